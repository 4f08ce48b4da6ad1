// SPDX-License-Identifier: MIT
// meta.json: Python's JSON dialect read (NaN, big ints, surrogates) and written byte for byte (json or orjson).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/tensordict/detail/keys.hpp"

namespace tensorfile {

/// Which of tensordict's JSON backends save_memmap imitates when it writes meta.json.
enum class MetaJsonStyle : std::uint8_t {
  stdlib,  ///< Python's json module: ", " and ": " separators, \uXXXX escapes for non-ASCII, NaN/Infinity tokens
  orjson,  ///< orjson: compact separators, raw UTF-8, NaN and infinities written as null
};

}  // namespace tensorfile

namespace tensorfile::detail::td {

/// Deepest JSON nesting accepted (Python's own limit is about 1000).
inline constexpr std::size_t json_max_depth = 512;

/// The dtype named by a tensordict dtype string: "torch." followed by a canonical torch name (no aliases,
/// as tensordict's loader); nullopt otherwise.
[[nodiscard]] constexpr std::optional<DType> parse_tensordict_dtype(std::string_view text) noexcept {
  if (!text.starts_with("torch.")) return std::nullopt;
  text.remove_prefix(6);
  for (const auto& info : tensorfile::detail::dtype_table) {
    if (info.name == text) return info.dtype;
  }
  return std::nullopt;
}

/// Decimal text of a JSON integer beyond 64 bits, as a BigInt (minimal two's complement, little-endian).
[[nodiscard]] inline BigInt big_int_from_decimal(std::string_view digits) {
  const bool negative = !digits.empty() && digits.front() == '-';
  if (negative) digits.remove_prefix(1);
  std::vector<std::uint8_t> magnitude;  // little-endian
  for (const char c : digits) {
    unsigned carry = static_cast<unsigned>(c - '0');
    for (auto& b : magnitude) {
      const unsigned v = b * 10u + carry;
      b = static_cast<std::uint8_t>(v & 0xFF);
      carry = v >> 8;
    }
    while (carry != 0) {
      magnitude.push_back(static_cast<std::uint8_t>(carry & 0xFF));
      carry >>= 8;
    }
  }
  magnitude.push_back(0);  // room for the sign bit
  if (negative) {
    unsigned carry = 1;
    for (auto& b : magnitude) {
      const unsigned v = static_cast<unsigned>(static_cast<std::uint8_t>(~b)) + carry;
      b = static_cast<std::uint8_t>(v & 0xFF);
      carry = v >> 8;
    }
  }
  // Drop redundant sign bytes.
  while (magnitude.size() > 1) {
    const std::uint8_t top = magnitude.back();
    const std::uint8_t next = magnitude[magnitude.size() - 2];
    if ((top == 0 && (next & 0x80) == 0) || (top == 0xFF && (next & 0x80) != 0)) {
      magnitude.pop_back();
    } else {
      break;
    }
  }
  return BigInt{std::move(magnitude)};
}

/// Reads JSON text as Python's json.loads does (NaN, Infinity and -Infinity tokens, integers of any
/// size, lone surrogates kept as WTF-8). Errors are FormatErrors naming the file and byte offset.
class JsonReader {
 public:
  JsonReader(std::string_view text, const std::filesystem::path& file) noexcept : text_(text), file_(file) {
    if (text_.starts_with("\xEF\xBB\xBF")) pos_ = 3;  // a UTF-8 byte-order mark, as Python accepts
  }

  [[nodiscard]] std::size_t position() const noexcept { return pos_; }
  void seek(std::size_t position) noexcept { pos_ = position; }
  [[nodiscard]] std::string_view text() const noexcept { return text_; }
  [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }

