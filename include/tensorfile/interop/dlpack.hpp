// SPDX-License-Identifier: MIT
/// @file
/// DLPack: hand a Tensor to another framework (to_dlpack) and take one from it (from_dlpack), both zero-copy.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"

// DLPack 1.0 added DLManagedTensorVersioned (with a read-only flag) and DLPACK_MAJOR_VERSION; 0.x headers
// (Debian 12 ships 0.6) have only DLManagedTensor.
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
/// 1 when <dlpack/dlpack.h> defines DLManagedTensorVersioned (DLPack 1.0 or later), else 0.
#define TENSORFILE_DLPACK_VERSIONED 1
#else
/// 1 when <dlpack/dlpack.h> defines DLManagedTensorVersioned (DLPack 1.0 or later), else 0.
#define TENSORFILE_DLPACK_VERSIONED 0
#endif

namespace tensorfile {

namespace detail {

/// The parts joined, for messages (appended, not `"literal" + std::string`: GCC 12 -Wrestrict at -O3).
inline std::string dlpack_message(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (const std::string_view part : parts) out += part;
  return out;
}

// Type codes newer than some headers: kDLBool is 6 since DLPack 0.8, the float8 codes 10 to 14 since 1.1. The
// values are part of the exchange format, so an older header (Debian's 0.6 lacks the enumerators) still writes
// and reads them.
inline constexpr std::uint8_t dlpack_bool_code = 6;
inline constexpr std::uint8_t dlpack_float8_e4m3fn_code = 10;
inline constexpr std::uint8_t dlpack_float8_e4m3fnuz_code = 11;
inline constexpr std::uint8_t dlpack_float8_e5m2_code = 12;
inline constexpr std::uint8_t dlpack_float8_e5m2fnuz_code = 13;
inline constexpr std::uint8_t dlpack_float8_e8m0fnu_code = 14;

/// The DLPack type of `dtype`; throws DTypeError for dtypes DLPack has no code for.
inline DLDataType dlpack_dtype(DType dtype) {
  const auto bits = static_cast<std::uint8_t>(element_size(dtype) * 8);
  switch (dtype) {
    case DType::Bool: return {dlpack_bool_code, 8, 1};
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return {static_cast<std::uint8_t>(kDLInt), bits, 1};
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: return {static_cast<std::uint8_t>(kDLUInt), bits, 1};
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: return {static_cast<std::uint8_t>(kDLFloat), bits, 1};
    case DType::BFloat16: return {static_cast<std::uint8_t>(kDLBfloat), 16, 1};
    case DType::Complex32:
    case DType::Complex64:
    case DType::Complex128: return {static_cast<std::uint8_t>(kDLComplex), bits, 1};
    case DType::Float8_e4m3fn: return {dlpack_float8_e4m3fn_code, 8, 1};
    case DType::Float8_e4m3fnuz: return {dlpack_float8_e4m3fnuz_code, 8, 1};
    case DType::Float8_e5m2: return {dlpack_float8_e5m2_code, 8, 1};
    case DType::Float8_e5m2fnuz: return {dlpack_float8_e5m2fnuz_code, 8, 1};
    case DType::Float8_e8m0fnu: return {dlpack_float8_e8m0fnu_code, 8, 1};
    default: break;
  }
  std::string message = "to_dlpack: dtype ";
  message += dtype_name(dtype);
  message +=
      " has no DLPack type code; expected bool, an integer, a float, bfloat16, float8 (not e3m4/e4m3b11) or complex";
  throw DTypeError(message);
}

/// The tensorfile dtype of a DLPack type; nullopt when tensorfile has none.
inline std::optional<DType> dtype_from_dlpack(DLDataType type) noexcept {
  if (type.lanes != 1) return std::nullopt;
  switch (type.code) {
    case kDLInt:
      switch (type.bits) {
        case 8: return DType::Int8;
        case 16: return DType::Int16;
        case 32: return DType::Int32;
        case 64: return DType::Int64;
        default: return std::nullopt;
      }
    case kDLUInt:
      switch (type.bits) {
        case 8: return DType::UInt8;
        case 16: return DType::UInt16;
        case 32: return DType::UInt32;
        case 64: return DType::UInt64;
        default: return std::nullopt;
      }
    case kDLFloat:
      switch (type.bits) {
        case 16: return DType::Float16;
        case 32: return DType::Float32;
        case 64: return DType::Float64;
        default: return std::nullopt;
      }
    case kDLBfloat: return type.bits == 16 ? std::optional(DType::BFloat16) : std::nullopt;
    case kDLComplex:
      switch (type.bits) {
        case 32: return DType::Complex32;
        case 64: return DType::Complex64;
        case 128: return DType::Complex128;
        default: return std::nullopt;
      }
    case dlpack_bool_code: return type.bits == 8 ? std::optional(DType::Bool) : std::nullopt;
    case dlpack_float8_e4m3fn_code: return type.bits == 8 ? std::optional(DType::Float8_e4m3fn) : std::nullopt;
    case dlpack_float8_e4m3fnuz_code: return type.bits == 8 ? std::optional(DType::Float8_e4m3fnuz) : std::nullopt;
    case dlpack_float8_e5m2_code: return type.bits == 8 ? std::optional(DType::Float8_e5m2) : std::nullopt;
    case dlpack_float8_e5m2fnuz_code: return type.bits == 8 ? std::optional(DType::Float8_e5m2fnuz) : std::nullopt;
    case dlpack_float8_e8m0fnu_code: return type.bits == 8 ? std::optional(DType::Float8_e8m0fnu) : std::nullopt;
    default: return std::nullopt;
  }
}

/// The DLPack device of a tensor on `device`; throws DeviceError for meta and an unresolved "cuda".
inline DLDevice dlpack_device(Device device) {
  if (device.is_cpu()) return {kDLCPU, 0};
  if (device.is_cuda()) {
    if (device.index < 0) {
      throw DeviceError(
          "to_dlpack: the tensor is on \"cuda\" without an ordinal; expected cuda:N (DLPack names the device)");
    }
    return {kDLCUDA, device.index};
  }
  throw DeviceError("to_dlpack: a meta tensor has no bytes to share; expected a cpu or cuda tensor");
}

/// What to_dlpack allocates: the exported tensor (it keeps the storage alive), its shape and strides, and the
/// managed struct handed out. Freed by the deleter.
template <class Managed>
struct DlpackExport {
  Tensor tensor;
  Shape sizes;
  Shape strides;
  Managed managed{};

