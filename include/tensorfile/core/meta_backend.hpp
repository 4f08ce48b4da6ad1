// SPDX-License-Identifier: MIT
/// @file
/// Meta backend: a size and no bytes, for shapes-and-dtypes-only tensors.
#pragma once

#include <cstddef>

#include "tensorfile/config.hpp"
#include "tensorfile/core/storage.hpp"

namespace tensorfile {

/// Claims `size` bytes on the meta device and holds none: data() is always null.
class MetaBackend {
 public:
  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::meta; }  ///< backend kind

  /// Claims `size` bytes, allocating none.
  explicit MetaBackend(std::size_t size) noexcept : size_(size) {}

  [[nodiscard]] std::byte* data() const noexcept { return nullptr; }       ///< no bytes
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }  ///< bytes claimed
  [[nodiscard]] Device device() const noexcept { return Device::meta(); }  ///< meta
  [[nodiscard]] bool writable() const noexcept { return false; }           ///< nothing to write

 private:
  std::size_t size_;
};

/// A meta Storage claiming `bytes` bytes.
[[nodiscard]] TENSORFILE_ENTRY Storage meta_storage(std::size_t bytes);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(core_meta_backend)
namespace tensorfile {

TENSORFILE_ENTRY Storage meta_storage(std::size_t bytes) { return Storage(MetaBackend(bytes)); }

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(core_meta_backend)
