// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/storage.hpp>: shared ownership, slices and the backend concept.
#include <tensorfile/core/heap_backend.hpp>
#include <tensorfile/core/meta_backend.hpp>
#include <tensorfile/core/storage.hpp>

#include <utility>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("Storage copies share one backend", "[storage]") {
  const Storage a = heap_storage(128);
  REQUIRE(a.defined());
  CHECK(a.use_count() == 1);
  {
    const Storage b = a;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
    CHECK(a.use_count() == 2);
    CHECK(b.data() == a.data());
    CHECK(b.shares_owner_with(a));
  }
  CHECK(a.use_count() == 1);
  CHECK(a.kind() == StorageKind::heap);
  CHECK(a.name() == "heap");
  CHECK(a.backend<HeapBackend>() != nullptr);
  CHECK(a.backend<MetaBackend>() == nullptr);
}

TEST_CASE("Storage::slice shares the owner and checks its range", "[storage]") {
  const Storage whole = heap_storage(100);
  SECTION("inside") {
    const Storage part = whole.slice(10, 20);
    CHECK(part.data() == whole.data() + 10);
    CHECK(part.size_bytes() == 20);
    CHECK(part.shares_owner_with(whole));
    CHECK(whole.slice(100, 0).size_bytes() == 0);
  }
  SECTION("outside") {
    REQUIRE_THROWS_WITH(whole.slice(90, 20),
                        "tensorfile: storage slice [90, +20) leaves the storage; expected at most 100 bytes");
    CHECK_THROWS_AS(whole.slice(101, 0), ArgumentError);
    CHECK_THROWS_AS(whole.slice(1, SIZE_MAX), ArgumentError);
  }
}

TEST_CASE("A default Storage is empty and read-only", "[storage]") {
  const Storage empty;
  CHECK_FALSE(empty.defined());
  CHECK(empty.data() == nullptr);
  CHECK(empty.size_bytes() == 0);
  CHECK_FALSE(empty.writable());
  REQUIRE_THROWS_WITH(empty.mutable_data(), "tensorfile: storage (custom) is read-only; expected a writable storage");
  CHECK(empty.kind() == StorageKind::custom);
  CHECK(empty.name() == "custom");
}

TEST_CASE("A Storage moved from, whose backend is then gone, answers as an empty one", "[storage]") {
  Storage from = heap_storage(64);
  CHECK(from.kind() == StorageKind::heap);
  CHECK(from.name() == "heap");
  {
    const Storage to = std::move(from);
    CHECK(to.kind() == StorageKind::heap);
    CHECK(to.backend<HeapBackend>() != nullptr);
  }                             // the backend and the facts kept beside it are freed here
  CHECK_FALSE(from.defined());  // NOLINT(bugprone-use-after-move): the moved-from state is what is tested
  CHECK(from.kind() == StorageKind::custom);
  CHECK(from.name() == "custom");
  CHECK(from.backend<HeapBackend>() == nullptr);
}

TEST_CASE("storage_kind_name names every StorageKind", "[storage]") {
  CHECK(storage_kind_name(StorageKind::heap) == "heap");
  CHECK(storage_kind_name(StorageKind::mmap) == "mmap");
  CHECK(storage_kind_name(StorageKind::borrowed) == "borrowed");
  CHECK(storage_kind_name(StorageKind::meta) == "meta");
  CHECK(storage_kind_name(StorageKind::cuda) == "cuda");
  CHECK(storage_kind_name(StorageKind::custom) == "custom");
}
