// SPDX-License-Identifier: MIT
// SHA-256 (FIPS 180-4), incremental, for content hashes of tensor bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

// x86-64 SHA extensions (SHA-NI), chosen at run time; other targets use the portable code.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TENSORFILE_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tensorfile::detail {

namespace sha256_impl {

/// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 180-4 4.2.2).
inline constexpr std::array<std::uint32_t, 64> round_constants{
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

/// The initial hash value: square roots of the first 8 primes (FIPS 180-4 5.3.3).
inline constexpr std::array<std::uint32_t, 8> initial_state{
    0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u,
};

[[nodiscard]] constexpr std::uint32_t rotr(std::uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

/// Big-endian 32-bit load; compilers turn it into a load and a bswap.
[[nodiscard]] inline std::uint32_t load_be32(const unsigned char* p) noexcept {
  return (static_cast<std::uint32_t>(p[0]) << 24) | (static_cast<std::uint32_t>(p[1]) << 16) |
         (static_cast<std::uint32_t>(p[2]) << 8) | static_cast<std::uint32_t>(p[3]);
}

/// One round: updates d and h; the callers rotate the roles of the eight words instead of moving them.
inline void one_round(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t& d, std::uint32_t e,
                  std::uint32_t f, std::uint32_t g, std::uint32_t& h, std::uint32_t k_plus_w) noexcept {
  const std::uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k_plus_w;
  const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
  d += t1;
  h = t1 + t2;
}

/// Runs the compression function over `blocks` whole 64-byte blocks at `p` (FIPS 180-4 6.2.2).
inline void compress_portable(std::array<std::uint32_t, 8>& state, const unsigned char* p, std::size_t blocks) noexcept {
  const auto& k = round_constants;
  for (; blocks > 0; --blocks, p += 64) {
    std::array<std::uint32_t, 64> w;  // the message schedule W_0..W_63
    for (std::size_t t = 0; t < 16; ++t) w[t] = load_be32(p + 4 * t);
    for (std::size_t t = 16; t < 64; ++t) {
      const std::uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const std::uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    std::uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (std::size_t t = 0; t < 64; t += 8) {
      one_round(a, b, c, d, e, f, g, h, k[t] + w[t]);
      one_round(h, a, b, c, d, e, f, g, k[t + 1] + w[t + 1]);
      one_round(g, h, a, b, c, d, e, f, k[t + 2] + w[t + 2]);
      one_round(f, g, h, a, b, c, d, e, k[t + 3] + w[t + 3]);
      one_round(e, f, g, h, a, b, c, d, k[t + 4] + w[t + 4]);
      one_round(d, e, f, g, h, a, b, c, k[t + 5] + w[t + 5]);
      one_round(c, d, e, f, g, h, a, b, k[t + 6] + w[t + 6]);
      one_round(b, c, d, e, f, g, h, a, k[t + 7] + w[t + 7]);
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#ifdef TENSORFILE_SHA256_X86
/// Whether the CPU has the SHA extensions and SSE4.1 (CPUID leaf 7 EBX bit 29, leaf 1 ECX bit 19).
[[nodiscard]] inline bool cpu_has_sha_ni() noexcept {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 19)) == 0) return false;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ebx & (1u << 29)) != 0;
  }();
  return has;
}

/// compress_portable with the SHA-NI instructions: four rounds per two sha256rnds2.
__attribute__((target("sha,sse4.1"))) inline void compress_sha_ni(std::array<std::uint32_t, 8>& state,
                                                                  const unsigned char* p, std::size_t blocks) noexcept {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  // The instructions keep the state as ABEF and CDGH.
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (; blocks > 0; --blocks, p += 64) {
    const __m128i abef_saved = abef;
    const __m128i cdgh_saved = cdgh;
    __m128i w[4];  // message words W[4i..4i+3] of the last four groups, ring-indexed by i & 3
    for (std::size_t i = 0; i < 16; ++i) {
      __m128i& current = w[i & 3];
      if (i < 4) {
        current = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), byte_swap);
      } else {
        const __m128i previous = w[(i - 1) & 3];
        __m128i next = _mm_sha256msg1_epu32(current, w[(i - 3) & 3]);           // W[t-16] + sigma0(W[t-15])
        next = _mm_add_epi32(next, _mm_alignr_epi8(previous, w[(i - 2) & 3], 4));  // + W[t-7]
        current = _mm_sha256msg2_epu32(next, previous);                          // + sigma1(W[t-2])
      }
      __m128i k_plus_w =
          _mm_add_epi32(current, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&round_constants[4 * i])));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k_plus_w);
      k_plus_w = _mm_shuffle_epi32(k_plus_w, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, k_plus_w);
    }
    abef = _mm_add_epi32(abef, abef_saved);
    cdgh = _mm_add_epi32(cdgh, cdgh_saved);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  dcba = _mm_blend_epi16(feba, dchg, 0xF0);
  hgfe = _mm_alignr_epi8(dchg, feba, 8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), dcba);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), hgfe);
}
#endif

