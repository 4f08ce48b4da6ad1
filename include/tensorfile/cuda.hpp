// SPDX-License-Identifier: MIT
/// @file
/// CUDA for tensorfile: Tensor::to(cuda), device storages, and loads streamed to the GPU (link tensorfile::cuda).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/cuda/backend.hpp"
#include "tensorfile/cuda/detail/copy.hpp"
#include "tensorfile/cuda/detail/cufile.hpp"
#include "tensorfile/cuda/detail/ring_load.hpp"
#include "tensorfile/cuda/detail/ring_ranks.hpp"
#include "tensorfile/cuda/detail/runtime.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/slice.hpp"
#include "tensorfile/formats/torch/load.hpp"
#include "tensorfile/io/from_file.hpp"
#include "tensorfile/state_dict.hpp"

namespace tensorfile::cuda {

/// Number of CUDA devices; 0 when there is none or no usable driver (never throws).
[[nodiscard]] inline int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// Why cuFile (GPUDirect Storage) cannot be used in this process ("libcufile.so.0 does not load: ..."),
/// or an empty string when its library loaded and its driver opened (a file may still be refused:
/// LoadOptions::Cuda::require_cufile says so).
[[nodiscard]] inline std::string cufile_unavailable_reason() {
  return tensorfile::detail::CuFileApi::unavailable_reason();
}

/// Whether a CUDA device can be used.
[[nodiscard]] inline bool is_available() noexcept { return device_count() > 0; }

/// Why CUDA cannot be used ("cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is
/// detected)"), or an empty string when it can.
[[nodiscard]] inline std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return "cudaGetDeviceCount: " + detail::cuda_error_text(status);
  }
  return count > 0 ? std::string() : std::string("cudaGetDeviceCount: 0 devices");
}

/// Installs the CUDA copy behind Tensor::to (host to device, device to host, device to device),
/// which the loads' map_location, save of device tensors and Tensor::zeros on a
/// device use, and the write into device memory that LoadOptions::into's CUDA buffers take.
/// Including this header already does it; calling it again does nothing new.
inline void install() noexcept {
  detail::device_copy_hook().copy = &detail::cuda_copy_tensor;
  detail::device_copy_hook().write = &detail::cuda_write_tensor;
}

/// Frees the rings that loads with keep_ring left behind (pinned host memory, streams, events); loads in
/// flight keep theirs until they return. Never throws.
inline void release_ring() noexcept { tensorfile::detail::CudaRingCache::get().release(); }

}  // namespace tensorfile::cuda

namespace tensorfile::detail {
/// The ring settings of `options`: LoadOptions::cuda, with the common `threads` (0: 8 readers) and `direct_reads`
/// (automatic: O_DIRECT for files of 256 MiB and more mostly not in the page cache).
inline RingOptions cuda_ring_options(const LoadOptions& options) {
  std::optional<bool> direct_io;
  if (options.direct_reads != DirectReads::automatic) direct_io = options.direct_reads == DirectReads::always;
  return {.ring_bytes = options.cuda.ring_bytes,
          .slot_bytes = options.cuda.slot_bytes,
          .threads = options.threads != 0 ? options.threads : 8,
          .direct_io = direct_io,
          .single_allocation = options.cuda.single_allocation,
          .keep_ring = options.cuda.keep_ring};
}
/// The stream path `options` ask for.
inline CudaStreamPath cuda_stream_path(const LoadOptions& options) {
  if (!options.cuda.use_cufile) return CudaStreamPath::ring;
  return options.cuda.require_cufile ? CudaStreamPath::cufile_required : CudaStreamPath::cufile_or_ring;
}
/// The stream step of the streamed loads: a planned group of an open file to its device, by the path
/// `options` ask for.
inline auto cuda_streamer(const RingOptions& ring, const LoadOptions& options) {
  return [&ring, how = cuda_stream_path(options)](const FileHandle& file, const RingGroup& group,
                                                  RingProgressState& progress) {
    return cuda_stream(file, group, ring, how, progress);
  };
}
/// Runs `fn`, adding `path` to a DeviceError that names no file.
template <class Fn>
auto with_file_location(const std::filesystem::path& path, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const DeviceError& error) {
    if (!error.path().empty()) throw;
    throw DeviceError(error.reason(), {.file = path, .member = error.member(), .offset = error.offset()});
  }
}
/// The frame of cuda::load_torch, cuda::load_safetensors and cuda::load_gguf: opens `path` (read-write for a shared
/// `mmap`) and returns `load(file, ring, stream)` with the ring `options` describe, a DeviceError naming the file.
template <class Load>
Value cuda_stream_file(const std::filesystem::path& path, const LoadOptions& options, Load&& load) {
  cuda::install();
  const RingOptions ring = cuda_ring_options(options);
  const FileHandle file = open_for_stream(path, options.mmap);
  return with_file_location(path, [&] { return load(file, ring, cuda_streamer(ring, options)); });
}
}  // namespace tensorfile::detail

