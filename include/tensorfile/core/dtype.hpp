// SPDX-License-Identifier: MIT
/// @file
/// DType: the element types torch knows, their sizes and names, and the C++ types that hold them.
#pragma once

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/scalar_types.hpp"

namespace tensorfile {

/// Element type of a tensor, one per torch dtype.
enum class DType : std::uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex32,
  Complex64,
  Complex128,
  Float8_e4m3fn,
  Float8_e5m2,
  Float8_e4m3fnuz,
  Float8_e5m2fnuz,
  Float8_e8m0fnu,
  QInt8,
  QUInt8,
  QInt32,
  QUInt4x2,
  QUInt2x4,
};

/// Broad family of a dtype, for printing and comparison.
enum class DTypeKind : std::uint8_t { boolean, integer, floating, complex, float8, quantized };

/// Static facts about one dtype.
struct DTypeInfo {
  DType dtype;            ///< the dtype described
  std::string_view name;  ///< short name as torch prints it without "torch.": "float32"
  std::uint8_t size;      ///< bytes per element (packed sub-byte dtypes: 1 byte holds several values)
  DTypeKind kind;         ///< family
  bool is_signed;         ///< integers: whether negative values exist
};

namespace detail {

inline constexpr std::array<DTypeInfo, 26> dtype_table{{
    {DType::Bool, "bool", 1, DTypeKind::boolean, false},
    {DType::UInt8, "uint8", 1, DTypeKind::integer, false},
    {DType::Int8, "int8", 1, DTypeKind::integer, true},
    {DType::Int16, "int16", 2, DTypeKind::integer, true},
    {DType::Int32, "int32", 4, DTypeKind::integer, true},
    {DType::Int64, "int64", 8, DTypeKind::integer, true},
    {DType::UInt16, "uint16", 2, DTypeKind::integer, false},
    {DType::UInt32, "uint32", 4, DTypeKind::integer, false},
    {DType::UInt64, "uint64", 8, DTypeKind::integer, false},
    {DType::Float16, "float16", 2, DTypeKind::floating, true},
    {DType::BFloat16, "bfloat16", 2, DTypeKind::floating, true},
    {DType::Float32, "float32", 4, DTypeKind::floating, true},
    {DType::Float64, "float64", 8, DTypeKind::floating, true},
    {DType::Complex32, "complex32", 4, DTypeKind::complex, true},
    {DType::Complex64, "complex64", 8, DTypeKind::complex, true},
    {DType::Complex128, "complex128", 16, DTypeKind::complex, true},
    {DType::Float8_e4m3fn, "float8_e4m3fn", 1, DTypeKind::float8, true},
    {DType::Float8_e5m2, "float8_e5m2", 1, DTypeKind::float8, true},
    {DType::Float8_e4m3fnuz, "float8_e4m3fnuz", 1, DTypeKind::float8, true},
    {DType::Float8_e5m2fnuz, "float8_e5m2fnuz", 1, DTypeKind::float8, true},
    {DType::Float8_e8m0fnu, "float8_e8m0fnu", 1, DTypeKind::float8, false},
    {DType::QInt8, "qint8", 1, DTypeKind::quantized, true},
    {DType::QUInt8, "quint8", 1, DTypeKind::quantized, false},
    {DType::QInt32, "qint32", 4, DTypeKind::quantized, true},
    {DType::QUInt4x2, "quint4x2", 1, DTypeKind::quantized, false},
    {DType::QUInt2x4, "quint2x4", 1, DTypeKind::quantized, false},
}};

/// Other spellings torch accepts for a dtype (`torch.float` is float32, `torch.long` is int64...).
struct DTypeAlias {
  std::string_view name;
  DType dtype;
};
inline constexpr std::array<DTypeAlias, 11> dtype_aliases{{
    {"float", DType::Float32},
    {"double", DType::Float64},
    {"half", DType::Float16},
    {"long", DType::Int64},
    {"int", DType::Int32},
    {"short", DType::Int16},
    {"cfloat", DType::Complex64},
    {"cdouble", DType::Complex128},
    {"chalf", DType::Complex32},
    {"byte", DType::UInt8},
    {"char", DType::Int8},
}};

}  // namespace detail

/// Everything known about `dtype`.
[[nodiscard]] constexpr const DTypeInfo& dtype_info(DType dtype) noexcept {
  return detail::dtype_table[static_cast<std::size_t>(dtype)];
}

