// SPDX-License-Identifier: MIT
/// @file
/// Element conversion between dtypes with torch 1.13's CPU results bit for bit (x86): the kernels behind
/// Tensor::to(DType).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensorfile/config.hpp"
#include "tensorfile/core/dtype.hpp"

// The rules, as torch 1.13 applies them on x86 (tests/core/test_convert_torch checks each against real torch):
// - float -> integer truncates toward zero. Out of range, NaN and inf give what x86's cvtt instructions give:
//   int32 and int64 take INT_MIN; int8, int16 (and uint16) keep the low bits of the int32 result, uint8 (and
//   uint32) the low bits of the int64 result (torch casts to uint8 through int64). uint64: values in [0, 2^64)
//   exactly, others the bits of the int64 result.
// - integer -> integer keeps the low bits (two's complement); anything -> bool is `!= 0`; bool -> x is 0 or 1.
// - float64 and integers -> float16/bfloat16 go through float32 first (so float64 rounds twice, as in torch).
// - Narrowing floats round to nearest even. float16 results of NaN are sign | 0x7E00; bfloat16 results of NaN
//   are 0x7FC0 from every source: c10::BFloat16's own conversion, which torch applies to strided sources, short
//   float64 tensors and every tail, and everywhere under ATEN_CPU_CAPABILITY=default. (Its AVX2 kernels give 0xFFFF
//   instead for contiguous float32 sources and for the whole 16-element blocks of contiguous float64 ones, so there a
//   NaN's bits depend on its place and on torch's thread count; no conversion of the values alone can follow that.)
//   float16 -> float32 quiets a signalling NaN and keeps its payload; bfloat16 -> float32 keeps the bits.
// - complex -> real keeps the real part only (so complex -> bool tests the real part); real -> complex has +0
//   imaginary part.
// - float8 destinations (no torch 1.13 reference; these follow torch 2.x's c10 types): round to nearest even;
//   e4m3fn gives NaN (0x7F | sign) for what rounds past 448 (above 464), e5m2 gives inf from 61440 (which rounds to
//   65536) up; the fnuz kinds give NaN (0x80) for NaN, inf and values that round past their largest finite, and never
//   -0; e8m0fnu rounds the exponent to nearest (ties to even), gives 0xFF for NaN, inf, negatives and zero.
// - uint16/32/64 and float8 sources do not exist in torch 1.13; they follow the same rules as their neighbours.
// - Quantized dtypes are refused (UnsupportedError): their values need a scale and zero point.

