// SPDX-License-Identifier: MIT
// Tests of <tensorfile/backends/borrowed.hpp>: non-owning spans and keep-alive owners.
#include <tensorfile/backends/borrowed.hpp>

#include <array>
#include <memory>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("BorrowedBackend refers to the caller's memory", "[borrowed]") {
  std::array<std::byte, 16> bytes{};
  SECTION("writable span") {
    const Storage s{BorrowedBackend(std::span<std::byte>(bytes))};
    CHECK(s.data() == bytes.data());
    CHECK(s.writable());
    s.mutable_data()[3] = std::byte{9};
    CHECK(bytes[3] == std::byte{9});
    CHECK(s.kind() == StorageKind::borrowed);
  }
  SECTION("const span is read-only") {
    const Storage s{BorrowedBackend(std::span<const std::byte>(bytes))};
    CHECK_FALSE(s.writable());
    REQUIRE_THROWS_WITH(s.mutable_data(), "tensorfile: storage (borrowed) is read-only; expected a writable storage");
  }
}

TEST_CASE("A keep-alive owner lives as long as the storage", "[borrowed]") {
  auto owner = std::make_shared<std::vector<std::byte>>(32, std::byte{1});
  const std::weak_ptr<std::vector<std::byte>> watch = owner;
  Storage s(BorrowedBackend(std::span<std::byte>(*owner), owner));
  owner.reset();
  CHECK_FALSE(watch.expired());
  CHECK(s.data()[31] == std::byte{1});
  s = Storage();
  CHECK(watch.expired());
}
