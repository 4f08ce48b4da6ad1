// SPDX-License-Identifier: MIT
// A zip writer that lays records out as torch's writer does: stored, 64-byte aligned data, data descriptors, zip64;
// and whole deflated records for .npz.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/zip/crc32.hpp"

namespace tensorfile::detail {

/// Writes a zip archive record by record to a ByteSink: entries STORED (or whole DEFLATE records), flags 0x0808 (sizes
/// in a data descriptor, UTF-8 names), an "FB" extra field padding each record's data to `alignment`, zip64 fields only
/// where sizes or offsets reach 4 GiB, and always the zip64 end records.
class ZipWriter {
 public:
  ZipWriter(ByteSink& sink, std::string prefix, std::uint64_t alignment)
      : sink_(sink), prefix_(std::move(prefix)), alignment_(alignment) {}

  /// Starts record `prefix/name` of exactly `size` bytes; write() its bytes, then end_record().
  void begin_record(std::string_view name, std::uint64_t size) { begin_record(name, size, size, 0); }

  /// A whole DEFLATE-compressed record (method 8): `compressed` inflates to `size` bytes whose CRC-32 is `crc`.
  void add_deflated(std::string_view name, std::uint64_t size, std::uint32_t crc,
                    std::span<const std::byte> compressed) {
    begin_record(name, size, compressed.size(), 8);
    left_ = 0;
    emit(compressed);
    end_record(crc);
  }

  /// Closes the current record with its data descriptor.
  void end_record() { end_record(crc_); }

  /// Closes the current record, whose bytes have the CRC-32 `crc` (computed elsewhere, e.g. on another thread).
  void end_record(std::uint32_t crc) {
    Entry& entry = entries_.back();
    if (left_ != 0) throw ArgumentError("record " + entry.name + " is shorter than announced");
    entry.crc = crc;
    std::vector<std::byte> descriptor;
    put32(descriptor, 0x08074b50);
    put32(descriptor, entry.crc);
    if (entry.big() || entry.offset >= 0xFFFFFFFFu) {
      put64(descriptor, entry.compressed_size);
      put64(descriptor, entry.size);
    } else {
      put32(descriptor, static_cast<std::uint32_t>(entry.compressed_size));
      put32(descriptor, static_cast<std::uint32_t>(entry.size));
    }
    emit(descriptor);
  }

  /// Appends the next bytes of the current record (at most what begin_record announced).
  void write(std::span<const std::byte> bytes) {
    if (bytes.size() > left_) throw ArgumentError("record " + entries_.back().name + " is longer than announced");
    crc_ = crc32(bytes, crc_);
    left_ -= bytes.size();
    emit(bytes);
  }

  /// Appends bytes whose CRC-32 the caller computes (see end_record(crc)) and which stay valid
  /// until flush() (see ByteSink::write_borrowed).
  void write_borrowed(std::span<const std::byte> bytes) {
    if (bytes.size() > left_) throw ArgumentError("record " + entries_.back().name + " is longer than announced");
    left_ -= bytes.size();
    sink_.write_borrowed(bytes);
    cursor_ += bytes.size();
  }

  /// Hands borrowed bytes to the sink before their owner lets them go.
  void flush() { sink_.flush(); }

  /// A whole small record at once.
  void add(std::string_view name, std::span<const std::byte> bytes) {
    begin_record(name, bytes.size());
    write(bytes);
    end_record();
  }
  void add(std::string_view name, std::string_view text) {
    add(name, std::as_bytes(std::span(text.data(), text.size())));
  }

  /// Writes the central directory and the end records.
  void finish() {
    const std::uint64_t directory_offset = cursor_;
    std::vector<std::byte> directory;
    for (const Entry& entry : entries_) {
      const bool big = entry.big();
      const bool far = entry.offset >= 0xFFFFFFFFu;
      put32(directory, 0x02014b50);
      put16(directory, 0);                           // made by
      put16(directory, entry.method == 8 ? 20 : 0);  // version needed
      put16(directory, 0x0808);
      put16(directory, entry.method);
      put32(directory, 0);
      put32(directory, entry.crc);
      put32(directory, big ? 0xFFFFFFFFu : static_cast<std::uint32_t>(entry.compressed_size));
      put32(directory, big ? 0xFFFFFFFFu : static_cast<std::uint32_t>(entry.size));
      put16(directory, static_cast<std::uint32_t>(entry.name.size()));
      put16(directory, (big || far) ? 4u + (big ? 16u : 0u) + (far ? 8u : 0u) : 0u);
      put16(directory, 0);  // comment
      put16(directory, 0);  // disk
      put16(directory, 0);  // internal attributes
      put32(directory, 0);  // external attributes
      put32(directory, far ? 0xFFFFFFFFu : static_cast<std::uint32_t>(entry.offset));
      for (char c : entry.name) directory.push_back(static_cast<std::byte>(c));
      if (big || far) {
        put16(directory, 0x0001);
        put16(directory, (big ? 16u : 0u) + (far ? 8u : 0u));
        if (big) {
          put64(directory, entry.size);
          put64(directory, entry.compressed_size);
        }
        if (far) put64(directory, entry.offset);
      }
    }
    emit(directory);
    const std::uint64_t directory_size = directory.size();
    const std::uint64_t zip64_end = cursor_;
    const std::uint64_t count = entries_.size();
    std::vector<std::byte> end;
    put32(end, 0x06064b50);
    put64(end, 44);
    put16(end, 0x031E);
    put16(end, 45);
    put32(end, 0);
    put32(end, 0);
    put64(end, count);
    put64(end, count);
    put64(end, directory_size);
    put64(end, directory_offset);
    put32(end, 0x07064b50);  // zip64 locator
    put32(end, 0);
    put64(end, zip64_end);
    put32(end, 1);
    put32(end, 0x06054b50);  // classic end record
    put16(end, 0);
    put16(end, 0);
    put16(end, count >= 0xFFFF ? 0xFFFFu : static_cast<std::uint32_t>(count));
    put16(end, count >= 0xFFFF ? 0xFFFFu : static_cast<std::uint32_t>(count));
    put32(end, directory_size >= 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(directory_size));
    put32(end, directory_offset >= 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(directory_offset));
    put16(end, 0);
    emit(end);
  }

