// SPDX-License-Identifier: MIT
// Tests of <tensorfile/verify.hpp>: reports on clean fixtures of every format and on corrupted copies.
#include <tensorfile/formats/torch/save.hpp>
#include <tensorfile/verify.hpp>

#include <string>
#include <vector>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::file_bytes;
using tensorfile_test::sample;
using tensorfile_test::write_file;

TEST_CASE("verify passes every fixture", "[verify]") {
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    INFO(path.string());
    const VerifyReport report = verify(path);
    CHECK(report.ok());
    CHECK(report.errors.empty());
    CHECK(report.format == detect_format(path));
  }
  for (const auto& entry : std::filesystem::directory_iterator(tensorfile_test::data_dir() / "tensordict")) {
    if (!entry.is_directory()) continue;
    INFO(entry.path().string());
    const VerifyReport report = verify(entry.path());
    CHECK(report.ok());
    CHECK(report.format == FileFormat::tensordict);
    CHECK(report.leaves > 0);
  }
}

TEST_CASE("verify counts what it checked", "[verify]") {
  SECTION("a torch zip file") {
    const VerifyReport report = verify(sample("torch", "t_float32_2x3.pt"));
    CHECK(report.format == FileFormat::torch_zip);
    CHECK(report.records == 3);
    CHECK(report.record_bytes == 154 + 24 + 2);
    CHECK(report.storage_records == 1);
    CHECK(report.storages_used == 1);
    CHECK(report.tensors == 1);
    CHECK(report.leaves == 0);
  }
  SECTION("a legacy torch file") {
    const VerifyReport report = verify(sample("torch", "legacy_format.pt"));
    CHECK(report.format == FileFormat::torch_legacy);
    CHECK(report.tensors == 2);
    CHECK(report.records == 0);
  }
  SECTION("a tensordict tree") {
    const VerifyReport report = verify(sample("tensordict", "s01_basic"));
    CHECK(report.format == FileFormat::tensordict);
    CHECK(report.leaves == 3);
    CHECK(report.leaf_bytes == 44);
  }
  SECTION("a storage record data.pkl does not use") {
    const tensorfile_test::ScratchDir scratch;
    write_file(
        scratch / "unused.pt",
        tensorfile_test::torch_zip("archive", {{"data.pkl", "\x80\x02N."}, {"data/0", "abcd"}, {"version", "3\n"}}));
    const VerifyReport report = verify(scratch / "unused.pt");
    CHECK(report.ok());
    CHECK(report.storage_records == 1);
    CHECK(report.storages_used == 0);
    CHECK(report.tensors == 0);
  }
}

TEST_CASE("verify reports every error in a corrupted file", "[verify]") {
  const tensorfile_test::ScratchDir scratch;
  const auto original = sample("torch", "t_float32_2x3.pt");
  std::string bytes = file_bytes(original);
  const std::vector<ArchiveRecord> records = list_records(original);
  const auto path = scratch / "t_float32_2x3.pt";

  SECTION("a flipped data byte: one CRC-32 mismatch, found only when CRCs are checked") {
    bytes[records[1].offset] ^= 0x01;
    write_file(path, bytes);
    const VerifyReport report = verify(path);
    REQUIRE(report.errors.size() == 1);
    CHECK_FALSE(report.ok());
    CHECK_THAT(report.errors[0],
               Catch::Matchers::StartsWith("tensorfile: " + path.string() +
                                           ": t_float32_2x3/data/0: CRC-32 mismatch; expected 0x91e79017"));
    CHECK(report.tensors == 1);  // the other checks still ran
    CHECK(verify(path, {.crc = false}).ok());
  }
  SECTION("a record larger than one read piece (1 MiB): a flipped byte in its last piece, and one in its first") {
    const std::vector<float> values(3 * 1024 * 1024 / 4 + 5, 1.5f);
    save_torch(Tensor::from_values<float>(values), path);
    const std::string saved = file_bytes(path);
    for (const ArchiveRecord& record : list_records(path)) {
      if (!record.name.ends_with("/data/0")) continue;
      REQUIRE(record.size == values.size() * 4);
      for (const std::uint64_t at : {record.offset + record.size - 1, record.offset}) {
        std::string flipped = saved;
        flipped[static_cast<std::size_t>(at)] ^= 0x10;
        write_file(path, flipped);
        const VerifyReport report = verify(path);
        REQUIRE(report.errors.size() == 1);
        CHECK_THAT(report.errors[0], Catch::Matchers::Contains("/data/0: CRC-32 mismatch"));
        CHECK(verify(path, {.crc = false}).ok());
      }
      write_file(path, saved);
      CHECK(verify(path).ok());
    }
  }
  SECTION("a bad version record: its CRC and the version itself") {
    bytes[records[2].offset] = 'x';
    write_file(path, bytes);
    const VerifyReport report = verify(path);
    REQUIRE(report.errors.size() == 2);
    CHECK_THAT(report.errors[0], Catch::Matchers::Contains("t_float32_2x3/version: CRC-32 mismatch"));
    CHECK_THAT(report.errors[1], Catch::Matchers::Contains("unsupported file format version \"x\""));
  }
  SECTION("a truncated file: the index is gone, nothing else is checked") {
    write_file(path, bytes.substr(0, bytes.size() - 10));
    const VerifyReport report = verify(path);
    REQUIRE(report.errors.size() == 1);
    CHECK_THAT(report.errors[0], Catch::Matchers::Contains("not a zip archive"));
    CHECK(report.records == 0);
    CHECK(report.format == FileFormat::torch_zip);
  }
  SECTION("a file of unknown format and a missing file get load_torch()'s error") {
    write_file(path, "hello");
    const VerifyReport text = verify(path);
    REQUIRE(text.errors.size() == 1);
    CHECK(text.format == FileFormat::unknown);
    CHECK_THAT(text.errors[0], Catch::Matchers::Contains("not a torch file"));
    const VerifyReport missing = verify(scratch / "missing.pt");
    REQUIRE(missing.errors.size() == 1);
    CHECK_THAT(missing.errors[0], Catch::Matchers::Contains("missing.pt"));
  }
  SECTION("a tensordict tree with a short data file") {
    const auto tree = scratch / "tree";
    std::filesystem::copy(sample("tensordict", "s01_basic"), tree, std::filesystem::copy_options::recursive);
    std::filesystem::resize_file(tree / "a.memmap", 1);
    const VerifyReport report = verify(tree);
    REQUIRE(report.errors.size() == 1);
    CHECK_THAT(report.errors[0], Catch::Matchers::Contains("a.memmap"));
  }
}
