// SPDX-License-Identifier: MIT
// ggml block formats: each dequantize kernel against blocks packed here from the layout ggml documents, with the
// expected floats from the reference formulas (edge scales included), and quantize -> dequantize round trips.
#include <tensorfile/core/scalar_types.hpp>
#include <tensorfile/formats/gguf/dequantize.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensorfile_catch.hpp"

namespace gguf_dequantize_test {

using namespace tensorfile;

// A vector indexed by int as well (the layouts' arithmetic is in int).
template <class T>
struct Vec : std::vector<T> {
  using std::vector<T>::vector;
  T& operator[](int i) { return std::vector<T>::at(static_cast<std::size_t>(i)); }
  const T& operator[](int i) const { return std::vector<T>::at(static_cast<std::size_t>(i)); }
  T& operator[](std::size_t i) { return std::vector<T>::at(i); }
  const T& operator[](std::size_t i) const { return std::vector<T>::at(i); }
};

Vec<float> run(GgmlType type, const std::vector<std::uint8_t>& block) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  Vec<float> out(block.size() / info.block_bytes * info.block_size, -12345.0f);
  dequantize(type, std::as_bytes(std::span(block)), out);
  return out;
}

void put_f16(Vec<std::uint8_t>& b, std::size_t at, std::uint16_t bits) {
  b[at] = static_cast<std::uint8_t>(bits & 0xFF);
  b[at + 1] = static_cast<std::uint8_t>(bits >> 8);
}

float f16(std::uint16_t bits) { return static_cast<float>(Half::from_bits(bits)); }

// The scales every block type is tried with: 0.5, 0, -0.5, the smallest subnormal (2^-24), the largest finite
// (65504), and -2 as f16 bits.
const std::uint16_t edge_scales[] = {0x3800, 0x0000, 0xB800, 0x0001, 0x7BFF, 0xC000};

