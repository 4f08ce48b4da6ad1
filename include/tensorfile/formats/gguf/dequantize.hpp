// SPDX-License-Identifier: MIT
/// @file
/// ggml's block formats to float32 and back: dequantize Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the K-quants Q2_K-Q6_K and
/// Q8_K (and the plain F32, F16, BF16), quantize to Q8_0 and Q4_0, each as ggml's reference code computes it.
#pragma once

#include <cstddef>
#include <span>

#include "tensorfile/config.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"

namespace tensorfile {

/// Whether dequantize() reads `type`.
[[nodiscard]] constexpr bool can_dequantize(GgmlType type) noexcept {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q8_K: return true;
    default: return false;
  }
}

/// Whether quantize() writes `type` (Q8_0 and Q4_0).
[[nodiscard]] constexpr bool can_quantize(GgmlType type) noexcept {
  return type == GgmlType::Q8_0 || type == GgmlType::Q4_0;
}

/// Decodes `blocks`, whole blocks of `type` as a GGUF file stores them (little-endian), into `out`, which holds
/// exactly their elements (blocks / bytes per block * block size floats), with ggml's dequantize_row_* arithmetic:
/// the same floats. Throws UnsupportedError for a type it does not read (see can_dequantize) and ArgumentError when
/// `blocks` is not whole blocks or `out` has another length. Every bit pattern is read (no input is invalid).
TENSORFILE_ENTRY void dequantize(GgmlType type, std::span<const std::byte> blocks, std::span<float> out);

/// Encodes `in` (a multiple of 32 floats) into `out` (in.size() / 32 blocks of `type`) with ggml's reference
/// rounding (quantize_row_q8_0_ref, quantize_row_q4_0_ref): the same bytes for finite input. Throws
/// UnsupportedError for a type other than Q8_0 and Q4_0, ArgumentError when the sizes disagree.
TENSORFILE_ENTRY void quantize(GgmlType type, std::span<const float> in, std::span<std::byte> out);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_gguf_dequantize)
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/scalar_types.hpp"

namespace tensorfile {

namespace detail {

// Each kernel turns `n` blocks at `x` into n * block size floats at `y`, following the reference's loop and its
// order of operations (so that the floats are the reference's own).

inline float ggml_f16(const unsigned char* p) noexcept {
  return half_bits_to_float(static_cast<std::uint16_t>(p[0] | p[1] << 8));
}

inline void dequantize_q4_0(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 18, y += 32) {
    const float d = ggml_f16(x);
    const unsigned char* qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

inline void dequantize_q4_1(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 20, y += 32) {
    const float d = ggml_f16(x);
    const float m = ggml_f16(x + 2);
    const unsigned char* qs = x + 4;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

inline std::uint32_t ggml_u32(const unsigned char* p) noexcept {
  return p[0] | static_cast<std::uint32_t>(p[1]) << 8 | static_cast<std::uint32_t>(p[2]) << 16 |
         static_cast<std::uint32_t>(p[3]) << 24;
}

inline void dequantize_q5_0(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 22, y += 32) {
    const float d = ggml_f16(x);
    const std::uint32_t qh = ggml_u32(x + 2);  // bit j: the fifth bit of element j
    const unsigned char* qs = x + 6;
    for (int j = 0; j < 16; ++j) {
      const auto h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const auto h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
      y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

inline void dequantize_q5_1(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 24, y += 32) {
    const float d = ggml_f16(x);
    const float m = ggml_f16(x + 2);
    const std::uint32_t qh = ggml_u32(x + 4);
    const unsigned char* qs = x + 8;
    for (int j = 0; j < 16; ++j) {
      const auto h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const auto h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
      y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
    }
  }
}

inline void dequantize_q8_0(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 34, y += 32) {
    const float d = ggml_f16(x);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(x[2 + j])) * d;
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits each), d, dmin.
inline void dequantize_q2_k(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 84) {
    const unsigned char* scales = x;
    const unsigned char* q = x + 16;
    const float d = ggml_f16(x + 80);
    const float min = ggml_f16(x + 82);
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const unsigned char sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0x0F);
          const float ml = min * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K: hmask[32] (the third bit, inverted), qs[64] (low 2 bits), scales[12] (16 six-bit scales), d.
inline void dequantize_q3_k(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 110) {
    const unsigned char* hm = x;
    const unsigned char* q = x + 32;
    const unsigned char* packed = x + 96;
    const float d_all = ggml_f16(x + 108);
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? packed[j] & 0x0F : packed[j - 8] >> 4;
      const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (low | high << 4) - 32;
    }
    int is = 0;
    unsigned m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * static_cast<float>(scales[is++]);
          for (int l = 16 * part; l < 16 * part + 16; ++l) {
            *y++ = dl * static_cast<float>(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          }
        }
      }
    }
  }
}

