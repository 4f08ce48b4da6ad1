// SPDX-License-Identifier: MIT
// Where writers put bytes: a file (crash-safe replace), a std::ostream or a byte vector.
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/random_bits.hpp"

namespace tensorfile::detail {

/// A sequential byte destination.
class ByteSink {
 public:
  ByteSink() = default;
  ByteSink(const ByteSink&) = delete;
  ByteSink& operator=(const ByteSink&) = delete;
  virtual ~ByteSink() = default;
  /// Appends `bytes`; throws IoError on failure.
  virtual void write(std::span<const std::byte> bytes) = 0;
  /// Appends `bytes`, which the caller keeps valid and unchanged until flush() returns (or the sink
  /// is gone), so that a sink may gather them into fewer system calls without copying.
  virtual void write_borrowed(std::span<const std::byte> bytes) { write(bytes); }
  /// Hands every borrowed byte to the destination.
  virtual void flush() {}
};

/// Appends to a vector.
class VectorSink final : public ByteSink {
 public:
  explicit VectorSink(std::vector<std::byte>& out) : out_(out) {}
  void write(std::span<const std::byte> bytes) override { out_.insert(out_.end(), bytes.begin(), bytes.end()); }

 private:
  std::vector<std::byte>& out_;
};

/// Writes to a std::ostream.
class StreamSink final : public ByteSink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}
  void write(std::span<const std::byte> bytes) override {
    out_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out_) throw IoError("cannot write to the stream", EIO);
  }

 private:
  std::ostream& out_;
};