namespace tensorfile {

namespace detail {

/// Whether conversion from and to `dtype` is supported (every dtype except the quantized ones).
[[nodiscard]] constexpr bool convertible(DType dtype) noexcept {
  return dtype_info(dtype).kind != DTypeKind::quantized;
}

/// Throws UnsupportedError unless elements of `from` can be converted to `to`.
TENSORFILE_ENTRY void check_convertible(DType from, DType to);

}  // namespace detail

/// Converts `count` elements of dtype `from` at `src` (`src_stride` elements apart) to dtype `to`, written
/// densely at `dst`, with torch's results (the rules at the top of this header). Borrows both buffers; the caller
/// guarantees `src` holds the strided elements and `dst` count * element_size(to) bytes. Same dtype copies the
/// bytes. Throws UnsupportedError for quantized dtypes.
TENSORFILE_ENTRY void convert_elements(DType from, const std::byte* src, std::int64_t src_stride, DType to,
                                       std::byte* dst, std::int64_t count);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(core_convert)
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/scalar_types.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define TENSORFILE_CONVERT_X86 1
#endif

namespace tensorfile {

namespace detail {

/// What every NaN becomes in bfloat16 (see the rules at the top of this header).
inline constexpr std::uint16_t bfloat16_nan = 0x7FC0;

/// One element read for conversion: integers as int64 or uint64, floats as float or double.
struct ConvertScalar {
  enum class Kind : std::uint8_t { i64, u64, f32, f64 };
  Kind kind = Kind::i64;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  float f = 0.0f;
  double d = 0.0;
};

template <class T>
inline T load_as(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
inline void store_as(std::byte* p, T v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

/// Encodes a float32 as a float8 with `exponent_bits` (4 or 5) and `fnuz` (the finite, no-negative-zero
/// variants); see the rules at the top of this header.
inline std::uint8_t float_to_float8_bits(float value, int exponent_bits, bool fnuz) noexcept {
  const int mantissa_bits = 7 - exponent_bits;
  const int bias = (1 << (exponent_bits - 1)) - 1 + (fnuz ? 1 : 0);
  const std::uint32_t w = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint8_t>((w >> 24) & 0x80u);
  const std::uint32_t abs = w & 0x7FFFFFFFu;
  const bool e5m2 = !fnuz && exponent_bits == 5;
  const auto nan = static_cast<std::uint8_t>(fnuz ? 0x80u : (sign | 0x7Fu));
  if (abs > 0x7F800000u) return nan;
  if (abs == 0x7F800000u) return e5m2 ? static_cast<std::uint8_t>(sign | 0x7Cu) : nan;
  // Largest finite magnitude code: e4m3fn 0x7E (448), e5m2 0x7B (57344), fnuz 0x7F.
  const std::uint32_t max_code = fnuz ? 0x7Fu : (exponent_bits == 4 ? 0x7Eu : 0x7Bu);
  // Round |value| to a multiple of the spacing at its binade (the subnormal spacing below the normal range).
  const int min_exponent = 1 - bias;  // of the smallest normal
  int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent < min_exponent) exponent = min_exponent;
  const int quantum = exponent - mantissa_bits;  // value of one unit in the last place
  // scaled = |value| / 2^quantum as an integer rounded to nearest even; |value| < 2^(quantum + mantissa_bits + 1).
  const double scaled_exact = static_cast<double>(std::bit_cast<float>(abs)) * std::ldexp(1.0, -quantum);
  auto units = static_cast<std::uint32_t>(scaled_exact);  // < 2^(mantissa_bits + 1): fits
  const double rest = scaled_exact - static_cast<double>(units);
  if (rest > 0.5 || (rest == 0.5 && (units & 1u))) ++units;
  // units counts quanta at `exponent`: below 2^mantissa_bits only in the subnormal range.
  std::uint32_t code = 0;
  if (units == 0) {
    code = 0;
  } else if (units < (1u << mantissa_bits)) {
    code = units;  // subnormal (exponent == min_exponent)
  } else {
    int e = exponent;
    if (units == (2u << mantissa_bits)) {  // rounded up into the next binade
      units >>= 1;
      ++e;
    }
    code = (static_cast<std::uint32_t>(e + bias) << mantissa_bits) | (units & ((1u << mantissa_bits) - 1u));
  }
  if (code > max_code) {
    if (e5m2) return static_cast<std::uint8_t>(sign | 0x7Cu);
    return nan;
  }
  if (fnuz && code == 0) return 0;  // no negative zero
  return static_cast<std::uint8_t>(sign | code);
}

/// Encodes a float32 as float8_e8m0fnu (a power of two 2^(code - 127)); see the rules at the top of this header.
inline std::uint8_t float_to_e8m0_bits(float value) noexcept {
  const std::uint32_t w = std::bit_cast<std::uint32_t>(value);
  if ((w & 0x80000000u) != 0 || w >= 0x7F800000u || w == 0) return 0xFF;
  std::uint32_t exponent = w >> 23;
  const std::uint32_t mantissa = w & 0x7FFFFFu;
  if (exponent == 0) return 0;  // subnormal float32: below 2^-126, nearest is 2^-127 or 2^-126; 2^-127 is code 0
  if (mantissa > 0x400000u || (mantissa == 0x400000u && (exponent & 1u))) ++exponent;
  return exponent > 0xFEu ? 0xFF : static_cast<std::uint8_t>(exponent);
}

/// Decodes float8_e8m0fnu.
inline float e8m0_bits_to_float(std::uint8_t bits) noexcept {
  if (bits == 0xFF) return std::bit_cast<float>(0x7FC00000u);
  if (bits == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127, a float32 subnormal
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 23);
}

/// x86's truncating conversion to int32: NaN and out-of-range values give INT32_MIN.
inline std::int32_t x86_truncate_i32(double v) noexcept {
  if (!(v > -2147483649.0 && v < 2147483648.0)) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(v);
}

/// x86's truncating conversion to int64: NaN and out-of-range values give INT64_MIN.
inline std::int64_t x86_truncate_i64(double v) noexcept {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}

/// Reads part `imag ? 1 : 0` of the element at `p` (the imaginary part of a real dtype is its zero).
inline ConvertScalar load_for_convert(DType from, const std::byte* p, bool imag) noexcept {
  using Kind = ConvertScalar::Kind;
  ConvertScalar s;
  const auto real_float = [&](float f) {
    s.kind = Kind::f32;
    s.f = imag ? 0.0f : f;
  };
  switch (from) {
    case DType::Bool: s.i = imag ? 0 : (std::to_integer<unsigned>(*p) != 0 ? 1 : 0); break;
    case DType::UInt8: s.i = imag ? 0 : load_as<std::uint8_t>(p); break;
    case DType::Int8: s.i = imag ? 0 : load_as<std::int8_t>(p); break;
    case DType::Int16: s.i = imag ? 0 : load_as<std::int16_t>(p); break;
    case DType::Int32: s.i = imag ? 0 : load_as<std::int32_t>(p); break;
    case DType::Int64: s.i = imag ? 0 : load_as<std::int64_t>(p); break;
    case DType::UInt16: s.i = imag ? 0 : load_as<std::uint16_t>(p); break;
    case DType::UInt32: s.i = imag ? 0 : load_as<std::uint32_t>(p); break;
    case DType::UInt64:
      s.kind = Kind::u64;
      s.u = imag ? 0 : load_as<std::uint64_t>(p);
      break;
    case DType::Float16: real_float(half_bits_to_float(load_as<std::uint16_t>(p))); break;
    case DType::BFloat16:
      real_float(std::bit_cast<float>(static_cast<std::uint32_t>(load_as<std::uint16_t>(p)) << 16));
      break;
    case DType::Float32: real_float(load_as<float>(p)); break;
    case DType::Float64:
      s.kind = Kind::f64;
      s.d = imag ? 0.0 : load_as<double>(p);
      break;
    case DType::Complex32:
      s.kind = Kind::f32;
      s.f = half_bits_to_float(load_as<std::uint16_t>(p + (imag ? 2 : 0)));
      break;
    case DType::Complex64:
      s.kind = Kind::f32;
      s.f = load_as<float>(p + (imag ? 4 : 0));
      break;
    case DType::Complex128:
      s.kind = Kind::f64;
      s.d = load_as<double>(p + (imag ? 8 : 0));
      break;
    case DType::Float8_e4m3fn: real_float(decode_float8(load_as<std::uint8_t>(p), 4, false)); break;
    case DType::Float8_e5m2: real_float(decode_float8(load_as<std::uint8_t>(p), 5, false)); break;
    case DType::Float8_e4m3fnuz: real_float(decode_float8(load_as<std::uint8_t>(p), 4, true)); break;
    case DType::Float8_e5m2fnuz: real_float(decode_float8(load_as<std::uint8_t>(p), 5, true)); break;
    case DType::Float8_e8m0fnu: real_float(e8m0_bits_to_float(load_as<std::uint8_t>(p))); break;
    default: break;  // quantized: refused before any element is read
  }
  return s;
}

/// The value as float32 (integers round to nearest, float64 rounds to nearest).
inline float convert_to_float(const ConvertScalar& s) noexcept {
  switch (s.kind) {
    case ConvertScalar::Kind::i64: return static_cast<float>(s.i);
    case ConvertScalar::Kind::u64: return static_cast<float>(s.u);
    case ConvertScalar::Kind::f32: return s.f;
    case ConvertScalar::Kind::f64: return static_cast<float>(s.d);
  }
  return 0.0f;
}

/// The value as float64 (exact except for integers past 2^53, which round to nearest).
inline double convert_to_double(const ConvertScalar& s) noexcept {
  switch (s.kind) {
    case ConvertScalar::Kind::i64: return static_cast<double>(s.i);
    case ConvertScalar::Kind::u64: return static_cast<double>(s.u);
    case ConvertScalar::Kind::f32: return static_cast<double>(s.f);
    case ConvertScalar::Kind::f64: return s.d;
  }
  return 0.0;
}

/// The integer an integer destination keeps the low bits of (see the rules at the top of this header).
inline std::uint64_t convert_to_integer_bits(const ConvertScalar& s, DType to) noexcept {
  if (s.kind == ConvertScalar::Kind::i64) return static_cast<std::uint64_t>(s.i);
  if (s.kind == ConvertScalar::Kind::u64) return s.u;
  const double v = convert_to_double(s);  // exact for float32 sources
  switch (to) {
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::UInt16: return static_cast<std::uint64_t>(static_cast<std::int64_t>(x86_truncate_i32(v)));
    case DType::UInt64:
      if (v >= 0.0 && v < 18446744073709551616.0) return static_cast<std::uint64_t>(v);
      return static_cast<std::uint64_t>(x86_truncate_i64(v));
    default: return static_cast<std::uint64_t>(x86_truncate_i64(v));  // uint8, uint32, int64
  }
}

/// Writes part `imag ? 1 : 0` of the element at `p` of dtype `to` (the imaginary part of a real dtype is skipped).
inline void store_converted(DType to, const ConvertScalar& s, std::byte* p, bool imag) noexcept {
  switch (to) {
    case DType::Bool: {
      bool nonzero = false;
      if (s.kind == ConvertScalar::Kind::i64)
        nonzero = s.i != 0;
      else if (s.kind == ConvertScalar::Kind::u64)
        nonzero = s.u != 0;
      else if (s.kind == ConvertScalar::Kind::f32)
        nonzero = s.f != 0.0f;
      else
        nonzero = s.d != 0.0;
      *p = std::byte{static_cast<unsigned char>(nonzero ? 1 : 0)};
      break;
    }
    case DType::UInt8: store_as(p, static_cast<std::uint8_t>(convert_to_integer_bits(s, to))); break;
    case DType::Int8: store_as(p, static_cast<std::int8_t>(convert_to_integer_bits(s, to))); break;
    case DType::Int16: store_as(p, static_cast<std::int16_t>(convert_to_integer_bits(s, to))); break;
    case DType::Int32: store_as(p, static_cast<std::int32_t>(convert_to_integer_bits(s, to))); break;
    case DType::Int64: store_as(p, static_cast<std::int64_t>(convert_to_integer_bits(s, to))); break;
    case DType::UInt16: store_as(p, static_cast<std::uint16_t>(convert_to_integer_bits(s, to))); break;
    case DType::UInt32: store_as(p, static_cast<std::uint32_t>(convert_to_integer_bits(s, to))); break;
    case DType::UInt64: store_as(p, convert_to_integer_bits(s, to)); break;
    case DType::Float16: store_as(p, float_to_half_bits(convert_to_float(s))); break;
    case DType::BFloat16: store_as(p, float_to_bf16_bits(convert_to_float(s), bfloat16_nan)); break;
    case DType::Float32: store_as(p, convert_to_float(s)); break;
    case DType::Float64: store_as(p, convert_to_double(s)); break;
    case DType::Complex32: store_as(p + (imag ? 2 : 0), float_to_half_bits(convert_to_float(s))); break;
    case DType::Complex64: store_as(p + (imag ? 4 : 0), convert_to_float(s)); break;
    case DType::Complex128: store_as(p + (imag ? 8 : 0), convert_to_double(s)); break;
    case DType::Float8_e4m3fn: store_as(p, float_to_float8_bits(convert_to_float(s), 4, false)); break;
    case DType::Float8_e5m2: store_as(p, float_to_float8_bits(convert_to_float(s), 5, false)); break;
    case DType::Float8_e4m3fnuz: store_as(p, float_to_float8_bits(convert_to_float(s), 4, true)); break;
    case DType::Float8_e5m2fnuz: store_as(p, float_to_float8_bits(convert_to_float(s), 5, true)); break;
    case DType::Float8_e8m0fnu: store_as(p, float_to_e8m0_bits(convert_to_float(s))); break;
    default: break;  // quantized: refused before any element is written
  }
}

// ---- contiguous fast paths (the pairs a checkpoint converts in bulk) -------------------------------------

inline void convert_f32_to_f64(const float* src, double* dst, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<double>(src[i]);
}
inline void convert_f64_to_f32(const double* src, float* dst, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
inline void convert_f32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_bf16_bits(src[i], bfloat16_nan);
}
inline void convert_bf16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(src[i]) << 16);
}
inline void convert_f32_to_f16(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
}
inline void convert_f16_to_f32(const std::uint16_t* src, float* dst, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

#if defined(TENSORFILE_CONVERT_X86)
// AVX2 + F16C versions, chosen at run time (cpu_has_avx2_f16c); each handles the tail with the portable loop.
// Written with the compilers' vector extensions and two F16C builtins (the same in g++ and clang++) rather than
// <immintrin.h>, whose declarations cost every TU that includes this header (all of them) about 10% of its compile.

using f32x8 = float __attribute__((vector_size(32)));
using f32x4 = float __attribute__((vector_size(16)));
using f64x4 = double __attribute__((vector_size(32)));
using u32x8 = std::uint32_t __attribute__((vector_size(32)));
using i32x8 = std::int32_t __attribute__((vector_size(32)));
using u16x8 = std::uint16_t __attribute__((vector_size(16)));
using i16x8 = short __attribute__((vector_size(16)));

/// Unaligned vector loads and stores (memcpy of a vector's bytes: one move instruction).
template <class V, class T>
__attribute__((target("avx2,f16c"))) inline V load_vector(const T* p) noexcept {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class T>
__attribute__((target("avx2,f16c"))) inline void store_vector(T* p, V v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

__attribute__((target("avx2,f16c"))) inline void convert_f32_to_f64_avx2(const float* src, double* dst,
                                                                         std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) store_vector(dst + i, __builtin_convertvector(load_vector<f32x4>(src + i), f64x4));
  convert_f32_to_f64(src + i, dst + i, n - i);
}

__attribute__((target("avx2,f16c"))) inline void convert_f64_to_f32_avx2(const double* src, float* dst,
                                                                         std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) store_vector(dst + i, __builtin_convertvector(load_vector<f64x4>(src + i), f32x4));
  convert_f64_to_f32(src + i, dst + i, n - i);
}

__attribute__((target("avx2,f16c"))) inline void convert_f32_to_bf16_avx2(const float* src, std::uint16_t* dst,
                                                                          std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const f32x8 v = load_vector<f32x8>(src + i);
    const auto w = reinterpret_cast<u32x8>(v);                     // same-size vector casts reinterpret the bits
    const u32x8 rounded = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;  // to nearest, ties to even
    const auto nan = reinterpret_cast<u32x8>(v != v);              // all ones where v is NaN
    const u32x8 bits = (rounded & ~nan) | ((u32x8{} + bfloat16_nan) & nan);
    store_vector(dst + i, __builtin_convertvector(bits, u16x8));  // every lane fits 16 bits
  }
  convert_f32_to_bf16(src + i, dst + i, n - i);
}

__attribute__((target("avx2,f16c"))) inline void convert_bf16_to_f32_avx2(const std::uint16_t* src, float* dst,
                                                                          std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const u32x8 w = __builtin_convertvector(load_vector<u16x8>(src + i), u32x8) << 16;
    store_vector(dst + i, reinterpret_cast<f32x8>(w));
  }
  convert_bf16_to_f32(src + i, dst + i, n - i);
}

__attribute__((target("avx2,f16c"))) inline void convert_f32_to_f16_avx2(const float* src, std::uint16_t* dst,
                                                                         std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // vcvtps2ph, rounding to nearest even (imm 0), exceptions not suppressed (they are masked anyway).
    const i16x8 h = __builtin_ia32_vcvtps2ph256(load_vector<f32x8>(src + i), 0);
    // NaN: torch gives sign | 0x7E00 whatever the payload.
    const i16x8 nan = (h & 0x7FFF) > 0x7C00;
    const i16x8 canonical = (h & static_cast<short>(0x8000)) | 0x7E00;
    store_vector(dst + i, (h & ~nan) | (canonical & nan));
  }
  convert_f32_to_f16(src + i, dst + i, n - i);
}

