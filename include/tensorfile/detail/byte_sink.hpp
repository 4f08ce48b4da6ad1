// SPDX-License-Identifier: MIT
// Where writers put bytes: a file (crash-safe replace), a std::ostream or a byte vector.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "tensorfile/core/error.hpp"

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
/// unwinding) the temporary file is removed and `target` is untouched. Small writes are
/// buffered; large ones go straight from the caller's memory.
class AtomicFileSink final : public ByteSink {
 public:
  AtomicFileSink(std::filesystem::path target, bool sync) : target_(std::move(target)), sync_(sync) {
    std::filesystem::path directory = target_.parent_path();
    if (directory.empty()) directory = ".";
    std::string pattern = (directory / ("." + target_.filename().string() + ".tmp-XXXXXX")).string();
    fd_ = ::mkstemp(pattern.data());
    if (fd_ < 0) throw IoError("cannot create a temporary file beside it", errno, {.file = target_});
    temporary_ = pattern;
    ::fchmod(fd_, 0644);
    buffer_.reserve(buffer_size);
  }
  ~AtomicFileSink() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temporary_.c_str());
  }

  void write(std::span<const std::byte> bytes) override {
    if (bytes.size() >= direct_size) {
      flush();
      write_through(bytes);
      return;
    }
    if (buffer_.size() + bytes.size() > buffer_size) flush();
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  }

  /// Flushes, fsyncs (unless disabled) and renames the temporary file over the target.
  void commit() {
    flush();
    if (sync_ && ::fsync(fd_) != 0) throw IoError("cannot sync the new file", errno, {.file = temporary_});
    if (::close(fd_) != 0) {
      fd_ = -1;
      throw IoError("cannot close the new file", errno, {.file = temporary_});
    }
    fd_ = -1;
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
  static constexpr std::size_t buffer_size = std::size_t{1} << 20;
  static constexpr std::size_t direct_size = std::size_t{64} << 10;  // larger writes skip the buffer copy

  void flush() {
    write_through(buffer_);
    buffer_.clear();
  }
  void write_through(std::span<const std::byte> bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const std::size_t chunk = std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30);
      const ssize_t put = ::write(fd_, bytes.data() + done, chunk);
      if (put < 0) {
        if (errno == EINTR) continue;
        throw IoError("cannot write", errno, {.file = target_, .offset = written_ + done});
      }
      done += static_cast<std::size_t>(put);
    }
    written_ += done;
  }

  std::filesystem::path target_;
  std::filesystem::path temporary_;
  bool sync_;
  int fd_ = -1;
  bool committed_ = false;
  std::uint64_t written_ = 0;
  std::vector<std::byte> buffer_;
};

}  // namespace tensorfile::detail
