// SPDX-License-Identifier: MIT
// Helpers for tests of the modes new files get: a file's permission bits, a umask set for one test.
#pragma once

#include <sys/stat.h>

#include <filesystem>

#include "tensorfile_catch.hpp"

namespace tensorfile_test {

/// The permission bits of `path` (the link itself for a symbolic link).
inline mode_t permissions_of(const std::filesystem::path& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

/// Sets the process umask for one test and restores it after (tests run one at a time).
class UmaskScope {
 public:
  explicit UmaskScope(mode_t mask) : old_(::umask(mask)) {}
  UmaskScope(const UmaskScope&) = delete;
  UmaskScope& operator=(const UmaskScope&) = delete;
  ~UmaskScope() { ::umask(old_); }

 private:
  mode_t old_;
};

}  // namespace tensorfile_test