  static void deleter(Managed* self) noexcept {
    if (self != nullptr) delete static_cast<DlpackExport*>(self->manager_ctx);
  }
};

template <class Managed>
Managed* to_dlpack_managed(const Tensor& tensor) {
  if (!tensor.defined()) throw ArgumentError("to_dlpack: the tensor is undefined; expected a tensor with a storage");
  if (tensor.dim() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw ArgumentError(
        dlpack_message({"to_dlpack: ", std::to_string(tensor.dim()), " dimensions; expected at most 2147483647"}));
  }
  const DLDataType type = dlpack_dtype(tensor.dtype());
  const DLDevice device = dlpack_device(tensor.device());
  auto owned = std::make_unique<DlpackExport<Managed>>();
  owned->tensor = tensor;
  owned->sizes = tensor.sizes();
  owned->strides = tensor.strides();
  DLTensor& out = owned->managed.dl_tensor;
  // The first element goes in `data` and byte_offset stays 0: consumers such as libtorch 1.13 ignore byte_offset.
  const std::byte* base = tensor.storage().data();
  out.data = base == nullptr ? nullptr
                             : const_cast<std::byte*>(base) +
                                   static_cast<std::size_t>(tensor.storage_offset()) * tensor.element_size();
  out.device = device;
  out.ndim = static_cast<std::int32_t>(tensor.dim());
  out.dtype = type;
  out.shape = owned->sizes.empty() ? nullptr : owned->sizes.data();
  out.strides = owned->strides.empty() ? nullptr : owned->strides.data();
  out.byte_offset = 0;
  owned->managed.manager_ctx = owned.get();
  owned->managed.deleter = &DlpackExport<Managed>::deleter;
  return &owned.release()->managed;
}

/// Owns a managed tensor from another framework and calls its deleter once, when the last Storage sharing this
/// backend goes. Armed only once from_dlpack has succeeded, so a refused tensor stays with the caller.
template <class Managed>
class DlpackBackend {
 public:
  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::borrowed; }  ///< borrows
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "dlpack"; }          ///< in messages