// The j-th 6-bit scale and min of Q4_K and Q5_K's 12 packed bytes.
inline void ggml_scale_min_k4(int j, const unsigned char* q, int& d, int& m) noexcept {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin, scales[12], qs[128].
inline void dequantize_q4_k(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 144) {
    const float d = ggml_f16(x);
    const float min = ggml_f16(x + 2);
    const unsigned char* scales = x + 4;
    const unsigned char* q = x + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
      int sc = 0;
      int mn = 0;
      ggml_scale_min_k4(is, scales, sc, mn);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = min * static_cast<float>(mn);
      ggml_scale_min_k4(is + 1, scales, sc, mn);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = min * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K: d, dmin, scales[12], qh[32] (the fifth bits), qs[128].
inline void dequantize_q5_k(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 176) {
    const float d = ggml_f16(x);
    const float min = ggml_f16(x + 2);
    const unsigned char* scales = x + 4;
    const unsigned char* qh = x + 16;
    const unsigned char* ql = x + 48;
    unsigned u1 = 1;
    unsigned u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      int sc = 0;
      int mn = 0;
      ggml_scale_min_k4(is, scales, sc, mn);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = min * static_cast<float>(mn);
      ggml_scale_min_k4(is + 1, scales, sc, mn);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = min * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
inline void dequantize_q6_k(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 210) {
    const float d = ggml_f16(x + 208);
    const unsigned char* ql = x;
    const unsigned char* qh = x + 128;
    const unsigned char* sc = x + 192;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      const auto s = [&](int i) { return static_cast<float>(static_cast<std::int8_t>(sc[i])); };
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * s(is) * static_cast<float>(q1);
        y[l + 32] = d * s(is + 2) * static_cast<float>(q2);
        y[l + 64] = d * s(is + 4) * static_cast<float>(q3);
        y[l + 96] = d * s(is + 6) * static_cast<float>(q4);
      }
    }
  }
}

// Q8_K: a float32 scale, qs[256] (int8), bsums[16] (not needed to decode).
inline void dequantize_q8_k(const unsigned char* __restrict x, float* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 292, y += 256) {
    const float d = std::bit_cast<float>(ggml_u32(x));
    for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<std::int8_t>(x[4 + j]));
  }
}

inline void dequantize_plain(GgmlType type, const unsigned char* __restrict x, float* __restrict y,
                             std::size_t n) noexcept {
  if (type == GgmlType::F32) {
    if (n > 0) std::memcpy(y, x, n * 4);
  } else if (type == GgmlType::F16) {
    for (std::size_t i = 0; i < n; ++i) y[i] = ggml_f16(x + 2 * i);
  } else {  // BF16: the top half of a float32
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = std::bit_cast<float>(static_cast<std::uint32_t>(x[2 * i] | x[2 * i + 1] << 8) << 16);
    }
  }
}

inline void put_f16(unsigned char* p, float value) noexcept {
  const std::uint16_t bits = float_to_half_bits(value);
  p[0] = static_cast<unsigned char>(bits & 0xFF);
  p[1] = static_cast<unsigned char>(bits >> 8);
}

// quantize_overflows: a block whose largest magnitude is below about 3.7e-37 (float32 subnormals and just above)
// has a scale d under 2^-128, so 1 / d is infinite and every x * id is +-inf or NaN. The reference then converts
// those to int8, which C leaves undefined; ggml as built for x86-64 (cvttss2si, the result's low byte) writes 0 for
// every quant, in Q8_0 and in Q4_0 (MIN(15, 0)), and so does this code: the bytes of x86-64 ggml (checked against it
// by gguf.peer). The f16 scale of such a block is 0 anyway, so every quant dequantizes to 0 whatever it holds.

inline void quantize_q8_0(const float* __restrict x, unsigned char* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 32, y += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(y, d);
    if (std::isinf(id)) {  // see quantize_overflows
      std::memset(y + 2, 0, 32);
      continue;
    }
    for (int j = 0; j < 32; ++j) {
      // roundf (halves away from zero) written out so that it vectorizes: |v| <= 127 for finite input, where the
      // cast truncates exactly and v - t is exact; the clamp and the NaN test only keep the cast defined.
      float v = x[j] * id;
      v = v == v ? std::clamp(v, -127.0f, 127.0f) : 0.0f;
      const int t = static_cast<int>(v);
      const float rest = v - static_cast<float>(t);
      const int q = t + (rest >= 0.5f ? 1 : 0) - (rest <= -0.5f ? 1 : 0);
      y[2 + j] = static_cast<unsigned char>(static_cast<std::int8_t>(q));
    }
  }
}

