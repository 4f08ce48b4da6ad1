// SPDX-License-Identifier: MIT
// JSON text as Python's json module (or orjson) writes it: string escaping and floats.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/detail/text/python_repr.hpp"
#include "tensorfile/detail/text/utf8.hpp"

namespace tensorfile::detail {

/// Which characters a JSON string keeps unescaped.
enum class JsonCharset : std::uint8_t {
  ascii,  ///< printable ASCII only, the rest as lower-case \uXXXX (surrogate pairs above U+FFFF): json.dumps
  utf8,   ///< everything but controls, quote and backslash, as raw UTF-8: orjson, json.dumps(ensure_ascii=False)
};

/// What append_json_string does with bytes that are not WTF-8.
enum class OnInvalidUtf8 : std::uint8_t {
  stop,    ///< stop there and return the byte's index
  latin1,  ///< write the byte's latin-1 code point, so that nothing is lost when text is shown
};

/// Appends `text` as a quoted JSON string with Python's escapes (\" \\ \n \r \t \b \f, other controls as
/// \u00XX). Returns npos, or with OnInvalidUtf8::stop the index of the first invalid byte (the string
/// is then left unterminated in `out`).
inline std::size_t append_json_string(std::string& out, std::string_view text, JsonCharset charset,
                                      OnInvalidUtf8 invalid) {
  const auto escape_u = [&](std::uint32_t unit) {
    out += "\\u";
    append_hex(out, unit, 4);
  };
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c == 0x7f && charset == JsonCharset::utf8) {
            out += static_cast<char>(c);
          } else {
            escape_u(c);
          }
      }
      continue;
    }
    const std::size_t from = i;
    std::int32_t cp = decode_wtf8(text, i);
    if (cp < 0) {
      if (invalid == OnInvalidUtf8::stop) return from;
      cp = c;
      ++i;
      if (charset == JsonCharset::utf8) {
        append_utf8(out, c);
        continue;
      }
    }
    if (charset == JsonCharset::utf8) {
      out.append(text.substr(from, i - from));
    } else if (cp >= 0x10000) {
      const auto u = static_cast<std::uint32_t>(cp) - 0x10000;
      escape_u(0xD800 + (u >> 10));
      escape_u(0xDC00 + (u & 0x3FF));
    } else {
      escape_u(static_cast<std::uint32_t>(cp));
    }
  }
  out += '"';
  return std::string_view::npos;
}

/// How append_json_float writes NaN and the infinities, which JSON proper lacks.
enum class JsonNonFinite : std::uint8_t {
  python_tokens,  ///< NaN, Infinity, -Infinity: Python's json module
  null,           ///< null: orjson
};

/// Appends `v` as Python's json module writes a float: repr() when finite.
inline void append_json_float(std::string& out, double v, JsonNonFinite non_finite) {
  if (std::isfinite(v)) {
    append_python_float_repr(out, v);
  } else if (non_finite == JsonNonFinite::null) {
    out += "null";
  } else {
    out += std::isnan(v) ? "NaN" : v < 0 ? "-Infinity" : "Infinity";
  }
}

}  // namespace tensorfile::detail
