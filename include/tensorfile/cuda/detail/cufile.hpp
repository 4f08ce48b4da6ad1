// SPDX-License-Identifier: MIT
// Optional cuFile (GPUDirect Storage): dlopen("libcufile.so.0") when present, reads straight to device memory.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/cuda/backend.hpp"
#include "tensorfile/cuda/detail/copy.hpp"
#include "tensorfile/cuda/detail/device_guard.hpp"
#include "tensorfile/cuda/detail/ring_load.hpp"
#include "tensorfile/cuda/detail/ring_plan.hpp"
#include "tensorfile/cuda/detail/ring_scheduler.hpp"
#include "tensorfile/cuda/detail/runtime.hpp"

namespace tensorfile::detail {

/// The part of cuFile's C API the loader calls, resolved at run time (no cufile.h, no link-time
/// dependency). Layouts follow cufile.h (CUDA 11.4 and later).
struct CuFileApi {
  struct Status {  // CUfileError_t
    int err;       // CUfileOpError, 0 = CU_FILE_SUCCESS
    int cu_err;    // CUresult
  };
  struct Descriptor {  // CUfileDescr_t
    int type;          // CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
    union {
      int fd;
      void* handle;
    } handle;
    const void* fs_ops;
  };
  using Handle = void*;  // CUfileHandle_t

  Status (*driver_open)() = nullptr;
  Status (*handle_register)(Handle*, Descriptor*) = nullptr;
  void (*handle_deregister)(Handle) = nullptr;
  ssize_t (*read)(Handle, void*, std::size_t, off_t, off_t) = nullptr;

  /// The API with its driver opened, loaded once per process; null when libcufile.so.0 is absent,
  /// lacks a symbol, or its driver does not open (no GPUDirect Storage here: use the ring).
  [[nodiscard]] static const CuFileApi* get() noexcept;
  /// Why get() is null ("libcufile.so.0 does not load: ..."); empty when it is not.
  [[nodiscard]] static const std::string& unavailable_reason() noexcept;

  /// Loads the library and opens its driver; nullopt, with the reason in `why`, when that fails.
  [[nodiscard]] static std::optional<CuFileApi> load(std::string& why) {
    void* library = ::dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {  // the library stays loaded once found: the driver lives in it
      const char* error = ::dlerror();
      why = "libcufile.so.0 does not load: " + std::string(error != nullptr ? error : "not found");
      return std::nullopt;
    }
    CuFileApi api;
    const auto bind = [library](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, name));
      return function != nullptr;
    };
    if (!bind(api.driver_open, "cuFileDriverOpen") || !bind(api.handle_register, "cuFileHandleRegister") ||
        !bind(api.handle_deregister, "cuFileHandleDeregister") || !bind(api.read, "cuFileRead")) {
      ::dlclose(library);
      why = "libcufile.so.0 lacks a cuFile function (cuFileDriverOpen, cuFileHandleRegister, cuFileRead)";
      return std::nullopt;
    }
    if (const Status status = api.driver_open(); status.err != 0) {
      why = "cuFileDriverOpen failed with cuFile error " + std::to_string(status.err);
      return std::nullopt;
    }
    return api;
  }
};

/// CuFileApi::load's result, kept for the process.
struct CuFileLoaded {
  std::optional<CuFileApi> api;  ///< the API, when it loaded
  std::string why;               ///< else why not
};

/// The one CuFileLoaded of the process (loaded at the first call).
[[nodiscard]] inline const CuFileLoaded& cufile_loaded() noexcept {
  static const CuFileLoaded once = [] {
    CuFileLoaded out;
    try {
      out.api = CuFileApi::load(out.why);
    } catch (...) {  // a reason string that cannot be allocated: cuFile stays off
      out.api.reset();
    }
    return out;
  }();
  return once;
}

inline const CuFileApi* CuFileApi::get() noexcept {
  const CuFileLoaded& loaded = cufile_loaded();
  return loaded.api ? &*loaded.api : nullptr;
}

inline const std::string& CuFileApi::unavailable_reason() noexcept { return cufile_loaded().why; }

