// SPDX-License-Identifier: MIT
// The ring's file reader: pread from several threads, O_DIRECT when asked (or when the page cache is cold).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile::detail {

/// O_DIRECT reads use this alignment of file offset, length and buffer (the largest logical block size in use).
inline constexpr std::size_t direct_io_alignment = 4096;
/// Files from this size up are read with O_DIRECT when direct I/O is left automatic and the file is mostly not cached.
inline constexpr std::uint64_t direct_io_auto_min_bytes = std::uint64_t{256} << 20;

/// The fraction (0 to 1) of the first `bytes` of `fd` that sits in the page cache, by mincore();
/// 1 when it cannot tell (then buffered reads, the safe choice, are used).
[[nodiscard]] inline double page_cache_fraction(int fd, std::uint64_t bytes) noexcept {
  if (bytes == 0 || bytes > SIZE_MAX) return 1.0;
  const auto length = static_cast<std::size_t>(bytes);
  void* address = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) return 1.0;
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const std::size_t page = page_size > 0 ? static_cast<std::size_t>(page_size) : 4096;
  double fraction = 1.0;
  try {
    std::vector<unsigned char> resident((length + page - 1) / page);
    if (::mincore(address, length, resident.data()) == 0) {
      std::size_t cached = 0;
      for (const unsigned char flag : resident) cached += flag & 1u;
      fraction = static_cast<double>(cached) / static_cast<double>(resident.size());
    }
  } catch (...) {  // a vector too large for memory: say "cached", read normally
  }
  ::munmap(address, length);
  return fraction;
}

/// A path that opens the very file `file` has open (its /proc/self/fd link), for a second descriptor
/// with other flags (O_DIRECT) that cannot be swapped for another file between the two opens.
[[nodiscard]] inline std::string reopen_path(const FileHandle& file) {
  return "/proc/self/fd/" + std::to_string(file.fd());
}

/// Reads a file by positional reads from any number of threads; with O_DIRECT it bypasses the
/// page cache (faster on a cold cache for large files, no cache pollution) and falls back to
/// buffered reads where the filesystem refuses it (tmpfs, some network filesystems).
class PosixRangeReader {
 public:
  /// Opens `path` for reading. `direct_io`: true uses O_DIRECT, false never, unset decides: O_DIRECT
  /// for files of direct_io_auto_min_bytes or more of which less than half is in the page cache.
  /// Throws IoError when the file cannot be opened.
  PosixRangeReader(const std::filesystem::path& path, std::optional<bool> direct_io)
      : owned_(FileHandle::open(path, OpenMode::read)), file_(&owned_) {
    open_direct(direct_io);
  }
  /// Reads `file`, which the caller keeps open while this reader lives (a shard opened below its
  /// directory); O_DIRECT reopens that same file, never its path again.
  PosixRangeReader(const FileHandle& file, std::optional<bool> direct_io) : file_(&file) { open_direct(direct_io); }
  PosixRangeReader(const PosixRangeReader&) = delete;
  PosixRangeReader& operator=(const PosixRangeReader&) = delete;
  ~PosixRangeReader() {
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }

  /// 4096 when reads go through O_DIRECT, else 1.
  [[nodiscard]] std::size_t alignment() const noexcept { return direct_fd_ >= 0 ? direct_io_alignment : 1; }
  /// Whether O_DIRECT is in use (it may still be dropped at the first refused read).
  [[nodiscard]] bool direct() const noexcept { return direct_fd_ >= 0 && direct_ok_.load(std::memory_order_relaxed); }
  /// The file's size in bytes.
  [[nodiscard]] std::uint64_t size() const { return file_->size(); }

  /// Fills `out` from `offset`; returns the bytes read, fewer than out.size() only at the end of
  /// the file. Throws IoError (with errno and the offset) when a read fails.
  [[nodiscard]] std::size_t read(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    bool aligned = true;  // O_DIRECT only while offset and length stay aligned (a short read breaks that)
    while (done < out.size()) {
      const bool direct = aligned && direct_fd_ >= 0 && direct_ok_.load(std::memory_order_relaxed);
      const std::size_t chunk = std::min<std::size_t>(out.size() - done, std::size_t{1} << 30);
      const ssize_t got =
          ::pread(direct ? direct_fd_ : file_->fd(), out.data() + done, chunk, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        if (direct && errno == EINVAL) {  // the filesystem refuses this O_DIRECT read: read normally from now on
          direct_ok_.store(false, std::memory_order_relaxed);
          continue;
        }
        throw IoError("cannot read", errno, {.file = file_->path(), .offset = offset + done});
      }
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
      if (done % direct_io_alignment != 0) aligned = false;
    }
    return done;
  }

 private:
  void open_direct(std::optional<bool> direct_io) {
    const std::uint64_t size = file_->size();
    const bool direct =
        direct_io.value_or(size >= direct_io_auto_min_bytes && page_cache_fraction(file_->fd(), size) < 0.5);
    if (!direct) return;
    const std::string reopen = reopen_path(*file_);
    do {
      direct_fd_ = ::open(reopen.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    } while (direct_fd_ < 0 && errno == EINTR);
  }

  FileHandle owned_;
  const FileHandle* file_;
  int direct_fd_ = -1;
  mutable std::atomic<bool> direct_ok_{true};
};

}  // namespace tensorfile::detail
