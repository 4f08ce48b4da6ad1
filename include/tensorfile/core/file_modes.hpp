// SPDX-License-Identifier: MIT
/// @file
/// The public choices of how a file is mapped (MapMode) and read (DirectReads), and of the heap pages a load fills
/// (HugePages), apart from the POSIX code that acts on them, so that an options struct names them without pulling
/// that code into every including TU.
#pragma once

namespace tensorfile {

/// How a file is mapped into memory; public API, used by mmap_storage, from_file, load and load_memmap.
enum class MapMode {
  read_only,      ///< PROT_READ, MAP_PRIVATE: the storage is read-only; the file is opened read-only
  copy_on_write,  ///< PROT_READ|PROT_WRITE, MAP_PRIVATE: writes stay in this process (torch.from_file shared=False)
  shared,         ///< PROT_READ|PROT_WRITE, MAP_SHARED: writes reach the file (torch.from_file shared=True)
};

/// Whether a heap load reads its data around the page cache (O_DIRECT); public API, taken by load_torch(),
/// load_safetensors(), load_npy() and load_state_dict(). On a cold cache direct reads are about twice as fast
/// and leave the cache clean of what they read; on a warm one the cache is faster.
enum class DirectReads {
  automatic,  ///< when the data is large (64 MiB or more) and mostly not in the page cache
  always,     ///< whenever the file system allows it (else through the cache, as `never`)
  never,      ///< always through the page cache
};

/// Whether a load's large heap blocks (2 MiB or more) are advised for transparent huge pages (MADV_HUGEPAGE);
/// public API, taken by every load's options and by heap_storage(). Off by default: advised pages fill a 1 GiB load
/// about 3x faster on a machine up for hours, but 2-4x slower on a freshly booted one (or after a process that
/// freed small pages), where the zeroing and compaction of each 2 MiB page is paid first. Unadvised blocks get what
/// the kernel's system-wide setting gives plain memory (/sys/kernel/mm/transparent_hugepage/enabled).
enum class HugePages {
  from_environment,  ///< `on` when the environment variable TENSORFILE_HUGE_PAGES is 1, else `off`
  off,               ///< no advice: the plain path, as operator new's memory
  on,                ///< advised: one fault per 2 MiB rather than per 4 KiB
};

}  // namespace tensorfile
