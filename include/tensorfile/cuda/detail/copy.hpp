// SPDX-License-Identifier: MIT
// CUDA copies: the Tensor::to hook (host <-> device, device <-> device) and the ring's copy engine.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/cuda/backend.hpp"
#include "tensorfile/cuda/detail/runtime.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"

namespace tensorfile::detail {

/// The bytes [first, last) of its storage that a tensor's elements touch.
struct ByteSpan {
  std::size_t first = 0;  ///< first byte
  std::size_t last = 0;   ///< one past the last byte (== first for an empty tensor)
};

/// The storage bytes `tensor` views (its constructor checked that they lie in the storage).
[[nodiscard]] inline ByteSpan viewed_bytes(const Tensor& tensor) {
  if (tensor.numel() == 0) return {};
  std::int64_t last = tensor.storage_offset();
  for (std::size_t d = 0; d < tensor.dim(); ++d) last += (tensor.sizes()[d] - 1) * tensor.strides()[d];
  const auto elem = tensor.element_size();
  return {static_cast<std::size_t>(tensor.storage_offset()) * elem, static_cast<std::size_t>(last + 1) * elem};
}

/// Tensor::to across host and CUDA devices (installed as device_copy_hook by <tensorfile/cuda.hpp>):
/// copies the storage bytes the view touches into a new storage on `target` and keeps sizes,
/// strides (so views stay views) and requires_grad. Synchronous: the copy is complete on return.
/// Throws DeviceError naming the CUDA error (no device, no driver, out of memory).
[[nodiscard]] inline Tensor cuda_copy_tensor(const Tensor& source, Device target) {
  const Device from = source.device();
  if ((!from.is_cpu() && !from.is_cuda()) || (!target.is_cpu() && !target.is_cuda())) {
    throw DeviceError("cannot copy a tensor from " + from.str() + " to " + target.str() +
                      "; expected cpu and cuda devices");
  }
  const ByteSpan span = viewed_bytes(source);
  const std::size_t bytes = span.last - span.first;
  const std::byte* src = bytes == 0 ? nullptr : source.storage().data() + span.first;
  Storage out;
  if (target.is_cpu()) {
    out = heap_storage(bytes, false);
    if (bytes != 0) {
      const CudaDeviceGuard guard(from.index);
      cuda_check(cudaMemcpy(out.mutable_data(), src, bytes, cudaMemcpyDeviceToHost),
                 "cudaMemcpy of " + std::to_string(bytes) + " bytes from " + from.str() + " to the host");
    }
  } else {
    out = cuda_storage(bytes, target);  // resolves "cuda", throws when there is no device
    const Device to = out.device();
    if (bytes != 0) {
      if (from.is_cpu()) {
        const CudaDeviceGuard guard(to.index);
        cuda_check(cudaMemcpy(out.mutable_data(), src, bytes, cudaMemcpyHostToDevice),
                   "cudaMemcpy of " + std::to_string(bytes) + " bytes from the host to " + to.str());
      } else {
        cuda_check(cudaMemcpyPeer(out.mutable_data(), to.index, src, from.index, bytes),
                   "cudaMemcpyPeer of " + std::to_string(bytes) + " bytes from " + from.str() + " to " + to.str());
      }
    }
  }
  const auto elem = static_cast<std::int64_t>(source.element_size());
  const std::int64_t offset = bytes == 0 ? 0 : source.storage_offset() - static_cast<std::int64_t>(span.first) / elem;
  // An empty tensor keeps its strides too: a file may give it torch's wrapped ones, which contiguous_strides refuses.
  return {std::move(out), source.dtype(), source.sizes(), source.strides(), offset, source.requires_grad()};
}

/// DeviceCopyHook::write for CUDA (installed by <tensorfile/cuda.hpp>): the values of `source` into the existing
/// contiguous CUDA tensor `target` (same dtype and shape): one device-to-device copy when `source` is a contiguous
/// CUDA tensor, else through a contiguous host copy (there are no kernels here to gather a strided view on the
/// device). Synchronous. Throws DeviceError naming the CUDA error.
inline void cuda_write_tensor(const Tensor& source, const Tensor& target) {
  const std::size_t bytes = target.nbytes();
  if (!target.device().is_cuda() || !target.is_contiguous() || source.nbytes() != bytes) {
    throw DeviceError("cannot write a " + std::to_string(source.nbytes()) + "-byte tensor on " + source.device().str() +
                      " into " + std::to_string(bytes) + " bytes on " + target.device().str() +
                      "; expected a contiguous CUDA tensor of the same size");
  }
  if (bytes == 0) return;
  const Device to = target.device();
  std::byte* const dst = target.storage().mutable_data() + viewed_bytes(target).first;
  if (source.device().is_cuda() && source.is_contiguous()) {
    const Device from = source.device();
    cuda_check(cudaMemcpyPeer(dst, to.index, source.storage().data() + viewed_bytes(source).first, from.index, bytes),
               "cudaMemcpyPeer of " + std::to_string(bytes) + " bytes from " + from.str() + " to " + to.str());
    return;
  }
  const Tensor host = source.device().is_cpu() ? source : cuda_copy_tensor(source, Device::cpu());
  const Storage packed = heap_storage(bytes, false);
  host.copy_into(packed.mutable_data());
  const CudaDeviceGuard guard(to.index);
  cuda_check(cudaMemcpy(dst, packed.data(), bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy of " + std::to_string(bytes) + " bytes from the host to " + to.str());
}

/// Pinned buffers, streams and events that finished loads left for the next ones (LoadOptions::Cuda::keep_ring),
/// per device; cuda::release_ring() frees them.
struct CudaRingCache {
  struct Pinned {
    std::byte* memory = nullptr;
    std::size_t bytes = 0;
  };
  struct PerDevice {
    std::vector<Pinned> pinned;
    std::vector<CudaStream> streams;
    std::vector<CudaEvent> events;
  };
  std::mutex mutex;
  std::map<int, PerDevice> devices;

  /// The process's cache.
  [[nodiscard]] static CudaRingCache& get() noexcept {
    static CudaRingCache cache;
    return cache;
  }
  /// Frees everything it holds.
  void release() noexcept {
    std::map<int, PerDevice> held;
    {
      const std::lock_guard lock(mutex);
      held.swap(devices);
    }
    for (auto& [ordinal, device] : held) {
      const CudaDeviceGuard guard(ordinal, std::nothrow);
      for (const Pinned& buffer : device.pinned) (void)cudaFreeHost(buffer.memory);
      device.streams.clear();
      device.events.clear();
    }
  }
};

/// The ring's copy engine on one CUDA device: cudaHostAlloc'd slots, one non-blocking stream and
/// one event per lane, cudaMemcpyAsync host to device. With keep_ring(true) the slots, streams and
/// events come from and go back to CudaRingCache.
class CudaCopyEngine {
 public:
  /// An engine for `device` (resolved); throws DeviceError when it is missing.
  explicit CudaCopyEngine(Device device) : ordinal_(resolve_cuda_device(device).index) {}
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;
  ~CudaCopyEngine() {
    drain();
    if (!keep_) return;
    try {
      const std::lock_guard lock(CudaRingCache::get().mutex);
      CudaRingCache::PerDevice& cached = CudaRingCache::get().devices[ordinal_];
      for (CudaStream& stream : streams_) cached.streams.push_back(std::move(stream));
      for (CudaEvent& event : events_) cached.events.push_back(std::move(event));
    } catch (...) {  // no room in the cache: what was not moved is destroyed with the engine
    }
  }

  /// Whether this engine takes its ring from CudaRingCache and leaves it there.
  void keep_ring(bool keep) noexcept { keep_ = keep; }

  /// `device` with its ordinal; throws DeviceError naming the CUDA error when it is missing.
  [[nodiscard]] static Device resolve(Device device) { return resolve_cuda_device(device); }

  /// `bytes` of device memory (a CudaBackend storage).
  [[nodiscard]] Storage allocate_device(std::size_t bytes) { return cuda_storage(bytes, Device::cuda(ordinal_)); }

  /// Page-locked, portable host memory (page aligned).
  [[nodiscard]] std::byte* allocate_pinned(std::size_t bytes) {
    if (keep_) {
      const std::lock_guard lock(CudaRingCache::get().mutex);
      auto& cached = CudaRingCache::get().devices[ordinal_].pinned;
      const auto fits = std::find_if(cached.begin(), cached.end(), [&](const auto& b) { return b.bytes >= bytes; });
      if (fits != cached.end()) {
        const CudaRingCache::Pinned buffer = *fits;
        cached.erase(fits);
        kept_pinned_.push_back(buffer);
        return buffer.memory;
      }
    }
    const CudaDeviceGuard guard(ordinal_);
    void* memory = nullptr;
    cuda_check(cudaHostAlloc(&memory, bytes, cudaHostAllocPortable),
               "cudaHostAlloc of " + std::to_string(bytes) + " pinned bytes");
    if (keep_) kept_pinned_.push_back({static_cast<std::byte*>(memory), bytes});
    return static_cast<std::byte*>(memory);
  }
  /// Frees pinned memory, or hands it back to CudaRingCache with keep_ring(true).
  void free_pinned(std::byte* memory) noexcept {
    const auto kept = std::find_if(kept_pinned_.begin(), kept_pinned_.end(),
                                   [&](const CudaRingCache::Pinned& buffer) { return buffer.memory == memory; });
    if (kept == kept_pinned_.end()) {
      (void)cudaFreeHost(memory);
      return;
    }
    try {
      const std::lock_guard lock(CudaRingCache::get().mutex);
      CudaRingCache::get().devices[ordinal_].pinned.push_back(*kept);
    } catch (...) {  // no room in the cache: free it
      (void)cudaFreeHost(memory);
    }
    kept_pinned_.erase(kept);
  }

  /// One stream and one event per lane, on this engine's device.
  void open_lanes(std::size_t count) {
    const CudaDeviceGuard guard(ordinal_);
    drain();
    events_.clear();
    streams_.clear();
    streams_.reserve(count);
    events_.reserve(count);
    if (keep_) {
      const std::lock_guard lock(CudaRingCache::get().mutex);
      CudaRingCache::PerDevice& cached = CudaRingCache::get().devices[ordinal_];
      while (streams_.size() < count && !cached.streams.empty() && !cached.events.empty()) {
        streams_.push_back(std::move(cached.streams.back()));
        events_.push_back(std::move(cached.events.back()));
        cached.streams.pop_back();
        cached.events.pop_back();
      }
    }
    while (streams_.size() < count) {
      streams_.emplace_back();
      events_.emplace_back();
    }
  }

  /// Queues a host to device copy on `lane` (from any thread).
  void copy_async(std::size_t lane, std::byte* device, const std::byte* host, std::size_t bytes) {
    cuda_check(cudaSetDevice(ordinal_), "cudaSetDevice");  // per thread; a no-op when already current
    cuda_check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, streams_[lane].get()), "cudaMemcpyAsync");
  }
  /// Marks the end of `lane`'s queued copies.
  void record(std::size_t lane) {
    cuda_check(cudaEventRecord(events_[lane].get(), streams_[lane].get()), "cudaEventRecord");
  }
  /// Whether `lane`'s marked copies are done; throws DeviceError when one failed.
  [[nodiscard]] bool ready(std::size_t lane) {
    const cudaError_t status = cudaEventQuery(events_[lane].get());
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    cuda_check(status, "cudaEventQuery");
    return true;
  }
  /// Blocks until `lane`'s marked copies are done; throws DeviceError when one failed.
  void wait(std::size_t lane) { cuda_check(cudaEventSynchronize(events_[lane].get()), "cudaEventSynchronize"); }
  /// Waits for every lane, ignoring errors.
  void drain() noexcept {
    for (const CudaStream& stream : streams_) (void)cudaStreamSynchronize(stream.get());
  }

 private:
  int ordinal_;
  bool keep_ = false;
  std::vector<CudaRingCache::Pinned> kept_pinned_;  // this run's buffers that go back to the cache
  std::vector<CudaStream> streams_;
  std::vector<CudaEvent> events_;
};

}  // namespace tensorfile::detail
