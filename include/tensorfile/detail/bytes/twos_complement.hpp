// SPDX-License-Identifier: MIT
// Python ints of any size as minimal little-endian two's complement bytes (pickle's LONG, BigInt).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tensorfile::detail {

/// Drops the top bytes that only repeat the sign of the byte below them, so the value keeps its shortest
/// form (at least one byte).
inline void trim_sign_bytes(std::vector<std::uint8_t>& bytes) {
  while (bytes.size() > 1) {
    const std::uint8_t top = bytes.back();
    const bool below_negative = (bytes[bytes.size() - 2] & 0x80u) != 0;
    if ((top == 0x00 && !below_negative) || (top == 0xFF && below_negative)) {
      bytes.pop_back();
    } else {
      break;
    }
  }
}

/// The minimal two's complement bytes (least significant first) of a decimal integer: an optional '-'
/// and digits, checked by the caller.
[[nodiscard]] inline std::vector<std::uint8_t> twos_complement_from_decimal(std::string_view digits) {
  const bool negative = !digits.empty() && digits.front() == '-';
  if (negative) digits.remove_prefix(1);
  std::vector<std::uint8_t> bytes;
  for (const char c : digits) {
    unsigned carry = static_cast<unsigned>(c - '0');
    for (auto& b : bytes) {
      const unsigned v = b * 10u + carry;
      b = static_cast<std::uint8_t>(v & 0xFF);
      carry = v >> 8;
    }
    while (carry != 0) {
      bytes.push_back(static_cast<std::uint8_t>(carry & 0xFF));
      carry >>= 8;
    }
  }
  bytes.push_back(0);  // room for the sign bit
  if (negative) {
    unsigned carry = 1;
    for (auto& b : bytes) {
      const unsigned v = static_cast<unsigned>(static_cast<std::uint8_t>(~b)) + carry;
      b = static_cast<std::uint8_t>(v & 0xFF);
      carry = v >> 8;
    }
  }
  trim_sign_bytes(bytes);
  return bytes;
}

}  // namespace tensorfile::detail
