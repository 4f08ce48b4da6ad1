// SPDX-License-Identifier: MIT
// Tests of <tensorfile/backends/mmap.hpp>: shared writes reach the file, private ones do not.
#include <tensorfile/backends/mmap.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {
void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}
}  // namespace

TEST_CASE("mmap_storage maps files in three modes", "[mmap]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "bytes.bin";
  write_text(path, "abcdefgh");

  SECTION("shared: writes reach the file") {
    const Storage s = mmap_storage(path, MapMode::shared);
    CHECK(s.kind() == StorageKind::mmap);
    CHECK(s.name() == "mmap_shared");
    CHECK(s.size_bytes() == 8);
    s.mutable_data()[0] = std::byte{'X'};
    CHECK(tensorfile_test::read_text(path) == "Xbcdefgh");
  }
  SECTION("copy-on-write: writes stay in memory") {
    const Storage s = mmap_storage(path, MapMode::copy_on_write);
    CHECK(s.name() == "mmap_private");
    s.mutable_data()[0] = std::byte{'X'};
    CHECK(s.data()[0] == std::byte{'X'});
    CHECK(tensorfile_test::read_text(path) == "abcdefgh");
  }
  SECTION("read-only: no writes") {
    const Storage s = mmap_storage(path, MapMode::read_only);
    CHECK(s.name() == "mmap_read_only");
    CHECK_FALSE(s.writable());
    CHECK(s.data()[7] == std::byte{'h'});
    CHECK(s.backend<MmapBackend>()->mode() == MapMode::read_only);
  }
  SECTION("a prefix of the file") {
    const Storage s = mmap_storage(path, MapMode::read_only, 3);
    CHECK(s.size_bytes() == 3);
  }
  SECTION("the mapping outlives the file name") {
    const Storage s = mmap_storage(path, MapMode::read_only);
    std::filesystem::remove(path);
    CHECK(s.data()[1] == std::byte{'b'});
  }
  SECTION("errors") {
    REQUIRE_THROWS_WITH(
        mmap_storage(path, MapMode::read_only, 9),
        "tensorfile: " + path.string() + ": file is too short to map; expected at least 9 bytes, got 8");
    REQUIRE_THROWS_WITH(
        mmap_storage(dir / "nope", MapMode::read_only),
        "tensorfile: " + (dir / "nope").string() + ": cannot open for reading: No such file or directory");
    REQUIRE_THROWS_WITH(mmap_storage(dir.path(), MapMode::read_only),
                        "tensorfile: " + dir.path().string() + ": is a directory; expected a regular file");
  }
}
