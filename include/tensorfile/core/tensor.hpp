// SPDX-License-Identifier: MIT
/// @file
/// Tensor: a Storage seen through a dtype, sizes, strides and an offset (in elements, as in torch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/shape.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor_view.hpp"

namespace tensorfile {

class Tensor;

namespace detail {

/// Copies between devices other than CPU and meta; installed by <tensorfile/cuda.hpp>.
struct DeviceCopyHook {
  Tensor (*copy)(const Tensor& source, Device target) = nullptr;
  /// Writes the values of `source` (any layout, any device) into `target`, a contiguous tensor of the same dtype
  /// and shape in device memory that already exists (LoadOptions::into's device buffers).
  void (*write)(const Tensor& source, const Tensor& target) = nullptr;
};
[[nodiscard]] inline DeviceCopyHook& device_copy_hook() noexcept {
  static DeviceCopyHook hook;
  return hook;
}

/// "(2, 3)", as Python prints a shape tuple ("(4,)" for one dimension).
TENSORFILE_ENTRY std::string shape_string(std::span<const std::int64_t> shape);

/// Row-major strides for `sizes`.
TENSORFILE_ENTRY Shape contiguous_strides(std::span<const std::int64_t> sizes);

/// Calls fn(element_offset) for every element in C order; the innermost dimension is handed
/// over as a run (offset, count, stride) so callers can memcpy contiguous runs.
template <class Fn>
void for_each_run(std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides, std::int64_t base,
                  Fn&& fn) {
  const std::size_t dims = sizes.size();
  if (dims == 0) {
    fn(base, std::int64_t{1}, std::int64_t{1});
    return;
  }
  for (auto s : sizes) {
    if (s == 0) return;
  }
  std::vector<std::int64_t> index(dims, 0);
  std::int64_t offset = base;
  const std::int64_t inner = sizes[dims - 1];
  const std::int64_t inner_stride = strides[dims - 1];
  while (true) {
    fn(offset, inner, inner_stride);
    std::size_t d = dims - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++index[d] < sizes[d]) {
        offset += strides[d];
        break;
      }
      offset -= (index[d] - 1) * strides[d];
      index[d] = 0;
    }
  }
}

}  // namespace detail

/// A strided view of a Storage. Copies are cheap and share the storage (like torch tensors);
/// clone() makes an independent copy. A default-constructed Tensor is undefined.
class Tensor {
 public:
  Tensor() = default;

  /// A tensor over `storage`; sizes, strides and offset in elements. Throws ArgumentError when a
  /// size, stride or offset is negative, or when the view reaches past the end of the storage.
  Tensor(Storage storage, DType dtype, Shape sizes, Shape strides, std::int64_t storage_offset = 0,
         bool requires_grad = false)
      : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(storage_offset),
        dtype_(dtype), requires_grad_(requires_grad) {
    check_bounds();
  }

  /// A contiguous (row-major) tensor over `storage`, starting at its first byte.
  Tensor(Storage storage, DType dtype, Shape sizes)
      : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(detail::contiguous_strides(sizes_)),
        dtype_(dtype) {
    check_bounds();
  }

  /// A new zero-filled contiguous tensor on `device` (cpu or meta; cuda with <tensorfile/cuda.hpp>).
  [[nodiscard]] static Tensor zeros(Shape sizes, DType dtype, Device device = Device::cpu());

  /// A new contiguous CPU tensor holding a copy of `values`; `sizes` defaults to {values.size()}.
  template <element_type T>
  [[nodiscard]] static Tensor from_values(std::span<const T> values, Shape sizes = {}) {
    if (sizes.empty()) sizes = {static_cast<std::int64_t>(values.size())};
    const std::size_t bytes = checked_nbytes(sizes, dtype_of<T>);
    if (bytes != values.size_bytes()) {
      throw ArgumentError("shape " + detail::shape_string(sizes) + " needs " + std::to_string(bytes / sizeof(T)) +
                          " values; got " + std::to_string(values.size()));
    }
    Tensor out(heap_storage(bytes, false), dtype_of<T>, std::move(sizes));
    if (bytes != 0) std::memcpy(out.storage_.mutable_data(), values.data(), bytes);
    return out;
  }
  /// from_values with a braced list: `Tensor::from_values<float>({1, 2, 3, 4}, {2, 2})`.
  template <element_type T>
  [[nodiscard]] static Tensor from_values(std::initializer_list<T> values, Shape sizes = {}) {
    return from_values(std::span<const T>(values.begin(), values.size()), std::move(sizes));
  }

  // ---- shape and metadata -------------------------------------------------------------------

