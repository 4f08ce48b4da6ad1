// SPDX-License-Identifier: MIT
/// @file
/// The records of a torch zip file as a listing (names, offsets, sizes, CRC-32), and its version and byteorder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "tensorfile/config.hpp"

namespace tensorfile {

/// How a record's bytes are kept in the archive.
enum class Compression {
  stored,    ///< as they are (torch.save writes every record so, aligned to 64 bytes)
  deflated,  ///< DEFLATE (archives repacked by zip tools)
};

/// One record (zip entry) of a torch zip file, as its central directory describes it.
struct ArchiveRecord {
  std::string name{};                             ///< full name, archive prefix included ("archive/data/0")
  std::uint64_t offset = 0;                       ///< file offset of the record's stored bytes (after its local header)
  std::uint64_t stored_size = 0;                  ///< bytes the record takes in the file
  std::uint64_t size = 0;                         ///< bytes once decompressed (stored_size when stored)
  Compression compression = Compression::stored;  ///< stored or deflated
  std::uint32_t crc32 = 0;                        ///< CRC-32 the archive records (0 when the writer skipped it)
};

/// What the small records of a torch zip file say about it, with its listing.
struct ArchiveInfo {
  std::string prefix{};                  ///< the archive folder every record sits in ("archive")
  int version = 0;                       ///< the format version record, 1 to 10
  bool big_endian = false;               ///< whether the byteorder record says "big" (absent: little-endian)
  std::vector<ArchiveRecord> records{};  ///< every record in central-directory order
};

/// Lists the records of a torch zip file held in memory (borrowed for the call only). Reads the zip
/// index, no record data. Throws FormatError for a malformed archive, UnsupportedError for encryption,
/// multi-disk archives and compression other than stored and deflate.
[[nodiscard]] TENSORFILE_ENTRY std::vector<ArchiveRecord> list_records(std::span<const std::byte> archive);

/// Lists the records of the torch zip file at `path` (its index read with pread). Throws as above, and IoError
/// when the file cannot be read.
[[nodiscard]] TENSORFILE_ENTRY std::vector<ArchiveRecord> list_records(const std::filesystem::path& path);

/// The prefix, version, byte order and records of a torch zip file in memory. Reads the index and the
/// version and byteorder records only. Throws like list_records, and FormatError for a missing or
/// unsupported version or a bad byteorder (as load_torch() does).
[[nodiscard]] TENSORFILE_ENTRY ArchiveInfo read_archive_info(std::span<const std::byte> archive);

/// The prefix, version, byte order and records of the torch zip file at `path`; throws as above.
[[nodiscard]] TENSORFILE_ENTRY ArchiveInfo read_archive_info(const std::filesystem::path& path);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/zip/reader.hpp"

namespace tensorfile {

namespace detail {

/// The version and byteorder records of a torch zip file, checked as load_torch() checks them.
struct TorchZipHeader {
  int version = 0;
  bool big_endian = false;
};

/// Reads the `version` (or `.data/version`) and `byteorder` records. Throws FormatError when the version
/// record is missing or not 1 to 10, a byteorder is neither "little" nor "big", or either is over 64 bytes.
[[nodiscard]] inline TorchZipHeader read_torch_zip_header(const ZipReader& zip, const std::filesystem::path& path) {
  const auto record_text = [&](const ZipEntry& entry) {
    if (entry.size > 64) throw FormatError("record is longer than 64 bytes", {path, std::string(entry.name), 0});
    const std::vector<std::byte> raw = zip.read(entry);
    std::string text(reinterpret_cast<const char*>(raw.data()), raw.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
    return text;
  };
  TorchZipHeader header;
  const ZipEntry* version = zip.find(".data/version");
  if (version == nullptr) version = zip.find("version");
  if (version == nullptr) {
    throw FormatError("the archive has no version record", {path, std::string(zip.prefix()) + "/version"});
  }
  const std::string version_text = record_text(*version);
  if (version_text.empty() || version_text.size() > 2 ||
      version_text.find_first_not_of("0123456789") != std::string::npos || std::stoi(version_text) < 1 ||
      std::stoi(version_text) > 10) {
    throw FormatError("unsupported file format version \"" + version_text + "\"; expected 1 to 10",
                      {path, std::string(version->name), 0});
  }
  header.version = std::stoi(version_text);
  if (const ZipEntry* order = zip.find("byteorder")) {
    const std::string text = record_text(*order);
    if (text != "little" && text != "big") {
      throw FormatError("byteorder is \"" + text + "\"; expected \"little\" or \"big\"",
                        {path, std::string(order->name), 0});
    }
    header.big_endian = text == "big";
  }
  return header;
}

/// The listing of an opened archive.
[[nodiscard]] inline std::vector<ArchiveRecord> archive_records(const ZipReader& zip) {
  std::vector<ArchiveRecord> records;
  records.reserve(zip.entries().size());
  for (const ZipEntry& entry : zip.entries()) {
    records.push_back({.name = std::string(entry.name),
                       .offset = entry.data_offset,
                       .stored_size = entry.compressed_size,
                       .size = entry.size,
                       .compression = entry.method == 0 ? Compression::stored : Compression::deflated,
                       .crc32 = entry.crc32});
  }
  return records;
}

/// The facts of an opened archive.
[[nodiscard]] inline ArchiveInfo archive_info(const ZipReader& zip, const std::filesystem::path& path) {
  const TorchZipHeader header = read_torch_zip_header(zip, path);
  return {.prefix = std::string(zip.prefix()),
          .version = header.version,
          .big_endian = header.big_endian,
          .records = archive_records(zip)};
}

/// The zip index of the open file `file`, read with pread (nothing mapped, so a file truncated meanwhile is an
/// error, never SIGBUS); `file` must outlive the reader.
[[nodiscard]] inline ZipReader open_zip_file(const FileHandle& file) {
  return ZipReader::open_file(file.size(), file.path(), [&file](std::uint64_t offset, std::span<std::byte> out) {
    file.read_exact(offset, out);
  });
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_torch_archive)
namespace tensorfile {

TENSORFILE_ENTRY std::vector<ArchiveRecord> list_records(std::span<const std::byte> archive) {
  return detail::archive_records(detail::ZipReader::open(archive, {}));
}

TENSORFILE_ENTRY std::vector<ArchiveRecord> list_records(const std::filesystem::path& path) {
  const detail::FileHandle file = detail::FileHandle::open(path, detail::OpenMode::read);
  return detail::archive_records(detail::open_zip_file(file));
}

TENSORFILE_ENTRY ArchiveInfo read_archive_info(std::span<const std::byte> archive) {
  return detail::archive_info(detail::ZipReader::open(archive, {}), {});
}

TENSORFILE_ENTRY ArchiveInfo read_archive_info(const std::filesystem::path& path) {
  const detail::FileHandle file = detail::FileHandle::open(path, detail::OpenMode::read);
  return detail::archive_info(detail::open_zip_file(file), path);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_torch_archive)
