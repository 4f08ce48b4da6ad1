// SPDX-License-Identifier: MIT
/// @file
/// load_safetensors(): read a .safetensors file into a state-dict-shaped Value, on the heap, as views of
/// one mapping, or as meta tensors (header only), with map_location as load() takes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "tensorfile/config.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/map_location.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/safetensors/header.hpp"
#include "tensorfile/formats/safetensors/metadata.hpp"

namespace tensorfile {

/// Loads a .safetensors file as an OrderedDict of name -> Tensor in the order of its header, the shape
/// a state_dict load has, with `__metadata__` (a dict of str) in the dict's attributes (see
/// safetensors_metadata). The header is validated in full before any data is read. Data goes to one
/// heap buffer the tensors share (a tensor not aligned to its element size, possible only in files
/// written unsorted, gets its own copy), or with `.mmap` set tensors are zero-copy views into one
/// mapping of the file in that MapMode (unaligned ones too). `.map_location` = "meta" reads the header
/// only; a CUDA device copies each tensor through Tensor::to (<tensorfile/cuda.hpp>); the streaming
/// loader, cuda::load_safetensors, reads the file to the device through a bounded pinned ring instead. Throws
/// FormatError for invalid or hostile input, UnsupportedError for sub-byte dtypes, IoError when the file cannot be
/// read, DeviceError when map_location names a missing device. With `select`, only the kept tensors' bytes are
/// read (heap: one pread each; mmap: only they become views); the header is still validated whole.
[[nodiscard]] TENSORFILE_ENTRY Value load_safetensors(const std::filesystem::path& path,
                                                      const LoadOptions& options = {});

/// Loads from bytes in memory: tensors are copied to the heap, or with `.mmap` set (any mode) are
/// zero-copy read-only views into `bytes` (the caller keeps them alive as long as the tensors).
[[nodiscard]] TENSORFILE_ENTRY Value load_safetensors(std::span<const std::byte> bytes,
                                                      const LoadOptions& options = {});

/// Loads from a stream, read to its end into one heap buffer the tensors then share.
[[nodiscard]] TENSORFILE_ENTRY Value load_safetensors(std::istream& in, const LoadOptions& options = {});

namespace detail {
class FileHandle;  // detail/posix/file.hpp: a declaration takes one by reference

/// The ordered name -> Tensor dict of a validated header, tensor i on `storage_of(i) -> Storage`, with
/// the header's `__metadata__` in the dict's attributes. `storage_of` is asked only for the tensors `select`
/// keeps (all when unset); the others get meta storage, or with `select_drops` are left out.
template <class StorageOf>
Value build_safetensors_dict(const SafetensorsHeader& header, const TensorSelect& select, bool select_drops,
                             StorageOf&& storage_of) {
  Dict dict;
  dict.ordered = true;
  ValueAccess::reserve_more(dict, header.tensors.size());  // the table sized once, not at each doubling
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const SafetensorsTensorInfo& info = header.tensors[i];
    if (!select || select(info.name)) {
      dict.set(info.name, Tensor(storage_of(i), info.dtype, info.shape));
    } else if (!select_drops) {
      dict.set(info.name,
               Tensor(meta_storage(static_cast<std::size_t>(info.end - info.begin)), info.dtype, info.shape));
    }
  }
  if (header.metadata) {
    Dict metadata;
    for (const auto& [key, value] : *header.metadata) metadata.set(key, value);
    Dict attributes;
    attributes.set("__metadata__", Value(std::move(metadata)));
    dict.set_attributes(Value(std::move(attributes)));
  }
  return Value(std::move(dict));
}

/// load_safetensors(path) of a file already open for reading (read-write for MapMode::shared); `path`
/// names it in messages. load_state_dict opens shards below their directory and comes here.
TENSORFILE_ENTRY Value load_safetensors_file(const FileHandle& file, const std::filesystem::path& path,
                                             const LoadOptions& options);

}  // namespace detail

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_safetensors_load)
#include <cstring>
#include <istream>
#include <vector>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/heap_reads.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/detail/stream_input.hpp"
#include "tensorfile/formats/safetensors/detail/header_parser.hpp"

