// SPDX-License-Identifier: MIT
// Overflow-checked arithmetic for sizes a file merely claims.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace tensorfile::detail {

/// a * b, or nullopt when it does not fit in int64.
[[nodiscard]] inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// a + b, or nullopt when it does not fit in int64.
[[nodiscard]] inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// a + b for unsigned 64-bit offsets, or nullopt on wrap-around.
[[nodiscard]] inline std::optional<std::uint64_t> checked_add_u64(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// The bytes a row-major tensor of `sizes` and `element_size` would take with every size below 1 read as 1, or
/// nullopt when that does not fit in int64. This is the bound numpy puts on a shape ("array is too big"): within it
/// every stride, in elements or bytes, of the shape's row-major layout fits, as does its byte count, even for an
/// empty tensor (whose strides are those of its sizes with each 0 read as 1, as torch and numpy lay it out).
[[nodiscard]] inline std::optional<std::int64_t> checked_extent_bytes(std::span<const std::int64_t> sizes,
                                                                      std::int64_t element_size) noexcept {
  std::int64_t out = element_size;
  for (const std::int64_t size : sizes) {
    if (size > 1 && __builtin_mul_overflow(out, size, &out)) return std::nullopt;
  }
  return out;
}

}  // namespace tensorfile::detail
