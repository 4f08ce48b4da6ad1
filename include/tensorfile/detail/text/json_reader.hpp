// SPDX-License-Identifier: MIT
// JSON text read as Python's json.loads reads it: NaN and Infinity tokens, integers of any size, lone surrogates.
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
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/detail/text/utf8.hpp"

namespace tensorfile::detail {

/// Deepest JSON nesting read or written (Python's own limit is about 1000).
inline constexpr std::size_t json_max_depth = 512;

/// One literal or number scanned by JsonReader::scan_scalar: what it is and where its text lies.
struct JsonScalar {
  /// The token: a literal, Python's non-finite tokens, or a number with (real) or without a fraction or exponent.
  enum class Kind : std::uint8_t { null, true_, false_, nan, pos_inf, neg_inf, integer, real };
  Kind kind;          ///< the token
  std::size_t start;  ///< byte offset of its first byte
  std::size_t end;    ///< byte offset just past it
};

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
    return "byte 0x" + hex_text(c, 2);
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

  /// Parses a list of non-negative integers (a shape) at the cursor; nullopt (cursor restored) if it is not one.
  [[nodiscard]] std::optional<std::vector<std::int64_t>> try_parse_shape() {
    const std::size_t start = pos_;
    if (!consume('[')) return std::nullopt;
    std::vector<std::int64_t> shape;
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

  /// Scans a literal or a number (Python's grammar) at the cursor, past it.
  [[nodiscard]] JsonScalar scan_scalar() {
    const int c = peek();
    const std::size_t start = pos_;
    if (c == 'n' && match_word("null")) return {JsonScalar::Kind::null, start, pos_};
    if (c == 't' && match_word("true")) return {JsonScalar::Kind::true_, start, pos_};
    if (c == 'f' && match_word("false")) return {JsonScalar::Kind::false_, start, pos_};
    if (c == 'N' && match_word("NaN")) return {JsonScalar::Kind::nan, start, pos_};
    if (c == 'I' && match_word("Infinity")) return {JsonScalar::Kind::pos_inf, start, pos_};
    if (c == '-' && text_.substr(pos_, 9) == "-Infinity") {
      pos_ += 9;
      return {JsonScalar::Kind::neg_inf, start, pos_};
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
    if (i < text_.size() && text_[i] == '.' && digit_at(i + 1)) {
      real = true;
      ++i;
      while (digit_at(i)) ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      std::size_t j = i + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      if (digit_at(j)) {
        real = true;
        i = j;
        while (digit_at(i)) ++i;
      }
    }
    pos_ = i;
    return {real ? JsonScalar::Kind::real : JsonScalar::Kind::integer, start, i};
  }

  /// The value of a real number's text as Python's float() gives it: overflow is an infinity, underflow zero.
  [[nodiscard]] static double real_value(std::string_view number) {
    double v = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    (void)end;
    if (ec == std::errc::result_out_of_range) {
      // from_chars reports both the same way; tell them apart by magnitude.
      v = magnitude_exponent(number) > 0 ? HUGE_VAL : 0.0;
      if (number.front() == '-') v = -v;
    }
    return v;
  }

 private:
  std::uint32_t hex4(std::size_t at) const {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const int d = at + k < text_.size() ? hex_digit_value(text_[at + k]) : -1;
      if (d < 0) fail_at("four hex digits after \\u", at + k);
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }

  bool match_word(std::string_view word) noexcept {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
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

}  // namespace tensorfile::detail