namespace tensorfile {

namespace detail {

/// The dict of a validated header with its selected tensors placed by map_location, tensor i's host bytes
/// coming from `read(info) -> Storage` (asked only when it is placed on a device that needs them).
template <class ReadTensor>
Value place_safetensors_dict(const SafetensorsHeader& header, const LoadOptions& options,
                             const std::filesystem::path& file, ReadTensor&& read) {
  return build_safetensors_dict(header, options.select, options.select_drops, [&](std::size_t i) {
    const SafetensorsTensorInfo& info = header.tensors[i];
    return place_storage(
        options.map_location, static_cast<std::size_t>(info.end - info.begin), "cpu", [&] { return read(info); },
        [&] {
          return ErrorLocation{file, info.name, info.entry_offset};
        });
  });
}

/// The dict of a validated header whose selected tensors are each read alone into heap memory by
/// `read_at(offset in the file, out)`: a load with `select` reads no byte of the other tensors.
template <class ReadAt>
Value read_selected_safetensors(const SafetensorsHeader& header, const LoadOptions& options,
                                const std::filesystem::path& file, ReadAt&& read_at) {
  return place_safetensors_dict(header, options, file, [&](const SafetensorsTensorInfo& info) {
    Storage bytes = heap_storage(static_cast<std::size_t>(info.end - info.begin), false);
    if (bytes.size_bytes() != 0) read_at(header.data_offset + info.begin, {bytes.mutable_data(), bytes.size_bytes()});
    return bytes;
  });
}

/// The dict of a validated header with its tensors placed by map_location. `data` holds the data section
/// (undefined when every tensor goes to meta); tensors are slices of it, or copies when `data` is heap
/// memory and a tensor's bytes are not aligned to its element size (files written unsorted).
inline Value build_safetensors_dict(const SafetensorsHeader& header, const Storage& data, bool copy_misaligned,
                                    const LoadOptions& options, const std::filesystem::path& file) {
  return place_safetensors_dict(header, options, file, [&](const SafetensorsTensorInfo& info) -> Storage {
    const auto bytes = static_cast<std::size_t>(info.end - info.begin);
    Storage slice = data.slice(static_cast<std::size_t>(info.begin), bytes);
    const auto address = reinterpret_cast<std::uintptr_t>(slice.data());
    if (!copy_misaligned || bytes == 0 || address % element_size(info.dtype) == 0) return slice;
    Storage aligned = heap_storage(bytes, false);
    std::memcpy(aligned.mutable_data(), slice.data(), bytes);
    return aligned;
  });
}

/// The one reader of in-memory input: `bytes` is the whole file; `views`, when defined, owns it.
inline Value load_safetensors_bytes(std::span<const std::byte> bytes, const Storage& views, bool copy_misaligned,
                                    const LoadOptions& options, const std::filesystem::path& file) {
  const SafetensorsHeader header =
      parse_safetensors_header(bytes, bytes.size(), file, options.safetensors.max_header_bytes);
  const auto offset = static_cast<std::size_t>(header.data_offset);
  const auto size = static_cast<std::size_t>(header.data_bytes);
  if (options.map_location.all_meta()) return build_safetensors_dict(header, Storage(), false, options, file);
  if (views.defined()) {
    return build_safetensors_dict(header, views.slice(offset, size), copy_misaligned, options, file);
  }
  if (options.select) {
    return read_selected_safetensors(header, options, file, [&](std::uint64_t at, std::span<std::byte> out) {
      std::memcpy(out.data(), bytes.data() + at, out.size());
    });
  }
  Storage data = heap_storage(size, false, false, options.huge_pages);
  if (size != 0) std::memcpy(data.mutable_data(), bytes.data() + offset, size);
  return build_safetensors_dict(header, data, true, options, file);
}

/// load_safetensors_file() without the check of what another format's bytes are.
inline Value read_safetensors_file(const FileHandle& file, const std::filesystem::path& path,
                                   const LoadOptions& options) {
  const std::uint64_t size = file.size();
  if (options.mmap && !options.map_location.all_meta() && size >= 8) {
    Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), *options.mmap));
    return load_safetensors_bytes({mapping.data(), mapping.size_bytes()}, mapping, false, options, path);
  }
  const std::vector<std::byte> head = read_safetensors_head(file, size, options.safetensors.max_header_bytes);
  const SafetensorsHeader header = parse_safetensors_header(head, size, path, options.safetensors.max_header_bytes);
  if (options.map_location.all_meta()) return build_safetensors_dict(header, Storage(), false, options, path);
  if (options.select) {
    return read_selected_safetensors(header, options, path,
                                     [&](std::uint64_t at, std::span<std::byte> out) { file.read_exact(at, out); });
  }
  // Tensors need their element size's alignment at most (8; a 16-byte complex128 is copied if need be).
  const Storage data = read_to_heap(file, header.data_offset, static_cast<std::size_t>(header.data_bytes),
                                    options.threads, options.direct_reads, 8, options.huge_pages);
  return build_safetensors_dict(header, data, true, options, path);
}

TENSORFILE_ENTRY Value load_safetensors_file(const FileHandle& file, const std::filesystem::path& path,
                                             const LoadOptions& options) {
  try {
    return read_safetensors_file(file, path, options);
  } catch (const FormatError&) {
    rethrow_naming_format(file, path, FileFormat::safetensors, "an 8-byte header length and a JSON header");
  }
}

}  // namespace detail

TENSORFILE_ENTRY Value load_safetensors(const std::filesystem::path& path, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_safetensors()", path);
  detail::refuse_slice_rule(options, "load_safetensors()", path);
  const bool shared = options.mmap == MapMode::shared;
  return detail::load_safetensors_file(
      detail::FileHandle::open(path, shared ? detail::OpenMode::read_write : detail::OpenMode::read), path, options);
}

TENSORFILE_ENTRY Value load_safetensors(std::span<const std::byte> bytes, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_safetensors()");
  detail::refuse_slice_rule(options, "load_safetensors()");
  return detail::load_safetensors_bytes(bytes, options.mmap ? Storage(BorrowedBackend(bytes)) : Storage(), false,
                                        options, {});
}

TENSORFILE_ENTRY Value load_safetensors(std::istream& in, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_safetensors()");
  detail::refuse_slice_rule(options, "load_safetensors()");
  const Storage whole = detail::read_stream_to_heap(in);
  return detail::load_safetensors_bytes({whole.data(), whole.size_bytes()}, whole, true, options, {});
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_safetensors_load)
