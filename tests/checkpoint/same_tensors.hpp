// SPDX-License-Identifier: MIT
// The comparison the front-door tests make of two loads of one checkpoint.
#pragma once

#include "tensorfile/tensorfile.hpp"
#include "tensorfile_catch.hpp"

namespace tensorfile_test {

/// Both trees hold the same tensors at the same paths: dtype, shape, device and (off meta) values.
inline void check_same_tensors(const tensorfile::Value& got, const tensorfile::Value& expected) {
  const tensorfile::NamedTensors a = tensorfile::named_tensors(got);
  const tensorfile::NamedTensors b = tensorfile::named_tensors(expected);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << b[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.dtype() == b[i].second.dtype());
    CHECK(a[i].second.sizes() == b[i].second.sizes());
    CHECK(a[i].second.device() == b[i].second.device());
    if (!b[i].second.device().is_meta()) CHECK(a[i].second.equal(b[i].second));
  }
}

}  // namespace tensorfile_test
