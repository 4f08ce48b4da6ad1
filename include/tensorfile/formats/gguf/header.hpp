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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/shape.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"
#include "tensorfile/formats/options.hpp"

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
  /// The value's whole type as save_gguf takes it back: "uint32", "array[string]", "array[array[uint8]]"; an
  /// array of arrays whose inner arrays' types differ (or that holds none) is "array[array]".
  std::string type_name;
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
  /// The extents of the tensor as tensorfile loads it: shape() for a plain type; for a block type the shape of its
  /// raw bytes, shape() with the last extent (ne[0], whole blocks) made the bytes of one row.
  [[nodiscard]] Shape storage_shape() const {
    Shape out = shape();
    const GgmlTypeInfo& info = ggml_type_info(type);
    if (info.is_quantized() && !out.empty()) out.back() = out.back() / info.block_size * info.block_bytes;
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

/// Bounds on what a GGUF header may make the reader build, beyond the file's own size: LoadOptions::Gguf, the one
/// vocabulary (a load passes its `.gguf` to the parser).
using GgufLimits = LoadOptions::Gguf;

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

/// llama.cpp's split models (`gguf-split`): a model written as files `<prefix>-00001-of-0000N.gguf` ..., each a
/// whole GGUF file holding some of the tensors, the first one all the metadata; every part carries these keys.
inline constexpr std::string_view gguf_split_no_key = "split.no";        ///< uint16: the part's number, from 0
inline constexpr std::string_view gguf_split_count_key = "split.count";  ///< uint16: how many parts the model has
/// int32: how many tensors the whole model has (every part gives the same count).
inline constexpr std::string_view gguf_split_tensors_key = "split.tensors.count";

/// What a GGUF file's split.* keys say (all zero for a file that has none).
struct GgufSplit {
  std::uint32_t no = 0;       ///< split.no: the part's number, from 0 (its file name counts from 1)
  std::uint32_t count = 0;    ///< split.count: the parts of the model; 0 when the file has no split keys
  std::int64_t tensors = -1;  ///< split.tensors.count: the tensors of the whole model; -1 when absent
  /// Whether the file is one part of a model of several.
  [[nodiscard]] bool is_split() const noexcept { return count > 1; }
};

/// The split.* keys of a parsed header. Throws FormatError naming `file` and the key when one has another type than
/// llama.cpp writes (split.no and split.count uint16, split.tensors.count int32), a split.no not below split.count,
/// split.no without split.count, or a negative tensor count.
[[nodiscard]] TENSORFILE_ENTRY GgufSplit gguf_split_of(const GgufHeader& header,
                                                       const std::filesystem::path& file = {});

/// llama.cpp's name of part `no` (from 0) of `count`: `<prefix>-%05d-of-%05d.gguf` of no + 1 and count
/// ("model-00001-of-00003.gguf"). `prefix` may hold a directory.
[[nodiscard]] TENSORFILE_ENTRY std::string gguf_split_file_name(std::string_view prefix, std::uint32_t no,
                                                                std::uint32_t count);

/// A file name read as llama.cpp's split name.
struct GgufSplitName {
  std::string prefix;       ///< what comes before `-NNNNN-of-NNNNN.gguf` (with any directory)
  std::uint32_t no = 0;     ///< the part's number, from 0 (the name's first number less one)
  std::uint32_t count = 0;  ///< the name's second number
};

/// `name` (a path or a file name) read as `<prefix>-NNNNN-of-MMMMM.gguf` (five digits or more each, the first from 1
/// to the second); nullopt when it is not one.
[[nodiscard]] TENSORFILE_ENTRY std::optional<GgufSplitName> parse_gguf_split_name(std::string_view name);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <unordered_set>
#include <utility>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/posix/file.hpp"

// The parser: a cursor that reads the file in small windows, the metadata values into the Value tree, the tensor
// infos, and the checks of the data section. Every refusal names the file, the key or tensor, and the absolute byte
// offset of the field at fault.
namespace tensorfile::detail {

/// ggml's name for a value type, for messages ("uint32", "array").
[[nodiscard]] inline std::string gguf_value_type_name(std::uint32_t type) {
  static constexpr const char* names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                          "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return type < std::size(names) ? names[type] : "type " + std::to_string(type);
}

/// The fewest bytes one value of `type` takes in the file: what a count of them is checked against before
/// anything is reserved for it (a string is at least its length, an array its element type and count).
[[nodiscard]] constexpr std::uint64_t gguf_min_value_bytes(std::uint32_t type) noexcept {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::u16:
    case GgufValueType::i16: return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32: return 4;
    case GgufValueType::string:
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64: return 8;
    case GgufValueType::array: return 4 + 8;
  }
  return 0;  // not a value type
}

class GgufHeaderParser {
 public:
  GgufHeaderParser(GgufRangeRead read, std::uint64_t file_size, const std::filesystem::path& file,
                   const GgufLimits& limits)
      : read_(read), size_(file_size), file_(file), limits_(limits) {}

  GgufHeader parse() {
    GgufHeader header;
    header.file_size = size_;
    if (size_ < 4)
      fail("the file is too short for the GGUF magic; expected at least 4 bytes, got " + std::to_string(size_), 0);
    if (u32() != gguf_magic) fail("not a GGUF file; expected the magic \"GGUF\" first", 0);
    const std::uint64_t version_at = pos_;
    const std::uint32_t version = u32();
    if (version == 0) fail("GGUF version 0 is no version; expected 2 or 3", version_at);
    if ((version & 0xFFFFu) == 0) {
      // A small version read with the wrong byte order: a big-endian file (which only this check tells apart).
      unsupported("the version reads as " + std::to_string(version) + " (" +
                      std::to_string(__builtin_bswap32(version)) +
                      " byte-swapped): a big-endian GGUF file; only little-endian files are read",
                  version_at);
    }
    if (version == 1) {
      unsupported("GGUF version 1 (32-bit counts and lengths) is not read; expected version 2 or 3", version_at);
    }
    if (version > 3) {
      unsupported("GGUF version " + std::to_string(version) + " is newer than this reader; expected 2 or 3",
                  version_at);
    }
    header.version = version;

    const std::uint64_t tensors_at = pos_;
    const std::uint64_t n_tensors = u64("the tensor count");
    const std::uint64_t kv_at = pos_;
    const std::uint64_t n_kv = u64("the metadata key-value count");
    // Each key-value pair takes at least 13 bytes, each tensor info 24: counts the file cannot hold are refused
    // before anything is reserved for them.
    if (n_kv > left() / 13) {
      fail("the metadata count " + std::to_string(n_kv) + " runs past the end of the file; expected at most " +
               std::to_string(left() / 13) + " pairs in the " + std::to_string(left()) + " bytes left",
           kv_at);
    }
    if (n_tensors > left() / 24) {
      fail("the tensor count " + std::to_string(n_tensors) + " runs past the end of the file; expected at most " +
               std::to_string(left() / 24) + " tensor infos in the " + std::to_string(left()) + " bytes left",
           tensors_at);
    }

    // The limits, after the file-size checks (so that a count no file could hold reads as the corruption it is).
    if (n_kv > limits_.max_keys) {
      limit("the metadata count " + std::to_string(n_kv) + " is more than the limit of " +
                std::to_string(limits_.max_keys) + " pairs (LoadOptions::gguf.max_keys)",
            kv_at);
    }
    if (n_tensors > limits_.max_tensors) {
      limit("the tensor count " + std::to_string(n_tensors) + " is more than the limit of " +
                std::to_string(limits_.max_tensors) + " tensors (LoadOptions::gguf.max_tensors)",
            tensors_at);
    }

    Dict& metadata = header.metadata.as_dict();
    header.keys.reserve(static_cast<std::size_t>(n_kv));
    for (std::uint64_t i = 0; i < n_kv; ++i) read_pair(header, metadata, i);
    header.alignment = alignment(header);

    header.tensors.reserve(static_cast<std::size_t>(n_tensors));
    std::unordered_set<std::string, KeyedStringHash, std::equal_to<>> names;
    names.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensorInfo info = read_tensor_info(i);
      if (!names.insert(info.name).second) {
        fail("the tensor name is given twice; expected unique names", info.info_offset, info.name);
      }
      header.tensors.push_back(std::move(info));
    }

    const std::uint64_t end = pos_;
    const std::uint64_t padding = (header.alignment - end % header.alignment) % header.alignment;
    header.data_offset = end + padding;  // end < 2^64 - 2^32 (it is within the file), so no wrap
    if (header.data_offset > size_) {
      if (!header.tensors.empty()) {
        fail("the data section would start at byte " + std::to_string(header.data_offset) +
                 " (the tensor infos' end aligned to " + std::to_string(header.alignment) +
                 "), past the end of the file (" + std::to_string(size_) + " bytes)",
             end);
      }
      header.data_offset = size_;  // no tensors: ggml writes no padding after the header then
    }
    check_data_section(header);
    return header;
  }

 private:
  static constexpr std::size_t window_bytes = 64 * 1024;

  [[noreturn]] void fail(const std::string& reason, std::uint64_t at, const std::string& member = {}) const {
    throw FormatError(reason, {file_, member, at});
  }
  [[noreturn]] void unsupported(const std::string& reason, std::uint64_t at, const std::string& member = {}) const {
    throw UnsupportedError(reason, {file_, member, at});
  }
  [[noreturn]] void limit(const std::string& reason, std::uint64_t at, const std::string& member = {}) const {
    throw LimitError(reason, {file_, member, at});
  }

  [[nodiscard]] std::uint64_t left() const noexcept { return size_ - pos_; }

  // `n` (at most a window) bytes at the cursor, which moves past them; the file ending first is a FormatError
  // naming `what` at the first byte missing.
  const unsigned char* take(std::size_t n, const char* what) {
    if (n > left()) {
      fail(std::string("the file ends inside ") + what + "; expected " + std::to_string(n) + " bytes, got " +
               std::to_string(left()),
           size_, member_);
    }
    if (pos_ < window_start_ || pos_ + n > window_start_ + window_.size()) {
      const auto length = static_cast<std::size_t>(std::min<std::uint64_t>(window_bytes, left()));
      window_.resize(length);
      read_(pos_, window_);
      window_start_ = pos_;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(window_.data()) + (pos_ - window_start_);
    pos_ += n;
    return p;
  }
  // A little-endian scalar of type T at the cursor.
  template <class T>
  T scalar(const char* what) {
    using Bits =
        std::conditional_t<sizeof(T) == 1, std::uint8_t,
                           std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                              std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
    const unsigned char* p = take(sizeof(T), what);
    Bits raw = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) raw = static_cast<Bits>(raw | static_cast<Bits>(p[i]) << (8 * i));
    return std::bit_cast<T>(raw);
  }
  std::uint32_t u32(const char* what = "the header") { return scalar<std::uint32_t>(what); }
  std::uint64_t u64(const char* what) { return scalar<std::uint64_t>(what); }

  // A u64 length, then that many bytes.
  std::string string(const char* what) {
    const std::uint64_t at = pos_;
    const std::uint64_t length = u64(what);
    if (length > left()) {
      fail(std::string("the length of ") + what + " (" + std::to_string(length) +
               " bytes) runs past the end of the file; expected at most " + std::to_string(left()),
           at, member_);
    }
    if (length > limits_.max_string_bytes) {
      limit(std::string("the length of ") + what + " (" + std::to_string(length) +
                " bytes) is more than the limit of " + std::to_string(limits_.max_string_bytes) +
                " (LoadOptions::gguf.max_string_bytes)",
            at, member_);
    }
    std::string out(static_cast<std::size_t>(length), '\0');
    std::size_t done = 0;
    if (pos_ >= window_start_ && pos_ < window_start_ + window_.size()) {  // what the window already holds
      done = static_cast<std::size_t>(std::min<std::uint64_t>(length, window_start_ + window_.size() - pos_));
      if (done > 0) std::memcpy(out.data(), window_.data() + (pos_ - window_start_), done);
    }
    if (done < out.size()) {
      read_(pos_ + done, std::as_writable_bytes(std::span<char>(out.data() + done, out.size() - done)));
    }
    pos_ += length;
    return out;
  }

  void count_values(std::uint64_t n, std::uint64_t at) {
    if (n > limits_.max_values - values_) {
      limit("the metadata holds more than the limit of " + std::to_string(limits_.max_values) +
                " values (array elements counted; LoadOptions::gguf.max_values)",
            at, member_);
    }
    values_ += n;
  }

  void read_pair(GgufHeader& header, Dict& metadata, std::uint64_t index) {
    const std::uint64_t at = pos_;
    member_ = "metadata key " + std::to_string(index);
    std::string key = string("a metadata key");
    if (key.empty()) fail("the metadata key is empty; expected a name", at, member_);
    member_ = key;
    if (metadata.contains(key)) fail("the metadata key is given twice; expected unique keys", at, member_);
    const std::uint64_t type_at = pos_;
    const std::uint32_t type = u32("a value type");
    GgufKeyInfo info{key, static_cast<GgufValueType>(type), GgufValueType::u8, at, {}};
    if (type == static_cast<std::uint32_t>(GgufValueType::array) && left() >= 4) {
      const unsigned char* p = take(4, "an array's element type");
      pos_ -= 4;
      info.element_type = static_cast<GgufValueType>(std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 |
                                                     std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24);
    }
    count_values(1, type_at);
    Value value = read_value(type, type_at, 0, &info.type_name);
    metadata.set(Value(std::move(key)), std::move(value));
    header.keys.push_back(std::move(info));
  }

  /// The value of `type` at the cursor; `type_name`, when given, gets its whole type (GgufKeyInfo::type_name).
  Value read_value(std::uint32_t type, std::uint64_t type_at, std::size_t depth, std::string* type_name = nullptr) {
    if (type_name != nullptr && type != static_cast<std::uint32_t>(GgufValueType::array) &&
        gguf_min_value_bytes(type) != 0) {
      *type_name = gguf_value_type_name(type);
    }
    switch (static_cast<GgufValueType>(type)) {
      case GgufValueType::u8: return Value(static_cast<std::int64_t>(scalar<std::uint8_t>("a uint8 value")));
      case GgufValueType::i8: return Value(static_cast<std::int64_t>(scalar<std::int8_t>("an int8 value")));
      case GgufValueType::u16: return Value(static_cast<std::int64_t>(scalar<std::uint16_t>("a uint16 value")));
      case GgufValueType::i16: return Value(static_cast<std::int64_t>(scalar<std::int16_t>("an int16 value")));
      case GgufValueType::u32: return Value(static_cast<std::int64_t>(scalar<std::uint32_t>("a uint32 value")));
      case GgufValueType::i32: return Value(static_cast<std::int64_t>(scalar<std::int32_t>("an int32 value")));
      case GgufValueType::f32: return Value(static_cast<double>(scalar<float>("a float32 value")));
      case GgufValueType::boolean: return Value(scalar<std::uint8_t>("a bool value") != 0);
      case GgufValueType::string: return Value(string("a string value"));
      case GgufValueType::u64: {
        const std::uint64_t v = scalar<std::uint64_t>("a uint64 value");
        if (v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          return Value(static_cast<std::int64_t>(v));
        }
        BigInt big;  // little-endian two's complement: a zero byte above keeps it positive
        for (int i = 0; i < 8; ++i) big.bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
        big.bytes.push_back(0);
        return Value(std::move(big));
      }
      case GgufValueType::i64: return Value(scalar<std::int64_t>("an int64 value"));
      case GgufValueType::f64: return Value(scalar<double>("a float64 value"));
      case GgufValueType::array: return read_array(depth + 1, type_name);
    }
    fail("unknown value type " + std::to_string(type) + "; expected 0-12 (uint8 ... float64)", type_at, member_);
  }

  Value read_array(std::size_t depth, std::string* type_name) {
    if (depth > limits_.max_depth) {
      limit("arrays nest deeper than the limit of " + std::to_string(limits_.max_depth) +
                " levels (LoadOptions::gguf.max_depth)",
            pos_, member_);
    }
    const std::uint64_t type_at = pos_;
    const std::uint32_t type = u32("an array's element type");
    const std::uint64_t min_bytes = gguf_min_value_bytes(type);
    if (min_bytes == 0) {
      fail("unknown array element type " + std::to_string(type) + "; expected 0-12 (uint8 ... float64)", type_at,
           member_);
    }
    const std::uint64_t count_at = pos_;
    const std::uint64_t count = u64("an array's length");
    if (count > left() / min_bytes) {
      fail("the array of " + std::to_string(count) + " " + gguf_value_type_name(type) +
               " values runs past the end of the file; expected at most " + std::to_string(left() / min_bytes),
           count_at, member_);
    }
    count_values(count, count_at);
    std::vector<Value> items;
    items.reserve(static_cast<std::size_t>(count));
    const bool nested = type == static_cast<std::uint32_t>(GgufValueType::array);
    std::string shared;  // the inner arrays' type while they all agree
    bool agree = count != 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::string inner;
      items.push_back(read_value(type, type_at, depth, nested && type_name != nullptr ? &inner : nullptr));
      if (!nested || type_name == nullptr || !agree) continue;
      if (i == 0) {
        shared = std::move(inner);
      } else if (inner != shared) {
        agree = false;
      }
    }
    if (type_name != nullptr) {
      *type_name = "array[" + (!nested ? gguf_value_type_name(type) : agree ? shared : std::string("array")) + "]";
    }
    return Value(List(std::move(items)));
  }

  [[nodiscard]] std::uint64_t alignment(const GgufHeader& header) const {
    const Value* value = header.metadata.as_dict().find("general.alignment");
    if (value == nullptr) return gguf_default_alignment;
    const auto entry = std::find_if(header.keys.begin(), header.keys.end(),
                                    [](const GgufKeyInfo& k) { return k.key == "general.alignment"; });
    if (entry->type != GgufValueType::u32) {
      fail("general.alignment is a " + gguf_value_type_name(static_cast<std::uint32_t>(entry->type)) +
               "; expected a uint32",
           entry->offset, entry->key);
    }
    const auto alignment = static_cast<std::uint64_t>(value->as_int());
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      fail("general.alignment is " + std::to_string(alignment) + "; expected a power of two", entry->offset,
           entry->key);
    }
    return alignment;
  }

  GgufTensorInfo read_tensor_info(std::uint64_t index) {
    GgufTensorInfo info;
    info.info_offset = pos_;
    member_ = "tensor info " + std::to_string(index);
    info.name = string("a tensor name");
    member_ = info.name;
    const std::uint64_t dims_at = pos_;
    const std::uint32_t n_dims = u32("a tensor's dimension count");
    if (n_dims > 4) {
      fail("the tensor has " + std::to_string(n_dims) + " dimensions; expected at most 4", dims_at, member_);
    }
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t at = pos_;
      const std::uint64_t extent = u64("a tensor's dimensions");
      if (extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail("dimension " + std::to_string(d) + " is " + std::to_string(extent) +
                 "; expected at most 9223372036854775807",
             at, member_);
      }
      info.dims.push_back(static_cast<std::int64_t>(extent));
    }
    const std::uint64_t type_at = pos_;
    const std::uint32_t type_id = u32("a tensor's ggml type");
    const GgmlTypeInfo& type = ggml_type_info(type_id, {file_, member_, type_at});
    info.type = type.type;
    const std::uint64_t offset_at = pos_;
    info.offset = u64("a tensor's offset");

    // Sizes: the elements and the bytes, each with every 0 read as 1 (so that the strides of an empty tensor fit
    // too), must fit in int64; a row holds whole blocks.
    const std::int64_t row = info.dims.empty() ? 1 : info.dims[0];
    if (row % type.block_size != 0) {
      fail("the tensor's rows hold " + std::to_string(row) + " " + std::string(type.name) +
               " elements; expected a multiple of its block size " + std::to_string(type.block_size),
           dims_at, member_);
    }
    Shape blocks = info.dims;
    if (!blocks.empty()) blocks[0] /= type.block_size;
    if (!checked_extent_bytes(info.dims, 1) || !checked_extent_bytes(blocks, type.block_bytes)) {
      fail("the tensor's dimensions " + dims_string(info.dims) + " of " + std::string(type.name) +
               " overflow 64-bit sizes; expected at most 9223372036854775807 elements and bytes",
           dims_at, member_);
    }
    std::uint64_t bytes = type.block_bytes;
    for (const std::int64_t extent : blocks) bytes *= static_cast<std::uint64_t>(extent);  // fits: checked
    info.bytes = bytes;
    offsets_at_.push_back(offset_at);
    return info;
  }

  static std::string dims_string(const Shape& dims) {
    std::string out = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
    return out + "]";
  }

  void check_data_section(const GgufHeader& header) {
    const std::uint64_t data_bytes = size_ - header.data_offset;
    std::vector<std::size_t> order;
    order.reserve(header.tensors.size());
    for (std::size_t i = 0; i < header.tensors.size(); ++i) {
      const GgufTensorInfo& t = header.tensors[i];
      if (t.offset % header.alignment != 0) {
        fail("the tensor's offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                 std::to_string(header.alignment),
             offsets_at_[i], t.name);
      }
      if (t.offset > data_bytes || t.bytes > data_bytes - t.offset) {
        fail("the tensor's " + std::to_string(t.bytes) + " bytes at offset " + std::to_string(t.offset) +
                 " of the data section run past the end of the file; expected them within the " +
                 std::to_string(data_bytes) + " bytes after byte " + std::to_string(header.data_offset),
             offsets_at_[i], t.name);
      }
      if (t.bytes > 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return header.tensors[a].offset < header.tensors[b].offset; });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& before = header.tensors[order[k - 1]];
      const GgufTensorInfo& t = header.tensors[order[k]];
      if (t.offset < before.offset + before.bytes) {
        fail("the tensor's bytes [" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.bytes) +
                 ") of the data section overlap those of '" + before.name + "' [" + std::to_string(before.offset) +
                 ", " + std::to_string(before.offset + before.bytes) + ")",
             offsets_at_[order[k]], t.name);
      }
    }
  }

  GgufRangeRead read_;
  std::uint64_t size_;
  const std::filesystem::path& file_;
  const GgufLimits& limits_;
  std::uint64_t pos_ = 0;
  std::vector<std::byte> window_;
  std::uint64_t window_start_ = 0;
  std::uint64_t values_ = 0;
  std::string member_;
  std::vector<std::uint64_t> offsets_at_;  // where each tensor's offset field sits, for messages
};

}  // namespace tensorfile::detail
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_gguf_header)

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

