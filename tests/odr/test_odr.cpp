// SPDX-License-Identifier: MIT
// Calls into both ODR translation units, so the linker has to merge their inline definitions.
#include <string>

#include "tensorfile_catch.hpp"

namespace odr_test {
std::size_t float_size_from_a();
std::string device_text_from_b();
}  // namespace odr_test

TEST_CASE("Headers included in two translation units link into one program", "[odr]") {
  CHECK(odr_test::float_size_from_a() == 4);
  CHECK(odr_test::device_text_from_b() == "cuda:1");
}
