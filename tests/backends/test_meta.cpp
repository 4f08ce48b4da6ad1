// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/meta_backend.hpp>: a size without bytes.
#include <tensorfile/core/meta_backend.hpp>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("meta_storage claims a size and holds no bytes", "[meta]") {
  const Storage s = meta_storage(std::size_t{1} << 40);  // a terabyte costs nothing
  CHECK(s.data() == nullptr);
  CHECK(s.size_bytes() == std::size_t{1} << 40);
  CHECK(s.device().is_meta());
  CHECK_FALSE(s.writable());
  CHECK(s.kind() == StorageKind::meta);
}
