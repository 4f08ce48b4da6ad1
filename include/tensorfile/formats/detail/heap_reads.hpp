// SPDX-License-Identifier: MIT
// How the formats' heap loads read file bytes: a few threads with preadv into fresh memory, and
// around the page cache (O_DIRECT) when the bytes are many and not cached, where that is about twice as fast.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/detail/posix/direct_reads.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/posix/parallel_reads.hpp"

namespace tensorfile::detail {

/// Fewest bytes a heap load reads around the page cache with DirectReads::automatic: below it a cold read
/// is short anyway, and a warm cache is the likelier case.
inline constexpr std::uint64_t direct_read_bytes = std::uint64_t{64} << 20;

/// The O_DIRECT descriptor to read `payload` bytes lying in [start, start + span) of `file` with, as `how`
/// asks (automatic: `payload` is at least direct_read_bytes, the span holds little else, and less than half
/// of it is cached); nullopt: read through the cache.
[[nodiscard]] inline std::optional<FileHandle> direct_reads_for(DirectReads how, const FileHandle& file,
                                                                std::uint64_t start, std::uint64_t span,
                                                                std::uint64_t payload) {
  const bool wins =
      how == DirectReads::always || (how == DirectReads::automatic && payload >= direct_read_bytes &&
                                     span <= payload + payload / 16 && cached_fraction(file, start, span) < 0.5);
  if (!wins) return std::nullopt;
  return open_direct(file);
}

/// A heap Storage of the `bytes` bytes at `offset` of `file`, read by `threads` threads (0: the default) in
/// pieces of ParallelReads::group_bytes, around the page cache when direct_reads_for(`how`) says so and
/// `offset` is a multiple of `alignment`: the Storage then starts at the file's offset modulo 4096 in its
/// mapping (so aligned to `alignment`, not to the heap's 64 bytes); `pages` as heap_storage() takes it.
[[nodiscard]] inline Storage read_to_heap(const FileHandle& file, std::uint64_t offset, std::size_t bytes,
                                          std::size_t threads, DirectReads how, std::size_t alignment,
                                          HugePages pages) {
  std::optional<FileHandle> direct;
  if (offset % alignment == 0) direct = direct_reads_for(how, file, offset, bytes, bytes);
  const auto lead = direct ? static_cast<std::size_t>(offset % direct_alignment) : std::size_t{0};
  Storage block = heap_storage(lead + bytes, false, false, pages);
  ParallelReads reads;
  for (std::size_t done = 0; done < bytes; done += ParallelReads::group_bytes) {
    const std::size_t piece = std::min<std::size_t>(bytes - done, ParallelReads::group_bytes);
    reads.add(offset + done, {block.mutable_data() + lead + done, piece}, {});
  }
  const FileMirror mirror{direct ? &*direct : nullptr, {block.mutable_data(), block.size_bytes()}, offset - lead};
  reads.run(file, threads != 0 ? threads : default_read_threads(), direct ? &mirror : nullptr);
  return lead == 0 ? block : block.slice(lead, bytes);
}

}  // namespace tensorfile::detail