  DlpackBackend(Managed* managed, std::span<std::byte> bytes, Device device, bool writable) noexcept
      : managed_(managed), bytes_(bytes), device_(device), writable_(writable) {}
  DlpackBackend(DlpackBackend&& other) noexcept
      : managed_(std::exchange(other.managed_, nullptr)), bytes_(other.bytes_), device_(other.device_),
        writable_(other.writable_), armed_(std::exchange(other.armed_, false)) {}
  DlpackBackend(const DlpackBackend&) = delete;
  DlpackBackend& operator=(const DlpackBackend&) = delete;
  DlpackBackend& operator=(DlpackBackend&&) = delete;
  ~DlpackBackend() {
    if (armed_ && managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
  }

  [[nodiscard]] std::byte* data() const noexcept { return bytes_.data(); }         ///< first byte of the view
  [[nodiscard]] std::size_t size_bytes() const noexcept { return bytes_.size(); }  ///< bytes the view reaches
  [[nodiscard]] Device device() const noexcept { return device_; }                 ///< cpu or cuda:N
  [[nodiscard]] bool writable() const noexcept { return writable_; }               ///< false when flagged read-only
  [[nodiscard]] Managed* managed() const noexcept { return managed_; }             ///< the producer's struct
  void arm() noexcept { armed_ = true; }                                           ///< from now on, delete it

 private:
  Managed* managed_;
  std::span<std::byte> bytes_;
  Device device_;
  bool writable_;
  bool armed_ = false;
};

template <class Managed>
Tensor from_dlpack_managed(Managed* managed, bool read_only) {
  if (managed == nullptr) throw ArgumentError("from_dlpack: null managed tensor; expected a DLPack tensor");
  // One of ours coming back: the original tensor (same storage, same writability), and the export is released.
  if (managed->deleter == &DlpackExport<Managed>::deleter) {
    Tensor tensor = static_cast<DlpackExport<Managed>*>(managed->manager_ctx)->tensor;
    managed->deleter(managed);
    return tensor;
  }
  const DLTensor& in = managed->dl_tensor;
  const auto dtype = dtype_from_dlpack(in.dtype);
  if (!dtype) {
    throw DTypeError(dlpack_message({"from_dlpack: DLPack dtype (code ", std::to_string(in.dtype.code), ", bits ",
                                     std::to_string(in.dtype.bits), ", lanes ", std::to_string(in.dtype.lanes),
                                     ") has no tensorfile dtype; expected bool, int/uint 8-64, float 16/32/64, "
                                     "bfloat16, float8 or complex 32/64/128 with 1 lane"}));
  }
  Device device = Device::cpu();
  switch (in.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: break;  // pinned host memory: the host reads it like any other
    case kDLCUDA:
      if (in.device.device_id < 0) {
        throw DeviceError(dlpack_message(
            {"from_dlpack: CUDA device id ", std::to_string(in.device.device_id), "; expected 0 or more"}));
      }
      device = Device::cuda(in.device.device_id);
      break;
    default:
      throw DeviceError(
          dlpack_message({"from_dlpack: DLPack device type ", std::to_string(static_cast<int>(in.device.device_type)),
                          " is not supported; expected kDLCPU (1), kDLCUDA (2) or kDLCUDAHost (3)"}));
  }
  if (in.ndim < 0)
    throw ArgumentError(
        detail::dlpack_message({"from_dlpack: ndim ", std::to_string(in.ndim), "; expected 0 or more"}));
  if (in.ndim > 0 && in.shape == nullptr) throw ArgumentError("from_dlpack: ndim > 0 and a null shape");
  const auto rank = static_cast<std::size_t>(in.ndim);
  Shape sizes(in.shape, in.shape + rank);
  Shape strides = in.strides == nullptr ? contiguous_strides(sizes) : Shape(in.strides, in.strides + rank);
  // Elements the view reaches: 1 + sum (size - 1) * stride, or none when a size is 0.
  std::int64_t reach = 1;
  bool empty = false;
  for (std::size_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0) {
      throw ArgumentError(detail::dlpack_message(
          {"from_dlpack: size ", std::to_string(sizes[d]), " in dim ", std::to_string(d), "; expected 0 or more"}));
    }
    if (strides[d] < 0) {
      throw ArgumentError(
          dlpack_message({"from_dlpack: stride ", std::to_string(strides[d]), " in dim ", std::to_string(d),
                          "; expected 0 or more (tensorfile has no negative strides)"}));
    }
    empty = empty || sizes[d] == 0;
  }
  const auto overflow = [] {
    return ArgumentError("from_dlpack: the view's extent overflows 64 bits; expected a tensor that fits in memory");
  };
  if (!empty) {
    for (std::size_t d = 0; d < rank; ++d) {
      const auto step = checked_mul(sizes[d] - 1, strides[d]);
      const auto sum = step ? checked_add(reach, *step) : std::nullopt;
      if (!sum) throw overflow();
      reach = *sum;
    }
  }
  const auto bytes = checked_mul(empty ? 0 : reach, static_cast<std::int64_t>(element_size(*dtype)));
  if (!bytes) throw overflow();
  std::byte* first = nullptr;
  if (*bytes > 0) {
    if (in.data == nullptr) throw ArgumentError("from_dlpack: null data with elements; expected a data pointer");
    const auto address = reinterpret_cast<std::uintptr_t>(in.data);
    if (in.byte_offset > std::numeric_limits<std::uintptr_t>::max() - address) throw overflow();
    first = static_cast<std::byte*>(in.data) + in.byte_offset;
  }
  // Nothing below releases the managed tensor on failure: the backend is armed last.
  Storage storage(DlpackBackend<Managed>(managed, {first, static_cast<std::size_t>(*bytes)}, device, !read_only));
  Tensor tensor(storage, *dtype, std::move(sizes), std::move(strides));
  storage.backend<DlpackBackend<Managed>>()->arm();
  return tensor;
}

}  // namespace detail