  void skip_ws() noexcept {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }
  /// The next non-blank byte, or -1 at the end.
  [[nodiscard]] int peek() noexcept {
    skip_ws();
    return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1;
  }
  bool consume(char c) noexcept {
    if (peek() != static_cast<unsigned char>(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, std::string_view expected) {
    if (!consume(c)) fail(expected);
  }

  /// Throws "invalid JSON; expected <expected>, got <what is at the cursor>".
  [[noreturn]] void fail(std::string_view expected) const { fail_at(expected, pos_); }
  [[noreturn]] void fail_at(std::string_view expected, std::size_t at) const {
    throw FormatError("invalid JSON; expected " + std::string(expected) + ", got " + describe_at(at),
                      {.file = file_, .offset = at});
  }
  /// What is at byte `at`, for messages: "'x'", "byte 0x07" or "end of file".
  [[nodiscard]] std::string describe_at(std::size_t at) const {
    if (at >= text_.size()) return "end of file";
    const auto c = static_cast<unsigned char>(text_[at]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    constexpr char hex[] = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 0xF];
  }
  /// The raw text of the value starting at `at` (up to 40 bytes), for messages.
  [[nodiscard]] std::string snippet_at(std::size_t at) {
    const std::size_t saved = pos_;
    pos_ = at;
    std::size_t end = at;
    try {
      skip_value(0);
      end = pos_;
    } catch (const FormatError&) {
      end = std::min(text_.size(), at + 40);
    }
    pos_ = saved;
    std::string out(text_.substr(at, std::min<std::size_t>(end - at, 40)));
    if (end - at > 40) out += "...";
    return out;
  }

  /// Parses the string at the cursor. Returns a view into the text when it has no escapes, else into `scratch`.
  [[nodiscard]] std::string_view parse_string(std::string& scratch) {
    if (peek() != '"') fail("a string");
    const std::size_t start = ++pos_;
    std::size_t i = start;
    const std::size_t n = text_.size();
    while (true) {
      if (i >= n) fail_at("a closing '\"'", i);
      const auto c = static_cast<unsigned char>(text_[i]);
      if (c == '"') {
        pos_ = i + 1;
        return text_.substr(start, i - start);
      }
      if (c == '\\') break;
      if (c < 0x20) fail_at("a string without raw control characters", i);
      if (c >= 0x80) {
        if (decode_wtf8(text_, i) < 0) fail_at("valid UTF-8", i);
      } else {
        ++i;
      }
    }
    scratch.assign(text_.substr(start, i - start));
    while (true) {
      if (i >= n) fail_at("a closing '\"'", i);
      const auto c = static_cast<unsigned char>(text_[i]);
      if (c == '"') {
        pos_ = i + 1;
        return scratch;
      }
      if (c < 0x20) fail_at("a string without raw control characters", i);
      if (c >= 0x80) {
        const std::size_t from = i;
        if (decode_wtf8(text_, i) < 0) fail_at("valid UTF-8", i);
        scratch.append(text_.substr(from, i - from));
        continue;
      }
      if (c != '\\') {
        scratch += static_cast<char>(c);
        ++i;
        continue;
      }
      if (i + 1 >= n) fail_at("an escape sequence", i + 1);
      const char e = text_[i + 1];
      i += 2;
      switch (e) {
        case '"': scratch += '"'; break;
        case '\\': scratch += '\\'; break;
        case '/': scratch += '/'; break;
        case 'b': scratch += '\b'; break;
        case 'f': scratch += '\f'; break;
        case 'n': scratch += '\n'; break;
        case 'r': scratch += '\r'; break;
        case 't': scratch += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4(i);
          i += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= n && text_[i] == '\\' && text_[i + 1] == 'u') {
            const std::uint32_t low = hex4(i + 2);
            if (low >= 0xDC00 && low < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
              i += 6;
            }
          }
          append_utf8(scratch, cp);
          break;
        }
        default: fail_at("a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", i - 1);
      }
    }
  }

