// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/torch/archive.hpp>: record listings checked against the zip's own bytes, and the
// version and byteorder records.
#include <tensorfile/formats/torch/archive.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include <cstring>
#include <string>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::byte_span;
using tensorfile_test::file_bytes;
using tensorfile_test::sample;

namespace {
bool same(const ArchiveRecord& a, const ArchiveRecord& b) {
  return a.name == b.name && a.offset == b.offset && a.stored_size == b.stored_size && a.size == b.size &&
         a.compression == b.compression && a.crc32 == b.crc32;
}
}  // namespace

TEST_CASE("list_records lists a torch file's records with offsets into the file", "[archive]") {
  const auto path = sample("torch", "t_float32_2x3.pt");
  const std::string file = file_bytes(path);
  const std::vector<ArchiveRecord> records = list_records(path);
  REQUIRE(records.size() == 3);
  // The values Python's zipfile gives (data offset = local header + 30 + name + extra).
  CHECK(records[0].name == "t_float32_2x3/data.pkl");
  CHECK(records[0].offset == 64);
  CHECK(records[0].stored_size == 154);
  CHECK(records[0].crc32 == 0x275373c7);
  CHECK(records[1].name == "t_float32_2x3/data/0");
  CHECK(records[1].offset == 320);
  CHECK(records[1].size == 24);
  CHECK(records[1].crc32 == 0x91e79017);
  CHECK(records[2].name == "t_float32_2x3/version");
  CHECK(records[2].offset == 448);
  CHECK(records[2].stored_size == 2);

  SECTION("each offset holds the record's bytes, right after the local header that names it") {
    for (const ArchiveRecord& record : records) {
      INFO(record.name);
      CHECK(record.compression == Compression::stored);
      CHECK(record.size == record.stored_size);
      REQUIRE(record.offset + record.stored_size <= file.size());
      const auto bytes = byte_span(file).subspan(record.offset, record.stored_size);
      CHECK(tensorfile::detail::crc32(bytes) == record.crc32);
      const std::size_t header = file.rfind(std::string("PK\x03\x04", 4), record.offset);
      REQUIRE(header != std::string::npos);
      const auto u16_at = [&](std::size_t at) {
        return static_cast<std::size_t>(static_cast<unsigned char>(file[at])) |
               (static_cast<std::size_t>(static_cast<unsigned char>(file[at + 1])) << 8);
      };
      CHECK(file.compare(header + 30, u16_at(header + 26), record.name) == 0);
      CHECK(header + 30 + u16_at(header + 26) + u16_at(header + 28) == record.offset);
    }
    CHECK(file.substr(records[2].offset, 2) == "3\n");
    float values[6];
    std::memcpy(values, file.data() + records[1].offset, sizeof values);
    CHECK(values[5] == 5.0f);
  }
  SECTION("the bytes overload gives the same listing") {
    const std::vector<ArchiveRecord> from_bytes = list_records(byte_span(file));
    REQUIRE(from_bytes.size() == records.size());
    for (std::size_t i = 0; i < records.size(); ++i) CHECK(same(from_bytes[i], records[i]));
  }
}

TEST_CASE("list_records reports deflated records with both sizes", "[archive]") {
  const std::vector<ArchiveRecord> records = list_records(sample("torch_gen", "zip_deflated.pt"));
  REQUIRE(records.size() == 4);
  CHECK(records[1].name == "zip_deflated/data/0");
  CHECK(records[1].compression == Compression::deflated);
  CHECK(records[1].offset == 321);
  CHECK(records[1].stored_size == 17);
  CHECK(records[1].size == 24);
  CHECK(records[1].crc32 == 0x91e79017);
  CHECK(records[3].name == "zip_deflated/version");
  CHECK(records[3].offset == 447);
  CHECK(records[3].stored_size == 4);
  CHECK(records[3].size == 2);
}

TEST_CASE("list_records lists every zip fixture", "[archive]") {
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    if (path.filename().string().find("legacy") != std::string::npos) continue;
    INFO(path.string());
    const std::vector<ArchiveRecord> records = list_records(path);
    REQUIRE(!records.empty());
    const std::uint64_t file_size = std::filesystem::file_size(path);
    for (const ArchiveRecord& record : records) CHECK(record.offset + record.stored_size <= file_size);
  }
}

TEST_CASE("list_records throws for what is not a zip archive", "[archive]") {
  SECTION("a legacy torch file") {
    REQUIRE_THROWS_AS(list_records(sample("torch", "legacy_format.pt")), FormatError);
    REQUIRE_THROWS_WITH(list_records(sample("torch", "legacy_format.pt")),
                        Catch::Matchers::Contains("it starts like a pickle stream"));
  }
  SECTION("a missing file") { REQUIRE_THROWS_AS(list_records(tensorfile_test::data_dir() / "missing.pt"), IoError); }
  SECTION("empty bytes") {
    REQUIRE_THROWS_WITH(list_records(std::span<const std::byte>()),
                        "tensorfile: not a zip archive: the file is empty (at byte 0)");
  }
}

TEST_CASE("read_archive_info reads the prefix, version and byte order", "[archive]") {
  const ArchiveInfo info = read_archive_info(sample("torch", "t_float32_2x3.pt"));
  CHECK(info.prefix == "t_float32_2x3");
  CHECK(info.version == 3);
  CHECK_FALSE(info.big_endian);
  CHECK(info.records.size() == 3);

  SECTION("a version under .data/ and a big byteorder") {
    const std::string zip = tensorfile_test::torch_zip(
        "archive", {{"data.pkl", "\x80\x02N."}, {"byteorder", "big"}, {".data/version", "4\n"}});
    const ArchiveInfo crafted = read_archive_info(byte_span(zip));
    CHECK(crafted.prefix == "archive");
    CHECK(crafted.version == 4);
    CHECK(crafted.big_endian);
    CHECK(crafted.records.size() == 3);
  }
  SECTION("the version record's errors are load_torch()'s") {
    for (const auto& [version, message] : std::vector<std::pair<std::string, std::string>>{
             {"11",
              "tensorfile: archive/version: unsupported file format version \"11\"; expected 1 to 10 (at byte 0)"},
             {"x\n",
              "tensorfile: archive/version: unsupported file format version \"x\"; expected 1 to 10 (at byte 0)"},
         }) {
      const std::string zip = tensorfile_test::torch_zip("archive", {{"data.pkl", "\x80\x02N."}, {"version", version}});
      REQUIRE_THROWS_WITH(read_archive_info(byte_span(zip)), message);
      REQUIRE_THROWS_WITH(load_torch(byte_span(zip)), message);
    }
  }
  SECTION("a missing version record and a bad byteorder") {
    const std::string no_version = tensorfile_test::torch_zip("archive", {{"data.pkl", "\x80\x02N."}});
    REQUIRE_THROWS_WITH(read_archive_info(byte_span(no_version)),
                        "tensorfile: archive/version: the archive has no version record");
    const std::string bad_order =
        tensorfile_test::torch_zip("archive", {{"data.pkl", "\x80\x02N."}, {"version", "3"}, {"byteorder", "middle"}});
    REQUIRE_THROWS_WITH(
        read_archive_info(byte_span(bad_order)),
        "tensorfile: archive/byteorder: byteorder is \"middle\"; expected \"little\" or \"big\" (at byte 0)");
  }
}
