// SPDX-License-Identifier: MIT
// The second translation unit of the ODR test.
#include <tensorfile/tensorfile.hpp>

namespace odr_test {
std::string device_text_from_b() { return tensorfile::Device::parse("cuda:1").str(); }
}  // namespace odr_test
