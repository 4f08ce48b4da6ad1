// SPDX-License-Identifier: MIT
// Tests of the tensorfile program's text helpers: JSON floats, paths, byte sizes, progress frames.
#include "tensorfile_catch.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "formats.hpp"
#include "progress.hpp"
#include "python_text.hpp"

using namespace tensorfile::cli;

TEST_CASE("json_float") {
  CHECK(json_float(std::nan("")) == "\"nan\"");
  CHECK(json_float(-std::numeric_limits<double>::infinity()) == "\"-inf\"");
  CHECK(json_float(2.5) == "2.5");
  CHECK(json_float(1e16) == "1e+16");
}

TEST_CASE("child_path and key_text") {
  CHECK(tensorfile::child_path("", "a") == "a");
  CHECK(tensorfile::child_path("a", "b~c") == "a/b~c");
  CHECK(tensorfile::child_path(tensorfile::child_path("", "a/b"), "0") ==
        "a/b/0");  // named_tensors' spelling: steps are not escaped
  CHECK(key_text(tensorfile::Value("k")) == "k");
  CHECK(key_text(tensorfile::Value(std::int64_t{-3})) == "-3");
  CHECK(key_text(tensorfile::Value(2.5)) == "2.5");
  CHECK(key_text(tensorfile::Value::tuple({1, "a"})) == "(1, 'a')");
}

TEST_CASE("human_bytes") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(1023) == "1023 B");
  CHECK(human_bytes(1024) == "1.00 KiB");
  CHECK(human_bytes(1536) == "1.50 KiB");
  CHECK(human_bytes(std::uint64_t{20} << 20) == "20.0 MiB");
  CHECK(human_bytes(std::uint64_t{3} << 30) == "3.00 GiB");
}

TEST_CASE("progress_line") {
  const std::uint64_t mib = std::uint64_t{1} << 20;
  SECTION("a bar with bytes, rate and time left") {
    const std::string line = progress_line("writing x", 50 * mib, 100 * mib, 2.0, 100);
    CHECK(line.starts_with("writing x  [===="));
    CHECK(line.find("]   50%  50.0 MiB / 100.0 MiB  25.0 MiB/s  0:02 left") != std::string::npos);
    CHECK(line.size() <= 100);
  }
  SECTION("complete") {
    const std::string line = progress_line("w", 100, 100, 61.0, 100);
    CHECK(line.find("100%  100 B / 100 B") != std::string::npos);
    CHECK(line.ends_with("1:01 total"));
  }
  SECTION("more written than expected is shown as complete") {
    CHECK(progress_line("w", 150, 100, 1.0, 100).find("100%  100 B / 100 B") != std::string::npos);
  }
  SECTION("nothing written yet") { CHECK(progress_line("w", 0, 100, 0.5, 100).ends_with("--:-- left")); }
  SECTION("a narrow terminal drops the bar, not the numbers") {
    const std::string line = progress_line("writing x", 50 * mib, 100 * mib, 2.0, 40);
    CHECK(line.find('[') == std::string::npos);
    CHECK(line.find("50%") != std::string::npos);
  }
  SECTION("items counted instead of bytes") {
    const std::string line = progress_line("scanning", 450, 1000, 0.5, 100, "files");
    CHECK(line.starts_with("scanning  [===="));
    CHECK(line.find("]   45%  450 / 1000 files  900 files/s  0:01 left") != std::string::npos);
    CHECK(progress_line("scanning", 1000, 1000, 2.0, 100, "files")
              .ends_with("100%  1000 / 1000 files  500 files/s  0:02 total"));
  }
  SECTION("unknown progress: the elapsed time") {
    CHECK(progress_line("writing x", 0, std::nullopt, 3725.0, 80) == "writing x  1:02:05");
  }
}
