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
#include "tensorfile/cuda/detail/device_guard.hpp"

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

/// The calling thread's CUDA device, for BasicDeviceGuard. Whether the thread has chosen a device is
/// asked of the driver (cuCtxGetCurrent, found through cudaGetDriverEntryPointByVersion so that nothing
/// links libcuda); where that is unavailable the thread counts as having chosen one.
struct CudaThreadDevice {
  using GetContext = int (*)(void**);  // CUresult cuCtxGetCurrent(CUcontext*)
  using SetContext = int (*)(void*);   // CUresult cuCtxSetCurrent(CUcontext)
  struct DriverContextApi {
    GetContext get = nullptr;
    SetContext set = nullptr;
  };

  /// The driver's context calls, resolved once per process; null members when unavailable.
  [[nodiscard]] static const DriverContextApi& driver() noexcept {
    static const DriverContextApi api = [] {
      DriverContextApi found;
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12050
      void* get = nullptr;
      void* set = nullptr;
      cudaDriverEntryPointQueryResult status{};
      if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 4000, cudaEnableDefault, &status) == cudaSuccess &&
          status == cudaDriverEntryPointSuccess &&
          cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 4000, cudaEnableDefault, &status) == cudaSuccess &&
          status == cudaDriverEntryPointSuccess) {
        found.get = reinterpret_cast<GetContext>(get);
        found.set = reinterpret_cast<SetContext>(set);
      }
#endif
      (void)cudaGetLastError();
      return found;
    }();
    return api;
  }
  /// Whether a context is bound to the calling thread (true when the driver cannot say).
  [[nodiscard]] static bool chosen() noexcept {
    const DriverContextApi& api = driver();
    if (api.get == nullptr) return true;
    void* context = nullptr;
    return api.get(&context) != 0 || context != nullptr;
  }
  /// cudaGetDevice; throws DeviceError.
  [[nodiscard]] static int current_device() {
    int ordinal = 0;
    cuda_check(cudaGetDevice(&ordinal), "cudaGetDevice");
    return ordinal;
  }
  /// cudaSetDevice; throws DeviceError.
  static void set_device(int ordinal) {
    cuda_check(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
  }
  /// Unbinds the thread's context (cuCtxSetCurrent(nullptr)).
  static void unset() noexcept {
    if (const DriverContextApi& api = driver(); api.set != nullptr) (void)api.set(nullptr);
  }
};

/// Makes a CUDA device the calling thread's current one and restores only what it changed.
using CudaDeviceGuard = BasicDeviceGuard<CudaThreadDevice>;

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