  /// Parses any value into a Value: objects become Dicts with str keys (a repeated key keeps its first
  /// position and its last value, as Python), arrays Lists, integers int or BigInt, numbers with a
  /// fraction or exponent float.
  [[nodiscard]] Value parse_value(std::size_t depth = 0) {
    if (depth > json_max_depth) {
      throw LimitError("JSON nesting is too deep; expected at most " + std::to_string(json_max_depth) + " levels",
                       {.file = file_, .offset = pos_});
    }
    switch (peek()) {
      case '{': {
        ++pos_;
        Dict dict;
        if (consume('}')) return Value(std::move(dict));
        std::string scratch;
        while (true) {
          std::string key(parse_string(scratch));
          expect(':', "':'");
          dict.set(Value(std::move(key)), parse_value(depth + 1));
          if (consume(',')) continue;
          expect('}', "',' or '}'");
          return Value(std::move(dict));
        }
      }
      case '[': {
        ++pos_;
        List list;
        if (consume(']')) return Value(std::move(list));
        while (true) {
          list.push_back(parse_value(depth + 1));
          if (consume(',')) continue;
          expect(']', "',' or ']'");
          return Value(std::move(list));
        }
      }
      case '"': {
        std::string scratch;
        return Value(std::string(parse_string(scratch)));
      }
      default: return parse_scalar();
    }
  }

  /// Skips one value without building it (strings are still checked).
  void skip_value(std::size_t depth = 0) {
    if (depth > json_max_depth) {
      throw LimitError("JSON nesting is too deep; expected at most " + std::to_string(json_max_depth) + " levels",
                       {.file = file_, .offset = pos_});
    }
    switch (peek()) {
      case '{': {
        ++pos_;
        if (consume('}')) return;
        std::string scratch;
        while (true) {
          (void)parse_string(scratch);
          expect(':', "':'");
          skip_value(depth + 1);
          if (consume(',')) continue;
          expect('}', "',' or '}'");
          return;
        }
      }
      case '[': {
        ++pos_;
        if (consume(']')) return;
        while (true) {
          skip_value(depth + 1);
          if (consume(',')) continue;
          expect(']', "',' or ']'");
          return;
        }
      }
      case '"': {
        std::string scratch;
        (void)parse_string(scratch);
        return;
      }
      default: (void)scan_scalar(); return;
    }
  }

  /// Requires that only blanks follow.
  void finish() {
    if (peek() != -1) fail("the end of the file");
  }

  /// Parses a whole document.
  [[nodiscard]] Value parse_document() {
    if (peek() == -1) fail("a JSON value");
    Value v = parse_value();
    finish();
    return v;
  }

  /// Parses a list of non-negative integers (a shape) at the cursor; nullopt (cursor restored) if it is not one.
  [[nodiscard]] std::optional<Shape> try_parse_shape() {
    const std::size_t start = pos_;
    if (!consume('[')) return std::nullopt;
    Shape shape;
    if (consume(']')) return shape;
    while (true) {
      skip_ws();
      std::int64_t value = 0;
      const char* first = text_.data() + pos_;
      const char* last = text_.data() + text_.size();
      if (first == last || *first < '0' || *first > '9' ||
          (*first == '0' && last - first > 1 && first[1] >= '0' && first[1] <= '9')) {
        pos_ = start;
        return std::nullopt;
      }
      const auto [end, ec] = std::from_chars(first, last, value);
      if (ec != std::errc{} || (end != last && (*end == '.' || *end == 'e' || *end == 'E'))) {
        pos_ = start;
        return std::nullopt;
      }
      pos_ += static_cast<std::size_t>(end - first);
      shape.push_back(value);
      if (consume(',')) continue;
      if (consume(']')) return shape;
      pos_ = start;
      return std::nullopt;
    }
  }

 private:
  std::uint32_t hex4(std::size_t at) const {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      if (at + k >= text_.size()) fail_at("four hex digits after \\u", at + k);
      const char c = text_[at + k];
      std::uint32_t d = 0;
      if (c >= '0' && c <= '9') {
        d = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        fail_at("four hex digits after \\u", at + k);
      }
      v = v * 16 + d;
    }
    return v;
  }