  /// Bytes written so far.
  [[nodiscard]] std::uint64_t size() const noexcept { return cursor_; }

 private:
  // Writes the local header of record `prefix/name` (`method` 0 or 8) and makes it the current record.
  void begin_record(std::string_view name, std::uint64_t size, std::uint64_t compressed_size, std::uint16_t method) {
    Entry entry;
    entry.name = prefix_;  // an empty prefix (.npz) puts records at the top level
    if (!prefix_.empty()) entry.name += '/';
    entry.name += name;
    entry.size = size;
    entry.compressed_size = compressed_size;
    entry.method = method;
    entry.offset = cursor_;
    const bool big = entry.big();
    const bool far = cursor_ >= 0xFFFFFFFFu;
    std::uint64_t start = cursor_ + 30 + entry.name.size() + 4;
    if (big || far) start += 4u + (big ? 16u : 0u) + (far ? 8u : 0u);
    const auto pad = static_cast<std::uint16_t>((alignment_ - start % alignment_) % alignment_);

    std::vector<std::byte> header;
    put32(header, 0x04034b50);
    put16(header, method == 8 ? 20 : 0);  // version needed: 2.0 for deflate; stored as torch writes it
    put16(header, 0x0808);                // data descriptor + UTF-8 name
    put16(header, method);
    put32(header, 0);  // time and date
    put32(header, 0);  // CRC: in the descriptor
    put32(header, big ? 0xFFFFFFFFu : 0);
    put32(header, big ? 0xFFFFFFFFu : 0);
    put16(header, static_cast<std::uint32_t>(entry.name.size()));
    const std::uint32_t zip64_extra = (big || far) ? 4u + (big ? 16u : 0u) + (far ? 8u : 0u) : 0u;
    put16(header, zip64_extra + 4u + pad);
    for (char c : entry.name) header.push_back(static_cast<std::byte>(c));
    if (big || far) {
      put16(header, 0x0001);
      put16(header, zip64_extra - 4);
      if (big) {
        put64(header, size);
        put64(header, 0);
      }
      if (far) put64(header, cursor_);
    }
    put16(header, 0x4246);  // "FB"
    put16(header, pad);
    header.insert(header.end(), pad, std::byte{'Z'});
    emit(header);
    entry.data_offset = cursor_;
    entries_.push_back(std::move(entry));
    crc_ = 0;
    left_ = size;
  }

  struct Entry {
    std::string name;
    std::uint64_t size = 0;             // uncompressed
    std::uint64_t compressed_size = 0;  // as written (size when stored)
    std::uint16_t method = 0;           // 0 stored, 8 deflate
    std::uint64_t offset = 0;
    std::uint64_t data_offset = 0;
    std::uint32_t crc = 0;
    [[nodiscard]] bool big() const noexcept { return size >= 0xFFFFFFFFu || compressed_size >= 0xFFFFFFFFu; }
  };

  static void put16(std::vector<std::byte>& out, std::uint32_t v) {
    out.push_back(static_cast<std::byte>(v & 0xFF));
    out.push_back(static_cast<std::byte>((v >> 8) & 0xFF));
  }
  static void put32(std::vector<std::byte>& out, std::uint32_t v) {
    put16(out, v & 0xFFFF);
    put16(out, v >> 16);
  }
  static void put64(std::vector<std::byte>& out, std::uint64_t v) {
    put32(out, static_cast<std::uint32_t>(v));
    put32(out, static_cast<std::uint32_t>(v >> 32));
  }
  void emit(std::span<const std::byte> bytes) {
    sink_.write(bytes);
    cursor_ += bytes.size();
  }

  ByteSink& sink_;
  std::string prefix_;
  std::uint64_t alignment_;
  std::uint64_t cursor_ = 0;
  std::vector<Entry> entries_;
  std::uint32_t crc_ = 0;
  std::uint64_t left_ = 0;
};

}  // namespace tensorfile::detail
