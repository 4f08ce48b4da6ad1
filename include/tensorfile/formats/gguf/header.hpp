// SPDX-License-Identifier: MIT
/// @file
/// The GGUF header (llama.cpp's and ggml's format): version, metadata, tensor infos and where the data section
/// starts, read by small ranged reads and fully validated without touching the tensor data.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/shape.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"

namespace tensorfile {

/// The magic of every GGUF file: the bytes "GGUF" (0x46554747 read as a little-endian u32).
inline constexpr std::uint32_t gguf_magic = 0x46554747;

/// The alignment of the data section and of each tensor's offset when `general.alignment` is absent.
inline constexpr std::uint64_t gguf_default_alignment = 32;

/// The type of a metadata value as the file stores it (ggml's `enum gguf_type`).
enum class GgufValueType : std::uint32_t {
  u8 = 0,       ///< uint8
  i8 = 1,       ///< int8
  u16 = 2,      ///< uint16
  i16 = 3,      ///< int16
  u32 = 4,      ///< uint32
  i32 = 5,      ///< int32
  f32 = 6,      ///< float32
  boolean = 7,  ///< one byte, nonzero is true (as ggml reads it)
  string = 8,   ///< u64 length, then that many bytes (UTF-8 by the spec; not checked)
  array = 9,    ///< u32 element type, u64 count, then the elements (arrays of arrays included)
  u64 = 10,     ///< uint64
  i64 = 11,     ///< int64
  f64 = 12,     ///< float64
};

/// How GGUF's value types come into the Value tree: every integer an int (a u64 above INT64_MAX a big int),
/// f32 and f64 a float, bool a bool, string a str, array a list. The file's exact types are kept beside the tree
/// in GgufHeader::keys.
struct GgufKeyInfo {
  std::string key;                                 ///< the metadata key
  GgufValueType type = GgufValueType::u8;          ///< the value's type
  GgufValueType element_type = GgufValueType::u8;  ///< for an array: its elements' declared type (else u8)
  std::uint64_t offset = 0;                        ///< where the key's entry starts in the file
};

/// One tensor as its tensor info describes it.
struct GgufTensorInfo {
  std::string name;               ///< its name
  Shape dims{};                   ///< ggml's ne[0..n_dims), up to 4: ne[0] is the fastest-varying dimension
  GgmlType type = GgmlType::F32;  ///< element or block type
  std::uint64_t offset = 0;       ///< first byte, counted from the start of the data section
  std::uint64_t bytes = 0;        ///< bytes it takes: elements / block size * bytes per block
  std::uint64_t info_offset = 0;  ///< where its tensor info starts in the file (for messages)

  /// The extents in torch (C, row-major) order, as every other tensorfile format gives them: dims reversed,
  /// so the last extent is ggml's ne[0], the one contiguous in memory.
  [[nodiscard]] Shape shape() const {
    Shape out(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) out[dims.size() - 1 - i] = dims[i];
    return out;
  }
  /// The number of elements (1 for no dims, 0 when a dim is 0).
  [[nodiscard]] std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (const std::int64_t d : dims) n *= d;  // bounded by the parser's checks
    return n;
  }
};

/// A parsed and validated GGUF header.
struct GgufHeader {
  std::uint32_t version = 3;                         ///< 2 or 3 (the same layout; v1 is refused)
  std::uint64_t alignment = gguf_default_alignment;  ///< `general.alignment`, or 32
  Value metadata{Dict{}};                            ///< every key-value pair, in file order, as a dict
  std::vector<GgufKeyInfo> keys;                     ///< each key's stored types, in file order
  std::vector<GgufTensorInfo> tensors;               ///< in the order of the tensor infos
  std::uint64_t data_offset = 0;                     ///< absolute: the end of the tensor infos, aligned up
  std::uint64_t file_size = 0;                       ///< the size of the file the header was checked against
};

/// Bounds on what a GGUF header may make the reader build, beyond the file's own size.
struct GgufLimits {
  std::size_t max_depth = 8;                                ///< most nesting of arrays (an array of arrays is 2)
  std::uint64_t max_string_bytes = std::uint64_t{1} << 30;  ///< longest string (ggml's own limit)
  std::uint64_t max_values = std::uint64_t{1} << 24;        ///< most metadata values in all, array elements counted
};

