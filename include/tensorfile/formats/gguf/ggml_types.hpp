// SPDX-License-Identifier: MIT
/// @file
/// The ggml tensor types a GGUF file names: ids, block sizes, bytes per block, and the tensorfile dtype of the plain
/// ones.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"

namespace tensorfile {

/// A ggml tensor type, by the id GGUF files store (ggml's `enum ggml_type`). Ids 4, 5, 31-33 and 36-38 were
/// removed from ggml and are not listed.
enum class GgmlType : std::uint32_t {
  F32 = 0,       ///< float32
  F16 = 1,       ///< float16
  Q4_0 = 2,      ///< 4-bit, one f16 scale per 32
  Q4_1 = 3,      ///< 4-bit, f16 scale and min per 32
  Q5_0 = 6,      ///< 5-bit, one f16 scale per 32
  Q5_1 = 7,      ///< 5-bit, f16 scale and min per 32
  Q8_0 = 8,      ///< 8-bit, one f16 scale per 32
  Q8_1 = 9,      ///< 8-bit, f16 scale and scaled sum per 32
  Q2_K = 10,     ///< 2-bit K-quant, super-blocks of 256
  Q3_K = 11,     ///< 3-bit K-quant
  Q4_K = 12,     ///< 4-bit K-quant
  Q5_K = 13,     ///< 5-bit K-quant
  Q6_K = 14,     ///< 6-bit K-quant
  Q8_K = 15,     ///< 8-bit K-quant (float32 scale)
  IQ2_XXS = 16,  ///< 2.06 bits per weight, lattice codebook
  IQ2_XS = 17,   ///< 2.31 bits per weight
  IQ3_XXS = 18,  ///< 3.06 bits per weight
  IQ1_S = 19,    ///< 1.56 bits per weight
  IQ4_NL = 20,   ///< 4-bit non-linear, blocks of 32
  IQ3_S = 21,    ///< 3.44 bits per weight
  IQ2_S = 22,    ///< 2.5 bits per weight
  IQ4_XS = 23,   ///< 4.25 bits per weight
  I8 = 24,       ///< int8
  I16 = 25,      ///< int16
  I32 = 26,      ///< int32
  I64 = 27,      ///< int64
  F64 = 28,      ///< float64
  IQ1_M = 29,    ///< 1.75 bits per weight
  BF16 = 30,     ///< bfloat16
  TQ1_0 = 34,    ///< ternary, 1.69 bits per weight
  TQ2_0 = 35,    ///< ternary, 2.06 bits per weight
  MXFP4 = 39,    ///< OCP microscaling FP4 (E2M1 values, one E8M0 scale per 32)
  NVFP4 = 40,    ///< E2M1 values, four UE4M3 scales per 64
  Q1_0 = 41,     ///< 1-bit, one f16 scale per 128
  Q2_0 = 42,     ///< 2-bit, one f16 scale per 64
};

/// Static facts about one ggml type, as ggml's type traits give them.
struct GgmlTypeInfo {
  GgmlType type;               ///< the type described
  std::string_view name;       ///< ggml's name for it: "f32", "q4_0", "q2_K", "iq2_xxs"
  std::uint32_t block_size;    ///< elements per block (1 for the plain types)
  std::uint32_t block_bytes;   ///< bytes per block
  std::optional<DType> dtype;  ///< the tensorfile dtype of a plain type (F32, F16, BF16, F64, I8-I64), else none
  /// Whether the type stores elements in blocks with scales (every type without a plain dtype).
  [[nodiscard]] constexpr bool is_quantized() const noexcept { return !dtype.has_value(); }
};

namespace detail {

inline constexpr std::uint32_t ggml_qk_k = 256;  // elements per K-quant super-block

inline constexpr GgmlTypeInfo ggml_type_table[] = {
    {GgmlType::F32, "f32", 1, 4, DType::Float32},
    {GgmlType::F16, "f16", 1, 2, DType::Float16},
    {GgmlType::Q4_0, "q4_0", 32, 2 + 16, std::nullopt},
    {GgmlType::Q4_1, "q4_1", 32, 2 * 2 + 16, std::nullopt},
    {GgmlType::Q5_0, "q5_0", 32, 2 + 4 + 16, std::nullopt},
    {GgmlType::Q5_1, "q5_1", 32, 2 * 2 + 4 + 16, std::nullopt},
    {GgmlType::Q8_0, "q8_0", 32, 2 + 32, std::nullopt},
    {GgmlType::Q8_1, "q8_1", 32, 2 * 2 + 32, std::nullopt},
    {GgmlType::Q2_K, "q2_K", ggml_qk_k, 2 * 2 + 256 / 16 + 256 / 4, std::nullopt},
    {GgmlType::Q3_K, "q3_K", ggml_qk_k, 2 + 256 / 4 + 256 / 8 + 12, std::nullopt},
    {GgmlType::Q4_K, "q4_K", ggml_qk_k, 2 * 2 + 12 + 256 / 2, std::nullopt},
    {GgmlType::Q5_K, "q5_K", ggml_qk_k, 2 * 2 + 12 + 256 / 2 + 256 / 8, std::nullopt},
    {GgmlType::Q6_K, "q6_K", ggml_qk_k, 2 + 256 / 16 + 3 * 256 / 4, std::nullopt},
    {GgmlType::Q8_K, "q8_K", ggml_qk_k, 4 + 256 + 256 / 16 * 2, std::nullopt},
    {GgmlType::IQ2_XXS, "iq2_xxs", ggml_qk_k, 2 + 256 / 8 * 2, std::nullopt},
    {GgmlType::IQ2_XS, "iq2_xs", ggml_qk_k, 2 + 256 / 8 * 2 + 256 / 32, std::nullopt},
    {GgmlType::IQ3_XXS, "iq3_xxs", ggml_qk_k, 2 + 3 * (256 / 8), std::nullopt},
    {GgmlType::IQ1_S, "iq1_s", ggml_qk_k, 2 + 256 / 8 + 256 / 16, std::nullopt},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 2 + 16, std::nullopt},
    {GgmlType::IQ3_S, "iq3_s", ggml_qk_k, 2 + 13 * (256 / 32) + 256 / 64, std::nullopt},
    {GgmlType::IQ2_S, "iq2_s", ggml_qk_k, 2 + 256 / 4 + 256 / 16, std::nullopt},
    {GgmlType::IQ4_XS, "iq4_xs", ggml_qk_k, 2 + 2 + 256 / 64 + 256 / 2, std::nullopt},
    {GgmlType::I8, "i8", 1, 1, DType::Int8},
    {GgmlType::I16, "i16", 1, 2, DType::Int16},
    {GgmlType::I32, "i32", 1, 4, DType::Int32},
    {GgmlType::I64, "i64", 1, 8, DType::Int64},
    {GgmlType::F64, "f64", 1, 8, DType::Float64},
    {GgmlType::IQ1_M, "iq1_m", ggml_qk_k, 256 / 8 + 256 / 16 + 256 / 32, std::nullopt},
    {GgmlType::BF16, "bf16", 1, 2, DType::BFloat16},
    {GgmlType::TQ1_0, "tq1_0", ggml_qk_k, 2 + 256 / 64 + (256 - 4 * 256 / 64) / 5, std::nullopt},
    {GgmlType::TQ2_0, "tq2_0", ggml_qk_k, 2 + 256 / 4, std::nullopt},
    {GgmlType::MXFP4, "mxfp4", 32, 1 + 16, std::nullopt},
    {GgmlType::NVFP4, "nvfp4", 64, 4 + 32, std::nullopt},
    {GgmlType::Q1_0, "q1_0", 128, 2 + 128 / 8, std::nullopt},
    {GgmlType::Q2_0, "q2_0", 64, 2 + 64 / 4, std::nullopt},
};

/// The ids ggml once had and removed, with their old names: a file that holds one was written for an old ggml.
struct RemovedGgmlType {
  std::uint32_t id;
  std::string_view name;
};
inline constexpr RemovedGgmlType removed_ggml_types[] = {
    {4, "q4_2"},      {5, "q4_3"},        {31, "q4_0_4_4"},   {32, "q4_0_4_8"},
    {33, "q4_0_8_8"}, {36, "iq4_nl_4_4"}, {37, "iq4_nl_4_8"}, {38, "iq4_nl_8_8"},
};

}  // namespace detail