  bool match_word(std::string_view word) noexcept {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  enum class ScalarKind : std::uint8_t { null, true_, false_, nan, pos_inf, neg_inf, integer, real };
  struct Scalar {
    ScalarKind kind;
    std::size_t start;
    std::size_t end;
    bool exponent_negative;
  };

  /// Scans a literal or a number (Python's grammar) at the cursor.
  Scalar scan_scalar() {
    const int c = peek();
    const std::size_t start = pos_;
    if (c == 'n' && match_word("null")) return {ScalarKind::null, start, pos_, false};
    if (c == 't' && match_word("true")) return {ScalarKind::true_, start, pos_, false};
    if (c == 'f' && match_word("false")) return {ScalarKind::false_, start, pos_, false};
    if (c == 'N' && match_word("NaN")) return {ScalarKind::nan, start, pos_, false};
    if (c == 'I' && match_word("Infinity")) return {ScalarKind::pos_inf, start, pos_, false};
    if (c == '-' && text_.substr(pos_, 9) == "-Infinity") {
      pos_ += 9;
      return {ScalarKind::neg_inf, start, pos_, false};
    }
    const auto digit_at = [&](std::size_t k) { return k < text_.size() && text_[k] >= '0' && text_[k] <= '9'; };
    std::size_t i = pos_;
    if (i < text_.size() && text_[i] == '-') ++i;
    if (!digit_at(i)) fail_at("a JSON value", start);
    if (text_[i] == '0') {
      ++i;
    } else {
      while (digit_at(i)) ++i;
    }
    bool real = false;
    bool exponent_negative = false;
    if (i < text_.size() && text_[i] == '.' && digit_at(i + 1)) {
      real = true;
      ++i;
      while (digit_at(i)) ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      std::size_t j = i + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) {
        exponent_negative = text_[j] == '-';
        ++j;
      }
      if (digit_at(j)) {
        real = true;
        i = j;
        while (digit_at(i)) ++i;
      }
    }
    pos_ = i;
    return {real ? ScalarKind::real : ScalarKind::integer, start, i, exponent_negative};
  }

  Value parse_scalar() {
    const Scalar s = scan_scalar();
    switch (s.kind) {
      case ScalarKind::null: return Value(None{});
      case ScalarKind::true_: return Value(true);
      case ScalarKind::false_: return Value(false);
      case ScalarKind::nan: return Value(std::nan(""));
      case ScalarKind::pos_inf: return Value(HUGE_VAL);
      case ScalarKind::neg_inf: return Value(-HUGE_VAL);
      case ScalarKind::integer: {
        const std::string_view digits = text_.substr(s.start, s.end - s.start);
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (ec == std::errc{} && end == digits.data() + digits.size()) return Value(v);
        return Value(big_int_from_decimal(digits));
      }
      case ScalarKind::real: {
        const std::string_view number = text_.substr(s.start, s.end - s.start);
        double v = 0;
        const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
        if (ec == std::errc::result_out_of_range) {
          // Overflow gives an infinity and underflow zero, as Python's float(); tell them apart by magnitude.
          const bool negative = number.front() == '-';
          v = magnitude_exponent(number) > 0 ? HUGE_VAL : 0.0;
          if (negative) v = -v;
        }
        return Value(v);
      }
    }
    return Value(None{});
  }

