// SPDX-License-Identifier: MIT
// tensordict's key <-> file name rules: %XX "robust key" encoding, the legacy raw-name fallback, UTF-8 checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tensorfile::detail::td {

/// Whether tensordict's encoder replaces byte `c` of a key by %XX: / < > : " | ? * \ space % and controls.
[[nodiscard]] constexpr bool key_byte_needs_escape(unsigned char c) noexcept {
  switch (c) {
    case '/':
    case '<':
    case '>':
    case ':':
    case '"':
    case '|':
    case '?':
    case '*':
    case '\\':
    case ' ':
    case '%': return true;
    default: return c < 0x20 || c == 0x7f;
  }
}

/// Appends the file-system name of `key` (without ".memmap") to `out`: "" is "%", "." is "%2E",
/// ".." is "%2E%2E", and every escaped byte becomes %XX in upper-case hex. Non-ASCII stays as is.
inline void append_encoded_key(std::string& out, std::string_view key) {
  if (key.empty()) {
    out += '%';
    return;
  }
  if (key == ".") {
    out += "%2E";
    return;
  }
  if (key == "..") {
    out += "%2E%2E";
    return;
  }
  constexpr char hex[] = "0123456789ABCDEF";
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (key_byte_needs_escape(c)) {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += ch;
    }
  }
}

/// The encoded file-system name of `key` (tensordict's `_encode_key_for_filesystem`).
[[nodiscard]] inline std::string encode_key(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 4);
  append_encoded_key(out, key);
  return out;
}

/// Whether the raw key may be tried as a file name when its encoded name is missing (trees written by
/// tensordict <= 0.12): no '/', no '\', no NUL, no "X:" drive prefix; for directories also not "", "." or "..".
/// A key failing this could leave the directory, so it is never used raw.
[[nodiscard]] constexpr bool is_safe_legacy_key(std::string_view key, bool directory) noexcept {
  for (const char c : key) {
    if (c == '/' || c == '\\' || c == '\0') return false;
  }
  if (key.size() >= 2 && key[1] == ':') {
    const char d = key[0];
    if ((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z')) return false;
  }
  if (directory && (key.empty() || key == "." || key == "..")) return false;
  return true;
}

/// The name of a nested tensor's size table next to data file `name` (Python's
/// `Path(name).with_suffix(".shape.memmap")`): "x.memmap" -> "x.shape.memmap", ".memmap" -> ".memmap.shape.memmap".
[[nodiscard]] inline std::string nested_shape_file_name(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return std::string(name) + ".shape.memmap";
  return std::string(name.substr(0, dot)) + ".shape.memmap";
}

/// Decodes one code point of WTF-8 (UTF-8 that also allows encoded surrogates, as Python's str can hold)
/// at `text[i]`, advancing `i`; returns -1 on an invalid sequence.
[[nodiscard]] constexpr std::int32_t decode_wtf8(std::string_view text, std::size_t& i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  std::size_t length = 0;
  std::int32_t cp = 0;
  std::int32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return -1;
  }
  if (text.size() - i < length) return -1;
  for (std::size_t k = 1; k < length; ++k) {
    const unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF) return -1;
  i += length;
  return cp;
}

/// Whether `text` is valid WTF-8 (UTF-8, encoded lone surrogates allowed).
[[nodiscard]] constexpr bool is_valid_wtf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    if (decode_wtf8(text, i) < 0) return false;
  }
  return true;
}

/// Appends code point `cp` to `out` as (W)UTF-8.
inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// A key as it appears in messages: in double quotes, control bytes as \xNN.
[[nodiscard]] inline std::string quoted_key(std::string_view key) {
  std::string out = "\"";
  constexpr char hex[] = "0123456789abcdef";
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace tensorfile::detail::td