/// A borrowed callable `read(offset, out)` that fills all of `out` with the bytes at `offset` of the file, or
/// throws; the header parser asks only for bytes below the file size it was given. Made from any such callable
/// (a lambda), which must outlive the call it is passed to.
class GgufRangeRead {
 public:
  /// Borrows `read`.
  template <class Read>
  requires(!std::same_as<std::remove_cvref_t<Read>, GgufRangeRead> &&
           std::invocable<std::remove_reference_t<Read>&, std::uint64_t, std::span<std::byte>>)
      GgufRangeRead(Read&& read)
  noexcept  // NOLINT(google-explicit-constructor): a lambda converts in place
      : context_(const_cast<void*>(static_cast<const void*>(std::addressof(read)))),
        call_(&invoke<std::remove_reference_t<Read>>) {}

  /// Fills `out` with the bytes at `offset`.
  void operator()(std::uint64_t offset, std::span<std::byte> out) const { call_(context_, offset, out); }

 private:
  template <class Read>
  static void invoke(void* context, std::uint64_t offset, std::span<std::byte> out) {
    (*static_cast<Read*>(context))(offset, out);
  }
  void* context_;
  void (*call_)(void*, std::uint64_t, std::span<std::byte>);
};

/// Parses and validates the header of a GGUF file of `file_size` bytes, reading it through `read` in windows of
/// at most 64 KiB (a long string in one read of its length), so at most 64 KiB past the header's end. `file` names the
/// input in messages. Checks the magic, the version (2 or 3), every count and length against the bytes left before
/// anything is allocated for it, value and ggml types, array nesting, `general.alignment` (a u32 power of two),
/// the tensor infos (at most 4 dims, ne[0] a multiple of the block size, sizes that fit in 64 bits, unique names)
/// and the data section (each tensor's offset aligned, its bytes inside the file, no two overlapping). Throws
/// FormatError naming the file, the key or tensor, and the byte offset; UnsupportedError for version 1, a newer
/// version, a big-endian file and ggml types since removed; LimitError past `limits`.
[[nodiscard]] TENSORFILE_ENTRY GgufHeader parse_gguf_header(GgufRangeRead read, std::uint64_t file_size,
                                                            const std::filesystem::path& file = {},
                                                            const GgufLimits& limits = {});

/// parse_gguf_header over the whole file in memory (`bytes`).
[[nodiscard]] TENSORFILE_ENTRY GgufHeader parse_gguf_header(std::span<const std::byte> bytes,
                                                            const std::filesystem::path& file = {},
                                                            const GgufLimits& limits = {});

/// Reads and validates only the header of the GGUF file at `path` (pread in windows of 64 KiB, as parse_gguf_header).
/// Throws as parse_gguf_header, and IoError when the file cannot be read.
[[nodiscard]] TENSORFILE_ENTRY GgufHeader read_gguf_header(const std::filesystem::path& path,
                                                           const GgufLimits& limits = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS
#include <cstring>

#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/gguf/detail/header_parser.hpp"

namespace tensorfile {

TENSORFILE_ENTRY GgufHeader parse_gguf_header(GgufRangeRead read, std::uint64_t file_size,
                                              const std::filesystem::path& file, const GgufLimits& limits) {
  return detail::GgufHeaderParser(read, file_size, file, limits).parse();
}

TENSORFILE_ENTRY GgufHeader parse_gguf_header(std::span<const std::byte> bytes, const std::filesystem::path& file,
                                              const GgufLimits& limits) {
  const auto copy = [bytes](std::uint64_t offset, std::span<std::byte> out) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data() + offset, out.size());  // below bytes.size()
  };
  return parse_gguf_header(copy, bytes.size(), file, limits);
}

TENSORFILE_ENTRY GgufHeader read_gguf_header(const std::filesystem::path& path, const GgufLimits& limits) {
  const auto handle = detail::FileHandle::open(path, detail::OpenMode::read);
  const auto read = [&handle](std::uint64_t offset, std::span<std::byte> out) { handle.read_exact(offset, out); };
  return parse_gguf_header(read, handle.size(), path, limits);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS
