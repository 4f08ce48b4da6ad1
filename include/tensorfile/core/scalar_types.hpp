// SPDX-License-Identifier: MIT
// 16-bit floating-point value types (IEEE half and bfloat16) and a half-precision complex pair.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tensorfile {

/// IEEE 754 binary16, stored as its bits; converts to and from float (round to nearest even).
struct Half {
  std::uint16_t bits = 0;  ///< the raw binary16 bits, little-endian in memory on little-endian hosts

  Half() = default;
  /// Rounds `value` to the nearest binary16 (ties to even); overflow gives infinity, NaN stays NaN.
  explicit Half(float value) noexcept : bits(from_float(value)) {}
  /// The exact float value of these bits.
  explicit operator float() const noexcept { return to_float(bits); }

  /// Builds a Half from raw bits.
  [[nodiscard]] static constexpr Half from_bits(std::uint16_t raw) noexcept {
    Half h;
    h.bits = raw;
    return h;
  }
  friend constexpr bool operator==(Half a, Half b) noexcept { return a.bits == b.bits; }

 private:
  static std::uint16_t from_float(float value) noexcept {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t sign = (f >> 16) & 0x8000u;
    const std::uint32_t abs = f & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) {  // inf or NaN: keep NaN quiet and non-zero
      return static_cast<std::uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u | ((abs >> 13) & 0x3FFu) : 0u));
    }
    if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504
    if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal or zero
      if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // under half the smallest subnormal
      const std::uint32_t exponent = abs >> 23;
      const std::uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
      const std::uint32_t shift = 126u - exponent;  // 14..24 places
      std::uint32_t half = mantissa >> shift;
      const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
      const std::uint32_t halfway = 1u << (shift - 1u);
      if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
      return static_cast<std::uint16_t>(sign | half);
    }
    std::uint32_t rebiased = abs - 0x38000000u;  // exponent bias 127 -> 15
    const std::uint32_t rest = rebiased & 0x1FFFu;
    rebiased >>= 13;
    if (rest > 0x1000u || (rest == 0x1000u && (rebiased & 1u))) ++rebiased;
    return static_cast<std::uint16_t>(sign | rebiased);
  }

  static float to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1Fu;
    std::uint32_t mantissa = h & 0x3FFu;
    std::uint32_t f = 0;
    if (exponent == 0x1Fu) {
      f = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
      f = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa != 0) {  // subnormal: normalise
      std::uint32_t e = 113u;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --e;
      }
      f = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
    } else {
      f = sign;
    }
    return std::bit_cast<float>(f);
  }
};

/// bfloat16: the top 16 bits of a float32; converts to and from float (round to nearest even).
struct BFloat16 {
  std::uint16_t bits = 0;  ///< the raw bits

  BFloat16() = default;
  /// Rounds `value` to the nearest bfloat16 (ties to even); NaN stays NaN.
  explicit BFloat16(float value) noexcept : bits(from_float(value)) {}
  /// The exact float value of these bits.
  explicit operator float() const noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

  /// Builds a BFloat16 from raw bits.
  [[nodiscard]] static constexpr BFloat16 from_bits(std::uint16_t raw) noexcept {
    BFloat16 b;
    b.bits = raw;
    return b;
  }
  friend constexpr bool operator==(BFloat16 a, BFloat16 b) noexcept { return a.bits == b.bits; }

 private:
  static std::uint16_t from_float(float value) noexcept {
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    if ((f & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((f >> 16) | 0x40u);  // quiet NaN
    const std::uint32_t rounding = 0x7FFFu + ((f >> 16) & 1u);
    return static_cast<std::uint16_t>((f + rounding) >> 16);
  }
};

/// A complex number of two halves (torch.complex32 / chalf): real part first.
struct ComplexHalf {
  Half real;  ///< real part
  Half imag;  ///< imaginary part
  friend constexpr bool operator==(ComplexHalf a, ComplexHalf b) noexcept {
    return a.real == b.real && a.imag == b.imag;
  }
};

}  // namespace tensorfile

namespace tensorfile {

/// Decodes one float8 value. `exponent_bits` is 4 (e4m3) or 5 (e5m2); `fnuz` selects the
/// "finite, no negative zero" variants (bias one higher, 0x80 is NaN, no infinities).
[[nodiscard]] inline float decode_float8(std::uint8_t bits, int exponent_bits, bool fnuz) noexcept {
  const int mantissa_bits = 7 - exponent_bits;
  const int bias = (1 << (exponent_bits - 1)) - 1 + (fnuz ? 1 : 0);
  const bool negative = (bits & 0x80u) != 0;
  const int exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  const float nan = std::bit_cast<float>(0x7FC00000u);
  if (fnuz && bits == 0x80u) return nan;
  if (!fnuz) {
    const int top = (1 << exponent_bits) - 1;
    if (exponent_bits == 5 && exponent == top) {  // e5m2 keeps IEEE infinities and NaNs
      if (mantissa != 0) return nan;
      return negative ? -std::bit_cast<float>(0x7F800000u) : std::bit_cast<float>(0x7F800000u);
    }
    if (exponent_bits == 4 && exponent == top && mantissa == (1 << mantissa_bits) - 1) return nan;
  }
  float magnitude = 0.0f;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), 1 - bias - mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa + (1 << mantissa_bits)), exponent - bias - mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace tensorfile
