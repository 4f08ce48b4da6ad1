// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/error.hpp>: message shape, location parts and codes.
#include <tensorfile/core/error.hpp>

#include <cerrno>
#include <string>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("Error composes its message from the location parts that are known", "[error]") {
  SECTION("all parts") {
    const FormatError error("bad opcode; expected STOP, got 0x99",
                            {.file = "model.pt", .member = "model/data.pkl", .offset = 42});
    CHECK(std::string(error.what()) ==
          "tensorfile: model.pt: model/data.pkl: bad opcode; expected STOP, got 0x99 (at byte 42)");
    CHECK(error.code() == ErrorCode::format);
    CHECK(error.path() == "model.pt");
    CHECK(error.member() == "model/data.pkl");
    CHECK(error.offset() == 42u);
    CHECK(error.reason() == "bad opcode; expected STOP, got 0x99");
  }
  SECTION("no location at all") {
    const ArgumentError error("count is 0");
    CHECK(std::string(error.what()) == "tensorfile: count is 0");
    CHECK_FALSE(error.offset().has_value());
    CHECK(error.code() == ErrorCode::invalid_argument);
  }
  SECTION("file and offset without a member") {
    const FormatError error("file ends early", {.file = "x.bin", .offset = 0});
    CHECK(std::string(error.what()) == "tensorfile: x.bin: file ends early (at byte 0)");
  }
}

TEST_CASE("IoError keeps errno and appends the system's text", "[error]") {
  const IoError error("cannot open for reading", ENOENT, {.file = "missing.pt"});
  CHECK(std::string(error.what()) == "tensorfile: missing.pt: cannot open for reading: No such file or directory");
  CHECK(error.error_number() == ENOENT);
  CHECK(error.code() == ErrorCode::io);
}

TEST_CASE("Error::message is what() whole, past a NUL in a key or path", "[error]") {
  using namespace std::string_literals;
  const FormatError plain("bad", {.file = "x.pt", .member = "archive/data/0", .offset = 7});
  CHECK(plain.message() == plain.what());
  const FormatError error("key 'a\0b' is bad"s, {.file = "x.pt", .member = "k\0ey"s});
  CHECK(std::string(error.what()) == "tensorfile: x.pt: k");
  CHECK(error.message() == "tensorfile: x.pt: k\0ey: key 'a\0b' is bad"s);
}

TEST_CASE("Every subclass is caught as Error and as std::runtime_error", "[error]") {
  CHECK_THROWS_AS(throw UnsupportedError("sparse"), Error);
  CHECK_THROWS_AS(throw DTypeError("x"), std::runtime_error);
  CHECK(LimitError("deep").code() == ErrorCode::limit);
  CHECK(DeviceError("no gpu").code() == ErrorCode::device);
  CHECK(UnsupportedError("q").code() == ErrorCode::unsupported);
  CHECK(DTypeError("d").code() == ErrorCode::dtype);
}

TEST_CASE("to_string(ErrorCode) names every code", "[error]") {
  CHECK(to_string(ErrorCode::io) == "io");
  CHECK(to_string(ErrorCode::format) == "format");
  CHECK(to_string(ErrorCode::unsupported) == "unsupported");
  CHECK(to_string(ErrorCode::dtype) == "dtype");
  CHECK(to_string(ErrorCode::invalid_argument) == "invalid_argument");
  CHECK(to_string(ErrorCode::limit) == "limit");
  CHECK(to_string(ErrorCode::device) == "device");
  CHECK(to_string(static_cast<ErrorCode>(99)) == "unknown");
  CHECK(to_string(FormatError("x").code()) == "format");
}