/// Bytes per element of `dtype` (1 for packed quantized dtypes, which hold several values a byte).
[[nodiscard]] constexpr std::size_t element_size(DType dtype) noexcept { return dtype_info(dtype).size; }

/// Short name as used by numpy and tensordict: "float32", "bfloat16", "bool".
[[nodiscard]] constexpr std::string_view dtype_name(DType dtype) noexcept { return dtype_info(dtype).name; }

/// torch's spelling: "torch.float32".
[[nodiscard]] inline std::string torch_name(DType dtype) { return "torch." + std::string(dtype_name(dtype)); }

/// Whether values of `dtype` are real or complex floating point (float8 included).
[[nodiscard]] constexpr bool is_floating_point(DType dtype) noexcept {
  const auto kind = dtype_info(dtype).kind;
  return kind == DTypeKind::floating || kind == DTypeKind::float8;
}

/// Whether `dtype` is complex.
[[nodiscard]] constexpr bool is_complex(DType dtype) noexcept { return dtype_info(dtype).kind == DTypeKind::complex; }

/// Parses "float32", "torch.float32" or an alias ("float", "half", "long"...); nullopt when unknown.
[[nodiscard]] constexpr std::optional<DType> try_parse_dtype(std::string_view text) noexcept {
  if (text.starts_with("torch.")) text.remove_prefix(6);
  for (const auto& info : detail::dtype_table) {
    if (info.name == text) return info.dtype;
  }
  for (const auto& alias : detail::dtype_aliases) {
    if (alias.name == text) return alias.dtype;
  }
  return std::nullopt;
}

/// Parses a dtype name as try_parse_dtype does; throws DTypeError naming the text when unknown.
[[nodiscard]] inline DType parse_dtype(std::string_view text) {
  if (auto dtype = try_parse_dtype(text)) return *dtype;
  throw DTypeError("unknown dtype \"" + std::string(text) + "\"; expected a torch dtype name such as \"float32\"");
}

/// Maps a C++ element type to its DType: `dtype_of<float>` is DType::Float32.
template <class T>
inline constexpr std::optional<DType> dtype_of_v = std::nullopt;
template <>
inline constexpr std::optional<DType> dtype_of_v<bool> = DType::Bool;  ///< torch.bool
template <>
inline constexpr std::optional<DType> dtype_of_v<std::uint8_t> = DType::UInt8;  ///< torch.uint8
template <>
inline constexpr std::optional<DType> dtype_of_v<std::int8_t> = DType::Int8;  ///< torch.int8
template <>
inline constexpr std::optional<DType> dtype_of_v<std::int16_t> = DType::Int16;  ///< torch.int16
template <>
inline constexpr std::optional<DType> dtype_of_v<std::int32_t> = DType::Int32;  ///< torch.int32
template <>
inline constexpr std::optional<DType> dtype_of_v<std::int64_t> = DType::Int64;  ///< torch.int64
template <>
inline constexpr std::optional<DType> dtype_of_v<std::uint16_t> = DType::UInt16;  ///< torch.uint16
template <>
inline constexpr std::optional<DType> dtype_of_v<std::uint32_t> = DType::UInt32;  ///< torch.uint32
template <>
inline constexpr std::optional<DType> dtype_of_v<std::uint64_t> = DType::UInt64;  ///< torch.uint64
template <>
inline constexpr std::optional<DType> dtype_of_v<Half> = DType::Float16;  ///< torch.float16
template <>
inline constexpr std::optional<DType> dtype_of_v<BFloat16> = DType::BFloat16;  ///< torch.bfloat16
template <>
inline constexpr std::optional<DType> dtype_of_v<float> = DType::Float32;  ///< torch.float32
template <>
inline constexpr std::optional<DType> dtype_of_v<double> = DType::Float64;  ///< torch.float64
template <>
inline constexpr std::optional<DType> dtype_of_v<ComplexHalf> = DType::Complex32;  ///< torch.complex32
template <>
inline constexpr std::optional<DType> dtype_of_v<std::complex<float>> = DType::Complex64;  ///< torch.complex64
template <>
inline constexpr std::optional<DType> dtype_of_v<std::complex<double>> = DType::Complex128;  ///< torch.complex128

/// A C++ type that names exactly one DType (const-qualified types name the same one).
template <class T>
concept element_type = dtype_of_v<std::remove_cv_t<T>>
.has_value();

/// The DType of element type T.
template <element_type T>
inline constexpr DType dtype_of = *dtype_of_v<std::remove_cv_t<T>>;

}  // namespace tensorfile
