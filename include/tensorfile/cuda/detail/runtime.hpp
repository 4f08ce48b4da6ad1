// SPDX-License-Identifier: MIT
// The CUDA runtime behind one small interface: errors as DeviceError, device lookup, RAII for streams and events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"

namespace tensorfile::detail {

/// "cudaErrorNoDevice (no CUDA-capable device is detected)".
[[nodiscard]] inline std::string cuda_error_text(cudaError_t status) {
  const char* name = cudaGetErrorName(status);
  const char* text = cudaGetErrorString(status);
  return std::string(name != nullptr ? name : "cudaError") + " (" + (text != nullptr ? text : "unknown error") + ")";
}

/// Throws DeviceError "<call> failed: cudaErrorX (text)" unless `status` is cudaSuccess.
inline void cuda_check(cudaError_t status, std::string_view call) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so that the next call does not report it again
  throw DeviceError(std::string(call) + " failed: " + cuda_error_text(status));
}

/// The number of CUDA devices; throws DeviceError naming the CUDA error when there is no usable
/// device or driver (cudaErrorNoDevice, cudaErrorInsufficientDriver...).
[[nodiscard]] inline int cuda_device_count() {
  int count = 0;
  cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count <= 0) throw DeviceError("no CUDA device; cudaGetDeviceCount found 0");
  return count;
}

/// `device` with its ordinal: "cuda" becomes the calling thread's current device. Throws
/// DeviceError when there is no such device, ArgumentError when it is not a CUDA device.
[[nodiscard]] inline Device resolve_cuda_device(Device device) {
  if (!device.is_cuda())
    throw ArgumentError("device " + device.str() + " is not a CUDA device; expected cuda or cuda:N");
  const int count = cuda_device_count();
  int ordinal = device.index;
  if (ordinal < 0) cuda_check(cudaGetDevice(&ordinal), "cudaGetDevice");
  if (ordinal >= count) {
    throw DeviceError("device " + device.str() + " does not exist; expected an index below " + std::to_string(count) +
                      " (the CUDA devices present)");
  }
  return Device::cuda(ordinal);
}

/// Makes `ordinal` the calling thread's current device and restores the previous one on destruction.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int ordinal) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != ordinal) {
      cuda_check(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
      restore_ = true;
    }
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;
  ~CudaDeviceGuard() {
    if (restore_) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
  bool restore_ = false;
};

/// A non-blocking CUDA stream (it does not synchronise with the legacy default stream); destroyed
/// with its handle.
class CudaStream {
 public:
  /// Creates a stream on the current device; throws DeviceError.
  CudaStream() { cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept {
    if (this != &other) {
      reset();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  ~CudaStream() { reset(); }
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }  ///< the handle

 private:
  void reset() noexcept {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
  cudaStream_t stream_ = nullptr;
};

/// A CUDA event without timing whose synchronisation blocks the thread (no spinning while the
/// reader threads need the cores); destroyed with its handle.
class CudaEvent {
 public:
  /// Creates an event on the current device; throws DeviceError.
  CudaEvent() {
    cuda_check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming | cudaEventBlockingSync),
               "cudaEventCreateWithFlags");
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept {
    if (this != &other) {
      reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  ~CudaEvent() { reset(); }
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }  ///< the handle

 private:
  void reset() noexcept {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }
  cudaEvent_t event_ = nullptr;
};

}  // namespace tensorfile::detail
