// SPDX-License-Identifier: MIT
/// @file
/// Where a load's bytes come from: a path, a memory span, a std::istream, a ranged reader or a folder of them (remote
/// storage plugs in there), one Source value every front-door entry point takes, and the one internal reader they
/// funnel into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/config.hpp"

namespace tensorfile {

/// A reader of byte ranges that the caller implements: a file on remote storage, a cache, a custom container.
/// open() and load() read it by ranges where the format allows (safetensors, .npy, GGUF, torch zip), else whole (see
/// open()).
/// `read` is called from several threads at once (different entries read together), so it must be thread-safe.
class RangeReader {
 public:
  RangeReader() = default;
  RangeReader(const RangeReader&) = default;             ///< copyable: the base holds no state
  RangeReader& operator=(const RangeReader&) = default;  ///< copyable: the base holds no state
  virtual ~RangeReader() = default;

  /// Reads up to `out.size()` bytes starting at `offset` into `out` and returns how many it read: fewer is
  /// allowed (a short read is retried from where it stopped), 0 only at the end of the bytes; a count above
  /// `out.size()` is a FormatError naming the reader. Throws what it likes (a tensorfile::Error naming name() is
  /// best); the error reaches the caller unchanged, a tensorfile::Error naming no file then naming name().
  [[nodiscard]] virtual std::size_t read(std::uint64_t offset, std::span<std::byte> out) = 0;
  /// The number of bytes, when known without reading them; nullopt: the reader is read to its end once, into
  /// one heap buffer, before anything is parsed.
  [[nodiscard]] virtual std::optional<std::uint64_t> size() const { return std::nullopt; }
  /// What messages call the source (a URL, a path): errors name it where they would name a file.
  [[nodiscard]] virtual std::string name() const = 0;
  /// Memory that already holds every byte (exactly size() of them, else an ArgumentError) and lives as long as the
  /// reader: `mmap` loads then give read-only views of it, no copy. nullopt (the default): the reader cannot be
  /// mapped, and `mmap` set is an ArgumentError.
  [[nodiscard]] virtual std::optional<std::span<const std::byte>> mapped() const { return std::nullopt; }
};

/// A folder of files the caller implements, for the formats that span several files: a sharded checkpoint (its
/// index and shards), a model folder, a tensordict tree. Remote storage, an archive or a cache plugs in here as a
/// RangeReader does for one file. `open` and `list` may be called from several threads at once.
class FolderReader {
 public:
  FolderReader() = default;
  FolderReader(const FolderReader&) = default;             ///< copyable: the base holds no state
  FolderReader& operator=(const FolderReader&) = default;  ///< copyable: the base holds no state
  virtual ~FolderReader() = default;

  /// A reader of the file at `relative`: '/'-separated names below the folder, never absolute, never "." or ".."
  /// (the loaders refuse such names before they ask), such as "model-00001-of-00002.safetensors" or "td/a.memmap".
  /// Null when there is no such file. The reader lives as long as what was read from it needs it (views of its
  /// mapped() bytes keep it alive).
  [[nodiscard]] virtual std::unique_ptr<RangeReader> open(const std::string& relative) = 0;
  /// The entries of the directory `relative` ("" the folder itself), subdirectories ending in '/'; nullopt (the
  /// default) when the folder cannot be listed (plain HTTP). Tensordict trees use it to refuse the subdirectories
  /// their meta.json does not declare, as load_memmap does; without it that check is skipped.
  [[nodiscard]] virtual std::optional<std::vector<std::string>> list(const std::string& relative) {
    (void)relative;
    return std::nullopt;
  }
  /// What messages call the folder (a URL, a path); a file in it is named by this, '/' and its relative name.
  [[nodiscard]] virtual std::string name() const = 0;
};

/// The bytes open(), load() and the other front-door functions read: a file path (read with pread, or mapped
/// when `mmap` is set), a span of memory (borrowed: the caller keeps it alive as long as what was opened from it,
/// and with `mmap` as long as the tensors, read-only views of it; without `mmap` tensors are copies), a
/// std::istream (read to its end into one heap buffer by open() or load(), and not used after) or a RangeReader
/// (borrowed: the caller keeps it alive as long as what was opened from it) or a FolderReader (borrowed the same
/// way) with the file in it to open. Converts implicitly from a path, so that
/// `open("model.pt")` reads naturally; the other kinds have named factories. Copies are cheap and borrow the
/// same bytes.
class Source {
 public:
  /// Which bytes a Source names.
  enum class Kind : std::uint8_t {
    path,    ///< a file or directory
    memory,  ///< a span the caller owns
    stream,  ///< a std::istream the caller owns
    reader,  ///< a RangeReader the caller owns
    folder,  ///< a file (or the whole) of a FolderReader the caller owns
  };

