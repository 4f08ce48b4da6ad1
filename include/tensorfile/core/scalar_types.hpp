// SPDX-License-Identifier: MIT
/// @file
/// 16-bit floating-point value types (IEEE half and bfloat16) and a half-precision complex pair.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tensorfile {

namespace detail {

/// float16 bits to float32; a signalling NaN comes back quiet with its payload (as x86's vcvtph2ps gives it).
inline float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u));
  }
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  std::uint32_t e = 113u;  // subnormal: shift the leading one into the implicit place
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
}

/// float32 to float16 bits, round to nearest even; NaN becomes sign | 0x7E00. Branch-free (vectorisable): the
/// float unit does the rounding, by adding a power of two that pushes the discarded bits out of the mantissa.
inline std::uint16_t float_to_half_bits(float value) noexcept {
  const std::uint32_t w = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t twice = w + w;  // the sign shifted out
  const std::uint32_t sign = w & 0x80000000u;
  // |value| * 2^112 * 2^-110 overflows to inf exactly when the half would, and keeps every other value.
  float base = (std::bit_cast<float>(w & 0x7FFFFFFFu) * 0x1.0p+112f) * 0x1.0p-110f;
  std::uint32_t bias = twice & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;  // below half's normal range: round at the subnormal step
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(base);
  const std::uint32_t magnitude = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
  return static_cast<std::uint16_t>((sign >> 16) | (twice > 0xFF000000u ? 0x7E00u : magnitude));
}

/// float32 to bfloat16 bits, round to nearest even; NaN becomes `nan`.
inline std::uint16_t float_to_bf16_bits(float value, std::uint16_t nan) noexcept {
  const std::uint32_t w = std::bit_cast<std::uint32_t>(value);
  const auto rounded = static_cast<std::uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
  return (w & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded;
}

}  // namespace detail

/// IEEE 754 binary16, stored as its bits; converts to and from float (round to nearest even).
struct Half {
  std::uint16_t bits = 0;  ///< the raw binary16 bits, little-endian in memory on little-endian hosts

  Half() = default;
  /// Rounds `value` to the nearest binary16 (ties to even); overflow gives infinity, NaN gives sign | 0x7E00 (torch).
  explicit Half(float value) noexcept : bits(detail::float_to_half_bits(value)) {}
  /// The exact float value of these bits (a signalling NaN comes back quiet).
  explicit operator float() const noexcept { return detail::half_bits_to_float(bits); }

  /// Builds a Half from raw bits.
  [[nodiscard]] static constexpr Half from_bits(std::uint16_t raw) noexcept {
    Half h;
    h.bits = raw;
    return h;
  }
  /// Same bits, not IEEE equality: +0 and -0 differ, a NaN equals the same NaN.
  friend constexpr bool operator==(Half a, Half b) noexcept { return a.bits == b.bits; }
};

/// bfloat16: the top 16 bits of a float32; converts to and from float (round to nearest even).
struct BFloat16 {
  std::uint16_t bits = 0;  ///< the raw bits

  BFloat16() = default;
  /// Rounds `value` to the nearest bfloat16 (ties to even); NaN gives 0x7FC0 (torch's scalar conversion).
  explicit BFloat16(float value) noexcept : bits(detail::float_to_bf16_bits(value, 0x7FC0)) {}
  /// The exact float value of these bits.
  explicit operator float() const noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

  /// Builds a BFloat16 from raw bits.
  [[nodiscard]] static constexpr BFloat16 from_bits(std::uint16_t raw) noexcept {
    BFloat16 b;
    b.bits = raw;
    return b;
  }
  /// Same bits, not IEEE equality: +0 and -0 differ, a NaN equals the same NaN.
  friend constexpr bool operator==(BFloat16 a, BFloat16 b) noexcept { return a.bits == b.bits; }
};

/// A complex number of two halves (torch.complex32 / chalf): real part first.
struct ComplexHalf {
  Half real;  ///< real part
  Half imag;  ///< imaginary part
  /// Both parts have the same bits (as Half compares).
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
