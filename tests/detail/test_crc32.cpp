// SPDX-License-Identifier: MIT
// Tests of <tensorfile/detail/zip/crc32.hpp>: the folded (carry-less multiply) path equals the table path.
#include <tensorfile/detail/zip/crc32.hpp>

#include <random>
#include <vector>

#include "tensorfile_catch.hpp"

using tensorfile::detail::crc32;
using tensorfile::detail::crc32_portable;

TEST_CASE("crc32 gives the standard check value and agrees with the portable path", "[crc32]") {
  CHECK(crc32(std::as_bytes(std::span("123456789", 9))) == 0xCBF43926u);
  std::mt19937 random(7);
  std::vector<std::byte> bytes(70000);
  for (auto& b : bytes) b = static_cast<std::byte>(random());
  for (std::size_t length : {0u, 1u, 15u, 16u, 63u, 64u, 65u, 79u, 80u, 127u, 128u, 129u, 4096u, 65537u}) {
    for (std::size_t offset : {0u, 1u, 7u, 13u}) {
      const std::span<const std::byte> part(bytes.data() + offset, length);
      INFO("length " << length << " offset " << offset);
      CHECK(crc32(part) == crc32_portable(part));
      CHECK(crc32(part, 0xDEADBEEFu) == crc32_portable(part, 0xDEADBEEFu));
      CHECK(crc32(part.subspan(length / 3), crc32(part.first(length / 3))) == crc32(part));
    }
  }
}
