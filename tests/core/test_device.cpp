// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/device.hpp>: parsing and printing torch's device strings.
#include <tensorfile/core/device.hpp>

#include "tensorfile_catch.hpp"

using tensorfile::Device;

TEST_CASE("Device parses and prints torch's spellings", "[device]") {
  SECTION("round trips") {
    for (const char* text : {"cpu", "cuda", "cuda:0", "cuda:1", "cuda:15", "meta", "cpu:0"}) {
      INFO(text);
      CHECK(Device::parse(text).str() == text);
    }
    CHECK(Device::parse("cuda:3") == Device::cuda(3));
    CHECK(Device::parse("cpu") == Device::cpu());
    CHECK(Device::parse("meta").is_meta());
    CHECK(Device::parse("cuda").index == -1);
  }
  SECTION("errors") {
    REQUIRE_THROWS_WITH(Device::parse("gpu"),
                        "tensorfile: unknown device \"gpu\"; expected \"cpu\", \"cuda\", \"cuda:N\" or \"meta\"");
    REQUIRE_THROWS_WITH(Device::parse(""),
                        "tensorfile: unknown device \"\"; expected \"cpu\", \"cuda\", \"cuda:N\" or \"meta\"");
    for (const char* bad : {"cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:01", "cuda:99999999999"}) {
      INFO(bad);
      REQUIRE_THROWS_WITH(Device::parse(bad), "tensorfile: invalid device index in \"" + std::string(bad) +
                                                  "\"; expected a non-negative integer after ':'");
    }
    CHECK_THROWS_AS(Device::parse("mps"), tensorfile::ArgumentError);
  }
}
