// SPDX-License-Identifier: MIT
/// @file
/// Which file format a path or a byte sequence holds, told from the file system and the first bytes only.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string_view>
#include <system_error>

#include "tensorfile/config.hpp"

namespace tensorfile {

/// A file format tensorfile knows; new formats are appended, never reordered.
enum class FileFormat {
  unknown,       ///< none of the formats below (or a path that cannot be read)
  torch_zip,     ///< torch.save since 1.6: a zip archive of data.pkl and data/N records
  torch_legacy,  ///< torch.save with `_use_new_zipfile_serialization=False`: pickles, then raw storages
  tensordict,    ///< a directory: a tensordict memmap tree (load_memmap checks its meta.json)
  safetensors,   ///< a .safetensors file: an 8-byte little-endian header length, then a JSON object
  npy,           ///< a NumPy .npy file: "\x93NUMPY", a version, a header dict, then the array's bytes
  npz,           ///< a NumPy .npz file: a zip archive of .npy members (np.savez, np.savez_compressed)
  gguf,          ///< a GGUF file (llama.cpp, ggml): the magic "GGUF", metadata, tensor infos, an aligned data section
};

/// The format's name as the `tensorfile` program prints it: "torch-zip", "torch-legacy", "tensordict",
/// "safetensors", "npy", "npz", "gguf", "unknown".
[[nodiscard]] constexpr std::string_view format_name(FileFormat format) noexcept {
  switch (format) {
    case FileFormat::torch_zip: return "torch-zip";
    case FileFormat::torch_legacy: return "torch-legacy";
    case FileFormat::tensordict: return "tensordict";
    case FileFormat::safetensors: return "safetensors";
    case FileFormat::npy: return "npy";
    case FileFormat::npz: return "npz";
    case FileFormat::gguf: return "gguf";
    case FileFormat::unknown: break;
  }
  return "unknown";
}

/// How many leading bytes detect_format needs at most (the tar magic of the pre-2017 torch format sits at 257).
inline constexpr std::size_t format_sniff_bytes = 512;

/// The format of a file's bytes, from its magic: a zip whose first member's name ends in ".npy" is npz (as
/// is an empty zip: torch never writes one), any other zip local header torch_zip; "\x93NUMPY" is npy; "GGUF" is
/// gguf (no other format opens with those bytes: a safetensors length that low needs '{' at byte 8); a
/// little-endian
/// header length of at most 100,000,000 followed by `{` is safetensors (checked before the pickle
/// openings, which the length's low byte may look like); a pickle start (PROTO, or the `(` and long-int
/// openings of protocol 0 and 1) torch_legacy; the loader checks the rest. Bytes past the first
/// format_sniff_bytes are not looked at. Never throws.
[[nodiscard]] inline FileFormat detect_format(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x05\x06", 4) == 0) return FileFormat::npz;
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) {
    // The local header's name: its length at byte 26, the name from byte 30 (torch's first is <prefix>/data.pkl).
    if (bytes.size() >= 30) {
      const std::size_t length = std::to_integer<std::size_t>(bytes[26]) | std::to_integer<std::size_t>(bytes[27]) << 8;
      const std::string_view suffix = ".npy";
      if (length >= suffix.size() && bytes.size() >= 30 + length &&
          std::memcmp(bytes.data() + 30 + length - suffix.size(), suffix.data(), suffix.size()) == 0) {
        return FileFormat::npz;
      }
    }
    return FileFormat::torch_zip;
  }
  if (bytes.size() >= 6 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0) return FileFormat::npy;
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return FileFormat::gguf;
  if (bytes.size() >= 9 && bytes[8] == std::byte{'{'}) {
    // A pickle's second to eighth bytes are opcodes and arguments, never the zeros a length this small needs.
    std::uint64_t length = 0;
    for (std::size_t i = 8; i-- > 0;) length = (length << 8) | std::to_integer<std::uint64_t>(bytes[i]);
    if (length >= 2 && length <= 100'000'000) return FileFormat::safetensors;
  }
  if (!bytes.empty() && (bytes[0] == std::byte{0x80} || bytes[0] == std::byte{'('} || bytes[0] == std::byte{0x8a})) {
    return FileFormat::torch_legacy;
  }
  return FileFormat::unknown;
}

/// The format of what `path` names: a directory is a tensordict tree, a regular file is told by its first
/// bytes, never by its name. A missing or unreadable path, or one that is neither (a FIFO, a device), is
/// `unknown` (loading it then says why); a FIFO is not waited on. Never throws.
[[nodiscard]] inline FileFormat detect_format(const std::filesystem::path& path) noexcept {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return FileFormat::tensordict;
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return FileFormat::unknown;
  std::array<std::byte, format_sniff_bytes> head{};
  std::size_t got = 0;
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
    while (got < head.size()) {
      const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  return detect_format(std::span<const std::byte>(head.data(), got));
}

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers of the loaders' bodies (no entries)
#include <algorithm>
#include <string>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"

namespace tensorfile {

namespace detail {

/// Called while a FormatError of reading `path` as `expected` is in flight: when the file's first bytes are another
/// format tensorfile reads (a torch file's make no sense as a safetensors header length, a .npy has no zip
/// directory), throws an error naming that format and its loader instead; otherwise rethrows. `expected_layout` says
/// what the loader looked for ("the .npy magic").
[[noreturn]] inline void rethrow_naming_format(const FileHandle& file, const std::filesystem::path& path,
                                               FileFormat expected, std::string_view expected_layout) {
  std::array<std::byte, format_sniff_bytes> head{};
  FileFormat found = FileFormat::unknown;
  try {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), head.size()));
    file.read_exact(0, std::span(head).first(n));
    found = detect_format(std::span<const std::byte>(head).first(n));
  } catch (const Error&) {  // unreadable: the first error stands
  }
  static constexpr std::array<std::string_view, 8> loaders{
      "",           "load_torch()", "load_torch()", "load_memmap()", "load_safetensors()",
      "load_npy()", "load_npz()",   "load_gguf()"};
  const auto index = static_cast<std::size_t>(found);
  if (found != FileFormat::unknown && found != expected && index < loaders.size()) {
    const std::string name(format_name(found));
    throw FormatError("the file is " + name + " data, not " + std::string(format_name(expected)) + "; expected " +
                          std::string(expected_layout) + ", got " + name + " (read it with " +
                          std::string(loaders[index]) + ")",
                      {.file = path, .offset = 0});
  }
  throw;
}

}  // namespace detail

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS
