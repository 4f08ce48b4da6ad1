// SPDX-License-Identifier: MIT
// tensordict's key <-> file name rules: %XX "robust key" encoding and the legacy raw-name fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensorfile/detail/text/hex.hpp"

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
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (key_byte_needs_escape(c)) {
      out += '%';
      append_hex(out, c, 2, HexCase::upper);
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

/// A key as it appears in messages: in double quotes, control bytes as \xNN.
[[nodiscard]] inline std::string quoted_key(std::string_view key) {
  std::string out = "\"";
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      append_hex(out, c, 2);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace tensorfile::detail::td