TEST_CASE("dequantize: q4_0, q4_1, q5_0, q5_1 and q8_0 on crafted blocks") {
  CHECK(f16(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16(0x7BFF) == 65504.0f);
  SECTION("q4_0: (q - 8) * d, low nibbles first") {
    for (const std::uint16_t d_bits : edge_scales) {
      Vec<std::uint8_t> b(18);
      put_f16(b, 0, d_bits);
      for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
      const Vec<float> y = run(GgmlType::Q4_0, b);
      const float d = f16(d_bits);
      for (int j = 0; j < 16; ++j) {
        CHECK(y[j] == static_cast<float>(j - 8) * d);
        CHECK(y[16 + j] == static_cast<float>(7 - j) * d);
      }
    }
    Vec<std::uint8_t> b(18);
    put_f16(b, 0, 0x3800);  // 0.5
    b[2] = 0xF0;            // element 0 quant 0 (the minimum), element 16 quant 15 (the maximum)
    const Vec<float> y = run(GgmlType::Q4_0, b);
    CHECK(y[0] == -4.0f);
    CHECK(y[16] == 3.5f);
    CHECK(y[1] == -4.0f);
  }
  SECTION("q4_1: q * d + m") {
    for (const std::uint16_t d_bits : edge_scales) {
      Vec<std::uint8_t> b(20);
      put_f16(b, 0, d_bits);
      put_f16(b, 2, 0xBC00);  // m = -1
      for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
      const Vec<float> y = run(GgmlType::Q4_1, b);
      const float d = f16(d_bits);
      for (int j = 0; j < 16; ++j) {
        CHECK(y[j] == static_cast<float>(j) * d - 1.0f);
        CHECK(y[16 + j] == static_cast<float>(15 - j) * d - 1.0f);
      }
    }
    Vec<std::uint8_t> b(20);
    put_f16(b, 0, 0x3400);  // 0.25
    put_f16(b, 2, 0xBC00);
    b[4] = 0xF0;
    const Vec<float> y = run(GgmlType::Q4_1, b);
    CHECK(y[0] == -1.0f);
    CHECK(y[16] == 2.75f);
  }
  SECTION("q5_0 and q5_1: bit i of qh is element i's fifth bit") {
    for (const bool with_min : {false, true}) {
      for (const std::uint16_t d_bits : edge_scales) {
        const std::size_t base = with_min ? 4 : 2;
        Vec<std::uint8_t> b(with_min ? 24 : 22);
        put_f16(b, 0, d_bits);
        if (with_min) put_f16(b, 2, 0x4000);  // m = 2
        const std::uint32_t qh = 0xA5C3F00Fu;
        for (int i = 0; i < 4; ++i) b[base + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(qh >> (8 * i));
        for (int j = 0; j < 16; ++j)
          b[base + 4 + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(j | (15 - j) << 4);
        const Vec<float> y = run(with_min ? GgmlType::Q5_1 : GgmlType::Q5_0, b);
        const float d = f16(d_bits);
        for (int i = 0; i < 32; ++i) {
          const int low = i < 16 ? i : 15 - (i - 16);
          const int q = low | static_cast<int>((qh >> i) & 1) << 4;
          const float expected = with_min ? static_cast<float>(q) * d + 2.0f : static_cast<float>(q - 16) * d;
          INFO(i);
          CHECK(y[static_cast<std::size_t>(i)] == expected);
        }
      }
    }
    Vec<std::uint8_t> b(22);
    put_f16(b, 0, 0x3C00);  // 1
    b[2] = 0x02;            // element 1: fifth bit set
    b[6] = 0x00;            // element 0: quant 0 -> -16 (the minimum)
    b[7] = 0x0F;            // element 1: 15 | 16 = 31 -> 15 (the maximum)
    const Vec<float> y = run(GgmlType::Q5_0, b);
    CHECK(y[0] == -16.0f);
    CHECK(y[1] == 15.0f);
  }
  SECTION("q8_0: q * d, q signed") {
    for (const std::uint16_t d_bits : edge_scales) {
      Vec<std::uint8_t> b(34);
      put_f16(b, 0, d_bits);
      for (int j = 0; j < 32; ++j)
        b[2 + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(j * 8);  // 0, 8 ... 248 (-8)
      b[3] = 0x80;                                                              // -128, the minimum
      b[4] = 0x7F;                                                              // 127, the maximum
      const Vec<float> y = run(GgmlType::Q8_0, b);
      const float d = f16(d_bits);
      CHECK(y[1] == -128.0f * d);
      CHECK(y[2] == 127.0f * d);
      for (int j = 3; j < 32; ++j)
        CHECK(y[static_cast<std::size_t>(j)] == static_cast<float>(static_cast<std::int8_t>(j * 8)) * d);
    }
  }
  SECTION("an f16 infinity as the scale gives infinities, and 0 * inf a NaN, as the reference computes") {
    Vec<std::uint8_t> b(34);
    put_f16(b, 0, 0x7C00);
    b[2] = 1;
    b[3] = 0xFF;
    const Vec<float> y = run(GgmlType::Q8_0, b);
    CHECK(std::isinf(y[0]));
    CHECK(y[1] == -INFINITY);
    CHECK(std::isnan(y[2]));
  }
}

// The K-quants, packed here from ggml's layout: 256 elements, one scale (and min) per sub-block.
struct KBlock {
  Vec<int> q = Vec<int>(256);  // each element's quant as the formula uses it
  Vec<int> scale;              // per sub-block
  Vec<int> min;                // per sub-block (Q2_K, Q4_K, Q5_K)
};

KBlock random_k(std::mt19937& rng, int sub_blocks, int q_lo, int q_hi, int s_lo, int s_hi, int m_hi) {
  KBlock k;
  const auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1)); };
  for (int& q : k.q) q = pick(q_lo, q_hi);
  k.q[0] = q_lo;  // the extremes always appear
  k.q[255] = q_hi;
  for (int s = 0; s < sub_blocks; ++s) k.scale.push_back(pick(s_lo, s_hi));
  k.scale[0] = s_hi;
  k.scale[1] = s_lo;
  for (int s = 0; s < sub_blocks && m_hi > 0; ++s) k.min.push_back(pick(0, m_hi));
  if (m_hi > 0) k.min[1] = m_hi;
  return k;
}

// Q4_K and Q5_K's 12 bytes of eight 6-bit scales and mins: the first four of each whole in bytes 0-3 and 4-7,
// the last four's low nibbles in bytes 8-11, their top two bits in bits 6-7 of bytes 0-3 (scales) and 4-7 (mins).
void pack_k4_scales(const KBlock& k, std::uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<std::uint8_t>(k.scale[j] | (k.scale[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<std::uint8_t>(k.min[j] | (k.min[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<std::uint8_t>((k.scale[j + 4] & 0xF) | (k.min[j + 4] & 0xF) << 4);
  }
}

TEST_CASE("dequantize: the K-quants on blocks packed from ggml's layout") {
  std::mt19937 rng(45);
  const std::uint16_t d_bits_list[] = {0x3800, 0x0000, 0xB800, 0x0001, 0x7BFF};
  for (const std::uint16_t d_bits : d_bits_list) {
    const float d = f16(d_bits);
    const std::uint16_t dmin_bits = 0x3400;  // 0.25
    const float dmin = f16(dmin_bits);
    INFO("d bits " << d_bits);
    SECTION("q2_K: (d * scale) * q - dmin * min, 16 elements a scale, 2 bits in 4 shifts of 32 bytes") {
      const KBlock k = random_k(rng, 16, 0, 3, 0, 15, 15);
      Vec<std::uint8_t> b(84);
      for (int s = 0; s < 16; ++s)
        b[static_cast<std::size_t>(s)] = static_cast<std::uint8_t>(k.scale[s] | k.min[s] << 4);
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, r = i % 128, shift = 2 * (r / 32), l32 = r % 32;
        b[16 + static_cast<std::size_t>(h * 32 + l32)] |= static_cast<std::uint8_t>(k.q[i] << shift);
      }
      put_f16(b, 80, d_bits);
      put_f16(b, 82, dmin_bits);
      const Vec<float> y = run(GgmlType::Q2_K, b);
      for (int i = 0; i < 256; ++i) {
        const int s = i / 16;
        CHECK(y[static_cast<std::size_t>(i)] ==
              d * static_cast<float>(k.scale[s]) * static_cast<float>(k.q[i]) - dmin * static_cast<float>(k.min[s]));
      }
    }
    SECTION("q3_K: (d * (scale - 32)) * q, q in -4..3 with its third bit inverted in hmask") {
      const KBlock k = random_k(rng, 16, -4, 3, 0, 63, 0);
      Vec<std::uint8_t> b(110);
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, r = i % 128, s = r / 32, l32 = r % 32;
        const int low = k.q[i] >= 0 ? k.q[i] : k.q[i] + 4;
        b[32 + static_cast<std::size_t>(h * 32 + l32)] |= static_cast<std::uint8_t>(low << (2 * s));
        if (k.q[i] >= 0) b[static_cast<std::size_t>(l32)] |= static_cast<std::uint8_t>(1 << (h * 4 + s));
      }
      // 16 six-bit scales: low nibble of scale j in byte j % 8 (high nibble for j >= 8), top bits in byte 8 + j % 4.
      for (int j = 0; j < 16; ++j) {
        b[96 + static_cast<std::size_t>(j % 8)] |= static_cast<std::uint8_t>((k.scale[j] & 0xF) << (j >= 8 ? 4 : 0));
        b[96 + 8 + static_cast<std::size_t>(j % 4)] |= static_cast<std::uint8_t>((k.scale[j] >> 4) << (2 * (j / 4)));
      }
      put_f16(b, 108, d_bits);
      const Vec<float> y = run(GgmlType::Q3_K, b);
      for (int i = 0; i < 256; ++i) {
        CHECK(y[static_cast<std::size_t>(i)] ==
              d * static_cast<float>(k.scale[i / 16] - 32) * static_cast<float>(k.q[i]));
      }
    }
    SECTION("q4_K and q5_K: (d * scale) * q - dmin * min, 32 elements a scale") {
      for (const bool five : {false, true}) {
        const KBlock k = random_k(rng, 8, 0, five ? 31 : 15, 0, 63, 63);
        Vec<std::uint8_t> b(five ? 176 : 144);
        put_f16(b, 0, d_bits);
        put_f16(b, 2, dmin_bits);
        pack_k4_scales(k, b.data() + 4);
        const std::size_t qs = five ? 48 : 16;
        for (int i = 0; i < 256; ++i) {
          const int sb = i / 32, l = i % 32;
          b[qs + static_cast<std::size_t>((sb / 2) * 32 + l)] |=
              static_cast<std::uint8_t>((k.q[i] & 0xF) << (sb % 2 ? 4 : 0));
          if (five && k.q[i] >= 16) b[16 + static_cast<std::size_t>(l)] |= static_cast<std::uint8_t>(1 << sb);
        }
        const Vec<float> y = run(five ? GgmlType::Q5_K : GgmlType::Q4_K, b);
        for (int i = 0; i < 256; ++i) {
          const int sb = i / 32;
          INFO(i);
          CHECK(y[static_cast<std::size_t>(i)] == d * static_cast<float>(k.scale[sb]) * static_cast<float>(k.q[i]) -
                                                      dmin * static_cast<float>(k.min[sb]));
        }
      }
    }
    SECTION("q6_K: (d * scale) * (q - 32), scales signed, 16 elements a scale") {
      const KBlock k = random_k(rng, 16, 0, 63, -128, 127, 0);
      Vec<std::uint8_t> b(210);
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
        const std::size_t ql = static_cast<std::size_t>(h * 64 + (quarter % 2) * 32 + l);
        b[ql] |= static_cast<std::uint8_t>((k.q[i] & 0xF) << (quarter >= 2 ? 4 : 0));
        b[128 + static_cast<std::size_t>(h * 32 + l)] |= static_cast<std::uint8_t>((k.q[i] >> 4) << (2 * quarter));
      }
      for (int s = 0; s < 16; ++s) b[192 + static_cast<std::size_t>(s)] = static_cast<std::uint8_t>(k.scale[s]);
      put_f16(b, 208, d_bits);
      const Vec<float> y = run(GgmlType::Q6_K, b);
      for (int i = 0; i < 256; ++i) {
        CHECK(y[static_cast<std::size_t>(i)] ==
              d * static_cast<float>(k.scale[i / 16]) * static_cast<float>(k.q[i] - 32));
      }
    }
  }
  SECTION("q8_K: a float32 scale times each int8") {
    Vec<std::uint8_t> b(292);
    const auto d = std::bit_cast<std::uint32_t>(-0.125f);
    for (int i = 0; i < 4; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(d >> (8 * i));
    for (int j = 0; j < 256; ++j) b[4 + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(j);
    const Vec<float> y = run(GgmlType::Q8_K, b);
    CHECK(y[1] == -0.125f);
    CHECK(y[127] == -0.125f * 127);
    CHECK(y[128] == 16.0f);  // -128 * -0.125
    CHECK(y[255] == 0.125f);
  }
  SECTION("a hand-worked q4_K block") {
    Vec<std::uint8_t> b(144);
    put_f16(b, 0, 0x3C00);  // d = 1
    put_f16(b, 2, 0x3800);  // dmin = 0.5
    b[4] = 3;               // scale 0 = 3
    b[8] = 2;               // min 0 = 2
    b[12] = 0x45;           // scale 4 low nibble 5, min 4 low nibble 4
    b[4 + 0] |= 0x40;       // scale 4 top bits 01: 5 | 16 = 21
    b[16] = 0x0F;           // element 0: 15; element 32: 0
    b[16 + 64] = 0x07;      // element 128 (sub-block 4): 7
    const Vec<float> y = run(GgmlType::Q4_K, b);
    CHECK(y[0] == 3.0f * 15 - 0.5f * 2);  // 44
    CHECK(y[1] == -1.0f);                 // quant 0: -dmin * min
    CHECK(y[128] == 21.0f * 7 - 0.5f * 4);
  }
}

TEST_CASE("dequantize: plain types and refusals") {
  SECTION("f16, bf16 and f32") {
    const Vec<std::uint8_t> h = {0x00, 0x3C, 0x01, 0x00, 0xFF, 0xFB};  // 1, 2^-24, -65504
    const Vec<float> y = run(GgmlType::F16, h);
    CHECK(y == std::vector<float>{1.0f, std::ldexp(1.0f, -24), -65504.0f});
    const Vec<std::uint8_t> bf = {0x80, 0x3F, 0x00, 0xC0};  // 1, -2
    CHECK(run(GgmlType::BF16, bf) == std::vector<float>{1.0f, -2.0f});
    const Vec<std::uint8_t> f = {0x00, 0x00, 0x40, 0x40};  // 3
    CHECK(run(GgmlType::F32, f) == std::vector<float>{3.0f});
  }
  SECTION("types it does not read, and sizes that disagree") {
    CHECK_FALSE(can_dequantize(GgmlType::IQ2_XXS));
    CHECK_FALSE(can_dequantize(GgmlType::I32));
    std::vector<std::byte> blocks(66);
    std::vector<float> out(256);
    CHECK_THROWS_AS(dequantize(GgmlType::IQ2_XXS, blocks, out), UnsupportedError);
    std::vector<std::byte> q(35);
    std::vector<float> y(32);
    CHECK_THROWS_AS(dequantize(GgmlType::Q8_0, q, y), ArgumentError);
    q.resize(34);
    y.resize(33);
    CHECK_THROWS_AS(dequantize(GgmlType::Q8_0, q, y), ArgumentError);
    y.resize(32);
    CHECK_NOTHROW(dequantize(GgmlType::Q8_0, q, y));
    CHECK_THROWS_AS(quantize(GgmlType::Q4_1, y, q), UnsupportedError);
    CHECK_THROWS_AS(quantize(GgmlType::Q8_0, std::span(y).first(16), q), ArgumentError);
    CHECK_THROWS_AS(quantize(GgmlType::Q4_0, y, q), ArgumentError);  // q4_0 blocks are 18 bytes
  }
}

Vec<std::uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  Vec<std::uint8_t> out(x.size() / 32 * ggml_type_info(type).block_bytes);
  quantize(type, x, std::as_writable_bytes(std::span(out)));
  return out;
}

TEST_CASE("quantize: q8_0 and q4_0 with the reference rounding") {
  SECTION("q8_0: d = amax / 127, quants rounded half away from zero") {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;  // d = 1
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 0.49f;
    x[4] = -127.0f;
    x[5] = -0.5f;
    const Vec<std::uint8_t> b = quantized(GgmlType::Q8_0, x);
    CHECK((b[0] | b[1] << 8) == 0x3C00);
    CHECK(static_cast<std::int8_t>(b[2]) == 127);
    CHECK(static_cast<std::int8_t>(b[3]) == 3);
    CHECK(static_cast<std::int8_t>(b[4]) == -3);
    CHECK(static_cast<std::int8_t>(b[5]) == 0);
    CHECK(static_cast<std::int8_t>(b[6]) == -127);
    CHECK(static_cast<std::int8_t>(b[7]) == -1);
  }
  SECTION("q4_0: d = (the value of largest magnitude) / -8, quants min(15, trunc(x / d + 8.5))") {
    std::vector<float> x(32, 0.0f);
    x[0] = -8.0f;   // d = 1; this one's quant is 0
    x[1] = 8.0f;    // 16.5 -> 16 -> 15 (the clamp)
    x[2] = -0.5f;   // 8
    x[3] = 0.49f;   // 8.99 -> 8
    x[4] = 0.5f;    // 9
    x[5] = -0.51f;  // 7.99 -> 7
    x[16] = 3.0f;   // 11, in the high nibble of byte 0
    const Vec<std::uint8_t> b = quantized(GgmlType::Q4_0, x);
    CHECK((b[0] | b[1] << 8) == 0x3C00);
    CHECK(b[2] == (0 | 11 << 4));
    CHECK((b[3] & 0xF) == 15);
    CHECK((b[4] & 0xF) == 8);
    CHECK((b[5] & 0xF) == 8);
    CHECK((b[6] & 0xF) == 9);
    CHECK((b[7] & 0xF) == 7);
    CHECK((b[8] & 0xF) == 8);  // a zero
    // the first value of largest magnitude sets the sign of d: 8 first gives d = -1
    std::swap(x[0], x[1]);
    const Vec<std::uint8_t> c = quantized(GgmlType::Q4_0, x);
    CHECK((c[0] | c[1] << 8) == 0xBC00);
    CHECK((c[2] & 0xF) == 0);   // 8 / -1 + 8.5 = 0.5
    CHECK((c[3] & 0xF) == 15);  // -8 / -1 + 8.5 = 16.5
  }
  SECTION("an all-zero block: d = 0, quants at the middle") {
    const std::vector<float> x(32, 0.0f);
    const Vec<std::uint8_t> q8 = quantized(GgmlType::Q8_0, x);
    CHECK(std::all_of(q8.begin(), q8.end(), [](std::uint8_t v) { return v == 0; }));
    const Vec<std::uint8_t> q4 = quantized(GgmlType::Q4_0, x);
    CHECK(q4[0] == 0x00);  // d = 0 / -8: negative zero, as the reference stores it
    CHECK(q4[1] == 0x80);
    CHECK(std::all_of(q4.begin() + 2, q4.end(), [](std::uint8_t v) { return v == 0x88; }));
  }
  SECTION("round trips within half a step (q8_0) and one step (q4_0) of the stored scale") {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> x(32 * 64);
    for (float& v : x) v = normal(rng);
    for (std::size_t i = 0; i < 32; ++i) x[32 + i] = 1e-6f * static_cast<float>(i);  // a block of tiny values
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      const Vec<std::uint8_t> b = quantized(type, x);
      const Vec<float> y = run(type, b);
      const std::size_t block_bytes = ggml_type_info(type).block_bytes;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t at = i / 32 * block_bytes;
        const float d = std::fabs(f16(static_cast<std::uint16_t>(b[at] | b[at + 1] << 8)));
        // half a step (q8_0; q4_0: one step, for its clamp at 15), plus the f16 rounding of d (2^-11 relative, or
        // 2^-25 absolute below f16's normal range) times at most 127 (8) steps
        const float steps = type == GgmlType::Q8_0 ? 127.0f : 8.0f;
        const float bound =
            d * (type == GgmlType::Q8_0 ? 0.5f : 1.0f) + steps * std::max(d / 2048, std::ldexp(1.0f, -25));
        INFO(i);
        CHECK(std::fabs(x[i] - y[i]) <= bound * 1.0001f);
      }
    }
  }
}

}  // namespace gguf_dequantize_test
