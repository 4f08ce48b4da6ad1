// SPDX-License-Identifier: MIT
// Hexadecimal digits: the one digit table, fixed-width formatting and digit values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensorfile::detail {

/// Lower-case hex digits; messages, JSON and Python escapes all use this case.
inline constexpr char hex_digits_lower[] = "0123456789abcdef";
/// Upper-case hex digits, for tensordict's %XX key encoding.
inline constexpr char hex_digits_upper[] = "0123456789ABCDEF";

/// Which digit table append_hex uses.
enum class HexCase : std::uint8_t { lower, upper };

/// Appends the low `digits` hex digits of `value`, most significant first ("0a" for 10 with two digits).
inline void append_hex(std::string& out, std::uint64_t value, std::size_t digits, HexCase letters = HexCase::lower) {
  const char* table = letters == HexCase::lower ? hex_digits_lower : hex_digits_upper;
  for (std::size_t k = digits; k-- > 0;) out += table[(value >> (4 * k)) & 0xFu];
}

/// The low `digits` hex digits of `value` as a string.
[[nodiscard]] inline std::string hex_text(std::uint64_t value, std::size_t digits) {
  std::string out;
  out.reserve(digits);
  append_hex(out, value, digits);
  return out;
}

/// The value of hex digit `c` (either case), or -1 when it is none.
[[nodiscard]] constexpr int hex_digit_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace tensorfile::detail
