// SPDX-License-Identifier: MIT
// CRC-32 as used by zip (reflected polynomial 0xEDB88320), slicing-by-16 with compile-time tables.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tensorfile::detail {

namespace crc32_impl {

/// Sixteen 256-entry tables: table k maps a byte to its CRC contribution followed by k zero bytes.
using Crc32Tables = std::array<std::array<std::uint32_t, 256>, 16>;

/// Builds the slicing tables at compile time.
consteval Crc32Tables make_tables() {
  Crc32Tables tables{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    tables[0][byte] = crc;
  }
  for (std::size_t k = 1; k < tables.size(); ++k) {
    for (std::size_t byte = 0; byte < 256; ++byte) {
      const std::uint32_t previous = tables[k - 1][byte];
      tables[k][byte] = (previous >> 8) ^ tables[0][previous & 0xFFu];
    }
  }
  return tables;
}

/// The tables, built once by the compiler.
inline constexpr Crc32Tables tables = make_tables();

/// Little-endian 32-bit load; compilers turn it into one load on little-endian targets.
[[nodiscard]] inline std::uint32_t load_le32(const unsigned char* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace crc32_impl

/// The zip CRC-32 of `data`. Pass the result of an earlier call as `running` to continue it:
/// `crc32(b, crc32(a)) == crc32(a + b)`; `running = 0` starts a new checksum. Never throws.
[[nodiscard]] inline std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t running = 0) noexcept {
  const auto& t = crc32_impl::tables;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::uint32_t crc = ~running;
  while (n >= 16) {
    const std::uint32_t a = crc32_impl::load_le32(p) ^ crc;
    const std::uint32_t b = crc32_impl::load_le32(p + 4);
    const std::uint32_t c = crc32_impl::load_le32(p + 8);
    const std::uint32_t d = crc32_impl::load_le32(p + 12);
    crc = t[15][a & 0xFFu] ^ t[14][(a >> 8) & 0xFFu] ^ t[13][(a >> 16) & 0xFFu] ^ t[12][a >> 24] ^ t[11][b & 0xFFu] ^
          t[10][(b >> 8) & 0xFFu] ^ t[9][(b >> 16) & 0xFFu] ^ t[8][b >> 24] ^ t[7][c & 0xFFu] ^ t[6][(c >> 8) & 0xFFu] ^
          t[5][(c >> 16) & 0xFFu] ^ t[4][c >> 24] ^ t[3][d & 0xFFu] ^ t[2][(d >> 8) & 0xFFu] ^ t[1][(d >> 16) & 0xFFu] ^
          t[0][d >> 24];
    p += 16;
    n -= 16;
  }
  while (n-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFFu];
  return ~crc;
}

}  // namespace tensorfile::detail
