// SPDX-License-Identifier: MIT
// The platform layer: one move-only RAII handle for a file descriptor (and, through detail/posix/mapping.hpp, the
// one for a memory mapping).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode

namespace tensorfile::detail {

/// How a file is opened.
enum class OpenMode { read, read_write, read_write_create };

/// An open file descriptor; closes it on destruction.
class FileHandle {
 public:
  FileHandle() = default;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  FileHandle(FileHandle&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), created_(other.created_) {}
  FileHandle& operator=(FileHandle&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = std::exchange(other.fd_, -1);
      path_ = std::move(other.path_);
      created_ = other.created_;
    }
    return *this;
  }
  ~FileHandle() { close(); }

  /// Opens `path`; throws IoError (with errno) on failure, ArgumentError for a directory or another
  /// file that is not regular (a FIFO, a device, a socket). read_write_create creates a missing file;
  /// created() then says so.
  [[nodiscard]] static FileHandle open(const std::filesystem::path& path, OpenMode mode) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below, then cleared.
    const int flags = O_CLOEXEC | O_NONBLOCK | (mode == OpenMode::read ? O_RDONLY : O_RDWR);
    FileHandle file;
    file.path_ = path;
    const auto try_open = [&](int extra) {
      do {
        file.fd_ = ::open(path.c_str(), flags | extra, 0666);
      } while (file.fd_ < 0 && errno == EINTR);
    };
    try_open(0);
    // Create only what is missing, with O_EXCL, so that created() is true only for a file made here.
    if (mode == OpenMode::read_write_create && file.fd_ < 0 && errno == ENOENT) {
      try_open(O_CREAT | O_EXCL);
      if (file.fd_ >= 0) {
        file.created_ = true;
      } else if (errno == EEXIST) {
        try_open(O_CREAT);  // made by someone else meanwhile, or a dangling symlink: never removed
      }
    }
    if (file.fd_ < 0) {
      const int error = errno;
      throw IoError(mode == OpenMode::read ? "cannot open for reading" : "cannot open for writing", error,
                    {.file = path});
    }
    struct stat info {};
    if (::fstat(file.fd_, &info) != 0) throw IoError("cannot stat", errno, {.file = path});
    if (S_ISDIR(info.st_mode)) {
      throw ArgumentError("is a directory; expected a regular file", {.file = path});
    }
    if (!S_ISREG(info.st_mode)) throw ArgumentError("is not a regular file; expected a regular file", {.file = path});
    if (::fcntl(file.fd_, F_SETFL, ::fcntl(file.fd_, F_GETFL) & ~O_NONBLOCK) != 0) {
      throw IoError("cannot clear O_NONBLOCK", errno, {.file = path});
    }
    return file;
  }

  /// Removes the file that open() created (read_write_create on a missing path), if the path still
  /// names that file; used to undo a failed creation. No throw.
  void remove_if_created() const noexcept {
    if (!created_ || fd_ < 0) return;
    struct stat opened {};
    struct stat named {};
    if (::fstat(fd_, &opened) == 0 && ::lstat(path_.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
        opened.st_ino == named.st_ino) {
      ::unlink(path_.c_str());
    }
  }

  /// openat(2) of `name` relative to the directory descriptor `dir` (AT_FDCWD: the working directory),
  /// with O_CLOEXEC added and EINTR retried. No throw: an invalid handle with errno set on failure, so
  /// the caller decides what a missing file or a symlink means. `path` (may be empty) names the file in
  /// the errors of later calls.
  [[nodiscard]] static FileHandle try_open_at(int dir, const char* name, int flags, mode_t mode = 0,
                                              std::filesystem::path path = {}) noexcept {
    FileHandle file;
    do {
      file.fd_ = ::openat(dir, name, flags | O_CLOEXEC, mode);
    } while (file.fd_ < 0 && errno == EINTR);
    if (file.fd_ >= 0) file.path_ = std::move(path);
    return file;
  }

  /// Takes ownership of the open descriptor `fd` (from a call this class does not make, such as openat2).
  [[nodiscard]] static FileHandle adopt(int fd, std::filesystem::path path = {}) noexcept {
    FileHandle file;
    file.fd_ = fd;
    file.path_ = std::move(path);
    return file;
  }

  /// Whether it holds a descriptor.
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  /// The descriptor, -1 when closed.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The path it was opened with (for messages).
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// Whether open() created the file (read_write_create on a missing path).
  [[nodiscard]] bool created() const noexcept { return created_; }

  /// Current size in bytes.
  [[nodiscard]] std::uint64_t size() const {
    struct stat info {};
    if (::fstat(fd_, &info) != 0) throw IoError("cannot stat", errno, {.file = path_});
    return static_cast<std::uint64_t>(info.st_size);
  }

  /// Grows or shrinks the file to `bytes`.
  void resize(std::uint64_t bytes) const {
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      throw IoError("cannot resize to " + std::to_string(bytes) + " bytes", errno, {.file = path_});
    }
  }

  /// Reads exactly out.size() bytes at `offset`; a short file is a FormatError at that offset.
  void read_exact(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    while (done < out.size()) {
      const std::size_t chunk = std::min<std::size_t>(out.size() - done, std::size_t{1} << 30);
      const ssize_t got = ::pread(fd_, out.data() + done, chunk, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw IoError("cannot read", errno, {.file = path_, .offset = offset + done});
      }
      if (got == 0) {
        throw FormatError(
            "file ends early; expected " + std::to_string(out.size()) + " bytes, got " + std::to_string(done),
            {.file = path_, .offset = offset + done});
      }
      done += static_cast<std::size_t>(got);
    }
  }

  /// Reads the contiguous file range at `offset` into `parts` in order (preadv: one call fills many
  /// buffers), exactly; a short file is a FormatError at the first byte missing, as read_exact's.
  void read_scattered(std::uint64_t offset, std::span<const std::span<std::byte>> parts) const {
    std::vector<iovec> pending;
    std::size_t total = 0;
    for (const auto& part : parts) {
      if (part.empty()) continue;
      pending.push_back({part.data(), part.size()});
      total += part.size();
    }
    std::size_t first = 0;  // first iovec not yet full
    std::size_t done = 0;
    while (first < pending.size()) {
      const int count = static_cast<int>(std::min<std::size_t>(pending.size() - first, IOV_MAX));
      const ssize_t got = ::preadv(fd_, pending.data() + first, count, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw IoError("cannot read", errno, {.file = path_, .offset = offset + done});
      }
      if (got == 0) {
        throw FormatError("file ends early; expected " + std::to_string(total) + " bytes, got " + std::to_string(done),
                          {.file = path_, .offset = offset + done});
      }
      done += static_cast<std::size_t>(got);
      auto left = static_cast<std::size_t>(got);
      while (first < pending.size() && left >= pending[first].iov_len) left -= pending[first++].iov_len;
      if (left != 0) {
        pending[first].iov_base = static_cast<std::byte*>(pending[first].iov_base) + left;
        pending[first].iov_len -= left;
      }
    }
  }

  /// Writes all of `data` at `offset`.
  void write_all(std::uint64_t offset, std::span<const std::byte> data) const {
    std::size_t done = 0;
    while (done < data.size()) {
      const std::size_t chunk = std::min<std::size_t>(data.size() - done, std::size_t{1} << 30);
      const ssize_t put = ::pwrite(fd_, data.data() + done, chunk, static_cast<off_t>(offset + done));
      if (put < 0) {
        if (errno == EINTR) continue;
        throw IoError("cannot write", errno, {.file = path_, .offset = offset + done});
      }
      done += static_cast<std::size_t>(put);
    }
  }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
  std::filesystem::path path_;
  bool created_ = false;
};

}  // namespace tensorfile::detail

// Last: its definitions take the FileHandle defined above.
#include "tensorfile/detail/posix/mapping.hpp"