namespace tensorfile::cuda {

/// Loads a torch.save file as tensorfile::load_torch does, with the storages that map_location sends to
/// a CUDA device streamed there: `threads` reader threads (0: 8) pread the records into a ring of pinned host
/// buffers (`cuda.ring_bytes` in all, whatever the file size) while cudaMemcpyAsync moves the filled
/// ones to one device allocation per device (or, with `cuda.use_cufile`, cuFile reads straight to it); `direct_reads`
/// says whether the ring reads with O_DIRECT. The tensors are complete on return. Storages mapped elsewhere,
/// compressed or big-endian records, legacy files and the callable map_location form load as
/// tensorfile::load_torch does (through Tensor::to). Throws what tensorfile::load_torch throws; DeviceError naming
/// the CUDA error when a device is missing (cudaErrorNoDevice, cudaErrorInsufficientDriver) or out of memory.
[[nodiscard]] inline Value load_torch(const std::filesystem::path& path, const LoadOptions& options = {}) {
  return tensorfile::detail::cuda_stream_file(path, options, [&](const auto& file, const auto& ring, auto&& stream) {
    return tensorfile::detail::stream_load_torch(file, path, options, ring, options.cuda.progress,
                                                 tensorfile::detail::resolve_cuda_device, stream);
  });
}

/// Loads a .safetensors file as tensorfile::load_safetensors does, with its tensors streamed to the CUDA
/// device map_location names ("cuda", "cuda:1", {{"cpu", "cuda:1"}}: every tensor's saved tag is "cpu")
/// through the ring (or cuFile) as cuda::load_torch streams torch records: one device allocation, host memory
/// bounded by `cuda.ring_bytes`. Other targets, meta and the callable form load as load_safetensors does.
/// Throws what load_safetensors throws; DeviceError as cuda::load_torch.
[[nodiscard]] inline Value load_safetensors(const std::filesystem::path& path, const LoadOptions& options = {}) {
  return tensorfile::detail::cuda_stream_file(path, options, [&](const auto& file, const auto& ring, auto&& stream) {
    return tensorfile::detail::stream_load_safetensors(file, path, options, ring, options.cuda.progress,
                                                       tensorfile::detail::resolve_cuda_device, stream);
  });
}

/// Loads a GGUF file as tensorfile::load_gguf does, with its tensors (block-typed ones as their raw uint8 blocks)
/// streamed to the CUDA device map_location names through the ring (or cuFile) as cuda::load_safetensors streams
/// them: one device allocation, host memory bounded by `cuda.ring_bytes`. One file alone: cuda::load_state_dict loads
/// a split model whole from any part. Other targets, meta and the callable form load as load_gguf does. Throws what
/// load_gguf throws; DeviceError as cuda::load_torch.
[[nodiscard]] inline Value load_gguf(const std::filesystem::path& path, const LoadOptions& options = {}) {
  return tensorfile::detail::cuda_stream_file(path, options, [&](const auto& file, const auto& ring, auto&& stream) {
    return tensorfile::detail::stream_load_gguf(file, path, options, ring, options.cuda.progress,
                                                tensorfile::detail::resolve_cuda_device, stream);
  });
}

/// Loads a model's weights as tensorfile::load_state_dict does (a file, a directory, an index and its
/// shards, a split GGUF model), with the torch, safetensors and GGUF files streamed to CUDA as cuda::load_torch,
/// cuda::load_safetensors and cuda::load_gguf stream them. Shards go one after another (each read by the ring's
/// `threads`), so host memory stays at `cuda.ring_bytes`; `cuda.progress` counts each file's bytes anew. Tensordict
/// trees and .npz files load as load_state_dict loads them (through Tensor::to).
[[nodiscard]] inline Value load_state_dict(const std::filesystem::path& path, const LoadOptions& options = {}) {
  install();
  const tensorfile::detail::RingOptions ring = tensorfile::detail::cuda_ring_options(options);
  LoadOptions one_at_a_time = options;  // `threads` are the ring's readers here, not shards at once
  one_at_a_time.threads = 1;
  return tensorfile::detail::load_state_dict_with(
      path, one_at_a_time,
      [&](const tensorfile::detail::FileHandle& file, const std::filesystem::path& name, FileFormat format) {
        return tensorfile::detail::with_file_location(name, [&] {
          return tensorfile::detail::stream_load_weights(file, name, format, options, ring, options.cuda.progress,
                                                         tensorfile::detail::resolve_cuda_device,
                                                         tensorfile::detail::cuda_streamer(ring, options));
        });
      });
}

/// Loads every rank of a tensor-parallel group from one torch zip, safetensors or GGUF file, each rank's part straight
/// to its own device: `group.plan` cuts each tensor as parallel_slices() does for one rank (t.tensor_split or t.chunk
/// along the rule's dim, explicit sizes, replicated tensors whole), and rank r's parts stream through the pinned ring
/// to `group.devices[r]` ("cuda:0", ...; `{"cuda:0", "cuda:0"}` puts two ranks on one device), every device's ring at
/// once (its pinned buffers, streams and events, `threads` readers each; as cuda::load_torch, or cuFile with
/// `cuda.use_cufile`), one device allocation per rank that its parts slice. Each rank's bytes are read from the file
/// once (a replicated tensor once per device); nothing is staged on the host but the rings. Tensors whose bytes are
/// not raw in the file (deflated or big-endian records, views with strides of their own) are read once on the host
/// and each part copied with Tensor::to. Returns one state dict per rank, in rank order: an ordered path -> tensor
/// dict (named_tensors() paths, the file's order) of contiguous parts; a GGUF file's block tensors are their raw bytes
/// (uint8, the rules given their shape in elements; a cut of the last dimension keeps whole blocks), and every rank's
/// dict has the file's metadata and ggml types (gguf_tensor_type(), dequantize()). `options`: `select` (and
/// `select_drops`), `threads`, `direct_reads`, `cuda` (`ring_bytes` per device, `slot_bytes`, `use_cufile`,
/// `require_cufile`, `keep_ring`, `progress` over every device's bytes), the safetensors header bound, `gguf`; `slice`,
/// `map_location` and `into` set are ArgumentErrors, as are a device count other than `group.plan.world`, a device
/// string that is no CUDA device, a bad plan, and a file of another format; a rule that does not fit a tensor is the
/// ArgumentError parallel_slices() gives. DeviceError naming the CUDA error (and the rank) when a device is missing or
/// out of memory; what load_torch and load_safetensors throw otherwise.
[[nodiscard]] inline std::vector<Value> load_ranks(const std::filesystem::path& path, const ParallelDevices& group,
                                                   const LoadOptions& options = {}) {
  install();
  const tensorfile::detail::RingOptions ring = tensorfile::detail::cuda_ring_options(options);
  const tensorfile::detail::FileHandle file = tensorfile::detail::open_for_stream(path, options.mmap);
  return tensorfile::detail::with_file_location(path, [&] {
    return tensorfile::detail::stream_load_ranks(file, path, group, options, ring, options.cuda.progress,
                                                 tensorfile::detail::resolve_cuda_device,
                                                 tensorfile::detail::cuda_streamer(ring, options));
  });
}

/// A 1-d tensor of `file_options.size` elements of `path` (tensorfile::from_file's rules) on the CUDA device
/// `options.map_location` names (unset: "cuda"), read through the ring (or cuFile) as cuda::load_torch reads,
/// rather than mapped. Throws ArgumentError for a map_location that is not one CUDA device and for
/// MapMode::shared (a device copy cannot write back to the file), and what from_file throws; DeviceError naming
/// the CUDA error when the device is missing.
[[nodiscard]] inline Tensor from_file(const std::filesystem::path& path, const FromFileOptions& file_options = {},
                                      const LoadOptions& options = {}) {
  install();
  const Device device = options.map_location.single_device("cuda::from_file").value_or(Device::cuda());
  if (!device.is_cuda()) {
    throw ArgumentError("map_location is " + device.str() +
                            "; cuda::from_file expects a CUDA device (tensorfile::"
                            "from_file maps the file on the host)",
                        {.file = path});
  }
  if (file_options.mmap == MapMode::shared) {
    throw ArgumentError("mmap = MapMode::shared maps the file for writing; a tensor on " + device.str() +
                            " cannot write back, expected copy_on_write or read_only",
                        {.file = path});
  }
  const Tensor mapped = tensorfile::from_file(path, file_options);  // checks sizes; maps, reads nothing
  const tensorfile::detail::RingOptions ring = tensorfile::detail::cuda_ring_options(options);
  const tensorfile::detail::FileHandle file =
      tensorfile::detail::FileHandle::open(path, tensorfile::detail::OpenMode::read);
  Storage storage = tensorfile::detail::with_file_location(path, [&] {
    const Device target = tensorfile::detail::resolve_cuda_device(device);
    const auto stream = tensorfile::detail::cuda_streamer(ring, options);
    return tensorfile::detail::stream_read_file(
        mapped.nbytes(), target, options.cuda.progress,
        [&](const tensorfile::detail::RingGroup& group, tensorfile::detail::RingProgressState& progress) {
          return stream(file, group, progress);
        });
  });
  return {std::move(storage), file_options.dtype, mapped.sizes()};
}

}  // namespace tensorfile::cuda

namespace tensorfile::detail {
/// Including <tensorfile/cuda.hpp> installs the hook before main() runs.
inline const bool cuda_copy_hook_installed = (cuda::install(), true);
}  // namespace tensorfile::detail