/// One file registered with cuFile; deregistered and closed on destruction.
class CuFileHandle {
 public:
  /// Opens the file `source` has open once more (with O_DIRECT when the filesystem allows it, as
  /// GPUDirect needs) and registers it; nullopt, with the reason in `why`, when cuFile is unavailable or
  /// refuses the file.
  [[nodiscard]] static std::optional<CuFileHandle> open(const FileHandle& source, std::string& why) {
    const CuFileApi* api = CuFileApi::get();
    if (api == nullptr) {
      why = CuFileApi::unavailable_reason();
      return std::nullopt;
    }
    CuFileHandle file;
    file.api_ = api;
    file.path_ = source.path();
    const std::string reopen = reopen_path(source);
    for (const int flags : {O_RDONLY | O_CLOEXEC | O_DIRECT, O_RDONLY | O_CLOEXEC}) {
      do {
        file.fd_ = ::open(reopen.c_str(), flags);
      } while (file.fd_ < 0 && errno == EINTR);
      if (file.fd_ >= 0) break;
    }
    if (file.fd_ < 0) {
      why = "cannot open the file for cuFile: " + std::string(std::strerror(errno));
      return std::nullopt;
    }
    CuFileApi::Descriptor descriptor{};
    descriptor.type = 1;  // CU_FILE_HANDLE_TYPE_OPAQUE_FD
    descriptor.handle.fd = file.fd_;
    if (const CuFileApi::Status status = api->handle_register(&file.handle_, &descriptor); status.err != 0) {
      why = "cuFileHandleRegister refused the file with cuFile error " + std::to_string(status.err);
      return std::nullopt;
    }
    file.registered_ = true;
    return file;
  }
  CuFileHandle(CuFileHandle&& other) noexcept
      : api_(other.api_), path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)),
        handle_(std::exchange(other.handle_, nullptr)), registered_(std::exchange(other.registered_, false)) {}
  CuFileHandle& operator=(CuFileHandle&&) = delete;
  CuFileHandle(const CuFileHandle&) = delete;
  CuFileHandle& operator=(const CuFileHandle&) = delete;
  ~CuFileHandle() {
    if (registered_) api_->handle_deregister(handle_);
    if (fd_ >= 0) ::close(fd_);
  }

  /// Reads file bytes [file_offset, +bytes) to device address `device`; throws IoError,
  /// DeviceError (a cuFile error) or FormatError (the file ends early).
  void read_exact(std::byte* device, std::uint64_t file_offset, std::size_t bytes) const {
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t got = api_->read(handle_, device + done, bytes - done, static_cast<off_t>(file_offset + done), 0);
      if (got < 0) {
        if (got == -1) throw IoError("cuFileRead cannot read", errno, {.file = path_, .offset = file_offset + done});
        throw DeviceError("cuFileRead failed with cuFile error " + std::to_string(-got),
                          {.file = path_, .offset = file_offset + done});
      }
      if (got == 0) {
        throw FormatError("file ends early; expected " + std::to_string(file_offset + bytes) + " bytes, got " +
                              std::to_string(file_offset + done),
                          {.file = path_, .offset = file_offset + done});
      }
      done += static_cast<std::size_t>(got);
    }
  }

 private:
  CuFileHandle() = default;

  const CuFileApi* api_ = nullptr;
  std::filesystem::path path_;
  int fd_ = -1;
  CuFileApi::Handle handle_ = nullptr;
  bool registered_ = false;
};

/// Streams a planned group straight from the file to device memory with cuFile, `options.threads`
/// reads of at most slot_bytes at a time (no pinned host memory); nullopt, having done nothing and
/// with the reason in `why`, when cuFile is unavailable. Progress is reported one call at a time,
/// from the reading threads.
[[nodiscard]] inline std::optional<std::vector<Storage>> cufile_stream(const FileHandle& source, const RingGroup& group,
                                                                       const RingOptions& options,
                                                                       RingProgressState& progress, std::string& why) {
  check_ring_options(options);
  std::optional<CuFileHandle> file = CuFileHandle::open(source, why);
  if (!file) return std::nullopt;
  const auto allocate = [&](std::size_t bytes) { return cuda_storage(bytes, group.device); };
  const GroupAllocations allocations = allocate_group(group, allocate);
  const std::vector<std::byte*>& bases = allocations.bases;
  struct Piece {
    std::uint64_t file_offset;
    std::byte* device;
    std::size_t bytes;
  };
  std::vector<Piece> pieces;
  const std::uint64_t chunk = std::min(options.slot_bytes, options.ring_bytes);
  for (const RingSegment& segment : group.layout.segments) {
    for (std::uint64_t at = 0; at < segment.size; at += chunk) {
      pieces.push_back({segment.file_offset + at, bases[segment.target] + segment.device_offset + at,
                        static_cast<std::size_t>(std::min(chunk, segment.size - at))});
    }
  }
  std::mutex progress_mutex;
  parallel_for_on_device<CudaThreadDevice>(group.device.index, pieces.size(), options.threads, [&](std::size_t i) {
    file->read_exact(pieces[i].device, pieces[i].file_offset, pieces[i].bytes);
    const std::lock_guard lock(progress_mutex);
    progress.advance(pieces[i].bytes);
  });
  return group_storages(group, allocations, allocate);
}

/// How a streamed load reaches the device.
enum class CudaStreamPath : std::uint8_t {
  ring,             ///< pinned ring only
  cufile_or_ring,   ///< cuFile when available, else the ring
  cufile_required,  ///< cuFile; DeviceError naming why when it cannot be used
};

/// Streams a planned group to its CUDA device: with cuFile when asked for and available, else
/// through the ring of pinned buffers (or a DeviceError, when cuFile is required).
[[nodiscard]] inline std::vector<Storage> cuda_stream(const FileHandle& file, const RingGroup& group,
                                                      const RingOptions& options, CudaStreamPath how,
                                                      RingProgressState& progress) {
  if (how != CudaStreamPath::ring) {
    std::string why;
    if (auto storages = cufile_stream(file, group, options, progress, why)) return std::move(*storages);
    if (how == CudaStreamPath::cufile_required) {
      throw DeviceError("cuFile cannot be used: " + why, {.file = file.path()});
    }
  }
  return ring_stream<CudaCopyEngine>(file, group, options, progress);
}

}  // namespace tensorfile::detail
