// SPDX-License-Identifier: MIT
// Tests of <tensorfile/io/from_file.hpp>: torch.from_file's semantics, every dtype, every error.
#include <tensorfile/io/from_file.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "tensorfile_catch.hpp"
#include "torch/load_helpers.hpp"

using namespace tensorfile;

namespace {
void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 1);
  return s;
}
// Runs `body` as an unprivileged user (root ignores file permissions); returns its exit status.
template <class Fn>
int run_unprivileged(Fn body) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}
}  // namespace

TEMPLATE_TEST_CASE("from_file maps every dtype", "[from_file]", bool, std::uint8_t, std::int8_t, std::int16_t,
                   std::int32_t, std::int64_t, std::uint16_t, std::uint32_t, std::uint64_t, Half, BFloat16, float,
                   double, ComplexHalf, std::complex<float>, std::complex<double>) {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "values.bin";
  const DType dtype = dtype_of<TestType>;
  const std::size_t count = 5;
  std::string bytes = pattern(count * sizeof(TestType));
  if constexpr (std::is_same_v<TestType, bool>) {
    for (auto& c : bytes) c = static_cast<char>(c & 1);
  }
  write_bytes(path, bytes);

  const Tensor whole = from_file(path, {.dtype = dtype});
  CHECK(whole.dtype() == dtype);
  CHECK(whole.sizes() == Shape{static_cast<std::int64_t>(count)});
  CHECK(std::memcmp(whole.raw_data(), bytes.data(), bytes.size()) == 0);

  const Tensor sized = from_file(path, {.size = 3, .dtype = dtype});
  CHECK(sized.numel() == 3);
  CHECK(std::memcmp(sized.raw_data(), bytes.data(), 3 * sizeof(TestType)) == 0);

  const Tensor shared = from_file(path, {.mmap = MapMode::shared, .size = 5, .dtype = dtype});
  std::memcpy(shared.mutable_raw_data() + sizeof(TestType), bytes.data(), sizeof(TestType));  // element 1 := element 0
  const std::string after = tensorfile_test::read_text(path);
  CHECK(after.substr(sizeof(TestType), sizeof(TestType)) == bytes.substr(0, sizeof(TestType)));
}

TEST_CASE("from_file MapMode::shared creates, grows and writes through", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "new.bin";
  SECTION("creates a missing file with size * element_size zero bytes") {
    const Tensor t = from_file(path, {.mmap = MapMode::shared, .size = 4, .dtype = DType::Int32});
    CHECK(std::filesystem::file_size(path) == 16);
    t.data<std::int32_t>()[2] = 0x01020304;
    CHECK(tensorfile_test::read_text(path) == std::string("\0\0\0\0\0\0\0\0\x04\x03\x02\x01\0\0\0\0", 16));
    CHECK(t.storage().backend<MmapBackend>()->mode() == MapMode::shared);
  }
  SECTION("grows a short file and never shrinks a long one") {
    write_bytes(path, "abc");
    (void)from_file(path, {.mmap = MapMode::shared, .size = 2, .dtype = DType::Float32});
    CHECK(std::filesystem::file_size(path) == 8);
    CHECK(tensorfile_test::read_text(path).substr(0, 3) == "abc");
    (void)from_file(path, {.mmap = MapMode::shared, .size = 1, .dtype = DType::Float32});
    CHECK(std::filesystem::file_size(path) == 8);
  }
  SECTION("size 0 gives an empty tensor, as torch does") {
    const Tensor t = from_file(path, {.mmap = MapMode::shared, .size = 0});
    CHECK(t.numel() == 0);
    CHECK(std::filesystem::exists(path));
  }
}

TEST_CASE("from_file MapMode::copy_on_write copies on write and reads read-only files", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "ro.bin";
  write_bytes(path, std::string(8, '\x01'));
  ::chmod(path.c_str(), 0444);
  const Tensor t = from_file(path, {.dtype = DType::UInt8});
  CHECK(t.storage().backend<MmapBackend>()->mode() == MapMode::copy_on_write);
  t.data<std::uint8_t>()[0] = 9;  // copy-on-write: allowed, stays in memory
  CHECK(t.data<const std::uint8_t>()[0] == 9);
  CHECK(tensorfile_test::read_text(path) == std::string(8, '\x01'));
  const Tensor views = t.narrow(0, 2, 4);
  CHECK(views.storage().shares_owner_with(t.storage()));
}

