// SPDX-License-Identifier: MIT
/// @file
/// Python's text forms (repr of floats, str and bytes) and JSON strings as Python's json module writes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/detail/text/json_writer.hpp"
#include "tensorfile/detail/text/python_repr.hpp"

namespace tensorfile {

/// Python's repr() of a float: "0.1", "1.0", "1e-05", "1e+16", "-0.0", "nan", "inf", "-inf".
[[nodiscard]] inline std::string python_float_repr(double x) {
  std::string out;
  detail::append_python_float_repr(out, x);
  return out;
}

/// Python's repr() of a str: single quotes unless the text has ' and no "; quote, backslash and ASCII
/// controls escaped, non-ASCII shown as is. Bytes that are not UTF-8 come through as latin-1 code points.
[[nodiscard]] inline std::string python_str_repr(std::string_view text) {
  std::string out;
  detail::append_python_str_repr(out, text);
  return out;
}

/// Python's repr() of bytes: b'...' with printable ASCII as is and the other bytes escaped.
[[nodiscard]] inline std::string python_bytes_repr(std::span<const std::byte> bytes) {
  std::string out;
  detail::append_python_bytes_repr(out, bytes);
  return out;
}

/// `text` as a JSON string, as Python's json.dumps writes it (ASCII only: lower-case `\uXXXX` escapes,
/// surrogate pairs above U+FFFF). Bytes that are not UTF-8 come through as latin-1 code points, never lost.
[[nodiscard]] inline std::string json_string(std::string_view text) {
  std::string out;
  (void)detail::append_json_string(out, text, detail::JsonCharset::ascii, detail::OnInvalidUtf8::latin1);
  return out;
}

/// `text` safe to show on a terminal: printable ASCII and UTF-8 as is (a backslash too); `\n`, `\r`, `\t` and
/// the other C0 controls, DEL and bytes that are not UTF-8 (lone surrogates included) as `\xNN`, one per byte; C1
/// controls (U+0080..U+009F) as `\u0080`..`\u009f`. Text with none of these comes back unchanged.
[[nodiscard]] inline std::string escape_controls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t printable = i;  // a run of printable ASCII, most text, is copied at once
    while (printable < text.size() && text[printable] >= 0x20 && text[printable] < 0x7F) ++printable;
    if (printable > i) {
      out.append(text.substr(i, printable - i));
      i = printable;
      continue;
    }
    const std::size_t from = i;
    const std::int32_t cp = detail::decode_wtf8(text, i);
    if (cp >= 0x20 && cp != 0x7F && (cp < 0x80 || cp > 0x9F) && (cp < 0xD800 || cp > 0xDFFF)) {
      out.append(text.substr(from, i - from));
    } else if (cp >= 0x80 && cp <= 0x9F) {
      out += "\\u00";
      detail::append_hex(out, static_cast<std::uint32_t>(cp), 2);
    } else {
      if (cp < 0) i = from + 1;  // an invalid byte alone; a surrogate's three bytes one by one
      for (std::size_t k = from; k < i; ++k) {
        out += "\\x";
        detail::append_hex(out, static_cast<unsigned char>(text[k]), 2);
      }
    }
  }
  return out;
}

/// Lower-case hex of `bytes`, two digits a byte.
[[nodiscard]] inline std::string hex_bytes(std::span<const std::byte> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::byte b : bytes) detail::append_hex(out, std::to_integer<unsigned>(b), 2);
  return out;
}

/// One step of a slash-separated path, escaped as a JSON pointer escapes it ("~" -> "~0", "/" -> "~1"), so
/// a key holding "/" cannot be read as two steps.
[[nodiscard]] inline std::string json_pointer_step(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tensorfile