  [[nodiscard]] bool defined() const noexcept { return storage_.defined(); }      ///< has a storage
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }                   ///< element type
  [[nodiscard]] const Shape& sizes() const noexcept { return sizes_; }            ///< extents
  [[nodiscard]] const Shape& strides() const noexcept { return strides_; }        ///< in elements
  [[nodiscard]] std::int64_t storage_offset() const noexcept { return offset_; }  ///< in elements
  [[nodiscard]] std::size_t dim() const noexcept { return sizes_.size(); }        ///< rank
  [[nodiscard]] std::int64_t size(std::int64_t d) const {
    return sizes_[wrap_dim(d)];
  }  ///< extent of d (negative counts from the end)
  [[nodiscard]] std::int64_t stride(std::int64_t d) const { return strides_[wrap_dim(d)]; }             ///< stride of d
  [[nodiscard]] std::size_t element_size() const noexcept { return tensorfile::element_size(dtype_); }  ///< bytes
  [[nodiscard]] const Storage& storage() const noexcept { return storage_; }       ///< shared storage
  [[nodiscard]] Device device() const noexcept { return storage_.device(); }       ///< where the bytes are
  [[nodiscard]] bool is_writable() const noexcept { return storage_.writable(); }  ///< may be written
  [[nodiscard]] bool requires_grad() const noexcept { return requires_grad_; }  ///< autograd flag, kept for round trips
  /// Sets the requires_grad flag (tensorfile does no autograd; the flag is saved and loaded).
  Tensor& set_requires_grad(bool value) noexcept {
    requires_grad_ = value;
    return *this;
  }

  /// Number of elements (1 for a 0-d tensor).
  [[nodiscard]] std::int64_t numel() const noexcept {
    for (auto s : sizes_) {
      if (s == 0) return 0;  // before multiplying: the other sizes of an empty tensor may overflow together
    }
    std::int64_t n = 1;  // fits: every non-empty tensor's sizes were checked when it was made
    for (auto s : sizes_) n *= s;
    return n;
  }
  /// numel() * element_size(): the bytes of a contiguous copy.
  [[nodiscard]] std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel()) * element_size(); }

  /// Whether elements are laid out row-major without gaps (dims of size 1 may have any stride).
  [[nodiscard]] bool is_contiguous() const noexcept {
    for (auto s : sizes_) {
      if (s == 0) return true;  // before multiplying: the other sizes of an empty tensor may overflow together
    }
    std::int64_t expected = 1;  // at most numel(), which fits
    for (std::size_t d = sizes_.size(); d-- > 0;) {
      if (sizes_[d] != 1 && strides_[d] != expected) return false;
      expected *= sizes_[d];
    }
    return true;
  }

  // ---- element access -----------------------------------------------------------------------

  /// Pointer to the first element (at storage_offset). `data<const float>()` reads;
  /// `data<float>()` writes and throws ArgumentError on a read-only storage. Throws DTypeError when
  /// T does not match dtype(), DeviceError when the bytes are not in host memory.
  template <element_type T>
  [[nodiscard]] T* data() const {
    if (dtype_of<T> != dtype_) {
      throw DTypeError("tensor has dtype " + std::string(dtype_name(dtype_)) + "; expected " +
                       std::string(dtype_name(dtype_of<T>)) + " for this element type");
    }
    return reinterpret_cast<T*>(host_bytes<T>());
  }

  /// Raw bytes of the first element, for any dtype (float8, quantized...). Same checks as data().
  [[nodiscard]] const std::byte* raw_data() const { return host_bytes<const std::byte>(); }
  /// Writable raw bytes of the first element; throws ArgumentError on a read-only storage.
  [[nodiscard]] std::byte* mutable_raw_data() const { return host_bytes<std::byte>(); }

  /// A typed strided view (`view<const float>()` to read, `view<float>()` to write).
  template <element_type T>
  [[nodiscard]] TensorView<T> view() const {
    return TensorView<T>(data<T>(), sizes_, strides_, storage_);
  }

  /// The value of a one-element tensor. Throws ArgumentError when numel() != 1.
  template <element_type T>
  [[nodiscard]] std::remove_cv_t<T> item() const {
    if (numel() != 1) {
      throw ArgumentError("item() needs exactly one element; got " + std::to_string(numel()));
    }
    return *data<const T>();
  }

  // ---- views sharing the storage ------------------------------------------------------------

  /// The slice at `index` along `dim`, which is removed (t[i] for dim 0).
  [[nodiscard]] Tensor select(std::int64_t dim, std::int64_t index) const;

  /// Elements [start, start + length) along `dim` (torch.narrow).
  [[nodiscard]] Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;

  /// Elements start, start+step, ... below end along `dim` (Python's t[start:end:step]); start
  /// and end are clamped like Python slices, step must be positive.
  [[nodiscard]] Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;

  /// Swaps two dimensions.
  [[nodiscard]] Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;

  /// Reorders dimensions: result dim i is this tensor's dim order[i].
  [[nodiscard]] Tensor permute(std::span<const std::int64_t> order) const;
  /// permute with a braced list: `t.permute({2, 0, 1})`.
  [[nodiscard]] Tensor permute(std::initializer_list<std::int64_t> order) const {
    return permute(std::span<const std::int64_t>(order.begin(), order.size()));
  }

  /// The same elements with new sizes (one may be -1, deduced). Only contiguous tensors: call
  /// contiguous() first otherwise (torch.reshape would copy; tensorfile never copies silently).
  [[nodiscard]] Tensor reshape(Shape sizes) const;

  /// Broadcasts dims of size 1 (and new leading dims) to `sizes` with stride 0; -1 keeps a size.
  [[nodiscard]] Tensor expand(Shape sizes) const;

  /// Inserts a dimension of size 1 at `dim` (0 to dim()).
  [[nodiscard]] Tensor unsqueeze(std::int64_t dim) const;

  // ---- copies -------------------------------------------------------------------------------

  /// This tensor when already contiguous, else a contiguous clone().
  [[nodiscard]] Tensor contiguous() const { return is_contiguous() ? *this : clone(); }

  /// A new contiguous tensor on the same device with the same values (requires_grad kept).
  [[nodiscard]] Tensor clone() const;

  /// Writes the elements in C order, densely, to `out` (nbytes() bytes). CPU tensors only.
  void copy_into(std::byte* out) const;

  /// Calls `fn(std::span<const std::byte>)` with the elements' bytes in C order, in pieces whose concatenation is
  /// what copy_into() writes (to hash or stream a view without copying it whole): contiguous runs straight from
  /// the storage, the elements of a strided innermost dimension gathered into a scratch buffer first. Never calls
  /// `fn` for a tensor without elements. CPU tensors only.
  template <class Fn>
  void for_each_byte_run(Fn&& fn) const {
    if (numel() == 0) return;
    const auto elem = static_cast<std::int64_t>(element_size());
    const std::byte* base = host_bytes<const std::byte>() - offset_ * elem;
    std::vector<std::byte> scratch;
    detail::for_each_run(sizes_, strides_, offset_, [&](std::int64_t offset, std::int64_t count, std::int64_t stride) {
      if (stride == 1) {
        fn(std::span<const std::byte>(base + offset * elem, static_cast<std::size_t>(count * elem)));
        return;
      }
      fn(gather(scratch, base + offset * elem, count, stride, elem));
    });
  }

  /// This tensor on `device`: itself when already there; cpu to meta keeps shapes and drops bytes;
  /// meta to cpu throws (there is no data). CUDA needs <tensorfile/cuda.hpp>, else DeviceError.
  [[nodiscard]] Tensor to(Device target) const;

  /// This tensor with elements of `dtype`, converted as torch's `.to(dtype)` converts them (rules in
  /// <tensorfile/core/convert.hpp>). The same dtype returns this tensor itself, sharing its storage (no copy);
  /// otherwise a new contiguous tensor on the same device. Meta tensors give a meta tensor of `dtype`; other
  /// devices convert through a host copy (DeviceError when no copy path is built in). requires_grad is kept for
  /// floating and complex results. Throws UnsupportedError for quantized dtypes.
  [[nodiscard]] Tensor to(DType dtype) const;

  /// This tensor on `device` with elements of `dtype`: to(dtype) and to(device), converting on the host (the
  /// tensor itself when both already match).
  [[nodiscard]] Tensor to(Device target, DType dtype) const;

  /// The elements in C order as a std::vector<T>, converted from dtype() as to(dtype_of<T>) converts them; any
  /// layout. Tensors on other devices are copied to the host first (DeviceError without a copy path; meta
  /// tensors have no data). Throws UnsupportedError for quantized dtypes.
  template <element_type T>
  [[nodiscard]] std::vector<std::remove_cv_t<T>> to_vector() const {
    using Value = std::remove_cv_t<T>;
    const auto count = static_cast<std::size_t>(numel());
    if constexpr (std::is_same_v<Value, bool>) {
      return to_bools();
    } else {
      std::vector<Value> out(count);
      host_source().convert_into(reinterpret_cast<std::byte*>(out.data()), dtype_of<Value>);
      return out;
    }
  }

  /// Writes the elements in C order to `out`, converted to T as to(dtype_of<T>) converts them. Throws
  /// ArgumentError when out.size() != numel() (nothing written); otherwise as to_vector().
  template <element_type T, std::size_t Extent>
  requires(!std::is_const_v<T>) void copy_into(std::span<T, Extent> out) const {
    if (out.size() != static_cast<std::size_t>(numel())) {
      throw ArgumentError("copy_into needs a span of exactly " + std::to_string(numel()) + " elements; got " +
                          std::to_string(out.size()));
    }
    static_assert(!std::is_same_v<T, bool> || sizeof(bool) == 1, "DType::Bool elements are written as bools");
    host_source().convert_into(reinterpret_cast<std::byte*>(out.data()), dtype_of<T>);
  }

  /// Writes the elements' bytes in C order, unconverted, to `out`. Throws ArgumentError when out.size() !=
  /// nbytes() (nothing written). CPU tensors only.
  void copy_into(std::span<std::byte> out) const;

  /// Same dtype, sizes and values (torch.equal: NaN never equals, -0.0 equals 0.0). CPU only.
  [[nodiscard]] bool equal(const Tensor& other) const;

 private:
  static std::size_t checked_nbytes(std::span<const std::int64_t> sizes, DType dtype);

  // This tensor where its bytes can be read on the host: itself on the CPU, a host copy from another device.
  Tensor host_source() const;

  // Converts the elements (any layout, on the host) to `dtype`, written densely at `out`.
  void convert_into(std::byte* out, DType dtype) const;
  // to_vector<bool>(): std::vector<bool> packs bits, so the elements are converted to bytes first. Out of line, as
  // is gather(), so that the templates above instantiate no vector code in every including TU.
  std::vector<bool> to_bools() const;
  // Copies `count` elements of `elem` bytes, `stride` elements apart from `first`, densely into `scratch`.
  static std::span<const std::byte> gather(std::vector<std::byte>& scratch, const std::byte* first, std::int64_t count,
                                           std::int64_t stride, std::int64_t elem);

  std::size_t wrap_dim(std::int64_t d) const {
    const auto rank = static_cast<std::int64_t>(sizes_.size());
    if (d < -rank || d >= rank) dimension_out_of_range(d);
    return static_cast<std::size_t>(d < 0 ? d + rank : d);
  }
  [[noreturn]] void dimension_out_of_range(std::int64_t d) const;

  // The address of the first element in host memory (for writing: through the storage's mutable_data(), which
  // refuses a read-only one); throws for an undefined, meta or device tensor.
  std::byte* host_address(bool for_writing) const;
  template <class Byte>
  Byte* host_bytes() const {
    return reinterpret_cast<Byte*>(host_address(!std::is_const_v<Byte>));
  }

  void check_bounds() const;
  // offset_ moved `steps` elements along dimension `d`; throws ArgumentError where that overflows int64 (only an
  // empty tensor's strides, which check_bounds leaves unbounded, can make it).
  std::int64_t offset_after(std::size_t d, std::int64_t steps) const;

  Storage storage_;
  Shape sizes_;
  Shape strides_;
  std::int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
  bool requires_grad_ = false;
};

