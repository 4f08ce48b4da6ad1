// SPDX-License-Identifier: MIT
// UTF-8 as Python's str holds it: WTF-8 decoding (lone surrogates allowed) and encoding of code points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tensorfile::detail {

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

/// Decodes one code point at `text[i]`, advancing `i`; a byte that starts no valid WTF-8 sequence is
/// taken alone as its latin-1 code point, so that no byte is lost when text is shown.
[[nodiscard]] constexpr std::uint32_t decode_wtf8_or_latin1(std::string_view text, std::size_t& i) noexcept {
  const std::int32_t cp = decode_wtf8(text, i);
  if (cp >= 0) return static_cast<std::uint32_t>(cp);
  return static_cast<unsigned char>(text[i++]);
}

/// Whether `text` is valid WTF-8 (UTF-8, encoded lone surrogates allowed).
[[nodiscard]] constexpr bool is_valid_wtf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
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

}  // namespace tensorfile::detail
