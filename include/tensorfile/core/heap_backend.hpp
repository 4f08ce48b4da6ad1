// SPDX-License-Identifier: MIT
/// @file
/// Heap backend: owns 64-byte aligned host memory; large blocks come from their own mapping, advised for transparent
/// huge pages when asked (HugePages), so that filling them costs one fault per 2 MiB instead of per 4 KiB.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "tensorfile/config.hpp"
#include "tensorfile/core/file_modes.hpp"
#include "tensorfile/core/storage.hpp"

namespace tensorfile {

namespace detail {

/// Blocks of at least this many bytes are mapped (huge-page advised when asked) rather than taken from operator new.
inline constexpr std::size_t large_heap_block = std::size_t{2} << 20;
/// The huge-page size the mappings align to (x86-64 and arm64 with 4 KiB pages).
inline constexpr std::size_t huge_page = std::size_t{2} << 20;
/// Whether large blocks are mapped; tests turn it off to force the plain operator-new path.
inline bool map_large_heap_blocks = true;
/// A released mapped block of at most this many bytes is kept for the next block of about its size.
inline constexpr std::size_t kept_heap_block_max = std::size_t{16} << 20;
/// The one kept block (null when none); its first 8 bytes hold its mapped size, plus 1 when it is advised for huge
/// pages (sizes are whole pages), so that a block is reused only with the advice asked for. A program that loads the
/// same small checkpoint again and again would otherwise map, fault in and zero a fresh arena every time,
/// which costs more than filling it (malloc keeps freed memory for the same reason). One block of at most
/// 16 MiB, so that little is held.
inline std::atomic<std::byte*> kept_heap_block{nullptr};

/// `pages` with from_environment resolved: TENSORFILE_HUGE_PAGES=1 is `on`, anything else (or unset) `off`; the
/// variable is read once per process.
[[nodiscard]] TENSORFILE_ENTRY HugePages resolve_huge_pages(HugePages pages);

}  // namespace detail

/// Owns `size` bytes of host memory aligned to `alignment` (64) bytes; frees them on destruction.
/// Blocks of 2 MiB or more are anonymous mappings aligned to 2 MiB, advised MADV_HUGEPAGE when `pages` says so; the
/// last one released, when at most 16 MiB, is kept for the next block of about its size (with the pages it has).
class HeapBackend {
 public:
  [[nodiscard]] static constexpr StorageKind kind() noexcept { return StorageKind::heap; }  ///< backend kind
  static constexpr std::size_t alignment = 64;  ///< alignment of data(), bytes

  /// Allocates `size` bytes, zero-filled when `zeroed`; with `populate`, a large block's pages are faulted
  /// in ahead of use (MADV_POPULATE_WRITE, or MAP_POPULATE on kernels without it); `pages`: whether a large
  /// block is advised for huge pages. Throws std::bad_alloc when memory is short.
  explicit HeapBackend(std::size_t size, bool zeroed = true, bool populate = false,
                       HugePages pages = HugePages::from_environment);

  [[nodiscard]] std::byte* data() const noexcept { return memory_.get(); }  ///< first byte
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }   ///< bytes owned
  [[nodiscard]] Device device() const noexcept { return Device::cpu(); }    ///< always the host
  [[nodiscard]] bool writable() const noexcept { return true; }             ///< always writable
  /// Whether the memory is a mapping of its own (not operator new's).
  [[nodiscard]] bool mapped() const noexcept { return memory_.get_deleter().mapped_bytes != 0; }

 private:
  // Frees either kind of block: a mapping (mapped_bytes > 0, advised for huge pages when `huge`) or operator new's
  // memory.
  struct Release {
    std::size_t mapped_bytes = 0;
    bool huge = false;
    void operator()(std::byte* p) const noexcept;
  };

  // A mapping of `rounded` bytes (whole 4 KiB pages) starting at a huge-page boundary: the kernel backs each
  // aligned 2 MiB range inside it with a huge page and the tail with small ones (rounding the tail up to a
  // huge page would cost up to 2 MiB of memory per block), advised for them when `huge`. Null when mmap refuses, so
  // that operator new is tried.
  std::byte* map(std::size_t rounded, bool populate, bool huge);
  // The kept block when it holds `rounded` bytes with at most a quarter more and has the advice `huge` asks for (its
  // contents are stale); else null.
  std::byte* take_kept(std::size_t rounded, bool huge);

  std::unique_ptr<std::byte, Release> memory_{nullptr, Release{}};
  std::size_t size_;
};

/// A new heap Storage of `bytes` bytes (zero-filled unless `zeroed` is false; large ones populated ahead
/// of use with `populate`, and advised for huge pages as `pages` says).
[[nodiscard]] TENSORFILE_ENTRY Storage heap_storage(std::size_t bytes, bool zeroed = true, bool populate = false,
                                                    HugePages pages = HugePages::from_environment);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(core_heap_backend)
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include "tensorfile/detail/posix/populate.hpp"