__attribute__((target("avx2,f16c"))) inline void convert_f16_to_f32_avx2(const std::uint16_t* src, float* dst,
                                                                         std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) store_vector(dst + i, __builtin_ia32_vcvtph2ps256(load_vector<i16x8>(src + i)));
  convert_f16_to_f32(src + i, dst + i, n - i);
}

/// Whether this CPU has AVX2 and F16C (checked once).
inline bool cpu_has_avx2_f16c() noexcept {
  static const bool has = [] {
    // F16C is cpuid leaf 1, ecx bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 29) & 1u) != 0;
  }();
  return has;
}
#endif

/// Converts `n` contiguous elements when (from, to) has a fast path; false (nothing written) otherwise.
inline bool convert_contiguous_fast(DType from, const std::byte* src, DType to, std::byte* dst,
                                    std::size_t n) noexcept {
  // Views of the bytes as the element types; the caller checked that both buffers are aligned for them.
  const auto* f32 = reinterpret_cast<const float*>(src);
  const auto* f64 = reinterpret_cast<const double*>(src);
  const auto* u16 = reinterpret_cast<const std::uint16_t*>(src);
  auto* out_f32 = reinterpret_cast<float*>(dst);
  auto* out_f64 = reinterpret_cast<double*>(dst);
  auto* out_u16 = reinterpret_cast<std::uint16_t*>(dst);
  [[maybe_unused]] bool simd = false;
#if defined(TENSORFILE_CONVERT_X86)
  simd = cpu_has_avx2_f16c();
#define TENSORFILE_CONVERT_PICK(name, ...) (simd ? name##_avx2(__VA_ARGS__) : name(__VA_ARGS__))
#else
#define TENSORFILE_CONVERT_PICK(name, ...) name(__VA_ARGS__)
#endif
  if (from == DType::Float32 && to == DType::Float64) {
    TENSORFILE_CONVERT_PICK(convert_f32_to_f64, f32, out_f64, n);
  } else if (from == DType::Float64 && to == DType::Float32) {
    TENSORFILE_CONVERT_PICK(convert_f64_to_f32, f64, out_f32, n);
  } else if (from == DType::Float32 && to == DType::BFloat16) {
    TENSORFILE_CONVERT_PICK(convert_f32_to_bf16, f32, out_u16, n);
  } else if (from == DType::BFloat16 && to == DType::Float32) {
    TENSORFILE_CONVERT_PICK(convert_bf16_to_f32, u16, out_f32, n);
  } else if (from == DType::Float32 && to == DType::Float16) {
    TENSORFILE_CONVERT_PICK(convert_f32_to_f16, f32, out_u16, n);
  } else if (from == DType::Float16 && to == DType::Float32) {
    TENSORFILE_CONVERT_PICK(convert_f16_to_f32, u16, out_f32, n);
  } else {
    return false;
  }
#undef TENSORFILE_CONVERT_PICK
  return true;
}

