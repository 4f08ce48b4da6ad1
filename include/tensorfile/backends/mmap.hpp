// SPDX-License-Identifier: MIT
/// @file
/// Mmap backend: shares one memory mapping of a file, in one of the MapMode modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/config.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/detail/posix/mapping.hpp"  // MapMode, Mapping

namespace tensorfile {

/// Owns one mapping of a file; every Storage sliced from it keeps the mapping alive.
class MmapBackend {
 public:
  /// Maps the first `bytes` bytes of `file` (which must be at least that long). Throws IoError when mmap fails.
  MmapBackend(const detail::FileHandle& file, std::size_t bytes, MapMode mode)
      : MmapBackend(detail::Mapping::map(file, bytes, mode)) {}
  /// Takes ownership of `mapping`.
  explicit MmapBackend(detail::Mapping mapping) noexcept : mapping_(std::move(mapping)) {}

  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::mmap; }  ///< backend kind
  [[nodiscard]] std::byte* data() const noexcept { return mapping_.data(); }                ///< first mapped byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return mapping_.size(); }         ///< mapped bytes
  [[nodiscard]] Device device() const noexcept { return Device::cpu(); }                    ///< the host
  [[nodiscard]] bool writable() const noexcept { return mode() != MapMode::read_only; }     ///< per mode
  [[nodiscard]] MapMode mode() const noexcept { return mapping_.mode(); }                   ///< how it was mapped
  /// Name in messages: "mmap_shared", "mmap_private" or "mmap_read_only".
  [[nodiscard]] std::string_view name() const noexcept {
    return mode() == MapMode::shared          ? "mmap_shared"
           : mode() == MapMode::copy_on_write ? "mmap_private"
                                              : "mmap_read_only";
  }

 private:
  detail::Mapping mapping_;
};

/// Maps the first `bytes` bytes of the file at `path` (the whole file when `bytes` is nullopt)
/// into a Storage. read_only and copy_on_write open the file read-only; shared opens it read-write.
/// Throws IoError when the file cannot be opened or mapped, FormatError when it is shorter than `bytes`.
[[nodiscard]] TENSORFILE_ENTRY Storage mmap_storage(const std::filesystem::path& path, MapMode mode,
                                                    std::optional<std::uint64_t> bytes = std::nullopt);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(backends_mmap)
#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile {

TENSORFILE_ENTRY Storage mmap_storage(const std::filesystem::path& path, MapMode mode,
                                      std::optional<std::uint64_t> bytes) {
  const auto file =
      detail::FileHandle::open(path, mode == MapMode::shared ? detail::OpenMode::read_write : detail::OpenMode::read);
  const std::uint64_t file_size = file.size();
  const std::uint64_t wanted = bytes.value_or(file_size);
  if (wanted > file_size) {
    throw FormatError("file is too short to map; expected at least " + std::to_string(wanted) + " bytes, got " +
                          std::to_string(file_size),
                      {.file = path});
  }
  return Storage(MmapBackend(file, static_cast<std::size_t>(wanted), mode));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(backends_mmap)
