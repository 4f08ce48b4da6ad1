// SPDX-License-Identifier: MIT
/// @file
/// Borrowed backend: a span of someone else's memory, optionally kept alive by a shared owner.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "tensorfile/core/storage.hpp"

namespace tensorfile {

/// Refers to memory it does not own. Without a keep-alive owner the caller must keep the memory
/// alive as long as any tensor uses it; with one, the owner lives as long as the storage does.
class BorrowedBackend {
 public:
  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::borrowed; }  ///< backend kind

  /// Writable borrow of `bytes`.
  explicit BorrowedBackend(std::span<std::byte> bytes, std::shared_ptr<const void> keep_alive = {},
                           Device where = Device::cpu())
      : data_(bytes.data()), size_(bytes.size()), writable_(true), device_(where), keep_alive_(std::move(keep_alive)) {}
  /// Read-only borrow of `bytes`.
  explicit BorrowedBackend(std::span<const std::byte> bytes, std::shared_ptr<const void> keep_alive = {},
                           Device where = Device::cpu())
      : data_(const_cast<std::byte*>(bytes.data())), size_(bytes.size()), writable_(false), device_(where),
        keep_alive_(std::move(keep_alive)) {}

  [[nodiscard]] std::byte* data() const noexcept { return data_; }         ///< first byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }  ///< bytes borrowed
  [[nodiscard]] Device device() const noexcept { return device_; }         ///< where the memory is
  [[nodiscard]] bool writable() const noexcept { return writable_; }       ///< false for const spans

 private:
  std::byte* data_;
  std::size_t size_;
  bool writable_;
  Device device_;
  std::shared_ptr<const void> keep_alive_;
};

}  // namespace tensorfile
