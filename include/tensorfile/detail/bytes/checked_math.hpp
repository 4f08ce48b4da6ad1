// SPDX-License-Identifier: MIT
// Overflow-checked arithmetic for sizes a file merely claims.
#pragma once

#include <cstdint>
#include <optional>

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

}  // namespace tensorfile::detail