  /// A path: a file, or a directory (a tensordict tree, a model folder). A null `const char*` is an ArgumentError.
  TENSORFILE_ENTRY Source(std::filesystem::path path);  // NOLINT(google-explicit-constructor): reads as a path
  /// A path spelled as a C string (null: ArgumentError).
  TENSORFILE_ENTRY Source(const char* path);  // NOLINT(google-explicit-constructor)
  /// A path spelled as a string.
  TENSORFILE_ENTRY Source(const std::string& path);  // NOLINT(google-explicit-constructor)

  /// Bytes in memory, borrowed; `name` stands for them in messages (default "<memory>").
  [[nodiscard]] TENSORFILE_ENTRY static Source memory(std::span<const std::byte> bytes, std::string name = {});
  /// A stream, borrowed and read to its end when first used; `name` stands for it in messages (default
  /// "<stream>").
  [[nodiscard]] TENSORFILE_ENTRY static Source stream(std::istream& in, std::string name = {});
  /// A ranged reader, borrowed; messages name it by reader.name().
  [[nodiscard]] TENSORFILE_ENTRY static Source reader(RangeReader& reader);
  /// The file `relative` of a folder, borrowed: a single file, an index (its shards read from the same folder),
  /// or a tensordict tree's directory; "" (the default) is the folder itself, read as a model folder (the first of
  /// state_dict_file_names it holds, else the tensordict tree its meta.json starts). Messages name
  /// folder.name(), '/' and `relative`.
  [[nodiscard]] TENSORFILE_ENTRY static Source folder(FolderReader& folder, std::string relative = {});

  [[nodiscard]] Kind kind() const noexcept { return kind_; }                          ///< which bytes
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }  ///< Kind::path: the path
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }  ///< Kind::memory: the bytes
  [[nodiscard]] std::istream* stream() const noexcept { return stream_; }             ///< Kind::stream: the stream
  [[nodiscard]] RangeReader* reader() const noexcept { return reader_; }              ///< Kind::reader: the reader
  [[nodiscard]] FolderReader* folder() const noexcept { return folder_; }             ///< Kind::folder: the folder
  /// Kind::folder: the file in the folder ("" the folder itself).
  [[nodiscard]] const std::string& relative() const noexcept { return relative_; }
  /// What messages call the source: the path, the reader's name(), or the name given to memory() / stream().
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  Source() = default;

  Kind kind_ = Kind::path;
  std::filesystem::path path_{};
  std::span<const std::byte> bytes_{};
  std::istream* stream_ = nullptr;
  RangeReader* reader_ = nullptr;
  FolderReader* folder_ = nullptr;
  std::string relative_{};
  std::string name_{};
};

namespace detail {

/// A URL opened as a folder and the file in it: what the registered URL opener gives open() and load().
struct UrlFolder {
  std::shared_ptr<FolderReader> folder;  ///< owned by the checkpoint opened from it
  std::string relative;                  ///< the file of the folder the URL names
};

/// Maps a URL (http://, https://, s3://) to its folder; empty until <tensorfile/remote.hpp> registers one, so that
/// the core needs no network library. A function-local static, so every translation unit shares the one.
[[nodiscard]] inline std::function<UrlFolder(const std::string&)>& url_opener() {
  static std::function<UrlFolder(const std::string&)> opener;
  return opener;
}

}  // namespace detail

