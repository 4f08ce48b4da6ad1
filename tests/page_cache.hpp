// SPDX-License-Identifier: MIT
// Test helpers for reads around the page cache: drop a file's pages, and ask how much of it is cached.
#pragma once

#include <tensorfile/detail/posix/direct_reads.hpp>
#include <tensorfile/detail/posix/file.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "tensorfile_catch.hpp"

namespace tensorfile_test {

/// Drops the file's pages from the page cache (written back first, so that they are clean and can go).
inline void evict_from_page_cache(const std::filesystem::path& path) {
  const auto file = tensorfile::detail::FileHandle::open(path, tensorfile::detail::OpenMode::read);
  REQUIRE(::fdatasync(file.fd()) == 0);
  REQUIRE(::posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED) == 0);
}

/// The fraction of the file's pages the page cache holds.
inline double cached_fraction_of(const std::filesystem::path& path) {
  const auto file = tensorfile::detail::FileHandle::open(path, tensorfile::detail::OpenMode::read);
  return tensorfile::detail::cached_fraction(file, 0, file.size());
}

/// Whether the file system holding `path` takes O_DIRECT reads.
inline bool direct_reads_possible(const std::filesystem::path& path) {
  return tensorfile::detail::open_direct(tensorfile::detail::FileHandle::open(path, tensorfile::detail::OpenMode::read))
      .has_value();
}

}  // namespace tensorfile_test