TEST_CASE("from_file MapMode::read_only gives a read-only tensor over a file it never changes", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "ro.bin";
  write_bytes(path, std::string(8, '\x02'));
  const Tensor t = from_file(path, {.mmap = MapMode::read_only, .dtype = DType::UInt8});
  CHECK(t.storage().kind() == StorageKind::mmap);
  CHECK(t.storage().backend<MmapBackend>()->mode() == MapMode::read_only);
  CHECK_FALSE(t.is_writable());
  CHECK(t.data<const std::uint8_t>()[7] == 2);
  REQUIRE_THROWS_WITH(t.data<std::uint8_t>(),
                      "tensorfile: storage (mmap_read_only) is read-only; expected a writable storage");
  SECTION("a short file is an error, as with copy_on_write; nothing is grown") {
    REQUIRE_THROWS_WITH(from_file(path, {.mmap = MapMode::read_only, .size = 3, .dtype = DType::Float32}),
                        "tensorfile: " + path.string() +
                            ": file is too short for 3 float32 elements; expected at least 12 bytes, got 8");
    CHECK(std::filesystem::file_size(path) == 8);
  }
  SECTION("a missing file is not created") {
    CHECK_THROWS_AS(from_file(dir / "missing.bin", {.mmap = MapMode::read_only}), IoError);
    CHECK_FALSE(std::filesystem::exists(dir / "missing.bin"));
  }
  CHECK(FromFileOptions{}.mmap == MapMode::copy_on_write);  // torch.from_file's shared=False
}

TEST_CASE("from_file errors name the file and the numbers", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "data.bin";
  write_bytes(path, std::string(10, 'x'));
  const std::string where = "tensorfile: " + path.string() + ": ";
  SECTION("too short for size") {
    REQUIRE_THROWS_WITH(from_file(path, {.size = 3, .dtype = DType::Float32}),
                        where + "file is too short for 3 float32 elements; expected at least 12 bytes, got 10");
  }
  SECTION("whole file not a whole number of elements") {
    REQUIRE_THROWS_WITH(from_file(path, {.dtype = DType::Float64}),
                        where +
                            "file size is not a whole number of float64 elements; expected a multiple of 8 "
                            "bytes, got 10");
  }
  SECTION("empty file") {
    const auto empty = dir / "empty.bin";
    write_bytes(empty, "");
    REQUIRE_THROWS_WITH(from_file(empty),
                        "tensorfile: " + empty.string() +
                            ": file is empty; expected at least one float32 element (pass .size = 0 for an empty "
                            "tensor)");
    CHECK(from_file(empty, {.size = 0}).numel() == 0);
  }
  SECTION("negative and overflowing sizes") {
    REQUIRE_THROWS_WITH(from_file(path, {.size = -1}), where + "size must be non-negative; got -1");
    REQUIRE_THROWS_WITH(from_file(path, {.size = std::int64_t{1} << 61, .dtype = DType::Float64}),
                        where + "size of 2305843009213693952 float64 elements overflows the addressable byte count");
  }
  SECTION("missing file, directory") {
    const auto missing = dir / "missing.bin";
    REQUIRE_THROWS_WITH(from_file(missing),
                        "tensorfile: " + missing.string() + ": cannot open for reading: No such file or directory");
    REQUIRE_THROWS_WITH(from_file(dir.path()),
                        "tensorfile: " + dir.path().string() + ": is a directory; expected a regular file");
    REQUIRE_THROWS_WITH(from_file(dir.path(), {.mmap = MapMode::shared, .size = 1}),
                        "tensorfile: " + dir.path().string() + ": cannot open for writing: Is a directory");
    CHECK_THROWS_AS(from_file(missing), IoError);
  }
  SECTION("no permission") {
    const auto secret = dir / "secret.bin";
    write_bytes(secret, std::string(8, 's'));
    ::chmod(secret.c_str(), 0600);
    ::chmod(dir.path().c_str(), 0755);
    const std::string expected = "tensorfile: " + secret.string() + ": cannot open for reading: Permission denied";
    const int status = run_unprivileged([&] {
      try {
        (void)from_file(secret);
      } catch (const IoError& error) {
        return std::string(error.what()) == expected && error.error_number() == EACCES ? 0 : 1;
      } catch (...) {
        return 2;
      }
      return 4;
    });
    CHECK(status == 0);
  }
}

