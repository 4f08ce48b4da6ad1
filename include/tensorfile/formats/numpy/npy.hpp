// SPDX-License-Identifier: MIT
/// @file
/// load_npy() and save_npy(): NumPy's .npy files on the heap, as views of one mapping, or as meta tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <span>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode, DirectReads
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/formats/map_location.hpp"
#include "tensorfile/formats/numpy/npy_header.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/select.hpp"

namespace tensorfile {

/// Loads a .npy file (format 1.0, 2.0 or 3.0) as one Tensor. Little-endian, native and byte-order-free
/// data is used as is; big-endian data is converted on a heap load and refused (UnsupportedError) with
/// `.mmap`, since swapping would need a copy. fortran_order arrays come back as a column-major view of
/// the same bytes (no copy). With `.mmap` the tensor is a view into one mapping of the file in that
/// mode, as np.load(mmap_mode=): read_only is 'r', shared 'r+', copy_on_write 'c'; `.map_location = "meta"`
/// reads the header only. `select` is refused (ArgumentError): a .npy file holds one array. Throws FormatError for a
/// malformed or hostile file (naming the file and byte offset), UnsupportedError for object, structured and other
/// dtypes tensorfile lacks (never unpickled), IoError when the file cannot be read.
[[nodiscard]] TENSORFILE_ENTRY Tensor load_npy(const std::filesystem::path& path, const LoadOptions& options = {});

/// Loads .npy bytes in memory: copied to the heap, or with `.mmap` set (any mode) a read-only view of
/// `bytes`, which the caller keeps alive as long as the tensor.
[[nodiscard]] TENSORFILE_ENTRY Tensor load_npy(std::span<const std::byte> bytes, const LoadOptions& options = {});

/// Saves `tensor` to `path` as NumPy 1.24's np.save writes it, byte for byte: format 1.0 (2.0 when
/// the header needs it), the dict literal padded so the data starts at a multiple of 64, little-endian
/// data in C order (a column-major tensor is written as is with fortran_order True, as NumPy does).
/// Written beside `path` and renamed over it when complete (fsync'd unless `.sync = false`). Throws
/// DTypeError for dtypes NumPy lacks (bfloat16, float8, complex32, quantized), ArgumentError for an
/// undefined or meta tensor, IoError. Of SaveOptions only `sync` applies.
TENSORFILE_ENTRY void save_npy(const Tensor& tensor, const std::filesystem::path& path,
                               const SaveOptions& options = {});

/// Saves to a stream (see the path overload).
TENSORFILE_ENTRY void save_npy(const Tensor& tensor, std::ostream& out);

/// Saves to a new byte vector (see the path overload).
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_npy_to_bytes(const Tensor& tensor);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <algorithm>
#include <array>
#include <cstring>
#include <ostream>
#include <string>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/detail/bytes/byte_order.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/posix/direct_reads.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/heap_reads.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/format.hpp"

namespace tensorfile {

namespace detail {

/// The tensor a checked header describes over `data` (its data bytes, or undefined for meta):
/// fortran_order gives a column-major view of the same bytes, no copy.
[[nodiscard]] inline Tensor npy_tensor(const NpyHeader& header, Storage data) {
  if (!header.fortran_order) return Tensor(std::move(data), header.dtype, header.shape);
  Shape strides(header.shape.size());
  std::int64_t stride = 1;
  for (std::size_t d = 0; d < header.shape.size(); ++d) {
    strides[d] = stride;
    stride *= std::max<std::int64_t>(header.shape[d], 1);
  }
  return Tensor(std::move(data), header.dtype, header.shape, strides);
}

/// Places the data of a checked header: `read` gives the CPU bytes (heap or a view), byte-swapped here
/// when the file is big-endian (a view of big-endian data is refused, since swapping would write the file).
template <class Read>
[[nodiscard]] Tensor place_npy(const NpyHeader& header, const LoadOptions& options, bool zero_copy, Read&& read,
                               const std::filesystem::path& file, const std::string& member) {
  const auto where = [&] { return ErrorLocation{file, member, header.data_offset}; };
  if (header.swap_bytes && zero_copy && !options.map_location.all_meta()) {
    throw UnsupportedError("the data is big-endian (descr '" + header.descr +
                               "'); it cannot be used in place on this little-endian host; load it without .mmap "
                               "to get a converted copy",
                           where());
  }
  const auto bytes = static_cast<std::size_t>(header.data_bytes);
  const auto cpu = [&]() -> Storage {
    Storage data = read();
    if (header.swap_bytes) {  // each scalar: a complex number's two parts are swapped separately
      const std::size_t width = element_size(header.dtype);
      const bool complex = header.dtype == DType::Complex64 || header.dtype == DType::Complex128;
      swap_elements({data.mutable_data(), data.size_bytes()}, complex ? width / 2 : width);
    }
    return data;
  };
  return npy_tensor(header, place_storage(options.map_location, bytes, "cpu", cpu, where));
}

/// The checked header of a .npy of `size` bytes read by `read_at(offset, out)`, reading only the header's
/// bytes: its preamble, then its declared length (at most `max_header_bytes`, else LimitError).
template <class ReadAt>
[[nodiscard]] NpyHeader read_npy_header(ReadAt&& read_at, std::uint64_t size, std::uint64_t max_header_bytes,
                                        const std::filesystem::path& file, const std::string& member) {
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(size, 12)));
  read_at(0, head);
  const std::uint64_t preamble = npy_preamble_size(head, file, member);
  if (head.size() >= preamble) {
    const std::uint64_t length =
        preamble == 10
            ? (std::to_integer<std::uint64_t>(head[8]) | std::to_integer<std::uint64_t>(head[9]) << 8)
            : (std::to_integer<std::uint64_t>(head[8]) | std::to_integer<std::uint64_t>(head[9]) << 8 |
               std::to_integer<std::uint64_t>(head[10]) << 16 | std::to_integer<std::uint64_t>(head[11]) << 24);
    if (length > max_header_bytes) {
      throw LimitError("the header length " + std::to_string(length) + " is more than the limit of " +
                           std::to_string(max_header_bytes) + " bytes",
                       {file, member, 8});
    }
    head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size, preamble + length)));
    read_at(0, head);
  }
  return parse_npy_header(head, size, file, member);
}

