// SPDX-License-Identifier: MIT
/// @file
/// load_npz() and save_npz(): NumPy's .npz archives (np.savez, np.savez_compressed) as an ordered name -> Tensor dict.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/formats/numpy/npy.hpp"

namespace tensorfile {

/// Loads a .npz archive (np.savez or np.savez_compressed) as an OrderedDict of name -> Tensor in
/// archive order, names without their ".npy" (as np.load's keys), the shape load_safetensors gives.
/// Default: every array in its own heap buffer. With `.mmap` the archive is mapped once in that mode and
/// stored members (np.savez) are zero-copy views into it (big-endian ones refused as load_npy does);
/// deflated members (np.savez_compressed) are inflated to the heap. The zip is checked as the torch
/// reader checks it (no overlapping, repeated or escaping members; inflation bounded by the declared
/// size). Throws FormatError naming the file, member and byte offset for malformed input,
/// UnsupportedError for members that are not plain numeric .npy arrays, IoError. `select` is asked with each
/// array's name (the member's without ".npy"); only the kept arrays' data is read. The others become meta
/// tensors, for which only their .npy header is read (a deflated member must be inflated whole for it), or with
/// `select_drops` are left out, nothing of them read. `verify_crc` checks every kept member's CRC-32 (as
/// np.load does), reading all its bytes; `limits.max_records` bounds the members.
[[nodiscard]] TENSORFILE_ENTRY Value load_npz(const std::filesystem::path& path, const LoadOptions& options = {});

/// Loads a .npz archive held in memory: arrays copied to the heap, or with `.mmap` set (any mode) stored
/// members as read-only views of `bytes`, which the caller keeps alive as long as the tensors.
[[nodiscard]] TENSORFILE_ENTRY Value load_npz(std::span<const std::byte> bytes, const LoadOptions& options = {});

/// Saves named tensors to `path` as an np.savez archive: one stored `NAME.npy` member each, written as
/// save_npy writes it, in the given order (np.load reads it; member data is 64-byte aligned for views);
/// with `.npz.compress` as np.savez_compressed: each member deflated (members under 4 GiB).
/// Written beside `path` and renamed over it when complete. Throws ArgumentError for duplicate names
/// or names that cannot be zip members, DTypeError and ArgumentError as save_npy, IoError.
TENSORFILE_ENTRY void save_npz(const NamedTensors& tensors, const std::filesystem::path& path,
                               const SaveOptions& options = {});

/// Saves every tensor of `tensors` (a state dict, a load_npz() result...) under its named_tensors() path.
TENSORFILE_ENTRY void save_npz(const Value& tensors, const std::filesystem::path& path,
                               const SaveOptions& options = {});

/// Saves to a stream (see the path overload).
TENSORFILE_ENTRY void save_npz(const NamedTensors& tensors, std::ostream& out, const SaveOptions& options = {});

/// Saves to a new byte vector (see the path overload).
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_npz_to_bytes(const NamedTensors& tensors,
                                                                        const SaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <cstdint>
#include <ostream>
#include <string_view>
#include <unordered_set>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/zip/crc32.hpp"
#include "tensorfile/detail/zip/deflate.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile/detail/zip/writer.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"

namespace tensorfile {

namespace detail {

/// The meta tensor of a member (dtype and shape, no data) from its .npy header alone: read in place or
/// from the file for a stored member; a deflated one is inflated whole, as its header cannot be found otherwise.
[[nodiscard]] inline Tensor npz_member_meta(const ZipReader& zip, const ZipEntry& entry, const LoadOptions& options,
                                            const std::string& member) {
  LoadOptions meta = options;
  meta.map_location = "meta";
  if (entry.method == 0) {
    const auto read_at = [&](std::uint64_t offset, std::span<std::byte> out) {
      zip.read_stored_range(entry, offset, out);
    };
    const NpyHeader header = read_npy_header(read_at, entry.size, options.npy.max_header_bytes, zip.file(), member);
    return place_npy(
        header, meta, false, [] { return Storage(); }, zip.file(), member);
  }
  const std::vector<std::byte> whole = zip.read(entry);
  return load_npy_bytes(whole, Storage(), false, meta, zip.file(), member);
}

/// Reads every member of an open archive into the dict. `mapping`, when defined, holds the whole
/// archive (a file mapping or the caller's buffer): stored members become views of it; deflated members,
/// and every member when it is undefined, are read into their own heap buffers.
[[nodiscard]] inline Value load_npz_archive(const ZipReader& zip, const Storage& mapping, const LoadOptions& options) {
  Dict dict;
  dict.ordered = true;
  ValueAccess::reserve_more(dict, zip.entries().size());  // the table sized once, not at each doubling
  std::unordered_set<std::string, KeyedStringHash> names;
  for (const ZipEntry& entry : zip.entries()) {
    const std::string member = zip_impl::printable(entry.name);
    if (!entry.name.ends_with(".npy")) {
      throw UnsupportedError("the member is not a .npy array; expected only NAME.npy members in a .npz",
                             {zip.file(), member, entry.local_header_offset});
    }
    std::string name(entry.name.substr(0, entry.name.size() - 4));
    if (!names.insert(name).second) {
      throw FormatError("the array name '" + zip_impl::printable(name) + "' is given twice",
                        {zip.file(), member, entry.local_header_offset});
    }
    Tensor tensor;
    if (options.select && !options.select(name)) {
      if (options.select_drops) continue;  // nothing of it read
      tensor = npz_member_meta(zip, entry, options, member);
    } else if (mapping.defined() && entry.method == 0) {
      const std::span<const std::byte> bytes = zip.stored_bytes(entry);
      if (options.verify_crc) zip.verify_crc(entry, bytes);
      tensor = load_npy_bytes(bytes, mapping.slice(static_cast<std::size_t>(entry.data_offset), bytes.size()), true,
                              options, zip.file(), member);
    } else {
      Storage owned = heap_storage(static_cast<std::size_t>(entry.size), false, false, options.huge_pages);
      zip.read(entry, {owned.mutable_data(), owned.size_bytes()});
      if (options.verify_crc) zip.verify_crc(entry, {owned.data(), owned.size_bytes()});
      tensor = load_npy_bytes({owned.data(), owned.size_bytes()}, owned, false, options, zip.file(), member);
    }
    dict.set(std::move(name), std::move(tensor));
  }
  return Value(std::move(dict));
}

/// Zip checks for .npz: names at the top level (no torch-style prefix); the torch reader's other checks.
[[nodiscard]] inline ZipLimits npz_zip_limits(const LoadOptions& options) {
  ZipLimits limits;
  limits.max_entries = options.limits.max_records;
  limits.require_prefix = false;
  return limits;
}

/// Writes the archive: one `NAME.npy` record per tensor, stored with its data aligned to 64 bytes, or
/// deflated whole when `compress` (the member is built in memory, then compressed).
inline void write_npz(const NamedTensors& tensors, ByteSink& sink, bool compress) {
  std::vector<NpyRecord> records;
  records.reserve(tensors.size());
  std::unordered_set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    std::string what = "tensor \"";
    what += name;
    what += '"';
    const std::string member = name + ".npy";
    const bool plain = !name.empty() && name.size() < 0xFFF0 && ZipReader::is_plain_path(member);
    if (!plain) {
      throw ArgumentError(what +
                          ": the name cannot be a zip member; expected a non-empty name without '\\', NUL, "
                          "empty, '.' or '..' path components");
    }
    if (!names.insert(name).second) throw ArgumentError(what + ": the name is given twice");
    records.push_back(npy_record(tensor, what));
    if (compress && records.back().size() >= 0xFFFFFFFFu) {
      throw ArgumentError(what + ": a compressed member must be under 4 GiB; save it uncompressed");
    }
  }
  ZipWriter zip(sink, "", 64);
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (compress) {
      std::vector<std::byte> member;
      member.reserve(static_cast<std::size_t>(records[i].size()));
      write_npy_record(records[i], [&](std::span<const std::byte> bytes) {
        member.insert(member.end(), bytes.begin(), bytes.end());
      });
      zip.add_deflated(tensors[i].first + ".npy", member.size(), crc32(member), deflate(member));
      continue;
    }
    zip.begin_record(tensors[i].first + ".npy", records[i].size());
    write_npy_record(records[i], [&](std::span<const std::byte> bytes) { zip.write(bytes); });
    zip.end_record();
  }
  zip.finish();
  sink.flush();
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_numpy_npz)
namespace tensorfile {

TENSORFILE_ENTRY Value load_npz(const std::filesystem::path& path, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_npz()", path);
  detail::refuse_slice_rule(options, "load_npz()", path);
  const bool shared = options.mmap == MapMode::shared;
  const auto file = detail::FileHandle::open(path, shared ? detail::OpenMode::read_write : detail::OpenMode::read);
  try {
    const std::uint64_t size = file.size();
    if (options.mmap && size > 0) {
      Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), *options.mmap));
      const auto zip =
          detail::ZipReader::open({mapping.data(), mapping.size_bytes()}, path, detail::npz_zip_limits(options));
      return detail::load_npz_archive(zip, mapping, options);
    }
    const auto zip = detail::ZipReader::open_file(
        size, path, [&](std::uint64_t offset, std::span<std::byte> out) { file.read_exact(offset, out); },
        detail::npz_zip_limits(options));
    return detail::load_npz_archive(zip, Storage(), options);
  } catch (const FormatError&) {
    detail::rethrow_naming_format(file, path, FileFormat::npz, "a zip archive of .npy members");
  }
}

