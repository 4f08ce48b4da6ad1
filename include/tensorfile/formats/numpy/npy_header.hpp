// SPDX-License-Identifier: MIT
/// @file
/// The .npy header: magic, version 1.0/2.0/3.0, and the dict literal (descr, fortran_order, shape), parsed strictly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "tensorfile/config.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/shape.hpp"

namespace tensorfile {

/// What a .npy header says, checked against the bytes that follow it.
struct NpyHeader {
  int major = 1;                  ///< format version: 1, 2 or 3
  int minor = 0;                  ///< minor version (0)
  DType dtype = DType::Float32;   ///< the element type
  std::string descr;              ///< the dtype as written ("<f4", "|b1", ">i8")
  bool swap_bytes = false;        ///< the data is big-endian multi-byte values (this host is little-endian)
  bool fortran_order = false;     ///< the data is laid out column-major
  Shape shape;                    ///< extents (empty: a 0-d array)
  std::uint64_t data_offset = 0;  ///< where the data starts (a multiple of 64 in files NumPy writes)
  std::uint64_t data_bytes = 0;   ///< bytes the data takes: numel * element size
};

namespace detail {

/// Where the pickle of an object-dtype .npy starts (np.save pickles such arrays after the header), or nothing for
/// any other dtype tensorfile reads. Throws as parse_npy_header for a malformed header.
[[nodiscard]] TENSORFILE_ENTRY std::optional<std::uint64_t> npy_object_pickle_offset(std::span<const std::byte> bytes,
                                                                                     const std::filesystem::path& file,
                                                                                     const std::string& member);

}  // namespace detail

/// Parses and checks the header of a .npy file whose first bytes are `prefix` (at least the whole
/// header; more is fine) and which is `total_size` bytes long. The data must take exactly the bytes
/// after the header. `file` and `member` name the input in errors. Throws FormatError for a malformed
/// header or a size disagreement, UnsupportedError for dtypes tensorfile lacks (object, structured,
/// strings, datetimes, long double) and unknown versions; never allocates what the header claims.
[[nodiscard]] TENSORFILE_ENTRY NpyHeader parse_npy_header(std::span<const std::byte> prefix, std::uint64_t total_size,
                                                          const std::filesystem::path& file = {},
                                                          const std::string& member = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <string_view>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"

namespace tensorfile {

namespace detail {

/// The .npy magic string: "\x93NUMPY".
inline constexpr std::string_view npy_magic = "\x93NUMPY";

/// The dtype a NumPy descr (without its byte-order character) names, for the dtypes both sides share.
struct NpyDType {
  std::string_view code;  ///< kind and size: "f4"
  DType dtype;            ///< tensorfile's dtype
};

/// The shared dtypes, in NumPy's kind+size spelling.
inline constexpr NpyDType npy_dtypes[] = {
    {"b1", DType::Bool},      {"i1", DType::Int8},        {"i2", DType::Int16},   {"i4", DType::Int32},
    {"i8", DType::Int64},     {"u1", DType::UInt8},       {"u2", DType::UInt16},  {"u4", DType::UInt32},
    {"u8", DType::UInt64},    {"f2", DType::Float16},     {"f4", DType::Float32}, {"f8", DType::Float64},
    {"c8", DType::Complex64}, {"c16", DType::Complex128},
};

/// The descr NumPy writes for `dtype` ("<f4", "|u1"), or empty when NumPy has no such dtype.
[[nodiscard]] inline std::string npy_descr(DType dtype) {
  for (const NpyDType& entry : npy_dtypes) {
    if (entry.dtype == dtype) {
      std::string descr(1, element_size(dtype) == 1 ? '|' : '<');
      descr += entry.code;
      return descr;
    }
  }
  return {};
}

/// A strict reader of the header's dict literal, the subset NumPy's writer produces: str keys, str,
/// bool and tuple-of-int values. Every failure names the file, member and absolute byte offset.
class NpyDictParser {
 public:
  /// `objects_allowed`: an object descr ('|O') is accepted and recorded (objects()) instead of refused, for readers
  /// that look at the pickle NumPy writes after such a header without running it (scan()).
  NpyDictParser(std::string_view text, std::uint64_t base, const std::filesystem::path& file, const std::string& member,
                bool objects_allowed = false)
      : text_(text), base_(base), file_(file), member_(member), objects_allowed_(objects_allowed) {}

  /// Whether the descr was the object dtype (only with objects_allowed).
  [[nodiscard]] bool objects() const noexcept { return objects_; }

  /// Parses the dict into `header` (descr, fortran_order and shape; each exactly once, nothing else).
  void parse(NpyHeader& header) {
    skip_space();
    expect('{', "the header is not a Python dict literal");
    bool seen_descr = false;
    bool seen_order = false;
    bool seen_shape = false;
    skip_space();
    while (peek() != '}') {
      const std::size_t key_at = pos_;
      const std::string key = parse_string("a str key");
      skip_space();
      expect(':', "a ':' after the key");
      skip_space();
      const auto once = [&](bool& seen) {
        if (seen) fail("the key '" + key + "' is given twice", key_at);
        seen = true;
      };
      if (key == "descr") {
        once(seen_descr);
        parse_descr(header);
      } else if (key == "fortran_order") {
        once(seen_order);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        once(seen_shape);
        header.shape = parse_shape();
      } else {
        fail("unknown key '" + key + "'; expected only 'descr', 'fortran_order' and 'shape'", key_at);
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != '}') {
        fail("expected ',' or '}' in the header dict, got " + shown(), pos_);
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict: " + shown(), pos_);
    if (!seen_descr || !seen_order || !seen_shape) {
      fail(std::string("the header dict lacks '") +
               (!seen_descr   ? "descr"
                : !seen_order ? "fortran_order"
                              : "shape") +
               "'; expected the keys 'descr', 'fortran_order' and 'shape'",
           pos_);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& reason, std::size_t at) const {
    throw FormatError(reason, {file_, member_, base_ + at});
  }
  [[noreturn]] void unsupported(const std::string& reason, std::size_t at) const {
    throw UnsupportedError(reason, {file_, member_, base_ + at});
  }
  [[nodiscard]] char peek() const {
    if (pos_ >= text_.size()) fail("the header dict ends early", pos_);
    return text_[pos_];
  }
  [[nodiscard]] std::string shown() const {
    if (pos_ >= text_.size()) return "the end of the header";
    const char c = text_[pos_];
    if (c >= 0x20 && c < 0x7F) return std::string("'") + c + "'";
    return "byte " + std::to_string(static_cast<unsigned char>(c));
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c, const std::string& what) {
    if (pos_ >= text_.size() || text_[pos_] != c) {
      std::string reason = what;
      reason += "; expected '";
      reason += c;
      reason += "', got ";
      reason += shown();
      fail(reason, pos_);
    }
    ++pos_;
  }
  // A quoted str without escapes (NumPy's keys and descrs have none).
  std::string parse_string(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected " + what + ", got " + shown(), pos_);
    const std::size_t start = ++pos_;
    while (peek() != quote) {
      const char c = text_[pos_];
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20) fail("unexpected character in a str: " + shown(), pos_);
      ++pos_;
    }
    ++pos_;
    return std::string(text_.substr(start, pos_ - 1 - start));
  }
  bool parse_bool() {
    const std::size_t at = pos_;
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("fortran_order is not a bool; expected True or False, got " + shown(), at);
  }
  Shape parse_shape() {
    expect('(', "shape is not a tuple");
    Shape shape;
    skip_space();
    while (peek() != ')') {
      const std::size_t at = pos_;
      if (peek() == '-') fail("shape has a negative dimension", at);
      if (peek() < '0' || peek() > '9') fail("shape holds something other than an int: " + shown(), at);
      std::int64_t value = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const auto grown = checked_mul(value, 10);
        const auto next = grown ? checked_add(*grown, text_[pos_] - '0') : std::nullopt;
        if (!next) fail("a shape dimension does not fit in 64 bits", at);
        value = *next;
        ++pos_;
      }
      shape.push_back(value);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        fail("expected ',' or ')' in shape, got " + shown(), pos_);
      } else if (shape.size() == 1) {
        fail("a one-element shape must be written (n,); got (n)", pos_);
      }
    }
    ++pos_;
    return shape;
  }
  void parse_descr(NpyHeader& header) {
    const std::size_t at = pos_;
    if (peek() == '[') {
      if (objects_allowed_) {
        objects_ = structured_holds_objects();
        return;
      }
      unsupported("descr is a structured dtype (a list of fields); only plain numeric dtypes are read", at);
    }
    const std::string descr = parse_string("descr as a str");
    header.descr = descr;
    if (descr.size() < 2) fail("unknown descr '" + descr + "'", at);
    const char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=') {
      fail("unknown descr '" + descr + "'; expected a byte order '<', '>', '|' or '=' first", at);
    }
    const std::string_view code = std::string_view(descr).substr(1);
    for (const NpyDType& entry : npy_dtypes) {
      if (entry.code == code) {
        header.dtype = entry.dtype;
        header.swap_bytes = order == '>' && element_size(entry.dtype) > 1;
        return;
      }
    }
    const char kind = code[0];
    if (objects_allowed_) {
      // Asked only whether a pickle follows: numpy takes 'O', 'O8' and the like for the object dtype; the other
      // kinds it reads (strings, datetimes, void...) hold none; anything else is no descr this check can vouch for.
      objects_ = kind == 'O';
      if (objects_ || std::string_view("biufcUSaMmV").find(kind) != std::string_view::npos) return;
      fail("unknown descr '" + descr + "'", at);
    }
    if (kind == 'O') unsupported("descr '" + descr + "' is the object dtype (pickled Python objects), never read", at);
    if (kind == 'V') unsupported("descr '" + descr + "' is a void or structured dtype; not read", at);
    if (kind == 'U' || kind == 'S' || kind == 'a') {
      unsupported("descr '" + descr + "' is a string dtype; only numeric dtypes are read", at);
    }
    if (kind == 'M' || kind == 'm') unsupported("descr '" + descr + "' is a datetime dtype; not read", at);
    if (kind == 'f' || kind == 'c' || kind == 'i' || kind == 'u' || kind == 'b') {
      unsupported("descr '" + descr + "' is a numeric dtype tensorfile has no equivalent for", at);
    }
    fail("unknown descr '" + descr + "'", at);
  }

  // A structured descr, read only for whether a field holds objects (numpy then pickles the whole array): every
  // str in its nested lists and tuples is a field name or a type, and a type 'O', 'O8' or 'object' in any byte order
  // means objects. A field so named counts too, which only makes the scanner walk data that holds no pickle.
  bool structured_holds_objects() {
    bool objects = false;
    std::size_t depth = 0;
    do {
      const char c = peek();
      if (c == '\'' || c == '"') {
        const std::string item = parse_string("a str in the structured descr");
        const std::string_view code =
            item.size() > 1 && std::string_view("<>|=").find(item[0]) != std::string_view::npos
                ? std::string_view(item).substr(1)
                : std::string_view(item);
        objects = objects || code.starts_with('O') || code.starts_with("object");  // 'O8', 'object', 'object_'...
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if ((c == ']' || c == ')') && depth-- == 0) fail("unbalanced brackets in the structured descr", pos_);
      ++pos_;
    } while (depth > 0);
    return objects;
  }

  std::string_view text_;
  std::uint64_t base_;
  const std::filesystem::path& file_;
  const std::string& member_;
  bool objects_allowed_ = false;
  bool objects_ = false;
  std::size_t pos_ = 0;
};

/// Bytes before the dict literal: magic, version and the header length (10 for 1.0, 12 for 2.0 and 3.0).
/// Returns them, or 0 when `prefix` is too short to tell (fewer than 12 bytes given of a longer file).
[[nodiscard]] inline std::uint64_t npy_preamble_size(std::span<const std::byte> prefix,
                                                     const std::filesystem::path& file, const std::string& member) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(prefix[i]); };
  for (std::size_t i = 0; i < npy_magic.size(); ++i) {
    if (i >= prefix.size()) throw FormatError("the file ends inside the .npy magic", {file, member, i});
    if (at(i) != static_cast<unsigned char>(npy_magic[i])) {
      throw FormatError("not a .npy file; expected the magic \"\\x93NUMPY\" first", {file, member, i});
    }
  }
  if (prefix.size() < 8) throw FormatError("the file ends inside the .npy version", {file, member, prefix.size()});
  const int major = at(6);
  if (major < 1 || major > 3 || at(7) != 0) {
    throw UnsupportedError("unknown .npy format version " + std::to_string(major) + "." + std::to_string(at(7)) +
                               "; expected 1.0, 2.0 or 3.0",
                           {file, member, 6});
  }
  return major == 1 ? 10 : 12;
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_numpy_npy_header)
namespace tensorfile {

namespace detail {

/// The header's dict literal, checked for its length and (formats 1 and 2) for ASCII, and the size of the bytes
/// before it; `header` gets the version.
inline std::string_view npy_header_text(std::span<const std::byte> prefix, std::uint64_t total_size,
                                        const std::filesystem::path& file, const std::string& member, NpyHeader& header,
                                        std::uint64_t& preamble) {
  preamble = npy_preamble_size(prefix, file, member);
  if (prefix.size() < preamble) {
    throw FormatError("the file ends inside the .npy header length", {file, member, prefix.size()});
  }
  const auto byte = [&](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(prefix[i])); };
  header.major = static_cast<int>(byte(6));
  header.minor = 0;
  const std::uint64_t length =
      preamble == 10 ? (byte(8) | byte(9) << 8) : (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24);
  if (length > total_size - preamble || length > prefix.size() - preamble) {
    throw FormatError("the header length " + std::to_string(length) + " runs past the end of the file (" +
                          std::to_string(total_size) + " bytes)",
                      {file, member, preamble - (preamble == 10 ? 2 : 4)});
  }
  std::string_view text(reinterpret_cast<const char*>(prefix.data()) + preamble, static_cast<std::size_t>(length));
  if (header.major < 3) {
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (static_cast<unsigned char>(text[i]) >= 0x80) {
        throw FormatError("the header holds a byte that is not ASCII; expected latin-1 text in format " +
                              std::to_string(header.major) + ".0",
                          {file, member, preamble + i});
      }
    }
  }
  return text;
}

TENSORFILE_ENTRY std::optional<std::uint64_t> npy_object_pickle_offset(std::span<const std::byte> bytes,
                                                                       const std::filesystem::path& file,
                                                                       const std::string& member) {
  NpyHeader header;
  std::uint64_t preamble = 0;
  const std::string_view text = npy_header_text(bytes, bytes.size(), file, member, header, preamble);
  NpyDictParser parser(text, preamble, file, member, true);
  parser.parse(header);
  if (!parser.objects()) return std::nullopt;
  return preamble + text.size();
}

}  // namespace detail

TENSORFILE_ENTRY NpyHeader parse_npy_header(std::span<const std::byte> prefix, std::uint64_t total_size,
                                            const std::filesystem::path& file, const std::string& member) {
  NpyHeader header;
  std::uint64_t preamble = 0;
  const std::string_view text = detail::npy_header_text(prefix, total_size, file, member, header, preamble);
  detail::NpyDictParser(text, preamble, file, member).parse(header);
  header.data_offset = preamble + text.size();
  // numpy's own bound ("array is too big"), each 0 counted as 1: an empty array's row-major strides must fit int64
  // too ((0, 2^32, 2^32) would step dimension 0 by 2^64 elements).
  const auto elem = static_cast<std::int64_t>(element_size(header.dtype));
  if (!detail::checked_extent_bytes(header.shape, elem)) {
    throw FormatError("the shape " + detail::shape_string(header.shape) + " of " + header.descr +
                          " overflows 64-bit byte counts (each 0 counted as 1, as numpy counts); expected at most "
                          "9223372036854775807 bytes",
                      {file, member, preamble});
  }
  std::int64_t bytes = elem;
  for (const std::int64_t extent : header.shape) bytes *= extent;  // fits: at most the bound just checked
  header.data_bytes = static_cast<std::uint64_t>(bytes);
  const std::uint64_t available = total_size - header.data_offset;
  if (header.data_bytes != available) {
    throw FormatError("the data size disagrees with the header; expected " + std::to_string(header.data_bytes) +
                          " bytes of " + header.descr + " data, got " + std::to_string(available),
                      {file, member, header.data_offset});
  }
  return header;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_numpy_npy_header)