namespace tensorfile {

// The constructor, the mapping and the release are out of line: their unique_ptr and system calls would cost every
// TU that includes the header (through tensor.hpp: nearly all) their instantiations and <sys/mman.h>.
TENSORFILE_ENTRY HeapBackend::HeapBackend(std::size_t size, bool zeroed, bool populate, HugePages pages) : size_(size) {
  if (size == 0) return;
  constexpr std::size_t page = 4096;
  const std::size_t rounded = (size + page - 1) & ~(page - 1);  // wraps to less than `size` near SIZE_MAX
  if (size >= detail::large_heap_block && detail::map_large_heap_blocks && rounded >= size) {
    const bool huge = detail::resolve_huge_pages(pages) == HugePages::on;
    if (std::byte* kept = take_kept(rounded, huge)) {
      memory_.reset(kept);
      if (zeroed) std::memset(kept, 0, size);
      if (populate) detail::populate_for_write(kept, size);  // pages the last owner never touched
      return;
    }
    if (std::byte* mapped = map(rounded, populate, huge)) {  // anonymous memory is already zero
      memory_.reset(mapped);
      return;
    }
  }
  memory_ = std::unique_ptr<std::byte, Release>(
      static_cast<std::byte*>(::operator new (size, std::align_val_t{alignment})), Release{});
  if (zeroed) std::memset(memory_.get(), 0, size);
}

namespace detail {

TENSORFILE_ENTRY HugePages resolve_huge_pages(HugePages pages) {
  if (pages != HugePages::from_environment) return pages;
  static const HugePages from_environment = [] {
    const char* value = std::getenv("TENSORFILE_HUGE_PAGES");
    return value != nullptr && std::string_view(value) == "1" ? HugePages::on : HugePages::off;
  }();
  return from_environment;
}

// Hands a mapped block to the kept slot, unmapping the block it displaces (every kept block records its size and
// advice).
inline void keep_heap_block(std::byte* block, std::size_t bytes, bool huge) noexcept {
  const std::size_t tag = bytes | (huge ? 1 : 0);
  std::memcpy(block, &tag, sizeof tag);
  if (std::byte* displaced = kept_heap_block.exchange(block, std::memory_order_acq_rel)) {
    std::size_t displaced_tag = 0;
    std::memcpy(&displaced_tag, displaced, sizeof displaced_tag);
    ::munmap(displaced, displaced_tag & ~std::size_t{1});
  }
}

}  // namespace detail

TENSORFILE_ENTRY std::byte* HeapBackend::take_kept(std::size_t rounded, bool huge) {
  std::byte* kept = detail::kept_heap_block.exchange(nullptr, std::memory_order_acq_rel);
  if (kept == nullptr) return nullptr;
  std::size_t tag = 0;
  std::memcpy(&tag, kept, sizeof tag);
  const std::size_t kept_bytes = tag & ~std::size_t{1};
  const bool kept_huge = (tag & 1) != 0;
  if (kept_bytes < rounded || kept_bytes - rounded > rounded / 4 || kept_huge != huge) {
    detail::keep_heap_block(kept, kept_bytes, kept_huge);  // back for a block of its own size and advice
    return nullptr;
  }
  memory_ = std::unique_ptr<std::byte, Release>(nullptr, Release{kept_bytes, huge});
  return kept;
}

TENSORFILE_ENTRY void HeapBackend::Release::operator()(std::byte* p) const noexcept {
  if (mapped_bytes != 0 && mapped_bytes <= detail::kept_heap_block_max) {
    detail::keep_heap_block(p, mapped_bytes, huge);
  } else if (mapped_bytes != 0) {
    ::munmap(p, mapped_bytes);
  } else {
    ::operator delete (p, std::align_val_t{alignment});
  }
}

TENSORFILE_ENTRY std::byte* HeapBackend::map(std::size_t rounded, bool populate, bool huge) {
  const std::size_t reserved = rounded + detail::huge_page;
  void* address = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) return nullptr;
  // Trim the reservation to the aligned range inside it.
  auto* base = static_cast<std::byte*>(address);
  const auto misalign = reinterpret_cast<std::uintptr_t>(base) & (detail::huge_page - 1);
  const std::size_t head = misalign == 0 ? 0 : detail::huge_page - misalign;
  if (head != 0) ::munmap(base, head);
  if (reserved - head - rounded != 0) ::munmap(base + head + rounded, reserved - head - rounded);
  std::byte* block = base + head;
  if (huge) ::madvise(block, rounded, MADV_HUGEPAGE);  // advice only: without THP the block still works
  if (populate && !detail::populate_for_write(block, rounded)) {
    // No MADV_POPULATE_WRITE (Linux < 5.14): map again with MAP_POPULATE, which faults the pages in.
    void* again =
        ::mmap(block, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0);
    if (again == MAP_FAILED) {
      ::munmap(block, rounded);
      return nullptr;
    }
    if (huge) ::madvise(block, rounded, MADV_HUGEPAGE);  // the new mapping lost the advice
  }
  memory_ = std::unique_ptr<std::byte, Release>(nullptr, Release{rounded, huge});
  return block;
}

TENSORFILE_ENTRY Storage heap_storage(std::size_t bytes, bool zeroed, bool populate, HugePages pages) {
  return Storage(HeapBackend(bytes, zeroed, populate, pages));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(core_heap_backend)