inline void quantize_q4_0(const float* __restrict x, unsigned char* __restrict y, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n; ++b, x += 32, y += 18) {
    float amax = 0.0f;
    float max = 0.0f;  // the value of largest magnitude, sign kept: the first such in the block
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(y, d);
    if (std::isinf(id)) {  // see quantize_overflows
      std::memset(y + 2, 0, 16);
      continue;
    }
    // (int8_t)(v + 8.5f) truncates; v + 8.5 lies in [0.5, 16.5] for finite input, so the clamp to [0, 15] is the
    // reference's MIN(15, ...) and keeps a NaN from the cast.
    const auto level = [](float v) {
      const float t = v + 8.5f;
      return t >= 15.0f ? 15 : t > 0.0f ? static_cast<int>(t) : 0;
    };
    for (int j = 0; j < 16; ++j) {
      y[2 + j] = static_cast<unsigned char>(level(x[j] * id) | level(x[j + 16] * id) << 4);
    }
  }
}

}  // namespace detail

TENSORFILE_ENTRY void dequantize(GgmlType type, std::span<const std::byte> blocks, std::span<float> out) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (!can_dequantize(type)) {
    throw UnsupportedError("dequantize does not read ggml type " + std::string(info.name) +
                           "; expected f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0 or q2_K-q6_K, q8_K");
  }
  if (blocks.size() % info.block_bytes != 0) {
    throw ArgumentError("dequantize of " + std::string(info.name) + " takes whole blocks of " +
                        std::to_string(info.block_bytes) + " bytes; got " + std::to_string(blocks.size()) + " bytes");
  }
  const std::size_t n = blocks.size() / info.block_bytes;
  if (out.size() / info.block_size != n || out.size() % info.block_size != 0) {
    throw ArgumentError("dequantize of " + std::to_string(n) + " " + std::string(info.name) + " blocks writes " +
                        std::to_string(n) + " * " + std::to_string(info.block_size) + " floats; got room for " +
                        std::to_string(out.size()));
  }
  const auto* x = reinterpret_cast<const unsigned char*>(blocks.data());
  float* y = out.data();
  switch (type) {
    case GgmlType::Q4_0: return detail::dequantize_q4_0(x, y, n);
    case GgmlType::Q4_1: return detail::dequantize_q4_1(x, y, n);
    case GgmlType::Q5_0: return detail::dequantize_q5_0(x, y, n);
    case GgmlType::Q5_1: return detail::dequantize_q5_1(x, y, n);
    case GgmlType::Q8_0: return detail::dequantize_q8_0(x, y, n);
    case GgmlType::Q2_K: return detail::dequantize_q2_k(x, y, n);
    case GgmlType::Q3_K: return detail::dequantize_q3_k(x, y, n);
    case GgmlType::Q4_K: return detail::dequantize_q4_k(x, y, n);
    case GgmlType::Q5_K: return detail::dequantize_q5_k(x, y, n);
    case GgmlType::Q6_K: return detail::dequantize_q6_k(x, y, n);
    case GgmlType::Q8_K: return detail::dequantize_q8_k(x, y, n);
    default: return detail::dequantize_plain(type, x, y, n);
  }
}

TENSORFILE_ENTRY void quantize(GgmlType type, std::span<const float> in, std::span<std::byte> out) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (!can_quantize(type)) {
    throw UnsupportedError("quantize does not write ggml type " + std::string(info.name) + "; expected q8_0 or q4_0");
  }
  if (in.size() % 32 != 0) {
    throw ArgumentError("quantize to " + std::string(info.name) + " takes whole blocks of 32 floats; got " +
                        std::to_string(in.size()));
  }
  const std::size_t n = in.size() / 32;
  if (out.size() != n * info.block_bytes) {
    throw ArgumentError("quantize of " + std::to_string(in.size()) + " floats to " + std::string(info.name) +
                        " writes " + std::to_string(n * info.block_bytes) + " bytes; got room for " +
                        std::to_string(out.size()));
  }
  auto* y = reinterpret_cast<unsigned char*>(out.data());
  if (type == GgmlType::Q8_0) {
    detail::quantize_q8_0(in.data(), y, n);
  } else {
    detail::quantize_q4_0(in.data(), y, n);
  }
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_gguf_dequantize)
