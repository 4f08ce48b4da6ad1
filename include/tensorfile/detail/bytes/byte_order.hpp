// SPDX-License-Identifier: MIT
// Byte swapping for big-endian files (C++20 has no std::byteswap yet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace tensorfile::detail {

/// The value with its bytes reversed.
template <class T>
[[nodiscard]] constexpr T byteswap(T v) noexcept {
  if constexpr (sizeof(T) == 1)
    return v;
  else if constexpr (sizeof(T) == 2)
    return static_cast<T>(__builtin_bswap16(static_cast<std::uint16_t>(v)));
  else if constexpr (sizeof(T) == 4)
    return static_cast<T>(__builtin_bswap32(static_cast<std::uint32_t>(v)));
  else
    return static_cast<T>(__builtin_bswap64(static_cast<std::uint64_t>(v)));
}

/// Reverses each `width`-byte group of `bytes` in place (width 1 leaves them as they are).
inline void swap_elements(std::span<std::byte> bytes, std::size_t width) noexcept {
  if (width <= 1) return;
  for (std::size_t at = 0; at + width <= bytes.size(); at += width) {
    for (std::size_t i = 0, j = width - 1; i < j; ++i, --j) std::swap(bytes[at + i], bytes[at + j]);
  }
}

}  // namespace tensorfile::detail
