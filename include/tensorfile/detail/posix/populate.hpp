// SPDX-License-Identifier: MIT
// Faulting in fresh memory ahead of a copy into it: the one place that asks the kernel to populate pages.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace tensorfile::detail {

/// MADV_POPULATE_WRITE (Linux 5.14), spelled out: older libc headers lack the name; older kernels say EINVAL.
inline constexpr int madv_populate_write = 23;

/// Faults in the pages of [data, data + bytes) writable ahead of a copy into them (MADV_POPULATE_WRITE),
/// so that a read(2) into them does not stop at each page. False when the kernel cannot (before 5.14) or
/// the range is not page-aligned memory it may populate; the memory is then faulted in by its first write.
inline bool populate_for_write(std::byte* data, std::size_t bytes) noexcept {
  if (bytes == 0) return true;
  const std::size_t page = 4096;
  const auto first = reinterpret_cast<std::uintptr_t>(data) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(data) + bytes;
  int result = 0;
  do {
    result = ::madvise(reinterpret_cast<void*>(first), end - first, madv_populate_write);
  } while (result != 0 && errno == EINTR);
  return result == 0;
}

}  // namespace tensorfile::detail
