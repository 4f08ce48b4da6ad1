// SPDX-License-Identifier: MIT
// The zip container of torch.save files: an index built from the central directory, checked against hostile input.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/detail/zip/crc32.hpp"
#include "tensorfile/detail/zip/inflate.hpp"

namespace tensorfile::detail {

/// Resource caps for ZipReader::open; the defaults suit any real torch file.
struct ZipLimits {
  std::uint64_t max_entries = std::uint64_t{1}
                              << 24;  ///< most entries an archive may declare (as LoadLimits::max_records)
  std::uint64_t max_inflated_size = std::uint64_t{64} << 30;  ///< largest declared size of a deflate entry
  bool require_prefix = true;  ///< every entry under one top-level folder (torch); false: any plain names (.npz)
  /// Threads reading local headers through a ReadAt when the archive has many entries: each header
  /// of a large file is its own read (its record lies between it and the next), so they are spread out.
  std::size_t header_threads = 1;
};

/// One archive member, as the central directory describes it (local-header sizes are never used).
struct ZipEntry {
  /// Full name, archive prefix included (`archive/data.pkl`): a view of the name pool that the ZipReader and
  /// its copies share, so valid while one of them lives.
  std::string_view name;
  std::uint64_t local_header_offset = 0;  ///< archive offset of the local file header
  std::uint64_t data_offset = 0;          ///< archive offset of the stored or compressed bytes
  std::uint64_t compressed_size = 0;      ///< bytes the data takes in the archive
  std::uint64_t size = 0;                 ///< bytes once decompressed (equals compressed_size when stored)
  std::uint32_t crc32 = 0;                ///< CRC-32 recorded in the central directory
  std::uint16_t method = 0;               ///< 0 = stored, 8 = deflate
};

namespace zip_impl {

/// Record signatures (APPNOTE 4.3).
inline constexpr std::uint32_t local_header_signature = 0x04034b50;
inline constexpr std::uint32_t central_header_signature = 0x02014b50;
inline constexpr std::uint32_t end_signature = 0x06054b50;
inline constexpr std::uint32_t zip64_end_signature = 0x06064b50;
inline constexpr std::uint32_t zip64_locator_signature = 0x07064b50;

/// Fixed sizes of the records.
inline constexpr std::uint64_t local_header_size = 30;
inline constexpr std::uint64_t central_header_size = 46;
inline constexpr std::uint64_t end_size = 22;
inline constexpr std::uint64_t zip64_end_size = 56;
inline constexpr std::uint64_t zip64_locator_size = 20;

/// DEFLATE's best case is 258 bytes from 2 bits, so no stream inflates more than 1032 times.
inline constexpr std::uint64_t max_deflate_ratio = 1032;

/// Little-endian reads; the caller has checked the bounds.
[[nodiscard]] inline std::uint16_t u16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) | (std::to_integer<unsigned>(p[1]) << 8));
}
[[nodiscard]] inline std::uint32_t u32(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(u16(p)) | (static_cast<std::uint32_t>(u16(p + 2)) << 16);
}
[[nodiscard]] inline std::uint64_t u64(const std::byte* p) noexcept {
  return static_cast<std::uint64_t>(u32(p)) | (static_cast<std::uint64_t>(u32(p + 4)) << 32);
}

/// `0x` and eight hex digits.
[[nodiscard]] inline std::string hex32(std::uint32_t value) { return "0x" + hex_text(value, 8); }

/// A name from the archive made safe to print: control and non-ASCII bytes become `\xNN`, and
/// names longer than 256 bytes are cut.
[[nodiscard]] inline std::string printable(std::string_view name) {
  std::string text;
  const std::size_t shown = std::min<std::size_t>(name.size(), 256);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      text += static_cast<char>(c);
    } else {
      text += "\\x";
      append_hex(text, c, 2);
    }
  }
  if (shown < name.size()) text += "...";
  return text;
}

/// A name for a zip compression method, for error messages.
[[nodiscard]] inline std::string method_name(std::uint16_t method) {
  std::string text = std::to_string(method);
  switch (method) {
    case 1: return text + " (shrink)";
    case 6: return text + " (implode)";
    case 9: return text + " (deflate64)";
    case 12: return text + " (bzip2)";
    case 14: return text + " (lzma)";
    case 93: return text + " (zstd)";
    case 95: return text + " (xz)";
    case 99: return text + " (AES encryption)";
    default: return text;
  }
}

/// What a buffer without an end-of-central-directory record seems to be.
[[nodiscard]] inline std::string not_a_zip_reason(std::span<const std::byte> data) {
  std::string reason = "not a zip archive: no end-of-central-directory record";
  const auto starts_with = [&](std::size_t at, std::string_view text) {
    return data.size() >= at + text.size() && std::memcmp(data.data() + at, text.data(), text.size()) == 0;
  };
  if (starts_with(0, "PK\x03\x04")) return reason + "; it starts like a zip archive, so it is probably truncated";
  if (starts_with(0, "PYTORCH1")) return reason + "; it is the preview-release torch format";
  if (starts_with(257, "ustar")) return reason + "; it is a tar archive (the pre-0.2 torch.save format)";
  if (!data.empty() && data[0] == std::byte{0x80})
    return reason + "; it starts like a pickle stream (the legacy torch.save format)";
  return reason;
}

}  // namespace zip_impl

