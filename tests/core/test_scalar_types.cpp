// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/scalar_types.hpp>: Half, BFloat16 and float8 conversions, bit-exact.
#include <tensorfile/core/scalar_types.hpp>

#include <cmath>
#include <limits>

#include "tensorfile_catch.hpp"

using tensorfile::BFloat16;
using tensorfile::decode_float8;
using tensorfile::Half;

TEST_CASE("Half converts to and from float like IEEE binary16", "[scalar_types]") {
  SECTION("exact values") {
    CHECK(Half(1.0f).bits == 0x3C00);
    CHECK(Half(-2.0f).bits == 0xC000);
    CHECK(Half(65504.0f).bits == 0x7BFF);
    CHECK(Half(0.0f).bits == 0x0000);
    CHECK(Half(-0.0f).bits == 0x8000);
    CHECK(static_cast<float>(Half::from_bits(0x3555)) == 0.333251953125f);
    CHECK(static_cast<float>(Half::from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
    CHECK(static_cast<float>(Half::from_bits(0x03FF)) == std::ldexp(1023.0f, -24));
  }
  SECTION("rounding to nearest even, overflow and underflow") {
    CHECK(Half(1.0f + std::ldexp(1.0f, -11)).bits == 0x3C00);      // tie goes to even
    CHECK(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3C02);  // tie goes to even (up)
    CHECK(Half(65520.0f).bits == 0x7C00);                          // rounds past the largest half
    CHECK(Half(std::ldexp(1.0f, -25)).bits == 0x0000);             // exactly half the smallest subnormal: to even
    CHECK(Half(std::ldexp(1.5f, -25)).bits == 0x0001);
    CHECK(Half(1e-10f).bits == 0x0000);
  }
  SECTION("infinities and NaN") {
    CHECK(Half(std::numeric_limits<float>::infinity()).bits == 0x7C00);
    CHECK(Half(-std::numeric_limits<float>::infinity()).bits == 0xFC00);
    CHECK(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isinf(static_cast<float>(Half::from_bits(0x7C00))));
  }
  SECTION("every finite half survives float and back") {
    for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
      const auto h = Half::from_bits(static_cast<std::uint16_t>(bits));
      const float f = static_cast<float>(h);
      if (std::isnan(f)) continue;
      REQUIRE(Half(f).bits == bits);
    }
  }
}

TEST_CASE("BFloat16 keeps the top half of a float and rounds to nearest even", "[scalar_types]") {
  CHECK(BFloat16(1.0f).bits == 0x3F80);
  CHECK(BFloat16(2.0f).bits == 0x4000);
  CHECK(static_cast<float>(BFloat16::from_bits(0x3F80)) == 1.0f);
  CHECK(BFloat16(1.00390625f).bits == 0x3F80);  // 1 + 2^-8 is a tie: to even
  CHECK(BFloat16(1.01171875f).bits == 0x3F82);  // 1 + 3*2^-8 is a tie: to even (up)
  CHECK(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(BFloat16(std::numeric_limits<float>::infinity()).bits == 0x7F80);
}

TEST_CASE("float8 values decode per variant", "[scalar_types]") {
  CHECK(decode_float8(0x38, 4, false) == 1.0f);    // e4m3fn: exponent 7 = bias
  CHECK(decode_float8(0x7E, 4, false) == 448.0f);  // e4m3fn largest
  CHECK(std::isnan(decode_float8(0x7F, 4, false)));
  CHECK(decode_float8(0x01, 4, false) == std::ldexp(1.0f, -9));
  CHECK(decode_float8(0x3C, 5, false) == 1.0f);  // e5m2 = top byte of a half
  CHECK(std::isinf(decode_float8(0x7C, 5, false)));
  CHECK(decode_float8(0x40, 4, true) == 1.0f);  // e4m3fnuz: bias 8
  CHECK(std::isnan(decode_float8(0x80, 4, true)));
  CHECK(decode_float8(0x40, 5, true) == 1.0f);  // e5m2fnuz: bias 16
}
