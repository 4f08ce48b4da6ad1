// SPDX-License-Identifier: MIT
// The POSIX calls behind tensordict trees that detail::FileHandle does not make: whole-file reads, directory listings.
#pragma once

#include <fcntl.h>
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

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/directory.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile::detail::td {

/// Flags that open a directory without following a final symlink.
inline constexpr int dir_open_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

/// Reads all of the open `file` (at most `limit` bytes); `path` names it in errors. A small file costs one
/// pread (a short read is the end of a regular file); a larger one adds an fstat to size the buffer.
[[nodiscard]] inline std::string read_whole_file(const FileHandle& file, const std::filesystem::path& path,
                                                 std::uint64_t limit) {
  const int fd = file.fd();
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

/// The subdirectories of the open directory `directory` (never ".", ".."; symlinks excluded).
[[nodiscard]] inline std::vector<std::string> list_subdirectories(const FileHandle& directory,
                                                                  const std::filesystem::path& path) {
  std::vector<DirectoryEntry> entries;
  if (const int error = read_directory(directory.fd(), entries); error != 0) {
    throw IoError("cannot list directory", error, {.file = path});
  }
  std::vector<std::string> out;
  for (DirectoryEntry& entry : entries) {
    if (entry.is_directory) out.push_back(std::move(entry.name));
  }
  return out;
}

}  // namespace tensorfile::detail::td