TEST_CASE("a failed from_file removes the file it created, never one that was there", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  SECTION("created by the failing call: removed") {
    const auto path = dir / "new.bin";
    REQUIRE_THROWS_AS(from_file(path, {.mmap = MapMode::shared}), FormatError);  // no size: an empty file is refused
    CHECK_FALSE(std::filesystem::exists(path));
  }
  SECTION("there before, empty: kept") {
    const auto path = dir / "empty.bin";
    write_bytes(path, "");
    REQUIRE_THROWS_AS(from_file(path, {.mmap = MapMode::shared}), FormatError);
    CHECK(std::filesystem::exists(path));
  }
  SECTION("created by a call that succeeds: kept") {
    const auto path = dir / "made.bin";
    CHECK(from_file(path, {.mmap = MapMode::shared, .size = 4}).numel() == 4);
    CHECK(std::filesystem::file_size(path) == 16);
  }
}

TEST_CASE("from_file refuses a FIFO without waiting for a writer", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  const auto fifo = dir / "pipe.bin";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const MapMode mode : {MapMode::read_only, MapMode::copy_on_write, MapMode::shared}) {
    INFO(static_cast<int>(mode));
    // In a child with an alarm: before the fix, open() waited forever for a writer.
    const int status = tensorfile_test::exit_status_in_child(
        [&] {
          try {
            (void)from_file(fifo, {.mmap = mode, .size = 1});
          } catch (const ArgumentError& error) {
            return std::string(error.what()) ==
                           "tensorfile: " + fifo.string() + ": is not a regular file; expected a regular file"
                       ? 0
                       : 1;
          }
          return 2;
        },
        10);
    CHECK(status == 0);
  }
}

TEST_CASE("from_file with an offset skips a header", "[from_file]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "with_header.bin";
  const std::string bytes = pattern(64 + 40);  // a 64-byte header, then ten float32
  write_bytes(path, bytes);
  SECTION("the rest of the file, or `size` elements of it") {
    const Tensor all = from_file(path, {.offset = 64});
    CHECK(all.sizes() == Shape{10});
    CHECK(std::memcmp(all.raw_data(), bytes.data() + 64, 40) == 0);
    const Tensor some = from_file(path, {.size = 3, .dtype = DType::Int64, .offset = 16});
    CHECK(some.sizes() == Shape{3});
    CHECK(std::memcmp(some.raw_data(), bytes.data() + 16, 24) == 0);
    CHECK(from_file(path, {.size = 0, .offset = 104}).numel() == 0);
  }
  SECTION("shared mode grows the file to offset + size and writes after the offset") {
    const auto grown = dir / "grown.bin";
    {
      const Tensor t = from_file(grown, {.mmap = MapMode::shared, .size = 2, .dtype = DType::Int32, .offset = 8});
      t.data<std::int32_t>()[1] = 0x01020304;
    }
    const std::string written = tensorfile_test::read_text(grown);
    REQUIRE(written.size() == 16);
    CHECK(written.substr(0, 12) == std::string(12, '\0'));
    CHECK(written.substr(12) == std::string("\x04\x03\x02\x01", 4));
  }
  SECTION("errors") {
    REQUIRE_THROWS_WITH(
        from_file(path, {.offset = 6}),
        "tensorfile: " + path.string() + ": offset must be a multiple of the 4-byte float32 element size; got 6");
    REQUIRE_THROWS_WITH(
        from_file(path, {.offset = 108}),
        "tensorfile: " + path.string() + ": offset 108 is past the end of the file; expected at most 104");
    REQUIRE_THROWS_WITH(from_file(path, {.offset = 104}),
                        "tensorfile: " + path.string() +
                            ": file is empty after the offset; expected at least one float32 element (pass .size = 0 "
                            "for an empty tensor)");
    REQUIRE_THROWS_WITH(from_file(path, {.size = 11, .offset = 64}),
                        "tensorfile: " + path.string() +
                            ": file is too short for 11 float32 elements after an offset of 64; expected at least 108 "
                            "bytes, got 104");
    const auto odd = dir / "odd.bin";
    write_bytes(odd, pattern(64 + 39));
    REQUIRE_THROWS_WITH(from_file(odd, {.offset = 64}),
                        "tensorfile: " + odd.string() +
                            ": file size after the offset is not a whole number of float32 elements; expected a "
                            "multiple of 4 bytes, got 39");
    CHECK_THROWS_AS(from_file(path, {.size = INT64_MAX / 8, .dtype = DType::Float64, .offset = 64}), ArgumentError);
  }
}
