// SPDX-License-Identifier: MIT
// Catch2 for the tests, whichever major version is installed (Debian ships 2.13; v3 works too).
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <unistd.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tensorfile_test {

/// The committed test data folder (tests/data), from the build's compile definition.
inline std::filesystem::path data_dir() { return TENSORFILE_TEST_DATA_DIR; }

/// A file or folder of the committed test data: tests/data/<folder>/<name>.
inline std::filesystem::path sample(const std::string& folder, const std::string& name) {
  return data_dir() / folder / name;
}

/// Every torch-written fixture (tests/data/torch and torch_gen, *.pt), sorted.
inline std::vector<std::filesystem::path> torch_fixtures() {
  std::vector<std::filesystem::path> out;
  for (const char* folder : {"torch", "torch_gen"}) {
    for (const auto& entry : std::filesystem::directory_iterator(data_dir() / folder)) {
      if (entry.path().extension() == ".pt") out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// A fresh scratch folder removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tensorfile-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// The whole content of a file as text.
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream out;
  out << in.rdbuf();  // in blocks: a character at a time took 4 s per 39 MB at -O0, two minutes under valgrind
  return std::move(out).str();
}

/// `n` as 8 little-endian bytes (a safetensors header's length, for instance).
inline std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

/// A byte vector as the loaders take it.
inline std::span<const std::byte> span_of(const std::vector<std::byte>& v) { return v; }

/// The names in a folder, sorted.
inline std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Replaces a file's content with `text`.
inline void write_text(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

/// Bytes this process has read so far (read(2), pread(2) and friends: /proc/self/io rchar): a test's proof
/// that a load left some bytes unread.
inline std::uint64_t bytes_read_so_far() {
  std::istringstream io(read_text("/proc/self/io"));
  std::string field;
  std::uint64_t value = 0;
  while (io >> field >> value) {
    if (field == "rchar:") return value;
  }
  throw std::runtime_error("no rchar in /proc/self/io");
}

/// The stride of the loops that try every offset of a file (truncations, flipped bytes, windows): 1, except under
/// valgrind's memcheck (tests/faults/valgrind_suite.sh sets TENSORFILE_UNDER_VALGRIND), where every 5th offset
/// still meets each code path at a fifth of the cost; natively and under ASan+UBSan every offset runs.
inline std::size_t exhaustive_step() { return std::getenv("TENSORFILE_UNDER_VALGRIND") != nullptr ? 5 : 1; }

}  // namespace tensorfile_test
