// SPDX-License-Identifier: MIT
// Reading around the page cache (the public DirectReads, and the means): O_DIRECT reads of a file that is not cached go
// from the device straight into the destination (no copy through the cache, which is left clean of them), about twice
// the throughput of buffered reads on a cold cache. They need page-aligned offsets, lengths and memory.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorfile/core/file_modes.hpp"  // DirectReads
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile::detail {

/// The alignment O_DIRECT reads are made with (file offset, length and memory): the page size, which
/// covers every logical block size (512 or 4096) a Linux block device has.
inline constexpr std::uint64_t direct_alignment = 4096;

/// A second descriptor of `file`'s open file description's inode, opened O_DIRECT (reopened through
/// /proc/self/fd, so that it is the same file even if the path changed). Nullopt when the file system
/// refuses O_DIRECT (tmpfs, some FUSE) or /proc is not mounted: the caller then reads through the cache.
[[nodiscard]] inline std::optional<FileHandle> open_direct(const FileHandle& file) {
  const std::string proc = "/proc/self/fd/" + std::to_string(file.fd());
  FileHandle direct = FileHandle::try_open_at(AT_FDCWD, proc.c_str(), O_RDONLY | O_DIRECT, 0, file.path());
  if (!direct.valid()) return std::nullopt;
  return direct;
}

/// The fraction (0 to 1) of the pages of [offset, offset + bytes) of `file` that the page cache holds
/// (mincore over a mapping that is never touched, so nothing is faulted in). A range of more than
/// `sampled_pages` pages is judged by that many, in 64 windows spread evenly over it: asking about every page
/// of a cached 1 GiB file takes about 30 ms, the samples well under 1. 1 when it cannot tell, so that a caller
/// choosing direct reads for uncached files keeps the cache's path.
[[nodiscard]] inline double cached_fraction(const FileHandle& file, std::uint64_t offset, std::uint64_t bytes,
                                            std::size_t sampled_pages = 1024) {
  const std::uint64_t first = offset / direct_alignment * direct_alignment;
  const std::uint64_t length = offset + bytes - first;
  if (bytes == 0 || length > SIZE_MAX) return 1.0;
  void* const mapped =
      ::mmap(nullptr, static_cast<std::size_t>(length), PROT_READ, MAP_SHARED, file.fd(), static_cast<off_t>(first));
  if (mapped == MAP_FAILED) return 1.0;
  const auto pages = static_cast<std::size_t>((length + direct_alignment - 1) / direct_alignment);
  const std::size_t windows = pages <= sampled_pages ? 1 : 64;
  const std::size_t window_pages = pages <= sampled_pages ? pages : std::max<std::size_t>(sampled_pages / 64, 1);
  std::vector<unsigned char> resident(window_pages);
  std::size_t asked = 0;
  std::size_t cached = 0;
  for (std::size_t w = 0; w < windows; ++w) {
    const std::size_t page = windows == 1 ? 0 : (pages - window_pages) * w / (windows - 1);
    auto* const at = static_cast<std::byte*>(mapped) + page * direct_alignment;
    const std::size_t span = std::min<std::size_t>(window_pages * direct_alignment,
                                                   static_cast<std::size_t>(length) - page * direct_alignment);
    if (::mincore(at, span, resident.data()) != 0) continue;
    const std::size_t counted = (span + direct_alignment - 1) / direct_alignment;
    asked += counted;
    for (std::size_t i = 0; i < counted; ++i) cached += resident[i] & 1u;
  }
  ::munmap(mapped, static_cast<std::size_t>(length));
  return asked == 0 ? 1.0 : static_cast<double>(cached) / static_cast<double>(asked);
}

/// Memory laid out as a file from `offset` on (memory[i] holds file byte offset + i) and aligned alike
/// modulo direct_alignment, with a descriptor of that file opened O_DIRECT: reads whose destinations lie in
/// it at their file positions are made directly, and may fill the bytes between them (file bytes too).
struct FileMirror {
  const FileHandle* direct = nullptr;  ///< from open_direct()
  std::span<std::byte> memory;         ///< the mirror
  std::uint64_t offset = 0;            ///< the file offset of memory[0]
};

}  // namespace tensorfile::detail
