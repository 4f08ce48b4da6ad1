// SPDX-License-Identifier: MIT
// One of two translation units including every header: the link fails if a header defines a non-inline function.
#include <tensorfile/tensorfile.hpp>

namespace odr_test {
std::size_t float_size_from_a() { return tensorfile::element_size(tensorfile::parse_dtype("float32")); }
}  // namespace odr_test