/// Writes a new file beside `target` and renames it over `target` on commit(): readers see the
/// old file or the whole new one, never a half-written one. Without commit() (an exception
/// unwinding) the temporary file is removed and `target` is untouched. A symbolic link `target`
/// is written through, as torch.save does: the file it leads to is replaced and the link stays. The
/// new file gets the permission bits of the file it replaces, or 0666 less the umask. Small writes
/// are staged; large ones go out from the caller's memory, borrowed ones gathered with the staged
/// bytes into one writev() per many records (one write() per record costs measurably more in the kernel).
class AtomicFileSink final : public ByteSink {
 public:
  AtomicFileSink(std::filesystem::path target, bool sync) : target_(resolve_links(std::move(target))), sync_(sync) {
    std::filesystem::path directory = target_.parent_path();
    if (directory.empty()) directory = ".";
    // The kernel applies the umask to a new file's mode; a replaced file's bits are restored below
    // (never created more open than they were, so its old readers are the only ones who may look).
    struct stat old {};
    const bool replacing = ::stat(target_.c_str(), &old) == 0 && S_ISREG(old.st_mode);
    const mode_t mode = replacing ? (old.st_mode & 0777) : 0666;
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      char suffix[17];
      std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random_bits()));
      std::string name = ".";  // appended piece by piece: GCC 12 misreads `"literal" + std::string` (-Wrestrict)
      name += target_.filename().string();
      name += ".tmp-";
      name += suffix;
      temporary_ = directory / name;
      fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) throw IoError("cannot create a temporary file beside it", errno, {.file = target_});
    // Held while it is written: a sharded save that clears what killed saves left passes over a temporary whose
    // writer lives (the lock dies with the process).
    (void)::flock(fd_, LOCK_EX | LOCK_NB);
    if (replacing) ::fchmod(fd_, mode);  // the umask may have taken bits the old file had
    staging_.reserve(staging_size);
  }
  ~AtomicFileSink() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temporary_.c_str());
  }

  void write(std::span<const std::byte> bytes) override {
    if (bytes.size() >= borrow_size) {  // not borrowed: out before returning
      pieces_.push_back({bytes.data(), 0, bytes.size()});
      flush();
      return;
    }
    if (staging_.size() + bytes.size() > staging_size) flush();
    if (!pieces_.empty() && pieces_.back().borrowed == nullptr) {
      pieces_.back().size += bytes.size();
    } else {
      pieces_.push_back({nullptr, staging_.size(), bytes.size()});
    }
    staging_.insert(staging_.end(), bytes.begin(), bytes.end());
  }

  void write_borrowed(std::span<const std::byte> bytes) override {
    if (bytes.size() < borrow_size) return write(bytes);
    pieces_.push_back({bytes.data(), 0, bytes.size()});
    borrowed_bytes_ += bytes.size();
    if (borrowed_bytes_ >= gather_bytes || pieces_.size() >= gather_pieces) flush();
  }

  void flush() override {
    std::vector<iovec> iov;
    iov.reserve(pieces_.size());
    for (const Piece& piece : pieces_) {
      const std::byte* data = piece.borrowed != nullptr ? piece.borrowed : staging_.data() + piece.offset;
      for (std::size_t done = 0; done < piece.size; done += max_call_bytes) {  // some systems refuse > 2 GiB
        iov.push_back({const_cast<std::byte*>(data + done),                    // writev's iovec is not const-correct
                       std::min(piece.size - done, max_call_bytes)});
      }
    }
    write_all(iov);
    pieces_.clear();
    staging_.clear();
    borrowed_bytes_ = 0;
  }

  /// Flushes, fsyncs (unless disabled) and closes the temporary file without renaming it: a writer of
  /// several files finishes them all before it renames any (see save_safetensors_sharded).
  void finish() {
    if (fd_ < 0) return;
    flush();
    std::vector<std::byte>().swap(staging_);  // a finished sink waiting for its rename holds no buffer
    if (sync_ && ::fsync(fd_) != 0) throw IoError("cannot sync the new file", errno, {.file = temporary_});
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) throw IoError("cannot close the new file", errno, {.file = temporary_});
  }

  /// Finishes (see finish()) and renames the temporary file over the target.
  void commit() {
    finish();
    if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
      throw IoError("cannot rename the new file into place", errno, {.file = target_});
    }
    committed_ = true;
    if (sync_) {  // make the rename itself durable
      std::filesystem::path directory = target_.parent_path();
      const int dir = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
      }
    }
  }

  /// The temporary file's path (for tests).
  [[nodiscard]] const std::filesystem::path& temporary() const noexcept { return temporary_; }

 private:
  static constexpr std::size_t staging_size = std::size_t{1} << 20;
  static constexpr std::size_t borrow_size = std::size_t{64} << 10;  // smaller writes are copied into staging
  // A gather ends after this many borrowed bytes: large enough to amortise the call, small enough
  // that the first write starts soon (a save's CRC thread must have finished a gather's records).
  static constexpr std::size_t gather_bytes = std::size_t{32} << 20;
  static constexpr std::size_t gather_pieces = 512;
  static constexpr std::size_t max_call_bytes = std::size_t{1} << 30;

  // The file a chain of symbolic links ends at (the path itself when it is no link, or leads nowhere yet).
  static std::filesystem::path resolve_links(std::filesystem::path path) {
    for (int hops = 0; hops < 40; ++hops) {  // as the kernel's own limit on links followed
      std::error_code error;
      if (!std::filesystem::is_symlink(path, error)) return path;
      std::filesystem::path next = std::filesystem::read_symlink(path, error);
      if (error) throw IoError("cannot read the symbolic link", error.value(), {.file = path});
      path = next.is_absolute() ? next : path.parent_path() / next;
    }
    throw IoError("cannot follow the symbolic link", ELOOP, {.file = path});
  }

  struct Piece {
    const std::byte* borrowed;  // null: `size` staged bytes from `offset`
    std::size_t offset;
    std::size_t size;
  };

  // writev until every byte is out, resuming after short writes and EINTR.
  void write_all(std::vector<iovec>& iov) {
    std::size_t first = 0;
    while (first < iov.size()) {
      if (iov[first].iov_len == 0) {
        ++first;
        continue;
      }
      int count = 0;  // as many pieces as fit in max_call_bytes (at least one), at most IOV_MAX
      for (std::size_t bytes = 0; first + static_cast<std::size_t>(count) < iov.size() && count < IOV_MAX; ++count) {
        bytes += iov[first + static_cast<std::size_t>(count)].iov_len;
        if (bytes > max_call_bytes && count > 0) break;
      }
      const ssize_t put = ::writev(fd_, iov.data() + first, count);
      if (put < 0) {
        if (errno == EINTR) continue;
        throw IoError("cannot write", errno, {.file = target_, .offset = written_});
      }
      written_ += static_cast<std::uint64_t>(put);
      auto left = static_cast<std::size_t>(put);
      while (left > 0) {
        const std::size_t step = std::min(left, iov[first].iov_len);
        iov[first].iov_base = static_cast<std::byte*>(iov[first].iov_base) + step;
        iov[first].iov_len -= step;
        left -= step;
        if (iov[first].iov_len == 0) ++first;
      }
    }
  }

  std::filesystem::path target_;
  std::filesystem::path temporary_;
  bool sync_;
  int fd_ = -1;
  bool committed_ = false;
  std::uint64_t written_ = 0;
  std::vector<std::byte> staging_;
  std::vector<Piece> pieces_;
  std::size_t borrowed_bytes_ = 0;
};

}  // namespace tensorfile::detail