TENSORFILE_ENTRY GgufSplit gguf_split_of(const GgufHeader& header, const std::filesystem::path& file) {
  GgufSplit split;
  const auto find = [&](std::string_view key, GgufValueType type) -> const Value* {
    const Value* value = header.metadata.as_dict().find(key);
    if (value == nullptr) return nullptr;
    const auto info =
        std::find_if(header.keys.begin(), header.keys.end(), [&](const GgufKeyInfo& k) { return k.key == key; });
    if (info->type != type) {
      throw FormatError(std::string(key) + " is a " +
                            detail::gguf_value_type_name(static_cast<std::uint32_t>(info->type)) + "; expected a " +
                            detail::gguf_value_type_name(static_cast<std::uint32_t>(type)) +
                            " (as llama.cpp's gguf-split writes it)",
                        {file, std::string(key), info->offset});
    }
    return value;
  };
  const Value* no = find(gguf_split_no_key, GgufValueType::u16);
  const Value* count = find(gguf_split_count_key, GgufValueType::u16);
  const Value* tensors = find(gguf_split_tensors_key, GgufValueType::i32);
  if (count != nullptr) split.count = static_cast<std::uint32_t>(count->as_int());
  if (no != nullptr) split.no = static_cast<std::uint32_t>(no->as_int());
  if (tensors != nullptr) split.tensors = tensors->as_int();
  const auto offset_of = [&](std::string_view key) {
    for (const GgufKeyInfo& k : header.keys) {
      if (k.key == key) return k.offset;
    }
    return std::uint64_t{0};
  };
  if (no != nullptr && count == nullptr) {
    throw FormatError("split.no is given without split.count; expected both (a part of a split model)",
                      {file, std::string(gguf_split_no_key), offset_of(gguf_split_no_key)});
  }
  if (count != nullptr && split.count > 0 && split.no >= split.count) {
    throw FormatError(
        "split.no is " + std::to_string(split.no) + "; expected less than split.count " + std::to_string(split.count),
        {file, std::string(gguf_split_no_key), offset_of(gguf_split_no_key)});
  }
  if (tensors != nullptr && split.tensors < 0) {
    throw FormatError("split.tensors.count is " + std::to_string(split.tensors) + "; expected a count",
                      {file, std::string(gguf_split_tensors_key), offset_of(gguf_split_tensors_key)});
  }
  return split;
}