/// load_npy reads one array: a `select` (which arrays of many) is a misuse, refused rather than ignored.
inline void refuse_npy_select(const LoadOptions& options) {
  if (options.select || options.select_drops) {
    throw ArgumentError("load_npy reads one array; select and select_drops are for load_npz's archives");
  }
}

/// The one reader of in-memory .npy bytes; `views`, when defined, owns `bytes` and tensors view it
/// (`in_place`: the views are the caller's memory or a file mapping, not a private heap copy).
[[nodiscard]] inline Tensor load_npy_bytes(std::span<const std::byte> bytes, const Storage& views, bool in_place,
                                           const LoadOptions& options, const std::filesystem::path& file,
                                           const std::string& member) {
  const NpyHeader header = parse_npy_header(bytes, bytes.size(), file, member);
  const auto offset = static_cast<std::size_t>(header.data_offset);
  const auto size = static_cast<std::size_t>(header.data_bytes);
  return place_npy(
      header, options, in_place,
      [&]() -> Storage {
        if (views.defined()) return views.slice(offset, size);
        Storage data = heap_storage(size, false, false, options.huge_pages);
        if (size != 0) std::memcpy(data.mutable_data(), bytes.data() + offset, size);
        return data;
      },
      file, member);
}

/// True when `t` is column-major contiguous (and not row-major): NumPy writes such arrays with fortran_order.
[[nodiscard]] inline bool is_fortran_contiguous(const Tensor& t) {
  if (t.dim() < 2 || t.is_contiguous()) return false;
  std::int64_t expected = 1;
  for (std::size_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] != 1 && t.strides()[d] != expected) return false;
    expected *= t.sizes()[d];
  }
  return true;
}

/// The header NumPy 1.24 writes for this array: the sorted dict, 21 - len(repr(growth axis)) spaces, then
/// padding so that the data starts at a multiple of 64; version 1.0 unless the length needs 2.0.
[[nodiscard]] inline std::string npy_header_bytes(const std::string& descr, bool fortran_order, const Shape& shape) {
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': ";
  dict += fortran_order ? "True" : "False";
  dict += ", 'shape': (";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d != 0) dict += ", ";
    dict += std::to_string(shape[d]);
  }
  if (shape.size() == 1) dict += ',';
  dict += "), }";
  if (!shape.empty()) {
    const std::size_t digits = std::to_string(shape[fortran_order ? shape.size() - 1 : 0]).size();
    if (digits < 21) dict.append(21 - digits, ' ');
  }
  const std::size_t with_newline = dict.size() + 1;
  // NumPy tries 1.0 first; 2.0 when the padded length does not fit its 16-bit field.
  const std::size_t pad_v1 = 64 - (10 + with_newline) % 64;
  const int major = with_newline + pad_v1 <= 0xFFFF ? 1 : 2;
  const std::size_t preamble = major == 1 ? 10 : 12;
  const std::size_t pad = 64 - (preamble + with_newline) % 64;
  const std::size_t length = with_newline + pad;
  std::string out(npy_magic);
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>((length >> (8 * i)) & 0xFF);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  return out;
}

/// A tensor ready to be written: its host copy, whether it goes out column-major, and its header.
struct NpyRecord {
  Tensor host;         ///< the tensor on the host
  bool fortran{};      ///< written as is with fortran_order True
  std::string header;  ///< magic, version, length and padded dict

  /// Bytes of the whole .npy file.
  [[nodiscard]] std::uint64_t size() const noexcept { return header.size() + host.nbytes(); }
};

/// Checks `tensor` and builds its header; `what` names it in errors ("the tensor", "tensor \"w\"").
[[nodiscard]] inline NpyRecord npy_record(const Tensor& tensor, const std::string& what) {
  if (!tensor.defined()) throw ArgumentError(what + " is undefined; expected a tensor");
  if (tensor.device().is_meta()) throw ArgumentError(what + " is a meta tensor; expected a tensor with data");
  const std::string descr = npy_descr(tensor.dtype());
  if (descr.empty()) {
    throw DTypeError(what + " has dtype " + std::string(dtype_name(tensor.dtype())) + ", which NumPy has no name for");
  }
  NpyRecord record;
  record.host = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
  record.fortran = is_fortran_contiguous(record.host);
  record.header = npy_header_bytes(descr, record.fortran, record.host.sizes());
  return record;
}

/// Writes a record's bytes through `put` (a callable taking std::span<const std::byte>).
template <class Put>
void write_npy_record(const NpyRecord& record, Put&& put) {
  put(std::as_bytes(std::span(record.header)));
  if (record.fortran || record.host.is_contiguous()) {
    if (record.host.nbytes() != 0) put(std::span<const std::byte>(record.host.raw_data(), record.host.nbytes()));
  } else {
    record.host.for_each_byte_run([&](std::span<const std::byte> run) { put(run); });
  }
}

/// Writes `tensor` as a whole .npy file into `sink`.
inline void write_npy(const Tensor& tensor, ByteSink& sink) {
  const NpyRecord record = npy_record(tensor, "the tensor");
  write_npy_record(record, [&](std::span<const std::byte> bytes) { sink.write(bytes); });
  sink.flush();
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_numpy_npy)
namespace tensorfile {

TENSORFILE_ENTRY Tensor load_npy(const std::filesystem::path& path, const LoadOptions& options) {
  detail::refuse_npy_select(options);
  detail::refuse_into_buffers(options, "load_npy()", path);
  detail::refuse_slice_rule(options, "load_npy()", path);
  const bool shared = options.mmap == MapMode::shared;
  const auto file = detail::FileHandle::open(path, shared ? detail::OpenMode::read_write : detail::OpenMode::read);
  try {
    const std::uint64_t size = file.size();
    if (options.mmap && !options.map_location.all_meta() && size >= 12) {
      Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), *options.mmap));
      return detail::load_npy_bytes({mapping.data(), mapping.size_bytes()}, mapping, true, options, path, {});
    }
    const NpyHeader header =
        detail::read_npy_header([&](std::uint64_t offset, std::span<std::byte> out) { file.read_exact(offset, out); },
                                size, options.npy.max_header_bytes, path, {});
    return detail::place_npy(header, options, false,
                             [&]() -> Storage {
                               return detail::read_to_heap(
                                   file, header.data_offset, static_cast<std::size_t>(header.data_bytes),
                                   options.threads, options.direct_reads, HeapBackend::alignment, options.huge_pages);
                             },
                             path, {});
  } catch (const FormatError&) {
    detail::rethrow_naming_format(file, path, FileFormat::npy, "the .npy magic");
  }
}

TENSORFILE_ENTRY Tensor load_npy(std::span<const std::byte> bytes, const LoadOptions& options) {
  detail::refuse_npy_select(options);
  detail::refuse_into_buffers(options, "load_npy()");
  detail::refuse_slice_rule(options, "load_npy()");
  return detail::load_npy_bytes(bytes, options.mmap ? Storage(BorrowedBackend(bytes)) : Storage(),
                                options.mmap.has_value(), options, {}, {});
}

TENSORFILE_ENTRY void save_npy(const Tensor& tensor, const std::filesystem::path& path, const SaveOptions& options) {
  detail::AtomicFileSink sink(path, options.sync);
  detail::write_npy(tensor, sink);
  sink.commit();
}

TENSORFILE_ENTRY void save_npy(const Tensor& tensor, std::ostream& out) {
  detail::StreamSink sink(out);
  detail::write_npy(tensor, sink);
}

TENSORFILE_ENTRY std::vector<std::byte> save_npy_to_bytes(const Tensor& tensor) {
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::write_npy(tensor, sink);
  return out;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_numpy_npy)
