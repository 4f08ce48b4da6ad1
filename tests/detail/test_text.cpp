// SPDX-License-Identifier: MIT
// Tests of the text module (detail/text/: hex, UTF-8, Python reprs, JSON writing and reading), of the
// BigInt byte rules in detail/bytes/twos_complement.hpp, and of the public wrappers in core/text.hpp.
#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/detail/bytes/twos_complement.hpp>
#include <tensorfile/detail/text/hex.hpp>
#include <tensorfile/detail/text/json_reader.hpp>
#include <tensorfile/detail/text/json_writer.hpp>
#include <tensorfile/detail/text/python_repr.hpp>
#include <tensorfile/detail/text/utf8.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

// The detail namespaces are opened inside a namespace of this file only: the tests compile several files as one
// translation unit, where a directive at file scope would reach the next file.
namespace text_tests {
using namespace tensorfile;
using namespace tensorfile::detail;

namespace {
std::string json(std::string_view text, JsonCharset charset = JsonCharset::ascii) {
  std::string out;
  CHECK(append_json_string(out, text, charset, OnInvalidUtf8::stop) == std::string_view::npos);
  return out;
}
std::string json_number(double v, JsonNonFinite non_finite = JsonNonFinite::python_tokens) {
  std::string out;
  append_json_float(out, v, non_finite);
  return out;
}
}  // namespace

TEST_CASE("hex digits", "[detail][text]") {
  CHECK(hex_text(0, 2) == "00");
  CHECK(hex_text(0xab, 2) == "ab");
  CHECK(hex_text(0xdeadbeef, 8) == "deadbeef");
  CHECK(hex_text(0x1234, 2) == "34");  // only the low digits
  std::string out = "%";
  append_hex(out, 0x2f, 2, HexCase::upper);
  CHECK(out == "%2F");
  CHECK(hex_digit_value('0') == 0);
  CHECK(hex_digit_value('a') == 10);
  CHECK(hex_digit_value('F') == 15);
  CHECK(hex_digit_value('g') == -1);
  CHECK(hex_bytes(std::vector<std::byte>{std::byte{0x00}, std::byte{0x7f}, std::byte{0xff}}) == "007fff");
  CHECK(hex_bytes({}).empty());
}

TEST_CASE("WTF-8 decoding and encoding", "[detail][text]") {
  CHECK(is_valid_wtf8("plain \xc3\xa9 \xf0\x9f\x98\x80"));
  CHECK(is_valid_wtf8("\xed\xa0\x80"));            // a lone surrogate, as Python's str may hold
  CHECK_FALSE(is_valid_wtf8("\xc0\x80"));          // overlong
  CHECK_FALSE(is_valid_wtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_valid_wtf8("\xe2\x82"));          // cut short
  std::size_t i = 0;
  CHECK(decode_wtf8_or_latin1("\xff"
                              "a",
                              i) == 0xff);
  CHECK(i == 1);
  for (const std::uint32_t cp : {0x41u, 0xe9u, 0x20acu, 0xd800u, 0x1f600u}) {
    std::string text;
    append_utf8(text, cp);
    std::size_t at = 0;
    CHECK(decode_wtf8(text, at) == static_cast<std::int32_t>(cp));
    CHECK(at == text.size());
  }
}

TEST_CASE("Python float repr", "[detail][text]") {
  CHECK(python_float_repr(0.0) == "0.0");
  CHECK(python_float_repr(-0.0) == "-0.0");
  CHECK(python_float_repr(1.0) == "1.0");
  CHECK(python_float_repr(0.1) == "0.1");
  CHECK(python_float_repr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(python_float_repr(1.0 / 3.0) == "0.3333333333333333");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(1e-5) == "1e-05");
  CHECK(python_float_repr(1e15) == "1000000000000000.0");
  CHECK(python_float_repr(1234567890123456.0) == "1234567890123456.0");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(-1.5e300) == "-1.5e+300");
  CHECK(python_float_repr(123456789.125) == "123456789.125");
  CHECK(python_float_repr(5e-324) == "5e-324");                                  // the smallest subnormal
  CHECK(python_float_repr(2.225073858507201e-308) == "2.225073858507201e-308");  // the largest subnormal
  CHECK(python_float_repr(std::numeric_limits<double>::max()) == "1.7976931348623157e+308");
  CHECK(python_float_repr(std::nan("")) == "nan");
  CHECK(python_float_repr(-std::nan("")) == "nan");
  CHECK(python_float_repr(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(python_float_repr(-std::numeric_limits<double>::infinity()) == "-inf");
}

TEST_CASE("Python str and bytes repr", "[detail][text]") {
  CHECK(python_str_repr("plain") == "'plain'");
  CHECK(python_str_repr("it's") == "\"it's\"");
  CHECK(python_str_repr("both ' and \"") == "'both \\' and \"'");
  CHECK(python_str_repr("a\\b\n\r\t\x01\x7f") == "'a\\\\b\\n\\r\\t\\x01\\x7f'");
  CHECK(python_str_repr("h\xc3\xa9") == "'h\xc3\xa9'");  // non-ASCII as is
  CHECK(python_str_repr("\xff") == "'\xc3\xbf'");        // not UTF-8: the latin-1 code point
  const std::array<std::byte, 6> raw{std::byte{'a'},  std::byte{'\''}, std::byte{'\n'},
                                     std::byte{0x00}, std::byte{0x80}, std::byte{0xff}};
  CHECK(python_bytes_repr(raw) == "b'a\\'\\n\\x00\\x80\\xff'");
  CHECK(python_bytes_repr({}) == "b''");
}

TEST_CASE("JSON string escaping", "[detail][text]") {
  CHECK(json("plain") == "\"plain\"");
  CHECK(json("q\"b\\n\n\r\t\b\f") == R"("q\"b\\n\n\r\t\b\f")");
  CHECK(json(std::string_view("\x00\x01\x1f", 3)) == R"("\u0000\u0001\u001f")");
  CHECK(json("\x7f") == R"("\u007f")");
  CHECK(json("\x7f", JsonCharset::utf8) == "\"\x7f\"");
  CHECK(json("h\xc3\xa9") == R"("h\u00e9")");
  CHECK(json("\xe2\x82\xac") == R"("\u20ac")");
  CHECK(json("\xf0\x9f\x99\x82") == R"("\ud83d\ude42")");  // a surrogate pair
  CHECK(json("\xed\xa0\x80") == R"("\ud800")");            // a lone surrogate, as Python writes it
  CHECK(json("h\xc3\xa9\x01", JsonCharset::utf8) == "\"h\xc3\xa9\\u0001\"");

  std::string out;
  CHECK(append_json_string(out, "ok\xff", JsonCharset::ascii, OnInvalidUtf8::stop) == 2);
  out.clear();
  CHECK(append_json_string(out, "\xff", JsonCharset::ascii, OnInvalidUtf8::latin1) == std::string_view::npos);
  CHECK(out == R"("\u00ff")");
  out.clear();
  (void)append_json_string(out, "\xff", JsonCharset::utf8, OnInvalidUtf8::latin1);
  CHECK(out == "\"\xc3\xbf\"");
  CHECK(json_string("\xc0\x80") == R"("\u00c0\u0080")");  // overlong UTF-8 is not UTF-8
  CHECK(json_string("h\xc3\xa9") == R"("h\u00e9")");
}

TEST_CASE("JSON floats", "[detail][text]") {
  CHECK(json_number(2.5) == "2.5");
  CHECK(json_number(1e-5) == "1e-05");
  CHECK(json_number(std::nan("")) == "NaN");
  CHECK(json_number(HUGE_VAL) == "Infinity");
  CHECK(json_number(-HUGE_VAL) == "-Infinity");
  CHECK(json_number(std::nan(""), JsonNonFinite::null) == "null");
  CHECK(json_number(-HUGE_VAL, JsonNonFinite::null) == "null");
}

TEST_CASE("JsonReader scans Python's JSON tokens", "[detail][text]") {
  const std::filesystem::path file = "x.json";
  const auto scan = [&](std::string_view text) {
    JsonReader in(text, file);
    const JsonScalar s = in.scan_scalar();
    return std::pair{s.kind, std::string(text.substr(s.start, s.end - s.start))};
  };
  CHECK(scan(" NaN") == std::pair{JsonScalar::Kind::nan, std::string("NaN")});
  CHECK(scan("-Infinity,") == std::pair{JsonScalar::Kind::neg_inf, std::string("-Infinity")});
  CHECK(scan("-12]") == std::pair{JsonScalar::Kind::integer, std::string("-12")});
  CHECK(scan("1.5e-3 ") == std::pair{JsonScalar::Kind::real, std::string("1.5e-3")});
  CHECK(scan("1e") == std::pair{JsonScalar::Kind::integer, std::string("1")});
  CHECK(JsonReader::real_value("1e400") == HUGE_VAL);
  CHECK(JsonReader::real_value("-1e400") == -HUGE_VAL);
  CHECK(JsonReader::real_value("1e-400") == 0.0);
  CHECK(std::signbit(JsonReader::real_value("-1e-400")));

  std::string scratch;
  JsonReader strings(R"("a\u00e9\ud83d\ude00\n" "plain")", file);
  CHECK(strings.parse_string(scratch) == "a\xc3\xa9\xf0\x9f\x98\x80\n");
  CHECK(strings.parse_string(scratch) == "plain");
  strings.finish();

  JsonReader shape("[2, 3] [1.5]", file);
  CHECK(shape.try_parse_shape() == std::vector<std::int64_t>{2, 3});
  CHECK_FALSE(shape.try_parse_shape());

  JsonReader bad("[1, }", file);
  REQUIRE_THROWS_WITH(bad.skip_value(), "tensorfile: x.json: invalid JSON; expected a JSON value, got '}' (at byte 4)");
  JsonReader control("\x07", file);
  REQUIRE_THROWS_WITH(control.skip_value(),
                      "tensorfile: x.json: invalid JSON; expected a JSON value, got byte 0x07 (at byte 0)");
}

TEST_CASE("two's complement bytes of big integers", "[detail][text]") {
  using Bytes = std::vector<std::uint8_t>;
  CHECK(twos_complement_from_decimal("0") == Bytes{0x00});
  CHECK(twos_complement_from_decimal("127") == Bytes{0x7f});
  CHECK(twos_complement_from_decimal("128") == Bytes{0x80, 0x00});
  CHECK(twos_complement_from_decimal("-128") == Bytes{0x80});
  CHECK(twos_complement_from_decimal("-129") == Bytes{0x7f, 0xff});
  CHECK(twos_complement_from_decimal("18446744073709551616") == Bytes{0, 0, 0, 0, 0, 0, 0, 0, 0x01});
  Bytes redundant{0x01, 0x00, 0x00};
  trim_sign_bytes(redundant);
  CHECK(redundant == Bytes{0x01});
  Bytes negative{0xff, 0xff, 0xff};
  trim_sign_bytes(negative);
  CHECK(negative == Bytes{0xff});
  Bytes kept{0x80, 0x00};
  trim_sign_bytes(kept);
  CHECK(kept == Bytes{0x80, 0x00});
}

TEST_CASE("python_repr and key_text", "[core][text]") {
  CHECK(python_repr(Value(None{})) == "None");
  CHECK(python_repr(Value(true)) == "True");
  CHECK(python_repr(Value(2.5)) == "2.5");
  CHECK(python_repr(Value(std::complex<double>(1.0, -2.0))) == "(1-2j)");
  CHECK(python_repr(Value(std::complex<double>(0.0, 1.5))) == "1.5j");
  CHECK(python_repr(Value::tuple({1})) == "(1,)");
  CHECK(python_repr(Value("it's")) == "\"it's\"");
  CHECK(key_text(Value("k/x")) == "k/x");
  CHECK(key_text(Value(std::int64_t{-3})) == "-3");
  CHECK(key_text(Value(false)) == "False");
  CHECK(key_text(Value(2.5)) == "2.5");
  CHECK(key_text(Value::tuple({1, "a"})) == "(1, 'a')");
}

TEST_CASE("escape_controls", "[core][text]") {
  using namespace std::string_literals;
  SECTION("printable text, UTF-8 and backslashes unchanged") {
    CHECK(escape_controls("weight.0 a\\b ~/") == "weight.0 a\\b ~/");
    CHECK(escape_controls("gr\xc3\xb6\xc3\x9f\xe2\x82\xac \xf0\x9f\x98\x80") ==
          "gr\xc3\xb6\xc3\x9f\xe2\x82\xac \xf0\x9f\x98\x80");
    CHECK(escape_controls("").empty());
  }
  SECTION("C0 controls and DEL, NUL included, byte by byte") {
    CHECK(escape_controls("\x1b[31mred\x07") == "\\x1b[31mred\\x07");
    CHECK(escape_controls("a\0b\x7f\n\r\t"s) == "a\\x00b\\x7f\\x0a\\x0d\\x09");
  }
  SECTION("C1 controls as code points; invalid UTF-8 and surrogates byte by byte") {
    CHECK(escape_controls("\xc2\x9b"
                          "31m\xc2\x85\xc2\xa0") == "\\u009b31m\\u0085\xc2\xa0");
    CHECK(escape_controls("\x9b\xff\xc3") == "\\x9b\\xff\\xc3");
    CHECK(escape_controls("\xed\xa0\x80!") == "\\xed\\xa0\\x80!");
  }
}

TEST_CASE("json_pointer_step escapes the separator and the escape character", "[core][text]") {
  CHECK(json_pointer_step("layer.0.weight") == "layer.0.weight");
  CHECK(json_pointer_step("a/b") == "a~1b");
  CHECK(json_pointer_step("~/~") == "~0~1~0");
  CHECK(json_pointer_step("") == "");
}

}  // namespace text_tests
