// SPDX-License-Identifier: MIT
// The legacy torch storage class names (FloatStorage, ...) and the dtypes they stand for.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "tensorfile/core/dtype.hpp"

namespace tensorfile::detail {

struct StorageTypeName {
  std::string_view name;
  DType dtype;
};

/// torch's frozen storage-class table; every other dtype travels as UntypedStorage + _rebuild_tensor_v3.
inline constexpr std::array<StorageTypeName, 17> storage_type_names{{
    {"DoubleStorage", DType::Float64},
    {"FloatStorage", DType::Float32},
    {"HalfStorage", DType::Float16},
    {"BFloat16Storage", DType::BFloat16},
    {"LongStorage", DType::Int64},
    {"IntStorage", DType::Int32},
    {"ShortStorage", DType::Int16},
    {"CharStorage", DType::Int8},
    {"ByteStorage", DType::UInt8},
    {"BoolStorage", DType::Bool},
    {"ComplexDoubleStorage", DType::Complex128},
    {"ComplexFloatStorage", DType::Complex64},
    {"QInt8Storage", DType::QInt8},
    {"QUInt8Storage", DType::QUInt8},
    {"QInt32Storage", DType::QInt32},
    {"QUInt4x2Storage", DType::QUInt4x2},
    {"QUInt2x4Storage", DType::QUInt2x4},
}};

/// The dtype of a storage class name, whatever its module (torch, torch.cuda, torch.storage);
/// UntypedStorage holds bytes (uint8). nullopt for names that are no storage class.
[[nodiscard]] constexpr std::optional<DType> storage_type_dtype(std::string_view name) noexcept {
  if (name == "UntypedStorage" || name == "_UntypedStorage") return DType::UInt8;
  for (const auto& entry : storage_type_names) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

/// The storage class name torch writes for `dtype`, or nullopt when it needs UntypedStorage.
[[nodiscard]] constexpr std::optional<std::string_view> storage_type_name(DType dtype) noexcept {
  for (const auto& entry : storage_type_names) {
    if (entry.dtype == dtype) return entry.name;
  }
  return std::nullopt;
}

}  // namespace tensorfile::detail
