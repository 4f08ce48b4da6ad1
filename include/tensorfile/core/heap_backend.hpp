// SPDX-License-Identifier: MIT
// Heap backend: owns 64-byte aligned host memory.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

#include "tensorfile/core/storage.hpp"

namespace tensorfile {

/// Owns `size` bytes of host memory aligned to `alignment` (64) bytes; frees them on destruction.
class HeapBackend {
 public:
  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::heap; }  ///< backend kind
  static constexpr std::size_t alignment = 64;  ///< alignment of data(), bytes

  /// Allocates `size` bytes, zero-filled when `zeroed`; throws std::bad_alloc when memory is short.
  explicit HeapBackend(std::size_t size, bool zeroed = true) : size_(size) {
    if (size == 0) return;
    memory_.reset(static_cast<std::byte*>(::operator new (size, std::align_val_t{alignment})));
    if (zeroed) std::memset(memory_.get(), 0, size);
  }

  [[nodiscard]] std::byte* data() const noexcept { return memory_.get(); }  ///< first byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }   ///< bytes owned
  [[nodiscard]] Device device() const noexcept { return Device::cpu(); }    ///< always the host
  [[nodiscard]] bool writable() const noexcept { return true; }             ///< always writable

 private:
  struct AlignedDelete {
    void operator()(std::byte* p) const noexcept { ::operator delete (p, std::align_val_t{alignment}); }
  };
  std::unique_ptr<std::byte, AlignedDelete> memory_;
  std::size_t size_;
};

/// A new heap Storage of `bytes` bytes (zero-filled unless `zeroed` is false).
[[nodiscard]] inline Storage heap_storage(std::size_t bytes, bool zeroed = true) {
  return Storage(HeapBackend(bytes, zeroed));
}

}  // namespace tensorfile