/// An index over a zip archive held in memory (an mmap or a user buffer), or read from a file through
/// a ReadAt (open_file: nothing is mapped, every byte is copied into owned buffers). Borrows the
/// bytes or the reader: they must outlive it and every span it hands out. Built from the central
/// directory only, after checking every offset and length against the archive. Copyable; const member
/// functions are safe to call from several threads.
class ZipReader {
 public:
  /// Reads `out.size()` archive bytes at `offset` into `out` (a pread, for file-backed archives). May be
  /// called from several threads at once (ZipLimits::header_threads).
  using ReadAt = std::function<void(std::uint64_t offset, std::span<std::byte> out)>;

  /// Parses `archive`. `file_for_errors` only names the file in error messages. Throws FormatError
  /// for anything malformed or ambiguous (bounds, duplicate names, overlapping entries, names outside
  /// the prefix, local/central disagreement), UnsupportedError for encryption, multi-disk archives
  /// and compression methods other than stored and deflate, LimitError past `limits`.
  /// `read_at`, when given, reads local headers (bytes at an archive offset) instead of touching
  /// them through `archive`: with a file, a pread per header costs less than a page fault per record.
  [[nodiscard]] static ZipReader open(std::span<const std::byte> archive, std::filesystem::path file_for_errors,
                                      const ZipLimits& limits = {}, const ReadAt& read_at = {}) {
    ZipReader reader;
    reader.archive_ = archive;
    reader.size_ = archive.size();
    reader.file_ = std::move(file_for_errors);
    reader.read_at_ = read_at;
    reader.build(limits);
    return reader;
  }

  /// Parses an archive of `size` bytes that only `read_at` reaches (a file read with pread): the end
  /// records, the central directory and the local headers are copied into owned buffers, so a file that
  /// shrinks meanwhile gives read_at's error (FormatError, IoError), never a fault. Throws like open().
  [[nodiscard]] static ZipReader open_file(std::uint64_t size, std::filesystem::path file_for_errors,
                                           const ReadAt& read_at, const ZipLimits& limits = {}) {
    ZipReader reader = unread_file(size, std::move(file_for_errors), read_at);
    reader.build(limits);
    return reader;
  }

  /// Receives a window of archive bytes that the local-header pass read: entries [first, end) have their
  /// headers in it, checked and with data_offset set. A stored record whose data lies inside the window can
  /// be copied from it instead of being read again. Called from the thread that read the window.
  using WindowSink =
      std::function<void(std::uint64_t offset, std::span<const std::byte> window, std::size_t first, std::size_t end)>;

  /// open_file() up to the local headers: the end records, the central directory and the name index are read
  /// and checked, but no entry has a data_offset yet. read_local_header() (one entry, before its bytes are
  /// read) and read_local_headers() (all of them, then the layout checks) complete it, so that a caller can
  /// work on one record (a pickle) while another thread reads the headers of thousands of others.
  [[nodiscard]] static ZipReader open_file_index(std::uint64_t size, std::filesystem::path file_for_errors,
                                                 const ReadAt& read_at, const ZipLimits& limits = {}) {
    ZipReader reader = unread_file(size, std::move(file_for_errors), read_at);
    reader.end_ = reader.read_end_records(limits);
    reader.index_names(reader.read_central_directory(reader.end_, limits));
    reader.header_threads_ = limits.header_threads;
    return reader;
  }

  /// Reads and checks the local header of `entry` (one of entries()) of a reader from open_file_index().
  void read_local_header(const ZipEntry& entry) {
    check_entry(entry);
    const auto index = static_cast<std::size_t>(&entry - entries_.data());
    read_header_range(index, index + 1, {});
  }

  /// Reads and checks every local header of a reader from open_file_index() (with `threads` threads; 0: as
  /// ZipLimits::header_threads said), handing each window read to `sink` when given, then checks the layout.
  /// Throws like open_file(). While it runs, other threads may use the reader's names, sizes and methods, and
  /// the records whose header read_local_header() read before: it writes nothing else.
  void read_local_headers(const WindowSink& sink = {}, std::size_t threads = 0) {
    read_local_headers(threads != 0 ? threads : header_threads_, sink);
    check_layout(end_);
  }

  /// How many end-of-central-directory signatures the last 64 KiB + 22 bytes of the archive hold (the record read
  /// is one of them).
  [[nodiscard]] std::size_t end_signatures() const noexcept { return end_.signatures; }
  /// The offset of the last of those signatures: where readers that take the last one (miniz in libtorch,
  /// Python's zipfile) look for the end record.
  [[nodiscard]] std::uint64_t last_end_signature() const noexcept { return end_.last_signature; }
  /// Whether that is not the record this reader took (whose comment reaches the end of the file): those readers
  /// then see another archive.
  [[nodiscard]] bool end_record_ambiguous() const noexcept { return end_.last_signature != end_.classic; }
  /// Whether the central directory does not end where the end records begin, or a zip64 end record does not sit
  /// right before its locator: Python's zipfile (numpy.load) takes both for granted and reads the directory, and
  /// every member, at other offsets (by the gap).
  [[nodiscard]] bool directory_apart() const noexcept { return end_.apart; }

  /// Whether the archive bytes are in memory (open), so that stored_bytes() can hand them out.
  [[nodiscard]] bool in_memory() const noexcept { return archive_.size() == size_; }

  /// Every entry in central-directory order.
  [[nodiscard]] const std::vector<ZipEntry>& entries() const noexcept { return entries_; }

  /// The archive prefix: the text before the first `/` of the first central-directory entry
  /// (empty for an archive without entries).
  [[nodiscard]] std::string_view prefix() const noexcept { return prefix_; }