  /// Approximate decimal exponent of a number's magnitude (positive: >= 1).
  static std::int64_t magnitude_exponent(std::string_view number) {
    std::size_t i = number.front() == '-' ? 1 : 0;
    std::int64_t integer_digits = 0;
    std::int64_t leading_zeros = 0;
    bool nonzero_integer = false;
    for (; i < number.size() && number[i] >= '0' && number[i] <= '9'; ++i) {
      nonzero_integer = nonzero_integer || number[i] != '0';
      if (nonzero_integer) ++integer_digits;
    }
    if (i < number.size() && number[i] == '.') {
      for (++i; i < number.size() && number[i] >= '0' && number[i] <= '9'; ++i) {
        if (!nonzero_integer && number[i] == '0')
          ++leading_zeros;
        else
          break;
      }
    }
    std::int64_t exponent = 0;
    const std::size_t e = number.find_first_of("eE");
    if (e != std::string_view::npos) {
      const char* first = number.data() + e + 1;
      if (*first == '+') ++first;
      const auto [end, ec] = std::from_chars(first, number.data() + number.size(), exponent);
      if (ec == std::errc::result_out_of_range) exponent = *first == '-' ? INT64_MIN / 2 : INT64_MAX / 2;
      (void)end;
    }
    return exponent + (nonzero_integer ? integer_digits : -leading_zeros);
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  std::size_t pos_ = 0;
};

// ---- the fast reader for TensorDict directories ------------------------------------------------

/// What one member of a TensorDict meta.json describes.
enum class MemberKind : std::uint8_t {
  reserved,    ///< "shape", "device" or "_type": the directory's own fields, never a key
  not_object,  ///< any other non-object value: ignored, as tensordict does
  other,       ///< an object that is neither a leaf nor a collection: ignored, as tensordict does
  leaf,        ///< {"dtype": ..., "shape": ...}: a tensor in <enc(key)>.memmap
  collection,  ///< {"type": ...}: a sub-collection in the subdirectory <enc(key)>
};

/// One member of a TensorDict meta.json, as the loader needs it.
struct MetaMember {
  std::string key;           ///< the raw key
  std::size_t value_at = 0;  ///< byte offset of the value
  MemberKind kind = MemberKind::other;
  std::optional<DType> dtype;    ///< leaf dtype, when it names one
  std::size_t dtype_at = 0;      ///< byte offset of the "dtype" value
  std::optional<Shape> shape;    ///< leaf shape, when it is a list of non-negative ints
  std::size_t shape_at = 0;      ///< byte offset of the "shape" value
  bool is_nested = false;        ///< "is_nested": true
  bool is_nested_valid = true;   ///< "is_nested" is absent or a bool
  std::size_t is_nested_at = 0;  ///< byte offset of the "is_nested" value
};

/// A TensorDict meta.json read by read_dir_meta: members in file order, and the reserved ones' offsets.
struct DirMeta {
  std::vector<MetaMember> members;       ///< every member, in order (a repeated key appears twice)
  std::optional<std::size_t> type_at;    ///< "_type" value offset (the last one wins, as in Python)
  std::optional<std::size_t> shape_at;   ///< "shape" value offset
  std::optional<std::size_t> device_at;  ///< "device" value offset
};

/// Reads one {"type"|"dtype"|"shape"|"is_nested"...} entry object at the cursor into `member`.
inline void read_entry_object(JsonReader& in, MetaMember& member, std::string& scratch) {
  in.expect('{', "'{'");
  bool has_type = false;
  bool has_dtype = false;
  bool has_shape = false;
  if (!in.consume('}')) {
    while (true) {
      const std::string_view name = in.parse_string(scratch);
      in.expect(':', "':'");
      const int c = in.peek();
      if (name == "type") {
        has_type = true;
        in.skip_value(1);
      } else if (name == "dtype") {
        has_dtype = true;
        member.dtype_at = in.position();
        member.dtype.reset();
        if (c == '"') {
          member.dtype = parse_tensordict_dtype(in.parse_string(scratch));
        } else {
          in.skip_value(1);
        }
      } else if (name == "shape") {
        has_shape = true;
        member.shape_at = in.position();
        member.shape = in.try_parse_shape();
        if (!member.shape) in.skip_value(1);
      } else if (name == "is_nested") {
        member.is_nested_at = in.position();
        member.is_nested_valid = true;
        if (c == 't' && in.text().substr(in.position(), 4) == "true") {
          member.is_nested = true;
          in.seek(in.position() + 4);
        } else if (c == 'f' && in.text().substr(in.position(), 5) == "false") {
          member.is_nested = false;
          in.seek(in.position() + 5);
        } else {
          member.is_nested_valid = false;
          in.skip_value(1);
        }
      } else {
        in.skip_value(1);
      }
      if (in.consume(',')) continue;
      in.expect('}', "',' or '}'");
      break;
    }
  }
  member.kind = has_type ? MemberKind::collection : (has_dtype && has_shape) ? MemberKind::leaf : MemberKind::other;
}

/// Reads a TensorDict meta.json: every member with what it describes, without building a value tree.
[[nodiscard]] inline DirMeta read_dir_meta(std::string_view text, const std::filesystem::path& file) {
  JsonReader in(text, file);
  DirMeta meta;
  if (in.peek() != '{') in.fail("a JSON object");
  in.expect('{', "'{'");
  if (!in.consume('}')) {
    meta.members.reserve(std::min<std::size_t>(text.size() / 64 + 1, 65536));  // a leaf entry takes > 64 bytes
    std::string scratch;
    while (true) {
      MetaMember member;
      member.key.assign(in.parse_string(scratch));
      in.expect(':', "':'");
      member.value_at = (in.skip_ws(), in.position());
      if (member.key == "shape" || member.key == "device" || member.key == "_type") {
        member.kind = MemberKind::reserved;
        (member.key == "shape"    ? meta.shape_at
         : member.key == "device" ? meta.device_at
                                  : meta.type_at) = member.value_at;
        in.skip_value(1);
      } else if (in.peek() == '{') {
        read_entry_object(in, member, scratch);
      } else {
        member.kind = MemberKind::not_object;
        in.skip_value(1);
      }
      meta.members.push_back(std::move(member));
      if (in.consume(',')) continue;
      in.expect('}', "',' or '}'");
      break;
    }
  }
  in.finish();
  return meta;
}

// ---- writing ----------------------------------------------------------------------------------

/// Appends `v` as Python's repr(float) writes it ("1.0", "0.0001", "1e-05", "1e+16", "-0.0");
/// NaN and infinities as the stdlib's tokens, or null for orjson.
inline void append_python_float(std::string& out, double v, MetaJsonStyle style) {
  if (std::isnan(v)) {
    out += style == MetaJsonStyle::stdlib ? "NaN" : "null";
    return;
  }
  if (std::isinf(v)) {
    out += style == MetaJsonStyle::stdlib ? (v < 0 ? "-Infinity" : "Infinity") : "null";
    return;
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::scientific);
  const std::string_view sci(buffer, static_cast<std::size_t>(result.ptr - buffer));  // [-]d[.ddd]e[+-]XX
  std::size_t i = 0;
  if (sci[0] == '-') {
    out += '-';
    i = 1;
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (std::size_t k = i; k < e; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int decpt = exponent + 1;  // the value is 0.DIGITS * 10^decpt
  const auto ndigits = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= ndigits) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - ndigits), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<std::size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<std::size_t>(decpt));
    }
    return;
  }
  out += digits[0];
  if (ndigits > 1) {
    out += '.';
    out.append(digits, 1);
  }
  const int shown = decpt - 1;
  out += shown < 0 ? "e-" : "e+";
  const int magnitude = shown < 0 ? -shown : shown;
  if (magnitude < 10) out += '0';
  out += std::to_string(magnitude);
}

