// SPDX-License-Identifier: MIT
// The POSIX calls behind tensordict trees: descriptors relative to a directory, whole-file reads, mmap regions.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"

namespace tensorfile::detail::td {

/// An owned file descriptor (file or directory), closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// openat(2) retried on EINTR; returns the descriptor or -1 with errno set.
[[nodiscard]] inline int open_at(int dir, const char* name, int flags, mode_t mode = 0) noexcept {
  int fd = -1;
  do {
    fd = ::openat(dir, name, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// Flags that open a directory without following a final symlink.
inline constexpr int dir_open_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

/// Reads all of the open file `fd` (at most `limit` bytes); `path` names it in errors. A small file costs one
/// pread (a short read is the end of a regular file); a larger one adds an fstat to size the buffer.
[[nodiscard]] inline std::string read_whole_file(int fd, const std::filesystem::path& path, std::uint64_t limit) {
  constexpr std::size_t first_read = 16384;
  std::string text;
  std::size_t done = 0;
  std::size_t capacity = first_read;
  while (true) {
    text.resize(capacity);
    const ssize_t got = ::pread(fd, text.data() + done, capacity - done, static_cast<off_t>(done));
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EISDIR) throw FormatError("is a directory; expected a file", {.file = path});
      throw IoError("cannot read", errno, {.file = path, .offset = done});
    }
    done += static_cast<std::size_t>(got);
    if (done > limit) {
      throw LimitError("file is too large; expected at most " + std::to_string(limit) + " bytes", {.file = path});
    }
    if (done < capacity) break;
    struct stat info {};  // a full buffer: size it from the file, plus one byte to see the end
    if (::fstat(fd, &info) != 0) throw IoError("cannot stat", errno, {.file = path});
    const auto size = static_cast<std::uint64_t>(info.st_size);
    if (size > limit) {
      throw LimitError(
          "file is too large; expected at most " + std::to_string(limit) + " bytes, got " + std::to_string(size),
          {.file = path});
    }
    capacity = std::max<std::size_t>(static_cast<std::size_t>(size) + 1, done * 2);
  }
  text.resize(done);
  return text;
}

/// Writes all of `bytes` to `fd` from offset 0 (pwrite, retried on EINTR and short writes).
inline void write_whole_file(int fd, const void* bytes, std::size_t size, const std::filesystem::path& path) {
  const auto* p = static_cast<const char*>(bytes);
  std::size_t done = 0;
  while (done < size) {
    const std::size_t chunk = std::min<std::size_t>(size - done, std::size_t{1} << 30);
    const ssize_t put = ::pwrite(fd, p + done, chunk, static_cast<off_t>(done));
    if (put < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot write", errno, {.file = path, .offset = done});
    }
    done += static_cast<std::size_t>(put);
  }
}

/// How a data file is mapped.
enum class RegionMode : std::uint8_t {
  read_only,      ///< PROT_READ, MAP_PRIVATE
  copy_on_write,  ///< PROT_READ|PROT_WRITE, MAP_PRIVATE
  shared,         ///< PROT_READ|PROT_WRITE, MAP_SHARED
};

/// mmap(2) of the first `bytes` (> 0) bytes of `fd` in `mode`; MAP_FAILED with errno set on failure.
[[nodiscard]] inline void* map_file(int fd, std::size_t bytes, RegionMode mode) noexcept {
  const int protection = mode == RegionMode::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  const int flags = mode == RegionMode::shared ? MAP_SHARED : MAP_PRIVATE;
  return ::mmap(nullptr, bytes, protection, flags, fd, 0);
}

/// A storage_backend owning one mmap of a tensordict data file; munmaps on destruction.
/// kind() uses MmapBackend's names ("mmap_shared", "mmap_private", "mmap_read_only").
class MappedRegion {
 public:
  /// Adopts the mapping [data, data + bytes) made by map_file in `mode`.
  MappedRegion(void* data, std::size_t bytes, RegionMode mode) noexcept
      : data_(static_cast<std::byte*>(data)), size_(bytes), mode_(mode) {}
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  MappedRegion(MappedRegion&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), mode_(other.mode_) {}
  MappedRegion& operator=(MappedRegion&&) = delete;
  ~MappedRegion() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }

  [[nodiscard]] std::byte* data() const noexcept { return data_; }                         ///< first mapped byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }                  ///< mapped bytes
  [[nodiscard]] Device device() const noexcept { return Device::cpu(); }                   ///< the host
  [[nodiscard]] bool writable() const noexcept { return mode_ != RegionMode::read_only; }  ///< per mode
  [[nodiscard]] RegionMode mode() const noexcept { return mode_; }                         ///< how it was mapped
  /// Backend name, as MmapBackend's.
  [[nodiscard]] std::string_view kind() const noexcept {
    return mode_ == RegionMode::shared          ? "mmap_shared"
           : mode_ == RegionMode::copy_on_write ? "mmap_private"
                                                : "mmap_read_only";
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  RegionMode mode_;
};

/// Whether `candidate` (canonical) lies under `root` (canonical), or is root itself.
[[nodiscard]] inline bool path_is_under(const std::filesystem::path& root, const std::filesystem::path& candidate) {
  auto r = root.begin();
  auto c = candidate.begin();
  for (; r != root.end(); ++r, ++c) {
    if (r->empty() && std::next(r) == root.end()) break;  // trailing separator of root
    if (c == candidate.end() || *r != *c) return false;
  }
  return true;
}

/// The subdirectories of the open directory `dir` (never ".", ".."; symlinks excluded).
[[nodiscard]] inline std::vector<std::string> list_subdirectories(int dir, const std::filesystem::path& path) {
  const int copy = ::dup(dir);
  if (copy < 0) throw IoError("cannot list directory", errno, {.file = path});
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    const int error = errno;
    ::close(copy);
    throw IoError("cannot list directory", error, {.file = path});
  }
  ::rewinddir(stream);
  std::vector<std::string> out;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(stream);
    if (entry == nullptr) break;
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat info {};
      is_dir = ::fstatat(dir, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(info.st_mode);
    }
    if (is_dir) out.emplace_back(name);
  }
  const int error = errno;
  ::closedir(stream);
  if (error != 0) throw IoError("cannot list directory", error, {.file = path});
  return out;
}

}  // namespace tensorfile::detail::td
