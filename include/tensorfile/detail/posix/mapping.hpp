// SPDX-License-Identifier: MIT
// One move-only RAII handle for a memory mapping of a file. Apart from detail/posix/file.hpp, so that the mmap
// backend, which holds a Mapping, does not pull the POSIX file code into every including TU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "tensorfile/config.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode

namespace tensorfile::detail {

class FileHandle;  // detail/posix/file.hpp: the mapping calls take one by reference

/// A memory mapping of a whole byte range of a file; unmaps on destruction. A zero-length
/// mapping holds no pages and a null pointer.
class Mapping {
 public:
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping(Mapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), mode_(other.mode_) {}
  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mode_ = other.mode_;
    }
    return *this;
  }
  ~Mapping() { unmap(); }

  /// Maps the first `bytes` of `file`; the caller has checked that the file is that long.
  [[nodiscard]] TENSORFILE_ENTRY static Mapping map(const FileHandle& file, std::uint64_t bytes, MapMode mode);

  /// Maps the first `bytes` (> 0) of `file`. No throw: nullopt with errno set when mmap(2) refuses, so
  /// the caller names the file (and member) in its own error.
  [[nodiscard]] TENSORFILE_ENTRY static std::optional<Mapping> try_map(const FileHandle& file, std::size_t bytes,
                                                                       MapMode mode) noexcept;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }   ///< first mapped byte
  [[nodiscard]] std::size_t size() const noexcept { return size_; }  ///< mapped bytes
  [[nodiscard]] MapMode mode() const noexcept { return mode_; }      ///< how it was mapped

 private:
  TENSORFILE_ENTRY void unmap() noexcept;

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  MapMode mode_ = MapMode::read_only;
};

}  // namespace tensorfile::detail

#if TENSORFILE_DEFINITIONS_OF(detail_posix_mapping)
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile::detail {

TENSORFILE_ENTRY Mapping Mapping::map(const FileHandle& file, std::uint64_t bytes, MapMode mode) {
  Mapping mapping;
  mapping.mode_ = mode;
  if (bytes == 0) return mapping;
  if (bytes > static_cast<std::uint64_t>(SIZE_MAX)) {
    throw ArgumentError("mapping of " + std::to_string(bytes) + " bytes does not fit the address space",
                        {.file = file.path()});
  }
  std::optional<Mapping> mapped = try_map(file, static_cast<std::size_t>(bytes), mode);
  if (!mapped) {
    const int error = errno;
    throw IoError("cannot map " + std::to_string(bytes) + " bytes", error, {.file = file.path()});
  }
  return std::move(*mapped);
}

TENSORFILE_ENTRY std::optional<Mapping> Mapping::try_map(const FileHandle& file, std::size_t bytes,
                                                         MapMode mode) noexcept {
  const int protection = mode == MapMode::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  const int flags = mode == MapMode::shared ? MAP_SHARED : MAP_PRIVATE;
  void* address = ::mmap(nullptr, bytes, protection, flags, file.fd(), 0);
  if (address == MAP_FAILED) return std::nullopt;
  Mapping mapping;
  mapping.data_ = static_cast<std::byte*>(address);
  mapping.size_ = bytes;
  mapping.mode_ = mode;
  return mapping;
}

TENSORFILE_ENTRY void Mapping::unmap() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace tensorfile::detail
#endif  // TENSORFILE_DEFINITIONS_OF(detail_posix_mapping)
