// SPDX-License-Identifier: MIT
/// @file
/// The safetensors header: what a file holds (names, dtypes, shapes, data offsets, __metadata__), read
/// and fully validated without touching the tensor data. The loader, and any tool that only lists a
/// file (or an index of shards), start here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/shape.hpp"

namespace tensorfile {

/// The largest header the reference implementation reads (100,000,000 bytes).
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

/// One tensor as the header describes it.
struct SafetensorsTensorInfo {
  std::string name;                ///< its key in the header
  DType dtype = DType::UInt8;      ///< element type
  Shape shape{};                   ///< extents (C order, little-endian elements)
  std::uint64_t begin = 0;         ///< data_offsets[0]: first byte, counted from the start of the data section
  std::uint64_t end = 0;           ///< data_offsets[1]: one past the last byte
  std::uint64_t entry_offset = 0;  ///< where its entry starts in the file (for messages)
};

/// A parsed and validated header: the tensors tile the data section exactly and it ends where the file does.
struct SafetensorsHeader {
  std::uint64_t header_bytes = 0;              ///< N, the JSON text's length (padding included)
  std::uint64_t data_offset = 0;               ///< 8 + N: where the data section starts in the file
  std::uint64_t data_bytes = 0;                ///< length of the data section
  std::vector<SafetensorsTensorInfo> tensors;  ///< in the order of the header text
  /// The `__metadata__` string map in the order of the header text; nullopt when the header has none.
  std::optional<std::vector<std::pair<std::string, std::string>>> metadata;
};

/// Parses and validates the header of a safetensors file of `file_size` bytes whose first bytes are
/// `head` (at least the 8-byte length and the header it announces; more is ignored). `file` names the
/// input in messages. Checks everything the reference's reader checks (header length limit, UTF-8,
/// JSON, dtype names, shape x element size = data_offsets, offsets tiling the data section in order
/// with no hole or overlap, the data section ending at the file's end) and more: checked arithmetic,
/// no duplicate names or keys, metadata values strings, names free of NUL and lone surrogates.
/// Throws FormatError naming the file, the tensor and the byte offset; UnsupportedError for the
/// sub-byte dtypes (F4, F6_E2M3, F6_E3M2); LimitError for JSON nested beyond 512 levels.
[[nodiscard]] TENSORFILE_ENTRY SafetensorsHeader parse_safetensors_header(
    std::span<const std::byte> head, std::uint64_t file_size, const std::filesystem::path& file = {},
    std::uint64_t max_header_bytes = safetensors_max_header_bytes);

/// Reads and validates only the header of the safetensors file at `path` (two reads: the length, then
/// the header; never the data). Throws as parse_safetensors_header, and IoError when the file cannot be read.
[[nodiscard]] TENSORFILE_ENTRY SafetensorsHeader read_safetensors_header(
    const std::filesystem::path& path, std::uint64_t max_header_bytes = safetensors_max_header_bytes);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_safetensors_header)
#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/safetensors/detail/header_parser.hpp"

namespace tensorfile {

TENSORFILE_ENTRY SafetensorsHeader parse_safetensors_header(std::span<const std::byte> head, std::uint64_t file_size,
                                                            const std::filesystem::path& file,
                                                            std::uint64_t max_header_bytes) {
  const std::uint64_t n = detail::safetensors_header_length(head, file_size, file, max_header_bytes);
  if (head.size() - 8 < n) {
    throw ArgumentError("parse_safetensors_header needs the first " + std::to_string(8 + n) + " bytes; got " +
                            std::to_string(head.size()),
                        {.file = file});
  }
  SafetensorsHeader header;
  header.header_bytes = n;
  header.data_offset = 8 + n;
  detail::SafetensorsHeaderParser parser(head.first(static_cast<std::size_t>(8 + n)), file);
  parser.parse(
      [&](detail::SafetensorsEntry&& entry) {
        header.tensors.push_back(
            {std::move(entry.name), entry.dtype, std::move(entry.shape), entry.begin, entry.end, entry.at});
      },
      [&](std::vector<std::pair<std::string, std::string>>&& metadata) { header.metadata = std::move(metadata); });
  header.data_bytes = detail::check_safetensors_tiling(header.tensors, n, file_size, file);
  return header;
}

TENSORFILE_ENTRY SafetensorsHeader read_safetensors_header(const std::filesystem::path& path,
                                                           std::uint64_t max_header_bytes) {
  const auto file = detail::FileHandle::open(path, detail::OpenMode::read);
  try {
    const std::uint64_t size = file.size();
    const std::vector<std::byte> head = detail::read_safetensors_head(file, size, max_header_bytes);
    return parse_safetensors_header(head, size, path, max_header_bytes);
  } catch (const FormatError&) {
    detail::rethrow_naming_format(file, path, FileFormat::safetensors, "an 8-byte header length and a JSON header");
  }
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_safetensors_header)
