// SPDX-License-Identifier: MIT
// Mmap backend: shares one memory mapping of a file (MAP_SHARED writes through, MAP_PRIVATE copies on write).
#pragma once

#include <cstddef>
#include <filesystem>

#include "tensorfile/core/storage.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile {

/// How a file is mapped into a storage.
enum class MmapMode {
  read_only,      ///< MAP_PRIVATE, no writes allowed
  copy_on_write,  ///< MAP_PRIVATE, writes stay in memory (torch.from_file shared=False)
  shared,         ///< MAP_SHARED, writes reach the file (torch.from_file shared=True)
};

/// Owns one mapping of a file; every Storage sliced from it keeps the mapping alive.
class MmapBackend {
 public:

  /// Maps the first `bytes` bytes of `file` (which must be at least that long).
  MmapBackend(const detail::FileHandle& file, std::size_t bytes, MmapMode mode)
      : mapping_(detail::Mapping::map(file, bytes, to_map_mode(mode))), mode_(mode) {}

  [[nodiscard]] std::byte* data() const noexcept { return mapping_.data(); }         ///< first mapped byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return mapping_.size(); }  ///< mapped bytes
  [[nodiscard]] Device device() const noexcept { return Device::cpu(); }             ///< the host
  [[nodiscard]] bool writable() const noexcept { return mode_ != MmapMode::read_only; }  ///< per mode
  [[nodiscard]] MmapMode mode() const noexcept { return mode_; }                     ///< how it was mapped
  /// Backend name: "mmap_shared", "mmap_private" or "mmap_read_only".
  [[nodiscard]] std::string_view kind() const noexcept {
    return mode_ == MmapMode::shared ? "mmap_shared" : mode_ == MmapMode::copy_on_write ? "mmap_private" : "mmap_read_only";
  }

 private:
  static detail::MapMode to_map_mode(MmapMode mode) noexcept {
    switch (mode) {
      case MmapMode::read_only: return detail::MapMode::read_only;
      case MmapMode::copy_on_write: return detail::MapMode::copy_on_write;
      case MmapMode::shared: return detail::MapMode::shared;
    }
    return detail::MapMode::read_only;
  }

  detail::Mapping mapping_;
  MmapMode mode_;
};

/// Maps the first `bytes` bytes of the file at `path` (the whole file when `bytes` is nullopt)
/// into a Storage. read_only and copy_on_write open the file read-only; shared opens it read-write.
/// Throws IoError when the file cannot be opened or mapped, FormatError when it is shorter than `bytes`.
[[nodiscard]] inline Storage mmap_storage(const std::filesystem::path& path, MmapMode mode,
                                          std::optional<std::uint64_t> bytes = std::nullopt) {
  const auto file = detail::FileHandle::open(
      path, mode == MmapMode::shared ? detail::OpenMode::read_write : detail::OpenMode::read);
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