  /// The entry named `prefix() + "/" + name_under_prefix`, or nullptr. O(log n). The pointer lives as
  /// long as the reader.
  [[nodiscard]] const ZipEntry* find(std::string_view name_under_prefix) const noexcept {
    const std::size_t skip = prefix_.empty() ? 0 : prefix_.size() + 1;
    const auto key = [&](std::size_t index) { return std::string_view(entries_[index].name).substr(skip); };
    const auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name_under_prefix,
                                     [&](std::size_t index, std::string_view name) { return key(index) < name; });
    if (it == by_name_.end() || key(*it) != name_under_prefix) return nullptr;
    return &entries_[*it];
  }

  /// The bytes of a stored (method 0) entry inside the archive, without copying. Throws
  /// UnsupportedError for a compressed entry and ArgumentError for an entry of another archive or
  /// an archive that is not in memory (open_file).
  [[nodiscard]] std::span<const std::byte> stored_bytes(const ZipEntry& entry) const {
    if (!in_memory())
      throw ArgumentError("the archive is read from a file; its entries have no bytes in memory",
                          {file_, zip_impl::printable(entry.name), entry.data_offset});
    const std::span<const std::byte> data = raw_bytes(entry);
    if (entry.method != 0)
      throw UnsupportedError("the entry is deflate-compressed; only stored entries can be used in place",
                             {file_, zip_impl::printable(entry.name), entry.data_offset});
    return data;
  }

  /// Decompresses or copies `entry` into `out`, which must be exactly `entry.size` bytes (the caller's
  /// cap on the allocation). Throws ArgumentError for a wrong size or an entry of another archive, and
  /// FormatError for corrupt deflate data, with the archive offset of the fault.
  void read(const ZipEntry& entry, std::span<std::byte> out) const {
    check_belongs(entry);
    if (out.size() != entry.size)
      throw ArgumentError("the output buffer does not match the entry size; expected " + std::to_string(entry.size) +
                              " bytes, got " + std::to_string(out.size()),
                          {file_, zip_impl::printable(entry.name), entry.data_offset});
    if (!in_memory()) {
      if (entry.method == 0) {
        read_at_(entry.data_offset, out);
        return;
      }
      std::vector<std::byte> compressed(static_cast<std::size_t>(entry.compressed_size));
      read_at_(entry.data_offset, compressed);
      inflate(compressed, out, ErrorLocation{file_, zip_impl::printable(entry.name), entry.data_offset});
      return;
    }
    const std::span<const std::byte> data = raw_bytes(entry);
    if (entry.method == 0) {
      if (!data.empty()) std::memcpy(out.data(), data.data(), data.size());
      return;
    }
    inflate(data, out, ErrorLocation{file_, zip_impl::printable(entry.name), entry.data_offset});
  }

  /// `out.size()` bytes of the stored (method 0) `entry` from `offset` within it, the rest of it unread (a
  /// member's header, say). Throws ArgumentError for a compressed entry or a range past the entry's end.
  void read_stored_range(const ZipEntry& entry, std::uint64_t offset, std::span<std::byte> out) const {
    check_belongs(entry);
    if (entry.method != 0 || offset > entry.size || out.size() > entry.size - offset) {
      std::string what = "the range is not within a stored entry; expected at most ";
      what += std::to_string(entry.size);
      what += " bytes of an uncompressed entry";
      throw ArgumentError(what, {file_, zip_impl::printable(entry.name), entry.data_offset});
    }
    if (out.empty()) return;
    if (!in_memory()) {
      read_at_(entry.data_offset + offset, out);
      return;
    }
    std::memcpy(out.data(), raw_bytes(entry).data() + offset, out.size());
  }

  /// The contents of `entry` in a new buffer of `entry.size` bytes (bounded by the archive size for
  /// stored entries and by ZipLimits::max_inflated_size for deflate ones). Throws like read().
  [[nodiscard]] std::vector<std::byte> read(const ZipEntry& entry) const {
    std::vector<std::byte> out(static_cast<std::size_t>(entry.size));
    read(entry, out);
    return out;
  }

  /// Checks the CRC-32 of `entry` (inflating it into a temporary buffer when compressed). torch.load
  /// never checks CRCs; this is opt-in. A recorded CRC of 0 on a non-empty entry means the writer
  /// skipped it (torch 2.x can) and passes. Throws FormatError on a mismatch.
  /// A stored entry of a file-backed archive is read in pieces of at most 1 MiB, never whole.
  void verify_crc(const ZipEntry& entry) const {
    if (entry.method != 0) {
      verify_crc(entry, read(entry));
    } else if (in_memory()) {
      verify_crc(entry, stored_bytes(entry));
    } else {
      check_belongs(entry);
      std::vector<std::byte> piece(static_cast<std::size_t>(std::min<std::uint64_t>(entry.size, 1 << 20)));
      std::uint32_t running = 0;
      for (std::uint64_t done = 0; done < entry.size;) {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), entry.size - done));
        read_at_(entry.data_offset + done, std::span(piece).first(take));
        running = crc32(std::span(piece).first(take), running);
        done += take;
      }
      check_crc(entry, running);
    }
  }

  /// Checks that `contents`, the entry's decompressed bytes, match its recorded CRC-32; see above.
  void verify_crc(const ZipEntry& entry, std::span<const std::byte> contents) const {
    if (contents.size() != entry.size)
      throw ArgumentError("the contents do not match the entry size; expected " + std::to_string(entry.size) +
                              " bytes, got " + std::to_string(contents.size()),
                          {file_, zip_impl::printable(entry.name), entry.data_offset});
    check_crc(entry, crc32(contents));
  }

  /// The archive bytes the reader borrows (empty for open_file).
  [[nodiscard]] std::span<const std::byte> archive() const noexcept { return archive_; }

  /// The file name used in error messages.
  [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }

  /// A name made of ordinary components: nothing that could mean another place if ever used as a path.
  [[nodiscard]] static bool is_plain_path(std::string_view name) noexcept {
    if (name.find('\\') != std::string_view::npos || name.find('\0') != std::string_view::npos) return false;
    std::size_t start = 0;
    while (start <= name.size()) {
      const std::size_t end = std::min(name.find('/', start), name.size());
      const std::string_view part = name.substr(start, end - start);
      if (part.empty() || part == "." || part == "..") return false;
      start = end + 1;
    }
    return true;
  }

 private:
  /// Throws FormatError when `actual`, the CRC-32 of the entry's bytes, differs from the recorded one
  /// (0 recorded for a non-empty entry: skipped by the writer, passes).
  void check_crc(const ZipEntry& entry, std::uint32_t actual) const {
    if (entry.crc32 == 0 && entry.size != 0) return;
    if (actual != entry.crc32)
      throw FormatError(
          "CRC-32 mismatch; expected " + zip_impl::hex32(entry.crc32) + ", got " + zip_impl::hex32(actual),
          {file_, zip_impl::printable(entry.name), entry.data_offset});
  }

  /// What the end records say: where the central directory is, its size, the entry count.
  struct EndRecords {
    std::uint64_t entry_count = 0;
    std::uint64_t directory_offset = 0;
    std::uint64_t directory_size = 0;
    std::uint64_t start = 0;           // first byte of the end records (zip64 record, or classic record)
    std::uint64_t record = 0;          // the record that gave the values above, for error offsets
    std::size_t signatures = 0;        // end-record signatures in the searched tail, the one taken included
    std::uint64_t last_signature = 0;  // the offset of the last of them
    std::uint64_t classic = 0;         // the offset of the classic record taken
    bool apart = false;  // bytes between the directory and the end records, or a zip64 record not right before
                         // its locator: where Python's zipfile, which assumes both, reads another directory
  };

  /// A byte range an entry claims: local header through the end of its data.
  struct Extent {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    std::size_t index = 0;
  };

  ZipReader() = default;

  /// A reader of a file that only `read_at` reaches, with nothing read yet.
  static ZipReader unread_file(std::uint64_t size, std::filesystem::path file_for_errors, const ReadAt& read_at) {
    ZipReader reader;
    reader.size_ = size;
    reader.file_ = std::move(file_for_errors);
    reader.read_at_ = read_at;
    return reader;
  }

  void build(const ZipLimits& limits) {
    const EndRecords end = read_end_records(limits);
    end_ = end;
    const std::vector<std::uint64_t> header_offsets = read_central_directory(end, limits);
    read_local_headers(limits.header_threads, {});
    index_names(header_offsets);
    check_layout(end);
  }

  /// `length` archive bytes at `offset` (checked by the caller to lie in the archive): in place when in
  /// memory, otherwise read into `copy`.
  [[nodiscard]] const std::byte* bytes_at(std::uint64_t offset, std::uint64_t length,
                                          std::vector<std::byte>& copy) const {
    if (in_memory()) return at(offset);
    copy.resize(static_cast<std::size_t>(length));
    read_at_(offset, copy);
    return copy.data();
  }

  [[noreturn]] void fail(const std::string& what, std::uint64_t offset, std::string_view member = {}) const {
    throw FormatError(what, {file_, zip_impl::printable(member), offset});
  }

  [[noreturn]] void fail_unsupported(const std::string& what, std::uint64_t offset,
                                     std::string_view member = {}) const {
    throw UnsupportedError(what, {file_, zip_impl::printable(member), offset});
  }

  [[nodiscard]] const std::byte* at(std::uint64_t offset) const noexcept {
    return archive_.data() + static_cast<std::size_t>(offset);
  }

  /// Throws ArgumentError unless `entry` is one of entries().
  void check_entry(const ZipEntry& entry) const {
    const std::less<const ZipEntry*> before;  // a total order, also for pointers into other arrays
    if (before(&entry, entries_.data()) || !before(&entry, entries_.data() + entries_.size()))
      throw ArgumentError("the entry does not belong to this archive", {file_, zip_impl::printable(entry.name)});
  }

  /// Re-checks the data range of `entry`, so that an entry from another reader cannot reach outside.
  void check_belongs(const ZipEntry& entry) const {
    // A data_offset of 0 is one that open_file_index() has not read yet (data follows a 30-byte header).
    if (entry.data_offset == 0 || entry.data_offset > size_ || size_ - entry.data_offset < entry.compressed_size)
      throw ArgumentError("the entry does not belong to this archive",
                          {file_, zip_impl::printable(entry.name), entry.data_offset});
  }

  /// The data range of `entry` in memory, checked as above.
  [[nodiscard]] std::span<const std::byte> raw_bytes(const ZipEntry& entry) const {
    check_belongs(entry);
    return archive_.subspan(static_cast<std::size_t>(entry.data_offset),
                            static_cast<std::size_t>(entry.compressed_size));
  }

  [[nodiscard]] EndRecords read_end_records(const ZipLimits& limits) const {
    using namespace zip_impl;
    const std::uint64_t size = size_;
    if (size == 0) fail("not a zip archive: the file is empty", 0);

    // The classic record is the last thing in the file but for a comment of up to 65535 bytes. A
    // candidate counts only if its comment length reaches exactly the end of the file.
    std::uint64_t pos = size;
    bool found = false;
    std::vector<std::byte> tail_copy;
    const std::uint64_t lowest = size > end_size + 0xFFFF ? size - end_size - 0xFFFF : 0;
    const std::byte* tail = bytes_at(lowest, size - lowest, tail_copy);  // tail[0] is archive byte `lowest`
    // Every signature in the tail is counted: readers that take the last one (miniz in libtorch, Python's
    // zipfile) see another archive when it is not the one taken here (a scan's finding).
    std::size_t signatures = 0;
    std::uint64_t last_signature = 0;
    if (size >= end_size) {
      for (std::uint64_t candidate = size - end_size + 1; candidate-- > lowest;) {
        const std::byte* c = tail + (candidate - lowest);
        if (u32(c) != end_signature) continue;
        if (signatures++ == 0) last_signature = candidate;
        if (!found && candidate + end_size + u16(c + 20) == size) {
          pos = candidate;
          found = true;
        }
      }
    }
    if (!found) {
      std::vector<std::byte> head_copy;
      const std::uint64_t head_size = std::min<std::uint64_t>(size, 512);
      fail(not_a_zip_reason({bytes_at(0, head_size, head_copy), static_cast<std::size_t>(head_size)}), size);
    }

    const std::byte* e = tail + (pos - lowest);
    EndRecords end;
    end.entry_count = u16(e + 10);
    end.directory_size = u32(e + 12);
    end.directory_offset = u32(e + 16);
    end.start = pos;
    end.record = pos;
    end.signatures = signatures;
    end.last_signature = last_signature;
    end.classic = pos;

    std::vector<std::byte> locator_copy;
    const std::byte* l =
        pos >= zip64_locator_size ? bytes_at(pos - zip64_locator_size, zip64_locator_size, locator_copy) : nullptr;
    if (l != nullptr && u32(l) == zip64_locator_signature) {
      const std::uint64_t locator = pos - zip64_locator_size;
      const std::uint64_t record = u64(l + 8);
      if (u32(l + 4) != 0 || u32(l + 16) > 1) fail_unsupported("multi-disk zip archives are not supported", locator);
      if (record > locator || locator - record < zip64_end_size)
        fail("the zip64 end-of-central-directory record at byte " + std::to_string(record) +
                 " does not fit before its locator",
             locator);
      std::vector<std::byte> record_copy;
      const std::byte* z = bytes_at(record, zip64_end_size, record_copy);
      if (u32(z) != zip64_end_signature)
        fail("bad zip64 end-of-central-directory signature; expected " + hex32(zip64_end_signature) + ", got " +
                 hex32(u32(z)),
             record);
      const std::uint64_t rest = u64(z + 4);
      if (rest < zip64_end_size - 12 || rest > locator - record - 12)
        fail("bad zip64 end-of-central-directory record size; expected 44 to " + std::to_string(locator - record - 12) +
                 ", got " + std::to_string(rest),
             record);
      if (u32(z + 16) != 0 || u32(z + 20) != 0 || u64(z + 24) != u64(z + 32))
        fail_unsupported("multi-disk zip archives are not supported", record);
      const std::uint64_t count = u64(z + 32);
      const std::uint64_t directory_size = u64(z + 40);
      const std::uint64_t directory_offset = u64(z + 48);
      // The classic record holds either the 0xFFFF... placeholder or the same value.
      const auto agree = [&](const char* what, std::uint64_t classic, std::uint64_t placeholder, std::uint64_t zip64) {
        if (classic != placeholder && classic != zip64)
          fail(std::string("the zip64 end-of-central-directory record disagrees with the classic one on the ") + what +
                   "; expected " + std::to_string(classic) + ", got " + std::to_string(zip64),
               record);
      };
      agree("entry count", end.entry_count, 0xFFFF, count);
      agree("central directory size", end.directory_size, 0xFFFFFFFF, directory_size);
      agree("central directory offset", end.directory_offset, 0xFFFFFFFF, directory_offset);
      end.entry_count = count;
      end.directory_size = directory_size;
      end.directory_offset = directory_offset;
      end.start = record;
      end.apart = record + zip64_end_size != locator;
      end.record = record;
    } else if (u16(e + 4) != 0 || u16(e + 6) != 0 || u16(e + 8) != u16(e + 10)) {
      fail_unsupported("multi-disk zip archives are not supported", pos);
    }

    const auto directory_end = checked_add_u64(end.directory_offset, end.directory_size);
    if (directory_end && *directory_end < end.start) end.apart = true;
    if (!directory_end || *directory_end > end.start)
      fail("the central directory (" + std::to_string(end.directory_size) + " bytes at byte " +
               std::to_string(end.directory_offset) + ") runs into the end records at byte " +
               std::to_string(end.start),
           end.record);
    if (end.entry_count > limits.max_entries)
      throw LimitError("the archive declares " + std::to_string(end.entry_count) + " entries, more than the limit of " +
                           std::to_string(limits.max_entries),
                       {file_, {}, end.record});
    if (end.entry_count > end.directory_size / central_header_size)
      fail("a central directory of " + std::to_string(end.directory_size) + " bytes cannot hold " +
               std::to_string(end.entry_count) + " entries",
           end.record);
    return end;
  }

  /// Reads every central-directory header; returns where each one starts, for error messages.
  [[nodiscard]] std::vector<std::uint64_t> read_central_directory(const EndRecords& end, const ZipLimits& limits) {
    using namespace zip_impl;
    std::vector<std::uint64_t> header_offsets;
    // The count was checked against the directory size, so this reserves no more than the bytes can hold.
    entries_.reserve(static_cast<std::size_t>(end.entry_count));
    header_offsets.reserve(static_cast<std::size_t>(end.entry_count));
    const std::uint64_t directory_end = end.directory_offset + end.directory_size;
    std::vector<std::byte> directory_copy;
    const std::byte* directory = bytes_at(end.directory_offset, end.directory_size, directory_copy);
    std::uint64_t names_bytes = 0;  // at most the directory's size: every name lies inside it
    std::uint64_t pos = end.directory_offset;
    for (std::uint64_t i = 0; i < end.entry_count; ++i) {
      if (directory_end - pos < central_header_size)
        fail("a central directory header runs past the end of the central directory", pos);
      const std::byte* h = directory + (pos - end.directory_offset);
      if (u32(h) != central_header_signature)
        fail("bad central directory header signature; expected " + hex32(central_header_signature) + ", got " +
                 hex32(u32(h)),
             pos);
      const std::uint16_t flags = u16(h + 8);
      const std::uint16_t method = u16(h + 10);
      const std::uint64_t name_length = u16(h + 28);
      const std::uint64_t extra_length = u16(h + 30);
      const std::uint64_t comment_length = u16(h + 32);
      if (directory_end - pos - central_header_size < name_length + extra_length + comment_length)
        fail("a central directory header runs past the end of the central directory", pos);

      // A view of the directory bytes until every header is read; then the names move into the pool below.
      ZipEntry entry{std::string_view(reinterpret_cast<const char*>(h + central_header_size),
                                      static_cast<std::size_t>(name_length))};
      names_bytes += name_length;
      entry.method = method;
      entry.crc32 = u32(h + 16);
      entry.compressed_size = u32(h + 20);
      entry.size = u32(h + 24);
      entry.local_header_offset = u32(h + 42);
      std::uint32_t disk = u16(h + 34);
      const std::string_view name = entry.name;

      // Bit 0: encrypted; bit 6: strong encryption; bit 13: encrypted central directory.
      if ((flags & 0x2041u) != 0) fail_unsupported("encrypted zip entries are not supported", pos, name);
      read_zip64_extra(entry, disk, h + central_header_size + name_length, extra_length, pos);
      if (disk != 0) fail_unsupported("multi-disk zip archives are not supported", pos, name);
      if (method != 0 && method != 8)
        fail_unsupported("unsupported zip compression method " + method_name(method) +
                             "; only stored (0) and deflate (8) are supported",
                         pos, name);
      if (method == 0 && entry.compressed_size != entry.size)
        fail("a stored entry has a compressed size of " + std::to_string(entry.compressed_size) +
                 " bytes but a size of " + std::to_string(entry.size),
             pos, name);
      if (method == 8) {
        if (entry.size > limits.max_inflated_size)
          throw LimitError("the declared size of " + std::to_string(entry.size) + " bytes is more than the limit of " +
                               std::to_string(limits.max_inflated_size) + " for a compressed entry",
                           {file_, printable(name), pos});
        if (entry.size / max_deflate_ratio > entry.compressed_size ||
            (entry.size / max_deflate_ratio == entry.compressed_size && entry.size % max_deflate_ratio != 0))
          fail("the declared size of " + std::to_string(entry.size) + " bytes cannot come from " +
                   std::to_string(entry.compressed_size) + " bytes of deflate data (at most 1032 times larger)",
               pos, name);
      }

      if (!limits.require_prefix) {
        // names are checked by is_plain_path below; the prefix stays empty
      } else if (i == 0) {
        const std::size_t slash = name.find('/');
        if (slash == std::string_view::npos || slash == 0)
          fail("the first entry is not inside a top-level folder, so the archive has no prefix", pos, name);
        prefix_ = std::string(name.substr(0, slash));
      } else if (name.size() <= prefix_.size() || name.compare(0, prefix_.size(), prefix_) != 0 ||
                 name[prefix_.size()] != '/') {
        fail("the entry is outside the archive prefix '" + printable(prefix_) + "/'", pos, name);
      }

      if (!is_plain_path(name)) {
        fail("the entry name has an empty, '.' or '..' component, a backslash or a NUL byte", pos, name);
      }

      entries_.push_back(std::move(entry));
      header_offsets.push_back(pos);
      pos += central_header_size + name_length + extra_length + comment_length;
    }
    if (pos != directory_end)
      fail("the central directory size disagrees with its entries; expected " + std::to_string(end.directory_size) +
               " bytes, got " + std::to_string(pos - end.directory_offset),
           end.record);
    // The names in one pool rather than a string each (thousands of records named `archive/data/N`), sized
    // exactly once the directory has been read whole.
    const std::shared_ptr<char[]> pool(new char[names_bytes == 0 ? 1 : static_cast<std::size_t>(names_bytes)]);
    char* next = pool.get();
    for (ZipEntry& entry : entries_) {
      std::memcpy(next, entry.name.data(), entry.name.size());
      entry.name = std::string_view(next, entry.name.size());
      next += entry.name.size();
    }
    names_ = pool;
    return header_offsets;
  }

  /// Replaces the 0xFFFFFFFF placeholders of `entry` (and 0xFFFF of `disk`) with the zip64 extra
  /// field's values, which come in the order size, compressed size, local header offset, disk.
  void read_zip64_extra(ZipEntry& entry, std::uint32_t& disk, const std::byte* extra, std::uint64_t length,
                        std::uint64_t header) const {
    using namespace zip_impl;
    const bool need_size = entry.size == 0xFFFFFFFF;
    const bool need_compressed = entry.compressed_size == 0xFFFFFFFF;
    const bool need_offset = entry.local_header_offset == 0xFFFFFFFF;
    const bool need_disk = disk == 0xFFFF;
    const std::uint64_t needed =
        8u * (unsigned{need_size} + unsigned{need_compressed} + unsigned{need_offset}) + 4u * unsigned{need_disk};
    bool seen = false;
    std::uint64_t pos = 0;
    // A tail shorter than a field header is padding some writers leave; it is skipped.
    while (length - pos >= 4) {
      const std::uint16_t id = u16(extra + pos);
      const std::uint64_t size = u16(extra + pos + 2);
      if (length - pos - 4 < size) fail("an extra field runs past the end of the extra data", header, entry.name);
      if (id == 0x0001) {
        if (seen) fail("duplicate zip64 extra field", header, entry.name);
        seen = true;
        if (size < needed)
          fail("the zip64 extra field is too short; expected " + std::to_string(needed) + " bytes, got " +
                   std::to_string(size),
               header, entry.name);
        const std::byte* field = extra + pos + 4;
        if (need_size) {
          entry.size = u64(field);
          field += 8;
        }
        if (need_compressed) {
          entry.compressed_size = u64(field);
          field += 8;
        }
        if (need_offset) {
          entry.local_header_offset = u64(field);
          field += 8;
        }
        if (need_disk) disk = u32(field);
      }
      pos += 4 + size;
    }
    if (needed != 0 && !seen) fail("a field is 0xFFFFFFFF but there is no zip64 extra field", header, entry.name);
  }

  /// Reads every entry's local header (read_header_range), in one thread or, for an archive of many
  /// entries read through read_at_, in `threads` contiguous index ranges at once. The error reported is
  /// the first in entry order, as in one thread.
  void read_local_headers(std::size_t threads, const WindowSink& sink) {
    // Below this many entries per thread, starting a thread costs more than the reads it takes over.
    constexpr std::size_t min_entries_per_thread = 256;
    const std::size_t count = entries_.size();
    threads =
        read_at_ ? std::clamp<std::size_t>(count / min_entries_per_thread, 1, std::max<std::size_t>(threads, 1)) : 1;
    if (threads == 1) {
      read_header_range(0, count, sink);
      return;
    }
    std::vector<std::exception_ptr> errors(threads);
    std::vector<std::thread> workers;
    workers.reserve(threads - 1);
    const auto range = [&](std::size_t t) {
      try {
        read_header_range(count * t / threads, count * (t + 1) / threads, sink);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    try {
      for (std::size_t t = 1; t < threads; ++t) workers.emplace_back(range, t);
    } catch (...) {  // no thread to be had: the rest in this one
      for (std::size_t t = workers.size() + 1; t < threads; ++t) range(t);
    }
    range(0);
    for (std::thread& worker : workers) worker.join();
    for (const std::exception_ptr& error : errors)
      if (error) std::rethrow_exception(error);
  }

  /// Reads and checks the local headers of entries [first, last), setting each one's data_offset; hands each
  /// window read to `sink` once the headers in it are checked.
  void read_header_range(std::size_t first, std::size_t last, const WindowSink& sink) {
    using namespace zip_impl;
    const std::uint64_t size = size_;
    // With read_at_, one read covers this header and the following ones that lie within 64 KiB of it,
    // each at most 4 KiB of record data past the one before: an archive of many tiny records costs a
    // read per batch of headers, not one per record, and larger records' data is not read with them
    // (a select load reads only the records it keeps).
    constexpr std::uint64_t batch_bytes = std::uint64_t{64} << 10;
    constexpr std::uint64_t batch_gap = 4096;
    // A header is read for its fixed part and its name (checked against the central directory's); the
    // extra field is skipped by its length, so it is not read.
    const auto header_bytes = [&](std::size_t j) { return local_header_size + entries_[j].name.size(); };
    std::vector<std::byte> window;  // only grows: its first window_size bytes are the window
    std::size_t window_size = 0;
    std::uint64_t window_begin = 0;
    const auto covers = [&](std::uint64_t offset, std::uint64_t length) {
      return offset >= window_begin && offset - window_begin <= window_size &&
             window_size - (offset - window_begin) >= length;
    };
    std::size_t window_first = first;  // the first entry whose header is in the window
    const auto hand_over = [&](std::size_t end) {
      if (sink && window_size != 0 && end > window_first) {
        sink(window_begin, std::span(window).first(window_size), window_first, end);
      }
    };
    std::vector<std::byte> long_copy;
    for (std::size_t i = first; i < last; ++i) {
      ZipEntry& entry = entries_[i];
      const std::uint64_t lho = entry.local_header_offset;
      if (lho > size || size - lho < local_header_size)
        fail("the local file header at byte " + std::to_string(lho) + " runs past the end of the archive", lho,
             entry.name);
      const std::byte* h = nullptr;
      if (!read_at_) {
        h = at(lho);
      } else {
        if (!covers(lho, local_header_size)) {
          std::uint64_t end = lho + std::min<std::uint64_t>(size - lho, header_bytes(i));
          for (std::size_t j = i + 1; j < last; ++j) {
            const std::uint64_t next = entries_[j].local_header_offset;
            if (next < lho || next > size || next > end + batch_gap) break;
            const std::uint64_t next_end = next + std::min<std::uint64_t>(size - next, header_bytes(j));
            if (next_end - lho > batch_bytes) break;
            end = std::max(end, next_end);
          }
          hand_over(i);
          window_first = i;
          window_begin = lho;
          window_size = static_cast<std::size_t>(end - lho);
          if (window.size() < window_size) window.resize(window_size);
          read_at_(lho, {window.data(), window_size});
        }
        h = window.data() + (lho - window_begin);
      }
      if (u32(h) != local_header_signature)
        fail("bad local file header signature; expected " + hex32(local_header_signature) + ", got " + hex32(u32(h)),
             lho, entry.name);
      const std::uint64_t name_length = u16(h + 26);
      const std::uint64_t extra_length = u16(h + 28);
      if (size - lho - local_header_size < name_length + extra_length)
        fail("the local file header runs past the end of the archive", lho, entry.name);
      if (read_at_ && !covers(lho, local_header_size + name_length))  // a long name
        h = bytes_at(lho, local_header_size + name_length, long_copy);
      const std::string_view local_name(reinterpret_cast<const char*>(h + local_header_size),
                                        static_cast<std::size_t>(name_length));
      if (local_name != entry.name)
        fail("the local file header name '" + printable(local_name) + "' differs from the central directory name", lho,
             entry.name);
      if (u16(h + 8) != entry.method)
        fail("the local file header compression method " + std::to_string(u16(h + 8)) +
                 " differs from the central directory method " + std::to_string(entry.method),
             lho, entry.name);
      const std::uint64_t data_offset = lho + local_header_size + name_length + extra_length;
      if (size - data_offset < entry.compressed_size)
        fail("the entry data (" + std::to_string(entry.compressed_size) + " bytes at byte " +
                 std::to_string(data_offset) + ") runs past the end of the archive",
             data_offset, entry.name);
      // Written only when new: another thread may be reading a record that read_local_header() resolved.
      if (entry.data_offset != data_offset) entry.data_offset = data_offset;
    }
    hand_over(last);
  }

  void index_names(const std::vector<std::uint64_t>& header_offsets) {
    by_name_.resize(entries_.size());
    for (std::size_t i = 0; i < by_name_.size(); ++i) by_name_[i] = i;
    // torch writes its records in name order: names already strictly increasing need no sort and hold no duplicate.
    const auto not_increasing = [&](std::size_t a, std::size_t b) { return !(entries_[a].name < entries_[b].name); };
    if (std::adjacent_find(by_name_.begin(), by_name_.end(), not_increasing) == by_name_.end()) return;
    // Stable, so that of two equal names the later one is reported.
    std::stable_sort(by_name_.begin(), by_name_.end(),
                     [&](std::size_t a, std::size_t b) { return entries_[a].name < entries_[b].name; });
    for (std::size_t i = 1; i < by_name_.size(); ++i) {
      if (entries_[by_name_[i - 1]].name == entries_[by_name_[i]].name) {
        const std::size_t later = std::max(by_name_[i - 1], by_name_[i]);
        fail("duplicate entry name", header_offsets[later], entries_[later].name);
      }
    }
  }

  /// No two entries may share bytes, and none may reach into the central directory or the end records.
  void check_layout(const EndRecords& end) const {
    std::vector<Extent> extents;
    extents.reserve(entries_.size());
    for (std::size_t i = 0; i < entries_.size(); ++i)
      extents.push_back({entries_[i].local_header_offset, entries_[i].data_offset + entries_[i].compressed_size, i});
    // Entries usually come in file order; strictly increasing offsets sort to themselves.
    const auto not_increasing = [](const Extent& a, const Extent& b) { return a.begin >= b.begin; };
    if (std::adjacent_find(extents.begin(), extents.end(), not_increasing) != extents.end())
      std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });

    const auto describe = [](const Extent& x) {
      return "(bytes " + std::to_string(x.begin) + " to " + std::to_string(x.end) + ")";
    };
    const std::uint64_t directory_end = end.directory_offset + end.directory_size;
    for (std::size_t i = 0; i < extents.size(); ++i) {
      const Extent& x = extents[i];
      const std::string_view name = entries_[x.index].name;
      if (i > 0 && x.begin < extents[i - 1].end)
        fail("the entry " + describe(x) + " overlaps the entry '" +
                 zip_impl::printable(entries_[extents[i - 1].index].name) + "' " + describe(extents[i - 1]),
             x.begin, name);
      if (x.begin < directory_end && end.directory_offset < x.end)
        fail("the entry " + describe(x) + " overlaps the central directory (bytes " +
                 std::to_string(end.directory_offset) + " to " + std::to_string(directory_end) + ")",
             x.begin, name);
      if (x.end > end.start)
        fail("the entry " + describe(x) + " overlaps the end records at byte " + std::to_string(end.start), x.begin,
             name);
    }
  }

  ReadAt read_at_;
  EndRecords end_;                  // the end records (open_file_index(): for read_local_headers()' layout check)
  std::size_t header_threads_ = 1;  // open_file_index(): for read_local_headers()
  std::span<const std::byte> archive_;
  std::uint64_t size_ = 0;  // archive bytes; archive_ holds them all unless the archive is read through read_at_
  std::filesystem::path file_;
  std::vector<ZipEntry> entries_;
  std::shared_ptr<const char[]> names_;  // the entries' names (shared by copies, which keep the same views)
  std::vector<std::size_t> by_name_;     // entry indices sorted by name
  std::string prefix_;
};

}  // namespace tensorfile::detail