/// Writes JSON text as tensordict's backends do: Python's json (`", "`/`": "` separators, or compact ones,
/// ASCII only with lower-case \uXXXX escapes, NaN/Infinity tokens) or orjson (compact, raw UTF-8).
class JsonWriter {
 public:
  /// Appends to `out`; `compact` selects "," and ":" separators (always on for orjson).
  JsonWriter(std::string& out, MetaJsonStyle style, bool compact) noexcept
      : out_(out), style_(style), compact_(compact || style == MetaJsonStyle::orjson) {}

  /// Where the text goes, for errors (file and member).
  ErrorLocation where{};

  void raw(std::string_view text) { out_ += text; }
  void item_separator() { out_ += compact_ ? "," : ", "; }
  void key(std::string_view name) {
    string(name);
    out_ += compact_ ? ":" : ": ";
  }
  void integer(std::int64_t v) { out_ += std::to_string(v); }
  void boolean(bool v) { out_ += v ? "true" : "false"; }

  /// A list of ints: "[2, 3]", "[]".
  void shape(const Shape& shape) {
    out_ += '[';
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (d != 0) item_separator();
      integer(shape[d]);
    }
    out_ += ']';
  }

  /// A string; throws ArgumentError when it is not valid UTF-8.
  void string(std::string_view text) {
    out_ += '"';
    constexpr char hex[] = "0123456789abcdef";
    const auto escape_u = [&](std::uint32_t unit) {
      out_ += "\\u";
      out_ += hex[(unit >> 12) & 0xF];
      out_ += hex[(unit >> 8) & 0xF];
      out_ += hex[(unit >> 4) & 0xF];
      out_ += hex[unit & 0xF];
    };
    std::size_t i = 0;
    while (i < text.size()) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
        out_ += static_cast<char>(c);
        ++i;
        continue;
      }
      if (c < 0x80) {
        ++i;
        switch (c) {
          case '"': out_ += "\\\""; break;
          case '\\': out_ += "\\\\"; break;
          case '\n': out_ += "\\n"; break;
          case '\r': out_ += "\\r"; break;
          case '\t': out_ += "\\t"; break;
          case '\b': out_ += "\\b"; break;
          case '\f': out_ += "\\f"; break;
          default:
            if (c == 0x7f && style_ == MetaJsonStyle::orjson) {
              out_ += static_cast<char>(c);
            } else {
              escape_u(c);
            }
        }
        continue;
      }
      const std::size_t from = i;
      const std::int32_t cp = decode_wtf8(text, i);
      if (cp < 0) {
        throw ArgumentError("string is not valid UTF-8; expected UTF-8 text, got byte " + std::to_string(c) +
                                " at index " + std::to_string(from),
                            where);
      }
      if (style_ == MetaJsonStyle::orjson) {
        out_.append(text.substr(from, i - from));
      } else if (cp >= 0x10000) {
        const auto u = static_cast<std::uint32_t>(cp) - 0x10000;
        escape_u(0xD800 + (u >> 10));
        escape_u(0xDC00 + (u & 0x3FF));
      } else {
        escape_u(static_cast<std::uint32_t>(cp));
      }
    }
    out_ += '"';
  }

  /// Any JSON-like Value: None, bool, int (any size), float, str, list, tuple (as a list), dict with
  /// str keys. Anything else throws UnsupportedError (tensordict would pickle it).
  void value(const Value& v, std::size_t depth = 0) {
    if (depth > json_max_depth) {
      throw LimitError(
          "value nesting is too deep for JSON; expected at most " + std::to_string(json_max_depth) + " levels", where);
    }
    switch (v.kind()) {
      case Value::Kind::none: out_ += "null"; return;
      case Value::Kind::boolean: boolean(v.as_bool()); return;
      case Value::Kind::integer: integer(v.as_int()); return;
      case Value::Kind::big_integer: out_ += v.as_big_int().str(); return;
      case Value::Kind::floating: append_python_float(out_, v.as_float(), style_); return;
      case Value::Kind::string: string(v.as_string()); return;
      case Value::Kind::list:
      case Value::Kind::tuple: {
        out_ += '[';
        bool first = true;
        for (const Value& item : v.elements()) {
          if (!first) item_separator();
          first = false;
          value(item, depth + 1);
        }
        out_ += ']';
        return;
      }
      case Value::Kind::dict: {
        out_ += '{';
        bool first = true;
        for (const auto& [k, item] : v.as_dict()) {
          if (!k.is_string()) {
            throw UnsupportedError("dict key is " + std::string(Value::kind_name(k.kind())) +
                                       "; expected str keys only (tensordict pickles other dicts)",
                                   where);
          }
          if (!first) item_separator();
          first = false;
          key(k.as_string());
          value(item, depth + 1);
        }
        out_ += '}';
        return;
      }
      default:
        throw UnsupportedError("value is " + std::string(Value::kind_name(v.kind())) +
                                   "; expected JSON data (None, bool, int, float, str, list, tuple or dict): "
                                   "tensordict would pickle it, and tensorfile writes no pickles",
                               where);
    }
  }

 private:
  std::string& out_;
  MetaJsonStyle style_;
  bool compact_;
};

}  // namespace tensorfile::detail::td
