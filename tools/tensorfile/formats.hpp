// SPDX-License-Identifier: MIT
// What a PATH holds (torch zip, torch legacy, tensordict tree), detected from its bytes, and a few shared helpers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <tensorfile/formats/torch/options.hpp>

namespace tensorfile::cli {

/// What a path holds, detected from the file system and the first bytes, never from the name.
enum class InputFormat {
  torch_zip,     ///< torch.save since 1.6
  torch_legacy,  ///< torch.save with _use_new_zipfile_serialization=False
  tensordict,    ///< a directory (a tensordict memmap tree)
  other,         ///< anything else: the loader reports what it is
};

/// Detects the format of `path`; `other` for missing files and unknown bytes (load() then says why).
[[nodiscard]] InputFormat detect_format(const std::filesystem::path& path);

/// "torch-zip", "torch-legacy", "tensordict" (inspect --json's "format"), or "unknown".
[[nodiscard]] std::string_view format_name(InputFormat format) noexcept;

/// What the records of a zip torch file say about the file itself.
struct ZipFacts {
  std::string prefix;       ///< archive folder name
  std::string version;      ///< the version record ("3"), empty when absent
  std::string byteorder;    ///< the byteorder record, empty when absent (little-endian then)
  std::size_t records = 0;  ///< number of zip entries
};

/// Reads the small records of a zip torch file (no tensor data). Throws tensorfile::Error.
[[nodiscard]] ZipFacts read_zip_facts(const std::filesystem::path& path);

/// A map_location from the command line: "cpu", "cuda:1", "meta", or tag remaps "cuda:1=cuda:0,cuda:2=cpu".
/// Throws UsageError on a malformed one.
[[nodiscard]] MapLocation parse_map_location(std::string_view text);

/// "512 B", "1.5 KiB", "12.0 MiB", "3.21 GiB".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

}  // namespace tensorfile::cli