/// The fastest compression function this CPU runs.
inline void compress(std::array<std::uint32_t, 8>& state, const unsigned char* p, std::size_t blocks) noexcept {
#ifdef TENSORFILE_SHA256_X86
  if (cpu_has_sha_ni()) {
    compress_sha_ni(state, p, blocks);
    return;
  }
#endif
  compress_portable(state, p, blocks);
}

}  // namespace sha256_impl

/// An incremental SHA-256: update() with the message in any number of pieces, then digest() or
/// hex_digest() once. `Sha256 h; h.update(bytes); h.hex_digest()` == Python's
/// `hashlib.sha256(bytes).hexdigest()`. update() and digest() never throw; messages below 2^61 bytes.
class Sha256 {
 public:
  /// Appends `data` to the message.
  void update(std::span<const std::byte> data) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    std::size_t n = data.size();
    if (n == 0) return;  // (data() may be null then; memcpy must not see it)
    length_ += n;
    if (buffered_ > 0) {  // top up the partial block first
      const std::size_t take = n < 64 - buffered_ ? n : 64 - buffered_;
      std::memcpy(buffer_.data() + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < 64) return;
      sha256_impl::compress(state_, buffer_.data(), 1);
      buffered_ = 0;
    }
    if (n >= 64) {  // whole blocks straight from the input, no copy
      sha256_impl::compress(state_, p, n / 64);
      p += n / 64 * 64;
      n %= 64;
    }
    if (n > 0) std::memcpy(buffer_.data(), p, n);
    buffered_ = n;
  }

  /// The 32-byte digest of everything given to update(). Call it once: it pads the message.
  [[nodiscard]] std::array<std::byte, 32> digest() noexcept {
    const std::uint64_t bits = length_ * 8;
    // Padding: 0x80, zeros up to 56 mod 64, then the bit length big-endian (FIPS 180-4 5.1.1).
    std::array<unsigned char, 72> pad{};
    pad[0] = 0x80;
    const std::size_t zeros = (buffered_ < 56 ? 56 : 120) - buffered_;
    for (int i = 0; i < 8; ++i) pad[zeros + static_cast<std::size_t>(i)] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    const std::uint64_t length = length_;
    update(std::as_bytes(std::span<const unsigned char>(pad.data(), zeros + 8)));
    length_ = length;
    std::array<std::byte, 32> out{};
    for (std::size_t i = 0; i < 8; ++i) {
      for (std::size_t j = 0; j < 4; ++j) out[4 * i + j] = static_cast<std::byte>(state_[i] >> (24 - 8 * j));
    }
    return out;
  }

  /// digest() as 64 lowercase hex digits.
  [[nodiscard]] std::string hex_digest() {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (const std::byte b : digest()) {
      const auto v = std::to_integer<unsigned>(b);
      out += digits[v >> 4];
      out += digits[v & 15u];
    }
    return out;
  }

 private:
  std::array<std::uint32_t, 8> state_ = sha256_impl::initial_state;
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;
};

/// The hex SHA-256 of `data` in one call.
[[nodiscard]] inline std::string sha256_hex(std::span<const std::byte> data) {
  Sha256 hash;
  hash.update(data);
  return hash.hex_digest();
}

}  // namespace tensorfile::detail