TENSORFILE_ENTRY void check_convertible(DType from, DType to) {
  for (const DType dtype : {from, to}) {
    if (!convertible(dtype)) {
      std::string reason = "cannot convert ";
      reason += dtype_name(from);
      reason += " to ";
      reason += dtype_name(to);
      reason += ": quantized values need their scale and zero point; expected a non-quantized dtype";
      throw UnsupportedError(reason);
    }
  }
}

}  // namespace detail

TENSORFILE_ENTRY void convert_elements(DType from, const std::byte* src, std::int64_t src_stride, DType to,
                                       std::byte* dst, std::int64_t count) {
  detail::check_convertible(from, to);
  if (count <= 0) return;
  const auto in_step = static_cast<std::int64_t>(element_size(from));
  const auto out_step = static_cast<std::int64_t>(element_size(to));
  if (src_stride == 1) {
    if (from == to) {
      std::memcpy(dst, src, static_cast<std::size_t>(count * in_step));
      return;
    }
    // The fast paths read and write through typed pointers: only for buffers aligned to their element sizes.
    const bool aligned = reinterpret_cast<std::uintptr_t>(src) % static_cast<std::uintptr_t>(in_step) == 0 &&
                         reinterpret_cast<std::uintptr_t>(dst) % static_cast<std::uintptr_t>(out_step) == 0;
    if (aligned && detail::convert_contiguous_fast(from, src, to, dst, static_cast<std::size_t>(count))) return;
  }
  const bool complex_out = is_complex(to);
  for (std::int64_t i = 0; i < count; ++i, dst += out_step) {
    const std::byte* in = src + i * src_stride * in_step;
    if (from == to) {
      std::memcpy(dst, in, static_cast<std::size_t>(in_step));
      continue;
    }
    detail::store_converted(to, detail::load_for_convert(from, in, false), dst, false);
    if (complex_out) detail::store_converted(to, detail::load_for_convert(from, in, true), dst, true);
  }
}

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(core_convert)
