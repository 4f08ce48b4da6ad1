// SPDX-License-Identifier: MIT
/// @file
/// from_file: a 1-d tensor over a memory-mapped file, as torch.from_file makes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"

namespace tensorfile {

/// Options of from_file; use designated initializers: `{.mmap = MapMode::shared, .size = 10}`.
struct FromFileOptions {
  MapMode mmap =
      MapMode::copy_on_write;  ///< shared: the file is created or grown and writes reach it (torch's shared=True);
                               ///< copy_on_write: writes stay in memory (shared=False); read_only: a read-only tensor
  std::optional<std::int64_t> size{};  ///< element count; unset maps the whole file (which must divide evenly); 0 gives
                                       ///< an empty tensor as in torch
  DType dtype = DType::Float32;        ///< element type (torch's default dtype)
  std::uint64_t offset = 0;  ///< bytes to skip at the start of the file (a header), a multiple of the element size;
                             ///< the size rules above apply to the bytes after it
};

/// A 1-d tensor of `size` elements mapped from `path` (torch.from_file), starting `offset` bytes into
/// it. With MapMode::shared, the file is opened read-write, created when missing and grown to offset +
/// size * element_size; otherwise it is opened read-only (read-only files work) and must already hold
/// that many bytes. The tensor keeps the mapping alive. Throws IoError (open, grow, map), FormatError
/// (file too short for the offset and size, or not a whole number of elements after the offset),
/// ArgumentError (negative or overflowing size, an offset that is not a multiple of the element size,
/// a path that is not a regular file). A file that a failing call created is removed again.
[[nodiscard]] TENSORFILE_ENTRY Tensor from_file(const std::filesystem::path& path, FromFileOptions options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(io_from_file)
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile {

TENSORFILE_ENTRY Tensor from_file(const std::filesystem::path& path, FromFileOptions options) {
  const auto elem = static_cast<std::int64_t>(element_size(options.dtype));
  const std::string type_name(dtype_name(options.dtype));
  std::optional<std::int64_t> wanted_bytes;
  if (options.size) {
    if (*options.size < 0) {
      throw ArgumentError("size must be non-negative; got " + std::to_string(*options.size), {.file = path});
    }
    wanted_bytes = detail::checked_mul(*options.size, elem);
    if (!wanted_bytes || static_cast<std::uint64_t>(*wanted_bytes) > SIZE_MAX) {
      throw ArgumentError("size of " + std::to_string(*options.size) + " " + type_name +
                              " elements overflows the addressable byte count",
                          {.file = path});
    }
  }

  if (options.offset % static_cast<std::uint64_t>(elem) != 0 || options.offset > INT64_MAX) {
    throw ArgumentError("offset must be a multiple of the " + std::to_string(elem) + "-byte " + type_name +
                            " element size; got " + std::to_string(options.offset),
                        {.file = path});
  }
  const auto skip = static_cast<std::int64_t>(options.offset);
  if (wanted_bytes && !detail::checked_add(*wanted_bytes, skip)) {
    throw ArgumentError(
        "offset " + std::to_string(skip) + " plus " + std::to_string(*wanted_bytes) + " bytes overflows the file size",
        {.file = path});
  }

  const bool shared = options.mmap == MapMode::shared;
  const auto file =
      detail::FileHandle::open(path, shared ? detail::OpenMode::read_write_create : detail::OpenMode::read);
  // A file made by this call is removed again when the call fails (never one that was there before).
  try {
    const auto file_size = static_cast<std::int64_t>(file.size());
    std::int64_t bytes = 0;
    if (wanted_bytes) {
      bytes = *wanted_bytes;
      if (file_size < skip + bytes) {
        if (!shared) {
          throw FormatError("file is too short for " + std::to_string(*options.size) + " " + type_name + " elements" +
                                (skip != 0 ? " after an offset of " + std::to_string(skip) : "") +
                                "; expected at least " + std::to_string(skip + bytes) + " bytes, got " +
                                std::to_string(file_size),
                            {.file = path});
        }
        file.resize(static_cast<std::uint64_t>(skip + bytes));
      }
    } else {
      if (file_size < skip) {
        throw FormatError("offset " + std::to_string(skip) + " is past the end of the file; expected at most " +
                              std::to_string(file_size),
                          {.file = path});
      }
      if (file_size == skip) {
        throw FormatError("file is empty" + std::string(skip != 0 ? " after the offset" : "") +
                              "; expected at least one " + type_name + " element (pass .size = 0 for an empty tensor)",
                          {.file = path});
      }
      if ((file_size - skip) % elem != 0) {
        throw FormatError("file size" + std::string(skip != 0 ? " after the offset" : "") +
                              " is not a whole number of " + type_name + " elements; expected a multiple of " +
                              std::to_string(elem) + " bytes, got " + std::to_string(file_size - skip),
                          {.file = path});
      }
      bytes = file_size - skip;
    }

    Storage storage(MmapBackend(file, static_cast<std::size_t>(skip + bytes), options.mmap));
    if (skip != 0) storage = storage.slice(static_cast<std::size_t>(skip), static_cast<std::size_t>(bytes));
    return {std::move(storage), options.dtype, Shape{bytes / elem}};
  } catch (...) {
    file.remove_if_created();
    throw;
  }
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(io_from_file)
