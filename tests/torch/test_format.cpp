// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/format.hpp>: format detection of every fixture kind, from paths and from bytes.
#include <tensorfile/formats/format.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include <string>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::byte_span;
using tensorfile_test::file_bytes;
using tensorfile_test::write_file;

TEST_CASE("detect_format tells every torch fixture by its bytes", "[format]") {
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    INFO(path.string());
    const FileFormat expected =
        path.filename().string().find("legacy") != std::string::npos ? FileFormat::torch_legacy : FileFormat::torch_zip;
    CHECK(detect_format(path) == expected);
    CHECK(detect_format(byte_span(file_bytes(path))) == expected);
  }
}

TEST_CASE("detect_format calls every tensordict fixture a tensordict tree", "[format]") {
  std::size_t trees = 0;
  for (const auto& entry : std::filesystem::directory_iterator(tensorfile_test::data_dir() / "tensordict")) {
    if (!entry.is_directory()) continue;
    INFO(entry.path().string());
    CHECK(detect_format(entry.path()) == FileFormat::tensordict);
    ++trees;
  }
  CHECK(trees >= 5);
}

TEST_CASE("detect_format says unknown for anything else", "[format]") {
  const tensorfile_test::ScratchDir scratch;
  SECTION("a missing path") { CHECK(detect_format(scratch / "missing.pt") == FileFormat::unknown); }
  SECTION("an empty file and empty bytes") {
    write_file(scratch / "empty.pt", "");
    CHECK(detect_format(scratch / "empty.pt") == FileFormat::unknown);
    CHECK(detect_format(std::span<const std::byte>()) == FileFormat::unknown);
  }
  SECTION("text, a truncated zip magic, the preview format") {
    for (const std::string bytes : {"hello, world", "PK\x03", "PYTORCH1 and more"}) {
      INFO(bytes);
      CHECK(detect_format(byte_span(bytes)) == FileFormat::unknown);
    }
    write_file(scratch / "notes.txt", "hello, world");
    CHECK(detect_format(scratch / "notes.txt") == FileFormat::unknown);
  }
  SECTION("the name does not matter") {
    write_file(scratch / "model.pt", "{\"json\": true}");
    CHECK(detect_format(scratch / "model.pt") == FileFormat::unknown);
  }
}

TEST_CASE("detect_format reads zip and pickle magics from bytes", "[format]") {
  CHECK(detect_format(byte_span(std::string("PK\x03\x04"))) == FileFormat::torch_zip);
  CHECK(detect_format(byte_span(std::string("\x80\x02\x8a\x0a"))) == FileFormat::torch_legacy);
  CHECK(detect_format(byte_span(std::string("(lp0"))) == FileFormat::torch_legacy);
  CHECK(detect_format(byte_span(std::string("\x8a\x0a"))) == FileFormat::torch_legacy);
}

TEST_CASE("format_name gives the names the tensorfile program prints", "[format]") {
  CHECK(format_name(FileFormat::torch_zip) == "torch-zip");
  CHECK(format_name(FileFormat::torch_legacy) == "torch-legacy");
  CHECK(format_name(FileFormat::tensordict) == "tensordict");
  CHECK(format_name(FileFormat::unknown) == "unknown");
  CHECK(FileFormat{} == FileFormat::unknown);
}

TEST_CASE("load still names the pre-2017 tar format, even behind a pickle-like first byte", "[format][load]") {
  std::string tar(512, '\0');
  tar[0] = '(';  // a member name that starts like a protocol-0 pickle
  tar.replace(257, 5, "ustar");
  REQUIRE_THROWS_AS(load_torch(byte_span(tar)), UnsupportedError);
  REQUIRE_THROWS_WITH(load_torch(byte_span(tar)),
                      "tensorfile: this is the pre-2017 tar format of torch.save; re-save it with a newer torch");
}