/// Whether `text` is a URL that open() and load() take when <tensorfile/remote.hpp> is included: it starts with
/// http://, https:// or s3://.
[[nodiscard]] inline bool is_url(std::string_view text) noexcept {
  return text.starts_with("http://") || text.starts_with("https://") || text.starts_with("s3://");
}

/// A URL as messages give it: without its query (a presigned URL's holds a signature) and without the user
/// information before the host ("user:password@"); any other text unchanged. What errors and the tool print.
[[nodiscard]] inline std::string redacted_url(std::string_view text) {
  if (!is_url(text)) return std::string(text);
  std::string_view url = text.substr(0, text.find('?'));
  const std::size_t host = url.find("://") + 3;
  const std::size_t path = url.find('/', host);
  const std::size_t at = url.substr(0, path).rfind('@');
  if (at == std::string_view::npos || at < host) return std::string(url);
  return std::string(url.substr(0, host)) + std::string(url.substr(at + 1));
}

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <istream>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/stream_input.hpp"

namespace tensorfile {
namespace detail {

/// All of a small file a reader holds (an index, a meta.json), read as its bytes arrive: more than `limit` bytes is
/// a LimitError naming `name`, whatever size() claims; short reads are retried.
[[nodiscard]] inline std::string read_small_file(RangeReader& reader, const std::string& name, std::uint64_t limit) {
  if (const std::optional<std::uint64_t> size = reader.size(); size && *size > limit) {
    throw LimitError(
        "file is too large; expected at most " + std::to_string(limit) + " bytes, got " + std::to_string(*size),
        {.file = name});
  }
  std::string text(static_cast<std::size_t>(std::min<std::uint64_t>(limit, 16383)) + 1, '\0');
  std::size_t done = 0;
  while (true) {
    if (done == text.size()) {
      if (done > limit) {
        throw LimitError("file is too large; expected at most " + std::to_string(limit) + " bytes", {.file = name});
      }
      const std::uint64_t most = limit == UINT64_MAX ? limit : limit + 1;  // one past the limit shows a longer file
      text.resize(static_cast<std::size_t>(std::min<std::uint64_t>(most, std::uint64_t{done} * 2)));
    }
    const std::size_t n = reader.read(done, std::as_writable_bytes(std::span(text)).subspan(done));
    if (n == 0) break;
    if (n > text.size() - done) {
      throw FormatError("the reader returned " + std::to_string(n) + " bytes, more than the " +
                            std::to_string(text.size() - done) + " asked for",
                        {.file = name, .offset = done});
    }
    done += n;
  }
  text.resize(done);
  return text;
}

/// The one reader every Source funnels into: ranges of a file (pread), of memory, or of a RangeReader, each
/// range read whole or refused with a FormatError naming the source and the offset. A stream, and a reader
/// without a size, are read whole into one heap storage first and then read as memory. Reads are thread-safe
/// (pread, memcpy, or the RangeReader's own contract).
class SourceBytes {
 public:
  /// Opens `source` (a path read-write when `writable`, for MapMode::shared); a directory is not opened.
  SourceBytes(const Source& source, bool writable) : name_(source.name()) {
    switch (source.kind()) {
      case Source::Kind::path:
        file_ = FileHandle::open(source.path(), writable ? OpenMode::read_write : OpenMode::read);
        size_ = file_.size();
        break;
      case Source::Kind::memory:
        memory_ = source.bytes();
        size_ = memory_.size();
        break;
      case Source::Kind::stream: hold(read_stream_to_heap(*source.stream())); break;
      case Source::Kind::folder:
        throw ArgumentError("a folder is read by open() file by file; expected a file, memory, a stream or a reader",
                            {.file = name_});
      case Source::Kind::reader:
        reader_ = source.reader();
        if (const std::optional<std::uint64_t> size = reader_->size()) {
          size_ = *size;
        } else {
          hold(read_all(*reader_, std::nullopt, HugePages::from_environment));
          reader_ = nullptr;
        }
        break;
    }
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }  ///< the source's name
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }       ///< bytes in all
  /// The open file (a path source); invalid otherwise.
  [[nodiscard]] const FileHandle& file() const noexcept { return file_; }
  /// Bytes in memory that hold the whole source (memory, stream, a reader read whole); empty for a file or a
  /// reader read by ranges.
  [[nodiscard]] std::span<const std::byte> memory() const noexcept { return memory_; }
  /// The heap storage a stream or unsized reader was read into; undefined otherwise.
  [[nodiscard]] const Storage& held() const noexcept { return held_; }
  /// The reader read by ranges; null otherwise.
  [[nodiscard]] RangeReader* reader() const noexcept { return reader_; }
  /// The ranged reader's mapped() bytes, nullopt when it has none (or this is no ranged reader); a mapping that
  /// does not hold exactly size() bytes is an ArgumentError naming the reader.
  [[nodiscard]] std::optional<std::span<const std::byte>> mapped() const {
    if (reader_ == nullptr) return std::nullopt;
    const std::optional<std::span<const std::byte>> bytes = reader_->mapped();
    if (bytes && bytes->size() != size_) {
      throw ArgumentError("the reader's mapped() holds " + std::to_string(bytes->size()) +
                              " bytes; expected size()'s " + std::to_string(size_),
                          {.file = name_});
    }
    return bytes;
  }