TENSORFILE_ENTRY std::string gguf_split_file_name(std::string_view prefix, std::uint32_t no, std::uint32_t count) {
  const auto five = [](std::uint64_t n) {
    std::string digits = std::to_string(n);
    return std::string(digits.size() < 5 ? 5 - digits.size() : 0, '0') + digits;
  };
  return std::string(prefix) + "-" + five(std::uint64_t{no} + 1) + "-of-" + five(count) + ".gguf";
}

TENSORFILE_ENTRY std::optional<GgufSplitName> parse_gguf_split_name(std::string_view name) {
  constexpr std::string_view suffix = ".gguf";
  if (!name.ends_with(suffix)) return std::nullopt;
  name.remove_suffix(suffix.size());
  // Digits at the end of `text`, at least five and at most nine (so that they fit), taken off it.
  const auto number = [](std::string_view& text) -> std::optional<std::uint32_t> {
    std::size_t n = 0;
    while (n < text.size() && text[text.size() - 1 - n] >= '0' && text[text.size() - 1 - n] <= '9') ++n;
    if (n < 5 || n > 9) return std::nullopt;
    std::uint32_t value = 0;
    for (const char c : text.substr(text.size() - n)) value = value * 10 + static_cast<std::uint32_t>(c - '0');
    text.remove_suffix(n);
    return value;
  };
  const std::optional<std::uint32_t> count = number(name);
  if (!count || !name.ends_with("-of-")) return std::nullopt;
  name.remove_suffix(4);
  const std::optional<std::uint32_t> no = number(name);
  if (!no || !name.ends_with('-') || *no == 0 || *no > *count) return std::nullopt;
  name.remove_suffix(1);
  if (name.empty() || name.ends_with('/')) return std::nullopt;
  return GgufSplitName{std::string(name), *no - 1, *count};
}
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_gguf_header)