/// Tensors with their names, in order: what the flat formats' savers take and named_tensors() gives.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(core_tensor)
#include <algorithm>
#include <complex>

#include "tensorfile/core/convert.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"

namespace tensorfile {

namespace detail {

TENSORFILE_ENTRY std::string shape_string(std::span<const std::int64_t> shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

TENSORFILE_ENTRY Shape contiguous_strides(std::span<const std::int64_t> sizes) {
  // Dimension 0 steps by the product of the other sizes, zeros read as ones (as torch and numpy lay out an empty
  // tensor). Where that overflows no stride of the layout can be written down: torch wraps it, numpy refuses.
  if (!sizes.empty() && !checked_extent_bytes(sizes.subspan(1), 1)) {
    throw ArgumentError("the row-major strides of shape " + shape_string(sizes) +
                        " overflow int64; expected sizes after the first whose product (each 0 counted as 1) fits");
  }
  Shape strides(sizes.size());
  std::int64_t step = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    strides[d] = step;
    if (d != 0) step *= std::max<std::int64_t>(sizes[d], 1);  // fits: checked above
  }
  return strides;
}

/// Whether two elements of `dtype` hold equal values (torch.equal semantics: NaN differs from
/// itself, -0.0 equals 0.0); float8 and quantized values compare by their bits.
inline bool element_equal(DType dtype, const std::byte* a, const std::byte* b) noexcept {
  const auto load = [](const std::byte* p, auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dtype) {
    case DType::Float16: return static_cast<float>(load(a, Half{})) == static_cast<float>(load(b, Half{}));
    case DType::BFloat16: return static_cast<float>(load(a, BFloat16{})) == static_cast<float>(load(b, BFloat16{}));
    case DType::Float32: return load(a, 0.0f) == load(b, 0.0f);
    case DType::Float64: return load(a, 0.0) == load(b, 0.0);
    case DType::Complex32: {
      const auto x = load(a, ComplexHalf{});
      const auto y = load(b, ComplexHalf{});
      return static_cast<float>(x.real) == static_cast<float>(y.real) &&
             static_cast<float>(x.imag) == static_cast<float>(y.imag);
    }
    case DType::Complex64: return load(a, std::complex<float>{}) == load(b, std::complex<float>{});
    case DType::Complex128: return load(a, std::complex<double>{}) == load(b, std::complex<double>{});
    case DType::Bool: return (std::to_integer<int>(*a) != 0) == (std::to_integer<int>(*b) != 0);
    default: return std::memcmp(a, b, element_size(dtype)) == 0;
  }
}

}  // namespace detail

TENSORFILE_ENTRY Tensor Tensor::zeros(Shape sizes, DType dtype, Device device) {
  const std::size_t bytes = checked_nbytes(sizes, dtype);
  if (device.is_meta()) return {meta_storage(bytes), dtype, std::move(sizes)};
  Tensor host(heap_storage(bytes), dtype, std::move(sizes));
  return device.is_cpu() ? host : host.to(device);
}

TENSORFILE_ENTRY Tensor Tensor::select(std::int64_t dim, std::int64_t index) const {
  const std::size_t d = wrap_dim(dim);
  const std::int64_t extent = sizes_[d];
  if (index < -extent || index >= extent) {
    throw ArgumentError("select index " + std::to_string(index) + " is out of range for dimension " +
                        std::to_string(d) + " of size " + std::to_string(extent));
  }
  if (index < 0) index += extent;
  Tensor out = *this;
  out.offset_ = offset_after(d, index);
  out.sizes_.erase(out.sizes_.begin() + static_cast<std::ptrdiff_t>(d));
  out.strides_.erase(out.strides_.begin() + static_cast<std::ptrdiff_t>(d));
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  const std::size_t d = wrap_dim(dim);
  if (start < 0) start += sizes_[d];
  if (start < 0 || length < 0 || start > sizes_[d] || length > sizes_[d] - start) {
    throw ArgumentError("narrow [" + std::to_string(start) + ", +" + std::to_string(length) +
                        ") is out of range for dimension " + std::to_string(d) + " of size " +
                        std::to_string(sizes_[d]));
  }
  Tensor out = *this;
  out.offset_ = offset_after(d, start);
  out.sizes_[d] = length;
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) const {
  const std::size_t d = wrap_dim(dim);
  if (step <= 0) throw ArgumentError("slice step must be positive; got " + std::to_string(step));
  const std::int64_t extent = sizes_[d];
  const auto clamp = [extent](std::int64_t i) { return std::clamp(i < 0 ? i + extent : i, std::int64_t{0}, extent); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Tensor out = *this;
  out.offset_ = offset_after(d, start);
  out.sizes_[d] = end == start ? 0 : (end - start - 1) / step + 1;  // ceil((end - start) / step), no overflow
  if (out.sizes_[d] > 1) {                                          // a stride only matters where it is used to step
    const auto stride = detail::checked_mul(strides_[d], step);
    if (!stride) throw ArgumentError("slice step " + std::to_string(step) + " overflows the stride");
    out.strides_[d] = *stride;
  }
  out.check_bounds();
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  Tensor out = *this;
  std::swap(out.sizes_[wrap_dim(dim0)], out.sizes_[wrap_dim(dim1)]);
  std::swap(out.strides_[wrap_dim(dim0)], out.strides_[wrap_dim(dim1)]);
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::permute(std::span<const std::int64_t> order) const {
  if (order.size() != dim()) {
    throw ArgumentError("permute needs " + std::to_string(dim()) + " dimensions; got " + std::to_string(order.size()));
  }
  Tensor out = *this;
  std::vector<bool> seen(dim(), false);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t d = wrap_dim(order[i]);
    if (seen[d]) throw ArgumentError("permute repeats dimension " + std::to_string(d));
    seen[d] = true;
    out.sizes_[i] = sizes_[d];
    out.strides_[i] = strides_[d];
  }
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::reshape(Shape sizes) const {
  if (!is_contiguous()) {
    throw ArgumentError("reshape needs a contiguous tensor; call contiguous() first");
  }
  std::int64_t known = 1;
  std::size_t deduced = sizes.size();
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == -1 && deduced == sizes.size()) {
      deduced = d;
    } else if (sizes[d] < 0) {
      throw ArgumentError("invalid size " + std::to_string(sizes[d]) + " in reshape " + detail::shape_string(sizes));
    } else {
      auto product = detail::checked_mul(known, sizes[d]);
      if (!product) throw ArgumentError("reshape " + detail::shape_string(sizes) + " overflows int64");
      known = *product;
    }
  }
  if (deduced != sizes.size()) {
    if (known == 0 || numel() % known != 0) {
      throw ArgumentError("shape " + detail::shape_string(sizes) + " is invalid for " + std::to_string(numel()) +
                          " elements");
    }
    sizes[deduced] = numel() / known;
    known = numel();
  }
  if (known != numel()) {
    throw ArgumentError("shape " + detail::shape_string(sizes) + " is invalid for " + std::to_string(numel()) +
                        " elements");
  }
  Tensor out = *this;
  out.strides_ = detail::contiguous_strides(sizes);
  out.sizes_ = std::move(sizes);
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::expand(Shape sizes) const {
  if (sizes.size() < dim()) {
    throw ArgumentError("expand to " + detail::shape_string(sizes) + " has fewer dimensions than " +
                        detail::shape_string(sizes_));
  }
  const std::size_t lead = sizes.size() - dim();
  Shape strides(sizes.size(), 0);
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (d < lead) {
      if (sizes[d] < 0) throw ArgumentError("expand cannot deduce new leading dimension " + std::to_string(d));
      continue;
    }
    const std::int64_t own = sizes_[d - lead];
    if (sizes[d] == -1) sizes[d] = own;
    if (sizes[d] < 0) throw ArgumentError("expand to " + detail::shape_string(sizes) + " has a negative size");
    if (sizes[d] == own) {
      strides[d] = strides_[d - lead];
    } else if (own != 1) {
      throw ArgumentError("cannot expand dimension " + std::to_string(d - lead) + " of size " + std::to_string(own) +
                          " to " + std::to_string(sizes[d]) + "; only size-1 dimensions expand");
    }
  }
  Tensor out = *this;
  out.sizes_ = std::move(sizes);
  out.strides_ = std::move(strides);
  out.check_bounds();  // numel() must still fit int64: copies and printing size their loops by it
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::unsqueeze(std::int64_t dim) const {
  const auto rank = static_cast<std::int64_t>(this->dim());
  if (dim < 0) dim += rank + 1;
  if (dim < 0 || dim > rank) throw ArgumentError("unsqueeze dimension " + std::to_string(dim) + " is out of range");
  Tensor out = *this;
  const auto at = static_cast<std::size_t>(dim);
  // torch's stride for the new size-1 dimension; such a dimension is never stepped along, so where the product
  // overflows (an empty tensor's unbounded strides, or a meta storage's far reach) 1 serves as well.
  const auto product = dim < rank ? detail::checked_mul(sizes_[at], strides_[at]) : std::optional<std::int64_t>(1);
  const std::int64_t stride = product ? *product : 1;
  out.sizes_.insert(out.sizes_.begin() + dim, 1);
  out.strides_.insert(out.strides_.begin() + dim, stride);
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::clone() const {
  if (device().is_meta()) return Tensor::zeros(sizes_, dtype_, device()).set_requires_grad(requires_grad_);
  // Through the host: to() keeps a view's strides and offset (transposed, expanded), so clone there first.
  if (!device().is_cpu()) return to(Device::cpu()).clone().to(device()).set_requires_grad(requires_grad_);
  Tensor out(heap_storage(nbytes(), false), dtype_, sizes_);
  out.requires_grad_ = requires_grad_;
  copy_into(out.storage_.mutable_data());
  return out;
}

TENSORFILE_ENTRY void Tensor::copy_into(std::byte* out) const {
  if (numel() == 0) return;
  const std::byte* base = host_bytes<const std::byte>() - offset_ * static_cast<std::int64_t>(element_size());
  const auto elem = static_cast<std::int64_t>(element_size());
  detail::for_each_run(sizes_, strides_, offset_, [&](std::int64_t offset, std::int64_t count, std::int64_t stride) {
    if (stride == 1) {
      std::memcpy(out, base + offset * elem, static_cast<std::size_t>(count * elem));
      out += count * elem;
      return;
    }
    for (std::int64_t i = 0; i < count; ++i, out += elem) {
      std::memcpy(out, base + (offset + i * stride) * elem, static_cast<std::size_t>(elem));
    }
  });
}

TENSORFILE_ENTRY Tensor Tensor::to(Device target) const {
  const Device here = device();
  if (here.kind == target.kind && (target.index < 0 || here.index == target.index)) return *this;
  if (target.is_meta()) return Tensor::zeros(sizes_, dtype_, target).set_requires_grad(requires_grad_);
  if (here.is_meta()) throw DeviceError("cannot copy a meta tensor to " + target.str() + ": it has no data");
  if (auto copy = detail::device_copy_hook().copy) return copy(*this, target);
  throw DeviceError("cannot move a tensor to " + target.str() +
                    ": tensorfile was built without CUDA (include <tensorfile/cuda.hpp> and link tensorfile::cuda)");
}

TENSORFILE_ENTRY Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  detail::check_convertible(dtype_, dtype);
  const bool grad = requires_grad_ && (is_floating_point(dtype) || is_complex(dtype));
  if (device().is_meta()) return Tensor::zeros(sizes_, dtype, device()).set_requires_grad(grad);
  if (!device().is_cpu()) return to(Device::cpu()).to(dtype).to(device()).set_requires_grad(grad);
  Tensor out(heap_storage(checked_nbytes(sizes_, dtype), false), dtype, sizes_);
  out.requires_grad_ = grad;
  convert_into(out.storage_.mutable_data(), dtype);
  return out;
}

TENSORFILE_ENTRY Tensor Tensor::to(Device target, DType dtype) const {
  if (target.is_meta()) return to(target).to(dtype);
  if (device().is_cpu() || device().is_meta()) return to(dtype).to(target);
  return to(Device::cpu()).to(dtype).to(target);
}

TENSORFILE_ENTRY std::vector<bool> Tensor::to_bools() const {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(numel()));
  host_source().convert_into(reinterpret_cast<std::byte*>(bytes.data()), DType::Bool);
  return std::vector<bool>(bytes.begin(), bytes.end());
}

TENSORFILE_ENTRY std::span<const std::byte> Tensor::gather(std::vector<std::byte>& scratch, const std::byte* first,
                                                           std::int64_t count, std::int64_t stride, std::int64_t elem) {
  scratch.resize(static_cast<std::size_t>(count * elem));
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(scratch.data() + i * elem, first + i * stride * elem, static_cast<std::size_t>(elem));
  }
  return scratch;
}

TENSORFILE_ENTRY void Tensor::copy_into(std::span<std::byte> out) const {
  if (out.size() != nbytes()) {
    throw ArgumentError("copy_into needs a span of exactly " + std::to_string(nbytes()) + " bytes; got " +
                        std::to_string(out.size()));
  }
  copy_into(out.data());
}

TENSORFILE_ENTRY bool Tensor::equal(const Tensor& other) const {
  if (dtype_ != other.dtype_ || sizes_ != other.sizes_) return false;
  if (numel() == 0) return true;
  const Tensor a = contiguous();
  const Tensor b = other.contiguous();
  const std::byte* x = a.raw_data();
  const std::byte* y = b.raw_data();
  const std::size_t step = element_size();
  for (std::int64_t i = 0, n = numel(); i < n; ++i, x += step, y += step) {
    if (!detail::element_equal(dtype_, x, y)) return false;
  }
  return true;
}

TENSORFILE_ENTRY std::size_t Tensor::checked_nbytes(std::span<const std::int64_t> sizes, DType dtype) {
  for (auto s : sizes) {
    if (s < 0) throw ArgumentError("negative size in shape " + detail::shape_string(sizes));
  }
  const auto elem = static_cast<std::int64_t>(tensorfile::element_size(dtype));
  // numpy's bound, zeros counted as ones: within it the layout's strides fit too, even for an empty tensor.
  if (!detail::checked_extent_bytes(sizes, elem)) {
    throw ArgumentError("shape " + detail::shape_string(sizes) + " of " + std::string(dtype_name(dtype)) +
                        " overflows int64 bytes (each 0 counted as 1, as numpy counts); expected at most "
                        "9223372036854775807 bytes");
  }
  std::int64_t total = elem;
  for (auto s : sizes) total *= s;  // fits: at most the bound just checked
  return static_cast<std::size_t>(total);
}

TENSORFILE_ENTRY Tensor Tensor::host_source() const {
  if (storage_.defined() && !device().is_cpu() && !device().is_meta()) return to(Device::cpu());
  (void)host_bytes<const std::byte>();  // throws for undefined and meta tensors
  return *this;
}

TENSORFILE_ENTRY void Tensor::convert_into(std::byte* out, DType dtype) const {
  detail::check_convertible(dtype_, dtype);
  if (numel() == 0) return;
  const auto elem = static_cast<std::int64_t>(element_size());
  const std::byte* base = host_bytes<const std::byte>() - offset_ * elem;
  const auto out_step = static_cast<std::int64_t>(tensorfile::element_size(dtype));
  detail::for_each_run(sizes_, strides_, offset_, [&](std::int64_t offset, std::int64_t count, std::int64_t stride) {
    convert_elements(dtype_, base + offset * elem, stride, dtype, out, count);
    out += count * out_step;
  });
}

TENSORFILE_ENTRY void Tensor::dimension_out_of_range(std::int64_t d) const {
  throw ArgumentError("dimension " + std::to_string(d) + " is out of range for a " + std::to_string(sizes_.size()) +
                      "-d tensor");
}

TENSORFILE_ENTRY std::byte* Tensor::host_address(bool for_writing) const {
  if (!storage_.defined()) throw ArgumentError("tensor is undefined; expected a tensor with a storage");
  if (device().is_meta()) {
    throw DeviceError(
        "tensor is on meta and has no data; expected a tensor in host memory (a meta tensor "
        "holds only sizes and dtype)");
  }
  if (!device().is_cpu()) {
    throw DeviceError("tensor is on " + device().str() + "; expected host memory (call to(Device::cpu()) first)");
  }
  std::byte* base = for_writing ? storage_.mutable_data() : const_cast<std::byte*>(storage_.data());
  if (base == nullptr) return nullptr;
  // check_bounds keeps a tensor with elements inside its storage; an empty one's offset may lie past the end (or
  // past int64 bytes), and as nothing is read there it points at the storage's end.
  const auto at = detail::checked_mul(offset_, static_cast<std::int64_t>(element_size()));
  if (!at || static_cast<std::uint64_t>(*at) > storage_.size_bytes()) return base + storage_.size_bytes();
  return base + *at;
}