  /// Reads exactly `out.size()` bytes at `offset`; a source that ends first is a FormatError naming it.
  void read_exact(std::uint64_t offset, std::span<std::byte> out) const {
    if (offset > size_ || out.size() > size_ - offset) {
      throw FormatError("the source is truncated; expected " + std::to_string(out.size()) + " bytes, got " +
                            std::to_string(offset > size_ ? 0 : size_ - offset),
                        {.file = name_, .offset = offset});
    }
    if (file_.valid()) {
      file_.read_exact(offset, out);
    } else if (reader_ != nullptr) {
      std::size_t done = 0;
      while (done < out.size()) {
        const std::size_t n = reader_->read(offset + done, out.subspan(done));
        if (n == 0) {
          throw FormatError(
              "the reader ended early; expected " + std::to_string(out.size()) + " bytes, got " + std::to_string(done),
              {.file = name_, .offset = offset + done});
        }
        check_read_count(n, out.size() - done, offset + done);
        done += n;
      }
    } else if (!out.empty()) {
      std::memcpy(out.data(), memory_.data() + offset, out.size());
    }
  }

  /// The whole source in memory: the bytes it already has, else one new heap storage read with read_exact (a
  /// ranged reader: read as its bytes arrive, so that a size() it overstates costs no memory it does not give),
  /// advised for huge pages as `pages` says (a load's tensors may be slices of it).
  [[nodiscard]] Storage whole(HugePages pages = HugePages::from_environment) const {
    if (held_.defined()) return held_;
    if (reader_ != nullptr) return read_all(*reader_, size_, pages);
    Storage all = heap_storage(static_cast<std::size_t>(size_), false, false, pages);
    read_exact(0, {all.mutable_data(), all.size_bytes()});
    return all;
  }

 private:
  void hold(Storage storage) {
    held_ = std::move(storage);
    memory_ = {held_.data(), held_.size_bytes()};
    size_ = memory_.size();
  }

  // A reader that claims more than it was asked for broke its contract (and perhaps the buffer): refused.
  void check_read_count(std::size_t n, std::size_t asked, std::uint64_t offset) const {
    if (n > asked) {
      throw FormatError("the reader returned " + std::to_string(n) + " bytes, more than the " + std::to_string(asked) +
                            " asked for; expected at most " + std::to_string(asked),
                        {.file = name_, .offset = offset});
    }
  }

