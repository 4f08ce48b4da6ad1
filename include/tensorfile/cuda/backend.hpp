// SPDX-License-Identifier: MIT
/// @file
/// CUDA backend: owns device memory (cudaMalloc), frees it on its device; the runtime's host API only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/cuda/detail/runtime.hpp"

namespace tensorfile {

/// Owns `size` bytes of memory on one CUDA device, allocated with cudaMalloc (256-byte aligned)
/// and freed with cudaFree on that device when the last Storage sharing it goes. data() is a device
/// address: host code never dereferences it (Tensor::data() throws DeviceError for it).
class CudaBackend {
 public:
  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::cuda; }  ///< backend kind

  /// Allocates `size` uninitialised bytes on `device` ("cuda" is the current device). Throws
  /// DeviceError naming the CUDA error when there is no such device, no driver, or no memory.
  CudaBackend(std::size_t size, Device device) : device_(detail::resolve_cuda_device(device)), size_(size) {
    if (size == 0) return;
    const detail::CudaDeviceGuard guard(device_.index);
    void* memory = nullptr;
    detail::cuda_check(cudaMalloc(&memory, size),
                       "cudaMalloc of " + std::to_string(size) + " bytes on " + device_.str());
    memory_ = std::unique_ptr<std::byte, Free>(static_cast<std::byte*>(memory), Free{device_.index});
  }

  [[nodiscard]] std::byte* data() const noexcept { return memory_.get(); }  ///< device address of the first byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }   ///< bytes owned
  [[nodiscard]] Device device() const noexcept { return device_; }          ///< cuda:N (resolved)
  [[nodiscard]] bool writable() const noexcept { return true; }             ///< always writable (by device code)

 private:
  struct Free {
    int ordinal;
    void operator()(std::byte* memory) const noexcept {
      const detail::CudaDeviceGuard guard(ordinal, std::nothrow);  // restores only what it changed
      (void)cudaFree(memory);  // at process exit the runtime may already be gone: nothing to do then
    }
  };

  Device device_;
  std::size_t size_;
  std::unique_ptr<std::byte, Free> memory_{nullptr, Free{0}};
};

/// A new Storage of `bytes` uninitialised bytes on CUDA `device`; throws DeviceError.
[[nodiscard]] inline Storage cuda_storage(std::size_t bytes, Device device = Device::cuda()) {
  return Storage(CudaBackend(bytes, device));
}

}  // namespace tensorfile
