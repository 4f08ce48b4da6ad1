// SPDX-License-Identifier: MIT
// Directory trees through descriptors: opening a path that may not leave a root directory, removing a tree.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile::detail {

/// The '/'-separated components of `path`, last first (so that the next one is at the back).
[[nodiscard]] inline std::vector<std::string> path_components_reversed(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    const std::size_t slash = path.rfind('/');
    const std::string_view last = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (!last.empty()) out.emplace_back(last);
    if (slash == std::string_view::npos) break;
    path = path.substr(0, slash);
  }
  return out;
}

/// Opens `relative` below the directory `root` without the kernel's help: each component is read with
/// readlinkat and opened with O_NOFOLLOW, symbolic links are interpreted here, and ".." is the parent this
/// walk came from, so nothing a concurrent rename or link swap does can take the walk above `root`. An
/// absolute link is followed only when it names `root_path` (the root's absolute path; empty: refused) or a
/// path below it. On failure an invalid handle with errno set; EXDEV: the path leads out of `root`.
[[nodiscard]] inline FileHandle open_beneath_by_walking(int root, std::string_view relative, int flags,
                                                        std::string_view root_path) {
  constexpr int max_links = 40;  // as the kernel's limit
#ifdef O_PATH
  constexpr int walk_flags = O_PATH | O_DIRECTORY | O_NOFOLLOW;
#else
  constexpr int walk_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
#endif
  std::vector<FileHandle> walked;  // the directories below root on the way, innermost last
  std::vector<std::string> pending = path_components_reversed(relative);
  int links = 0;
  std::string target(4096, '\0');
  while (true) {
    const int here = walked.empty() ? root : walked.back().fd();
    if (pending.empty()) return FileHandle::try_open_at(here, ".", flags);  // the path ended on a directory
    std::string component = std::move(pending.back());
    pending.pop_back();
    if (component == ".") continue;
    if (component == "..") {
      if (walked.empty()) {
        errno = EXDEV;
        return {};
      }
      walked.pop_back();
      continue;
    }
    const ssize_t length = ::readlinkat(here, component.c_str(), target.data(), target.size());
    if (length >= 0) {
      if (++links > max_links || static_cast<std::size_t>(length) == target.size()) {
        errno = ELOOP;
        return {};
      }
      std::string_view text(target.data(), static_cast<std::size_t>(length));
      if (text.starts_with('/')) {
        if (root_path.empty() || !text.starts_with(root_path) ||
            (text.size() > root_path.size() && text[root_path.size()] != '/' && !root_path.ends_with('/'))) {
          errno = EXDEV;
          return {};
        }
        text.remove_prefix(root_path.size());
        walked.clear();
      }
      for (std::string& part : path_components_reversed(text)) pending.push_back(std::move(part));
      continue;
    }
    if (errno != EINVAL) return {};  // missing, not a directory on the way, no permission
    if (pending.empty()) {
      FileHandle file = FileHandle::try_open_at(here, component.c_str(), flags | O_NOFOLLOW);
      if (file.valid() || errno != ELOOP || ++links > max_links) return file;
      pending.push_back(std::move(component));  // it became a link since readlinkat: read it again
      continue;
    }
    FileHandle next = FileHandle::try_open_at(here, component.c_str(), walk_flags);
    if (!next.valid()) return next;
    walked.push_back(std::move(next));
  }
}

/// Opens `relative` (a '/'-separated path; symbolic links followed) below the directory `root` with open(2)
/// `flags`, never leaving it, with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) where the kernel has it
/// and open_beneath_by_walking elsewhere (and for absolute links, which the kernel refuses; see there for
/// `root_path`). On failure an invalid handle with errno set; EXDEV: the path leads out of `root`.
[[nodiscard]] inline FileHandle open_beneath(int root, const std::string& relative, int flags,
                                             std::string_view root_path) {
  flags &= ~O_NOFOLLOW;
#ifdef SYS_openat2
  struct OpenHow {  // struct open_how of <linux/openat2.h>
    std::uint64_t flags;
    std::uint64_t mode;
    std::uint64_t resolve;
  };
  constexpr std::uint64_t resolve_no_magiclinks = 0x02;
  constexpr std::uint64_t resolve_beneath = 0x08;
  static std::atomic<bool> kernel_lacks_openat2{false};
  if (!kernel_lacks_openat2.load(std::memory_order_relaxed)) {
    OpenHow how{static_cast<std::uint64_t>(static_cast<unsigned>(flags | O_CLOEXEC)), 0,
                resolve_beneath | resolve_no_magiclinks};
    for (int attempt = 0; attempt < 8; ++attempt) {
      const long fd = ::syscall(SYS_openat2, root, relative.c_str(), &how, sizeof how);
      if (fd >= 0) return FileHandle::adopt(static_cast<int>(fd));
      if (errno == EINTR || errno == EAGAIN) continue;  // EAGAIN: a concurrent rename; the kernel asks to retry
      if (errno == ENOSYS || errno == E2BIG) kernel_lacks_openat2.store(true, std::memory_order_relaxed);
      // EPERM may be a sandbox refusing the call (or an immutable file: the walk says so again); EXDEV may be
      // an absolute link back into the tree. Everything else is the answer.
      if (errno != ENOSYS && errno != E2BIG && errno != EPERM && errno != EXDEV) return {};
      break;
    }
  }
#endif
  return open_beneath_by_walking(root, relative, flags, root_path);
}

/// One name in a directory.
struct DirectoryEntry {
  std::string name;   ///< the name, never "." or ".."
  bool is_directory;  ///< a directory (a symbolic link to one is not)
};

/// Appends the entries of the open directory `dir` to `out`; returns 0, or the errno of the call that failed.
[[nodiscard]] inline int read_directory(int dir, std::vector<DirectoryEntry>& out) {
  const int copy = ::dup(dir);  // closedir closes the descriptor it is given
  if (copy < 0) return errno;
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    const int error = errno;
    ::close(copy);
    return error;
  }
  ::rewinddir(stream);
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(stream);
    if (entry == nullptr) break;
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    bool is_directory = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat info {};
      is_directory = ::fstatat(dir, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(info.st_mode);
    }
    out.push_back({std::string(name), is_directory});
  }
  const int error = errno;
  ::closedir(stream);
  return error;
}

/// Removes the directory `name` of `parent` and everything below it by unlinking names only (files are
/// never opened for writing or truncated, so a reader that holds them open keeps their bytes), never
/// following a symbolic link. Best effort: returns whether everything went.
inline bool remove_tree_at(int parent, const char* name) {
  const FileHandle dir = FileHandle::try_open_at(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (!dir.valid()) return ::unlinkat(parent, name, 0) == 0;  // not a directory (or gone)
  std::vector<DirectoryEntry> entries;
  bool all = read_directory(dir.fd(), entries) == 0;
  for (const DirectoryEntry& entry : entries) {
    const bool removed = entry.is_directory ? remove_tree_at(dir.fd(), entry.name.c_str())
                                            : ::unlinkat(dir.fd(), entry.name.c_str(), 0) == 0;
    all = removed && all;
  }
  return ::unlinkat(parent, name, AT_REMOVEDIR) == 0 && all;
}

}  // namespace tensorfile::detail