  // A reader read to its end (or to the `expected` bytes its size() claims, all of which it must give). A claim the
  // machine's memory could hold is read straight into one buffer of that size, each call asking for all that is left
  // (a remote reader splits it into concurrent ranges); its pages are touched only as bytes arrive, so a reader that
  // claims more than it gives costs address space, not memory. Otherwise, in doubling chunks.
  [[nodiscard]] Storage read_all(RangeReader& reader, std::optional<std::uint64_t> expected, HugePages pages) const {
    if (expected && *expected != 0 && *expected <= physical_memory_bytes()) {
      const auto total = static_cast<std::size_t>(*expected);
      Storage all = heap_storage(total, false, false, pages);
      std::size_t done = 0;
      while (done < total) {
        const std::size_t n = reader.read(done, {all.mutable_data() + done, total - done});
        if (n == 0) break;
        check_read_count(n, total - done, done);
        done += n;
      }
      if (done != total) {
        throw FormatError(
            "the reader ended early; expected " + std::to_string(total) + " bytes, got " + std::to_string(done),
            {.file = name_, .offset = done});
      }
      return all;
    }
    const auto cap = [&](std::size_t n) {
      return expected ? static_cast<std::size_t>(std::min<std::uint64_t>(n, *expected)) : n;
    };
    std::vector<std::byte> bytes(cap(std::size_t{1} << 16));
    std::size_t done = 0;
    while (!expected || done < *expected) {
      if (done == bytes.size()) bytes.resize(cap(bytes.size() * 2));
      const std::size_t n = reader.read(done, std::span(bytes).subspan(done));
      if (n == 0) break;
      check_read_count(n, bytes.size() - done, done);
      done += n;
    }
    if (expected && done != *expected) {
      throw FormatError(
          "the reader ended early; expected " + std::to_string(*expected) + " bytes, got " + std::to_string(done),
          {.file = name_, .offset = done});
    }
    Storage all = heap_storage(done, false, false, pages);
    if (done != 0) std::memcpy(all.mutable_data(), bytes.data(), done);
    return all;
  }

  // The machine's memory, bytes (0 when sysconf cannot say: every claim then takes the doubling path).
  [[nodiscard]] static std::uint64_t physical_memory_bytes() noexcept {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
  }

  std::string name_;
  FileHandle file_;
  std::span<const std::byte> memory_{};
  Storage held_{};
  RangeReader* reader_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_source)
namespace tensorfile {

TENSORFILE_ENTRY Source::Source(std::filesystem::path path) : path_(std::move(path)), name_(path_.string()) {}
TENSORFILE_ENTRY Source::Source(const char* path)
    : Source(path != nullptr ? std::filesystem::path(path)
                             : throw ArgumentError("the path is a null pointer; expected a file or directory name")) {}
TENSORFILE_ENTRY Source::Source(const std::string& path) : Source(std::filesystem::path(path)) {}

TENSORFILE_ENTRY Source Source::memory(std::span<const std::byte> bytes, std::string name) {
  Source source;
  source.kind_ = Kind::memory;
  source.bytes_ = bytes;
  source.name_ = name.empty() ? "<memory>" : std::move(name);
  return source;
}

TENSORFILE_ENTRY Source Source::stream(std::istream& in, std::string name) {
  Source source;
  source.kind_ = Kind::stream;
  source.stream_ = &in;
  source.name_ = name.empty() ? "<stream>" : std::move(name);
  return source;
}

TENSORFILE_ENTRY Source Source::reader(RangeReader& reader) {
  Source source;
  source.kind_ = Kind::reader;
  source.reader_ = &reader;
  source.name_ = reader.name();
  return source;
}

TENSORFILE_ENTRY Source Source::folder(FolderReader& folder, std::string relative) {
  Source source;
  source.kind_ = Kind::folder;
  source.folder_ = &folder;
  source.name_ = relative.empty() ? folder.name() : folder.name() + "/" + relative;
  source.relative_ = std::move(relative);
  return source;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_source)
