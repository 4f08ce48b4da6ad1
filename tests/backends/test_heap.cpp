// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/heap_backend.hpp>: aligned, zeroed, owned host memory.
#include <tensorfile/core/heap_backend.hpp>

#include <cstdint>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("heap_storage is 64-byte aligned, zero-filled and writable", "[heap]") {
  for (std::size_t bytes : {1u, 63u, 64u, 4097u, 1u << 20}) {
    const Storage s = heap_storage(bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(s.data()) % 64 == 0);
    CHECK(s.size_bytes() == bytes);
    CHECK(s.writable());
    CHECK(s.device() == Device::cpu());
    bool all_zero = true;
    for (std::size_t i = 0; i < bytes; ++i) all_zero = all_zero && s.data()[i] == std::byte{0};
    CHECK(all_zero);
    s.mutable_data()[bytes - 1] = std::byte{7};
    CHECK(s.data()[bytes - 1] == std::byte{7});
  }
  SECTION("zero bytes hold no memory") {
    const Storage s = heap_storage(0);
    CHECK(s.data() == nullptr);
    CHECK(s.size_bytes() == 0);
  }
}
