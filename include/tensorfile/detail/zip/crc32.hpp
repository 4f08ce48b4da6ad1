// SPDX-License-Identifier: MIT
// CRC-32 as used by zip (reflected polynomial 0xEDB88320), slicing-by-16 with compile-time tables.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Only the SSE4.1 and PCLMUL intrinsics: <immintrin.h> would add about a second of parsing to every loader.
#include <smmintrin.h>
#include <wmmintrin.h>
#endif

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

/// Advances a raw (not inverted) CRC register over `p[0..n)` with the slicing tables.
[[nodiscard]] inline std::uint32_t update_portable(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  const auto& t = crc32_impl::tables;
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
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("pclmul,sse4.1"))) inline __m128i load(const unsigned char* at) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}
/// x * k.low + x.high * k.high: moves 128 bits of remainder forward by the distance k encodes.
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i x, __m128i k) noexcept {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/// Carry-less multiplication folding (PCLMULQDQ) of a raw CRC register over `n` bytes, n a multiple
/// of 16 and at least 64: four 128-bit lanes folded 64 bytes a step, then reduced to 32 bits with
/// a Barrett step. The constants are x^k mod P for the reflected zip polynomial.
__attribute__((target("pclmul,sse4.1"))) inline std::uint32_t update_folded(std::uint32_t crc, const unsigned char* p,
                                                                            std::size_t n) noexcept {
  __m128i x1 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x2 = load(p + 16);
  __m128i x3 = load(p + 32);
  __m128i x4 = load(p + 48);
  p += 64;
  n -= 64;
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);  // x^(512+32), x^(512-32) mod P
  while (n >= 64) {
    x1 = _mm_xor_si128(fold(x1, k1k2), load(p));
    x2 = _mm_xor_si128(fold(x2, k1k2), load(p + 16));
    x3 = _mm_xor_si128(fold(x3, k1k2), load(p + 32));
    x4 = _mm_xor_si128(fold(x4, k1k2), load(p + 48));
    p += 64;
    n -= 64;
  }
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);  // x^(128+32), x^(128-32) mod P
  x1 = _mm_xor_si128(fold(x1, k3k4), x2);
  x1 = _mm_xor_si128(fold(x1, k3k4), x3);
  x1 = _mm_xor_si128(fold(x1, k3k4), x4);
  while (n >= 16) {
    x1 = _mm_xor_si128(fold(x1, k3k4), load(p));
    p += 16;
    n -= 16;
  }
  // 128 -> 64 bits (appending 32 zero bits), then 64 -> 32 bits.
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(k3k4, x1, 0x01), _mm_srli_si128(x1, 8));
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00), _mm_srli_si128(x1, 4));
  // Barrett reduction: mu = x^64 / P, and P itself.
  const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x00);
  return static_cast<std::uint32_t>(_mm_extract_epi32(_mm_xor_si128(x1, t), 1));
}

/// Whether this CPU has carry-less multiplication (checked once).
[[nodiscard]] inline bool has_folding() noexcept {
  static const bool available = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return available;
}
#endif

}  // namespace crc32_impl

/// The zip CRC-32 of `data`. Pass the result of an earlier call as `running` to continue it:
/// `crc32(b, crc32(a)) == crc32(a + b)`; `running = 0` starts a new checksum. Uses carry-less
/// multiplication on x86-64 CPUs that have it (about 10 GB/s), slicing tables elsewhere. Never throws.
[[nodiscard]] inline std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t running = 0) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::uint32_t crc = ~running;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (n >= 64 && crc32_impl::has_folding()) {
    const std::size_t bulk = n & ~std::size_t{15};
    crc = crc32_impl::update_folded(crc, p, bulk);
    p += bulk;
    n -= bulk;
  }
#endif
  return ~crc32_impl::update_portable(crc, p, n);
}

/// The same checksum with the slicing tables only (the reference the folded path is tested against).
[[nodiscard]] inline std::uint32_t crc32_portable(std::span<const std::byte> data, std::uint32_t running = 0) noexcept {
  return ~crc32_impl::update_portable(~running, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

}  // namespace tensorfile::detail