TENSORFILE_ENTRY Value load_npz(std::span<const std::byte> bytes, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_npz()");
  detail::refuse_slice_rule(options, "load_npz()");
  const auto zip = detail::ZipReader::open(bytes, {}, detail::npz_zip_limits(options));
  return detail::load_npz_archive(zip, options.mmap ? Storage(BorrowedBackend(bytes)) : Storage(), options);
}

TENSORFILE_ENTRY void save_npz(const NamedTensors& tensors, const std::filesystem::path& path,
                               const SaveOptions& options) {
  detail::AtomicFileSink sink(path, options.sync);
  detail::write_npz(tensors, sink, options.npz.compress);
  sink.commit();
}

TENSORFILE_ENTRY void save_npz(const Value& tensors, const std::filesystem::path& path, const SaveOptions& options) {
  save_npz(named_tensors(tensors), path, options);
}

TENSORFILE_ENTRY void save_npz(const NamedTensors& tensors, std::ostream& out, const SaveOptions& options) {
  detail::StreamSink sink(out);
  detail::write_npz(tensors, sink, options.npz.compress);
}

TENSORFILE_ENTRY std::vector<std::byte> save_npz_to_bytes(const NamedTensors& tensors, const SaveOptions& options) {
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::write_npz(tensors, sink, options.npz.compress);
  return out;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_numpy_npz)
