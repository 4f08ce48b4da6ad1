// SPDX-License-Identifier: MIT
// The safetensors dtype names, their tensorfile dtypes, and the rank the reference writer sorts by.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tensorfile/core/dtype.hpp"

namespace tensorfile::detail {

/// One dtype name of the format. `rank` is the name's position in the reference's dtype list, which
/// runs by increasing alignment; its writer puts higher ranks first. `dtype` is empty for the sub-byte
/// kinds tensorfile cannot hold.
struct SafetensorsDType {
  std::string_view name;
  std::uint8_t rank;
  std::optional<DType> dtype;
};

inline constexpr std::array<SafetensorsDType, 22> safetensors_dtypes{{
    {"BOOL", 0, DType::Bool},
    {"F4", 1, std::nullopt},
    {"F6_E2M3", 2, std::nullopt},
    {"F6_E3M2", 3, std::nullopt},
    {"U8", 4, DType::UInt8},
    {"I8", 5, DType::Int8},
    {"F8_E5M2", 6, DType::Float8_e5m2},
    {"F8_E4M3", 7, DType::Float8_e4m3fn},
    {"F8_E8M0", 8, DType::Float8_e8m0fnu},
    {"F8_E4M3FNUZ", 9, DType::Float8_e4m3fnuz},
    {"F8_E5M2FNUZ", 10, DType::Float8_e5m2fnuz},
    {"I16", 11, DType::Int16},
    {"U16", 12, DType::UInt16},
    {"F16", 13, DType::Float16},
    {"BF16", 14, DType::BFloat16},
    {"I32", 15, DType::Int32},
    {"U32", 16, DType::UInt32},
    {"F32", 17, DType::Float32},
    {"C64", 18, DType::Complex64},
    {"F64", 19, DType::Float64},
    {"I64", 20, DType::Int64},
    {"U64", 21, DType::UInt64},
}};

/// The entry named `name`, or null.
[[nodiscard]] constexpr const SafetensorsDType* find_safetensors_dtype(std::string_view name) noexcept {
  for (const auto& entry : safetensors_dtypes) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

/// The entry holding `dtype`, or null when the format has no name for it (complex32, complex128, quantized).
[[nodiscard]] constexpr const SafetensorsDType* find_safetensors_dtype(DType dtype) noexcept {
  for (const auto& entry : safetensors_dtypes) {
    if (entry.dtype == dtype) return &entry;
  }
  return nullptr;
}

}  // namespace tensorfile::detail