TENSORFILE_ENTRY std::int64_t Tensor::offset_after(std::size_t d, std::int64_t steps) const {
  const auto moved = detail::checked_mul(steps, strides_[d]);
  const auto sum = moved ? detail::checked_add(offset_, *moved) : std::nullopt;
  if (!sum) {
    throw ArgumentError("moving " + std::to_string(steps) + " steps of stride " + std::to_string(strides_[d]) +
                        " along dimension " + std::to_string(d) + " from storage offset " + std::to_string(offset_) +
                        " overflows int64");
  }
  return *sum;
}

TENSORFILE_ENTRY void Tensor::check_bounds() const {
  if (sizes_.size() != strides_.size()) {
    throw ArgumentError("sizes " + detail::shape_string(sizes_) + " and strides " + detail::shape_string(strides_) +
                        " differ in length");
  }
  if (offset_ < 0) throw ArgumentError("negative storage offset " + std::to_string(offset_));
  std::int64_t last = offset_;  // highest element index touched
  bool empty = false;
  for (std::size_t d = 0; d < sizes_.size(); ++d) {
    if (sizes_[d] < 0 || strides_[d] < 0) {
      throw ArgumentError("negative size or stride in sizes " + detail::shape_string(sizes_) + ", strides " +
                          detail::shape_string(strides_));
    }
    if (sizes_[d] == 0) empty = true;
  }
  if (empty) return;
  std::int64_t count = 1;  // numel() must fit int64 (a stride-0 view can claim far more elements than it touches)
  for (auto size : sizes_) {
    const auto product = detail::checked_mul(count, size);
    if (!product || !detail::checked_mul(*product, static_cast<std::int64_t>(element_size()))) {
      throw ArgumentError("sizes " + detail::shape_string(sizes_) + " hold more elements than int64 counts");
    }
    count = *product;
  }
  for (std::size_t d = 0; d < sizes_.size(); ++d) {
    auto reach = detail::checked_mul(sizes_[d] - 1, strides_[d]);
    auto sum = reach ? detail::checked_add(last, *reach) : std::nullopt;
    if (!sum) throw ArgumentError("view extent overflows int64");
    last = *sum;
  }
  auto end_bytes = detail::checked_mul(last + 1, static_cast<std::int64_t>(element_size()));
  if (!end_bytes || static_cast<std::uint64_t>(*end_bytes) > storage_.size_bytes()) {
    throw ArgumentError("view with sizes " + detail::shape_string(sizes_) + ", strides " +
                        detail::shape_string(strides_) + " and offset " + std::to_string(offset_) +
                        " leaves its storage; expected at most " + std::to_string(storage_.size_bytes()) +
                        " bytes, got " + (end_bytes ? std::to_string(*end_bytes) : std::string("an overflow")));
  }
}

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(core_tensor)
