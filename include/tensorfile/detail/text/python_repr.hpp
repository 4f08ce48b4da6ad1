// SPDX-License-Identifier: MIT
// Python's repr() of floats, str and bytes, byte for byte.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/detail/text/utf8.hpp"

namespace tensorfile::detail {

/// Appends Python's repr(float): the shortest text that reads back ("0.1", "1.0", "0.0001", "1e-05",
/// "1e+16", "-0.0"); "nan", "inf" and "-inf" when not finite.
inline void append_python_float_repr(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
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
  // As CPython's float_repr: the value is 0.DIGITS * 10^decpt, in exponent form when decpt <= -4 or > 16.
  const int decpt = exponent + 1;
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

/// Appends the escape Python's str and bytes reprs share for `c` (the quote, backslash, \n \r \t, other
/// ASCII controls as \xNN); false, appending nothing, when `c` needs none.
inline bool append_python_ascii_escape(std::string& out, std::uint32_t c, char quote) {
  if (c == static_cast<unsigned char>(quote) || c == '\\') {
    out += '\\';
    out += static_cast<char>(c);
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c < 0x20 || c == 0x7F) {
    out += "\\x";
    append_hex(out, c, 2);
  } else {
    return false;
  }
  return true;
}

/// Appends Python's repr() of a str: single quotes unless the text has ' and no "; non-ASCII shown as is.
/// Bytes that are not UTF-8 come through as their latin-1 code points.
inline void append_python_str_repr(std::string& out, std::string_view text) {
  const bool double_quoted = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos;
  const char quote = double_quoted ? '"' : '\'';
  out += quote;
  for (std::size_t i = 0; i < text.size();) {
    const std::uint32_t c = decode_wtf8_or_latin1(text, i);
    if (!append_python_ascii_escape(out, c, quote)) append_utf8(out, c);
  }
  out += quote;
}

/// Appends Python's repr() of bytes: b'...' with printable ASCII as is and every other byte escaped.
inline void append_python_bytes_repr(std::string& out, std::span<const std::byte> bytes) {
  out += "b'";
  for (const std::byte b : bytes) {
    const auto c = std::to_integer<unsigned char>(b);
    if (append_python_ascii_escape(out, c, '\'')) continue;
    if (c >= 0x80) {
      out += "\\x";
      append_hex(out, c, 2);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '\'';
}

}  // namespace tensorfile::detail