/// Shares `tensor` as a DLPack 0.x managed tensor, without a copy: `data` points at its first element
/// (byte_offset 0), shape and strides are in elements, the device is kDLCPU or kDLCUDA with its ordinal. The
/// returned struct keeps the tensor's storage alive until its deleter is called; the consumer calls it exactly
/// once. DLManagedTensor has no read-only flag: a read-only tensor (a private or read-only mapping) is handed out
/// all the same and the consumer must not write to it (use to_dlpack_versioned where the header has it).
/// Throws ArgumentError for an undefined tensor, DTypeError for quantized dtypes, DeviceError for meta
/// or an ordinal-less "cuda". bool is written as kDLBool (code 6, DLPack 0.8), which older consumers may refuse.
[[nodiscard]] inline DLManagedTensor* to_dlpack(const Tensor& tensor) {
  return detail::to_dlpack_managed<DLManagedTensor>(tensor);
}

/// A Tensor over the memory of `managed`, without a copy. On success tensorfile owns `managed`: its deleter is
/// called exactly once, when the last Tensor or Storage sharing it goes (a struct made by to_dlpack gives back
/// the original tensor and is released at once). The tensor is writable (DLPack 0.x has no read-only flag); its
/// device is cpu (kDLCPU, kDLCUDAHost) or cuda:N (kDLCUDA). On failure nothing is taken: the caller still owns
/// `managed` and must call its deleter. Throws ArgumentError (null pointer, negative ndim, size or stride, null
/// shape or data, an extent past 64 bits), DTypeError (a type tensorfile lacks, lanes != 1), DeviceError (other
/// device types).
[[nodiscard]] inline Tensor from_dlpack(DLManagedTensor* managed) {
  return detail::from_dlpack_managed(managed, false);
}

#if TENSORFILE_DLPACK_VERSIONED
/// Like to_dlpack, as a DLPack 1.x versioned tensor: version is the header's, and a read-only tensor carries
/// DLPACK_FLAG_BITMASK_READ_ONLY.
[[nodiscard]] inline DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor) {
  auto* managed = detail::to_dlpack_managed<DLManagedTensorVersioned>(tensor);
  managed->version.major = DLPACK_MAJOR_VERSION;
  managed->version.minor = DLPACK_MINOR_VERSION;
  managed->flags = tensor.is_writable() ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
  return managed;
}

/// Like from_dlpack, for a DLPack 1.x versioned tensor; DLPACK_FLAG_BITMASK_READ_ONLY gives a read-only tensor. A
/// major version other than the header's is refused with ArgumentError after calling the deleter, as DLPack
/// requires (the layout may differ); every other failure leaves `managed` with the caller, as from_dlpack does.
[[nodiscard]] inline Tensor from_dlpack(DLManagedTensorVersioned* managed) {
  if (managed != nullptr && managed->version.major != DLPACK_MAJOR_VERSION) {
    // DLPack's rule: another major version means another layout; only the deleter may be touched, and the
    // consumer must call it.
    const auto major = managed->version.major;
    if (managed->deleter != nullptr) managed->deleter(managed);
    throw ArgumentError(detail::dlpack_message({"from_dlpack: DLPack major version ", std::to_string(major),
                                                "; expected ", std::to_string(DLPACK_MAJOR_VERSION)}));
  }
  const bool read_only = managed != nullptr && (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return detail::from_dlpack_managed(managed, read_only);
}
#endif

}  // namespace tensorfile