/// Every ggml type in the table, in id order.
[[nodiscard]] constexpr std::span<const GgmlTypeInfo> ggml_types() noexcept { return detail::ggml_type_table; }

/// The facts about ggml type id `id`, or null for an id ggml does not define (or has removed).
[[nodiscard]] constexpr const GgmlTypeInfo* find_ggml_type(std::uint32_t id) noexcept {
  for (const GgmlTypeInfo& info : detail::ggml_type_table) {
    if (static_cast<std::uint32_t>(info.type) == id) return &info;
  }
  return nullptr;
}

/// The facts about ggml type id `id`. Throws UnsupportedError naming the old type for an id ggml has removed
/// (q4_2, q4_0_4_4, ...), FormatError for an id ggml never defined; `where` locates the id in errors.
[[nodiscard]] inline const GgmlTypeInfo& ggml_type_info(std::uint32_t id, const ErrorLocation& where = {}) {
  if (const GgmlTypeInfo* info = find_ggml_type(id)) return *info;
  for (const detail::RemovedGgmlType& removed : detail::removed_ggml_types) {
    if (removed.id == id) {
      throw UnsupportedError(
          "ggml type " + std::to_string(id) + " (" + std::string(removed.name) + ") was removed from ggml; not read",
          where);
    }
  }
  throw FormatError("unknown ggml type " + std::to_string(id) + "; expected one of ggml's type ids (0-42)", where);
}

/// The facts about `type` (always in the table).
[[nodiscard]] constexpr const GgmlTypeInfo& ggml_type_info(GgmlType type) noexcept {
  return *find_ggml_type(static_cast<std::uint32_t>(type));
}

/// ggml's name for `type` ("q4_0").
[[nodiscard]] constexpr std::string_view ggml_type_name(GgmlType type) noexcept { return ggml_type_info(type).name; }

namespace detail {

/// Elements [begin, end) of the last dimension of a tensor of `block` type as bytes of its raw rows: an
/// ArgumentError located at `where` (the file and the tensor, its member) when either cuts a block.
[[nodiscard]] inline std::pair<std::int64_t, std::int64_t> ggml_block_byte_range(const GgmlTypeInfo& block,
                                                                                 std::int64_t begin, std::int64_t end,
                                                                                 const ErrorLocation& where) {
  const auto size = static_cast<std::int64_t>(block.block_size);
  if (begin % size != 0 || end % size != 0) {
    throw ArgumentError("the slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of the last dimension of \"" + where.member + "\" cuts its " + std::string(block.name) +
                            " blocks; expected a begin and an end that are multiples of its block size " +
                            std::to_string(size) + " (or a slice of another dimension)",
                        where);
  }
  return {begin / size * block.block_bytes, end / size * block.block_bytes};
}

}  // namespace detail

}  // namespace tensorfile
