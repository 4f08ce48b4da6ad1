// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/tensordict/detail/meta_schema.hpp> and the key rules of detail/keys.hpp.
#include <tensorfile/formats/tensordict/detail/meta_schema.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "tensorfile_catch.hpp"

// The detail namespaces are opened inside a namespace of this file only: the tests compile several files as one
// translation unit, where a directive at file scope would reach the next file.
namespace meta_json_tests {
using namespace tensorfile;
using namespace tensorfile::detail;
using namespace tensorfile::detail::td;

namespace {
const std::filesystem::path meta_file = "dir/meta.json";
Value parse(std::string_view text) {
  JsonReader in(text, meta_file);
  return parse_json_document(in);
}
std::string dump(const Value& v, MetaJsonStyle style = MetaJsonStyle::stdlib, bool compact = false) {
  std::string out;
  JsonWriter(out, style, compact).value(v);
  return out;
}
std::string py_float(double v, MetaJsonStyle style = MetaJsonStyle::stdlib) {
  std::string out;
  append_json_float(out, v, style == MetaJsonStyle::stdlib ? JsonNonFinite::python_tokens : JsonNonFinite::null);
  return out;
}
}  // namespace

TEST_CASE("keys encode to file names as tensordict 0.14 does", "[tensordict][keys]") {
  // The observed encodings of the format notes, plus the full escape set.
  CHECK(encode_key("a/b") == "a%2Fb");
  CHECK(encode_key("sp ace") == "sp%20ace");
  CHECK(encode_key("pct%41") == "pct%2541");
  CHECK(encode_key("colon:x") == "colon%3Ax");
  CHECK(encode_key("tab\tkey") == "tab%09key");
  CHECK(encode_key("\xc3\xa9-unicode") == "\xc3\xa9-unicode");
  CHECK(encode_key("") == "%");
  CHECK(encode_key(".") == "%2E");
  CHECK(encode_key("..") == "%2E%2E");
  CHECK(encode_key("...") == "...");
  CHECK(encode_key("a.b") == "a.b");
  CHECK(encode_key("../etc/passwd") == "..%2Fetc%2Fpasswd");
  CHECK(encode_key("/abs") == "%2Fabs");
  CHECK(encode_key(std::string_view("<>:\"|?*\\ %\x7f\x1f\0", 13)) == "%3C%3E%3A%22%7C%3F%2A%5C%20%25%7F%1F%00");
}

TEST_CASE("legacy raw names are tried only for safe keys", "[tensordict][keys]") {
  CHECK(is_safe_legacy_key("plain", false));
  CHECK(is_safe_legacy_key("sp ace", true));
  CHECK(is_safe_legacy_key("", false));    // ".memmap" stays inside
  CHECK(is_safe_legacy_key("..", false));  // "...memmap" stays inside
  CHECK_FALSE(is_safe_legacy_key("", true));
  CHECK_FALSE(is_safe_legacy_key(".", true));
  CHECK_FALSE(is_safe_legacy_key("..", true));
  CHECK_FALSE(is_safe_legacy_key("a/b", false));
  CHECK_FALSE(is_safe_legacy_key("/etc/passwd", false));
  CHECK_FALSE(is_safe_legacy_key("..\\x", false));
  CHECK_FALSE(is_safe_legacy_key("C:x", false));
  CHECK_FALSE(is_safe_legacy_key(std::string_view("a\0b", 3), false));
  CHECK(is_safe_legacy_key("1:x", false));
}

TEST_CASE("nested size tables are named as Path.with_suffix", "[tensordict][keys]") {
  CHECK(nested_shape_file_name("x.memmap") == "x.shape.memmap");
  CHECK(nested_shape_file_name("a.b.memmap") == "a.b.shape.memmap");
  CHECK(nested_shape_file_name("%.memmap") == "%.shape.memmap");
  CHECK(nested_shape_file_name(".memmap") == ".memmap.shape.memmap");
  CHECK(nested_shape_file_name("..memmap") == "..shape.memmap");
}

TEST_CASE("dtype strings: torch.<canonical name> only", "[tensordict][json]") {
  CHECK(parse_tensordict_dtype("torch.float32") == DType::Float32);
  CHECK(parse_tensordict_dtype("torch.bfloat16") == DType::BFloat16);
  CHECK(parse_tensordict_dtype("torch.complex32") == DType::Complex32);
  CHECK(parse_tensordict_dtype("torch.quint4x2") == DType::QUInt4x2);
  CHECK(parse_tensordict_dtype("torch.uint64") == DType::UInt64);
  CHECK_FALSE(parse_tensordict_dtype("float32"));
  CHECK_FALSE(parse_tensordict_dtype("torch.float"));  // aliases are never written, and tensordict rejects them
  CHECK_FALSE(parse_tensordict_dtype("torch.float33"));
}

TEST_CASE("JsonReader reads Python's json dialect", "[tensordict][json]") {
  SECTION("scalars") {
    CHECK(parse("null").is_none());
    CHECK(parse(" true ").as_bool());
    CHECK(parse("42").as_int() == 42);
    CHECK(parse("-0").as_int() == 0);
    CHECK(parse("2.5").as_float() == 2.5);
    CHECK(parse("1e3").is_float());
    CHECK(parse("1E-2").as_float() == 0.01);
    CHECK(parse("-9223372036854775808").as_int() == std::numeric_limits<std::int64_t>::min());
    CHECK(std::isnan(parse("NaN").as_float()));
    CHECK(parse("Infinity").as_float() == HUGE_VAL);
    CHECK(parse("-Infinity").as_float() == -HUGE_VAL);
    CHECK(parse("1e400").as_float() == HUGE_VAL);
    CHECK(parse("-1e400").as_float() == -HUGE_VAL);
    CHECK(parse("1e-400").as_float() == 0.0);
    CHECK(parse("0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                "00000000000000000000000000000000000000000000000000000000000001")
              .as_float() == 0.0);
  }
  SECTION("integers beyond 64 bits become BigInt") {
    CHECK(parse("18446744073709551616").as_big_int().str() == "18446744073709551616");
    CHECK(parse("-18446744073709551617").as_big_int().str() == "-18446744073709551617");
    CHECK(parse("9223372036854775808").as_big_int().bytes == std::vector<std::uint8_t>{0, 0, 0, 0, 0, 0, 0, 0x80, 0});
  }
  SECTION("strings: escapes, surrogate pairs, lone surrogates, raw UTF-8") {
    CHECK(parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
    CHECK(parse(R"("\u00e9")").as_string() == "\xc3\xa9");
    CHECK(parse(R"("\ud83d\ude00")").as_string() == "\xf0\x9f\x98\x80");
    CHECK(parse(R"("\ud800x")").as_string() == "\xed\xa0\x80x");  // kept, as Python's str does
    CHECK(parse("\"\xc3\xa9\"").as_string() == "\xc3\xa9");
  }
  SECTION("containers; a repeated key keeps its first position and last value") {
    const Value v = parse(R"({"a": [1, [2.0, {}], []], "b": {"c": null}, "a": 7})");
    REQUIRE(v.is_dict());
    CHECK(v.size() == 2);
    CHECK(v.as_dict().items()[0].first.as_string() == "a");
    CHECK(v["a"].as_int() == 7);
    CHECK(v["b"]["c"].is_none());
    CHECK(parse("[1,2]") == parse("[ 1 , 2 ]"));
    CHECK(parse("\xEF\xBB\xBF{}").is_dict());  // a UTF-8 BOM, as Python accepts
  }
}

TEST_CASE("JsonReader errors name the file, what was expected, what was found and the byte", "[tensordict][json]") {
  REQUIRE_THROWS_WITH(parse(""),
                      "tensorfile: dir/meta.json: invalid JSON; expected a JSON value, got end of file (at byte 0)");
  REQUIRE_THROWS_WITH(parse("{"),
                      "tensorfile: dir/meta.json: invalid JSON; expected a string, got end of file (at byte 1)");
  REQUIRE_THROWS_WITH(parse(R"({"a" 1})"),
                      "tensorfile: dir/meta.json: invalid JSON; expected ':', got '1' (at byte 5)");
  REQUIRE_THROWS_WITH(parse(R"({"a": 1 "b": 2})"),
                      "tensorfile: dir/meta.json: invalid JSON; expected ',' or '}', got '\"' (at byte 8)");
  REQUIRE_THROWS_WITH(parse("[1, 2"),
                      "tensorfile: dir/meta.json: invalid JSON; expected ',' or ']', got end of file (at byte 5)");
  REQUIRE_THROWS_WITH(parse("{} x"),
                      "tensorfile: dir/meta.json: invalid JSON; expected the end of the file, got 'x' (at byte 3)");
  REQUIRE_THROWS_WITH(parse("nan"),
                      "tensorfile: dir/meta.json: invalid JSON; expected a JSON value, got 'n' (at byte 0)");
  REQUIRE_THROWS_WITH(parse("01"),
                      "tensorfile: dir/meta.json: invalid JSON; expected the end of the file, got '1' (at byte 1)");
  REQUIRE_THROWS_WITH(parse("\"a\x01\""),
                      "tensorfile: dir/meta.json: invalid JSON; expected a string without raw control characters, got "
                      "byte 0x01 (at byte 2)");
  REQUIRE_THROWS_WITH(parse("\"\xff\""),
                      "tensorfile: dir/meta.json: invalid JSON; expected valid UTF-8, got byte 0xff (at byte 1)");
  REQUIRE_THROWS_WITH(parse(R"("\x")"),
                      "tensorfile: dir/meta.json: invalid JSON; expected a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r "
                      "\\t \\uXXXX), got 'x' (at byte 2)");
  REQUIRE_THROWS_WITH(
      parse(R"("\u12")"),
      "tensorfile: dir/meta.json: invalid JSON; expected four hex digits after \\u, got '\"' (at byte 5)");
  REQUIRE_THROWS_WITH(parse("\"abc"),
                      "tensorfile: dir/meta.json: invalid JSON; expected a closing '\"', got end of file (at byte 4)");
  REQUIRE_THROWS_AS(parse(std::string(600, '[') + std::string(600, ']')), LimitError);
  try {
    (void)parse("[1,]");
    FAIL("no error");
  } catch (const FormatError& e) {
    CHECK(e.path() == meta_file);
    CHECK(e.offset() == 3u);
  }
}

TEST_CASE("read_dir_meta classifies the members of a TensorDict meta.json", "[tensordict][json]") {
  const std::string spaced =
      R"({"a": {"device": "cpu", "shape": [2, 3], "dtype": "torch.float32", "is_nested": false}, "n": {"type": "TensorDict"}, )"
      R"("odd": {"x": 1}, "num": 5, "nt": {"device": "cpu", "shape": [2, 2], "dtype": "torch.int64", "is_nested": true}, )"
      R"("old": {"device": "cpu", "shape": [], "dtype": "torch.bool"}, "shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})";
  const DirMeta meta = read_dir_meta(spaced, meta_file);
  REQUIRE(meta.members.size() == 9);
  CHECK(meta.members[0].kind == MemberKind::leaf);
  CHECK(meta.members[0].dtype == DType::Float32);
  CHECK(meta.members[0].shape == Shape{2, 3});
  CHECK_FALSE(meta.members[0].is_nested);
  CHECK(meta.members[1].kind == MemberKind::collection);
  CHECK(meta.members[2].kind == MemberKind::other);
  CHECK(meta.members[3].kind == MemberKind::not_object);
  CHECK(meta.members[4].is_nested);
  CHECK(meta.members[5].kind == MemberKind::leaf);  // v0.4: no is_nested member
  CHECK(meta.members[5].shape == Shape{});
  CHECK(meta.members[6].kind == MemberKind::reserved);
  CHECK(meta.shape_at.has_value());
  CHECK(meta.device_at.has_value());
  CHECK(meta.type_at.has_value());

  SECTION("compact (orjson) text reads the same") {
    std::string compact;
    bool in_string = false;
    for (const char c : spaced) {
      if (c == '"') in_string = !in_string;
      if (!in_string && c == ' ') continue;
      compact += c;
    }
    const DirMeta other = read_dir_meta(compact, meta_file);
    REQUIRE(other.members.size() == meta.members.size());
    for (std::size_t i = 0; i < other.members.size(); ++i) {
      CHECK(other.members[i].key == meta.members[i].key);
      CHECK(other.members[i].kind == meta.members[i].kind);
      CHECK(other.members[i].shape == meta.members[i].shape);
    }
  }
  SECTION("bad dtypes and shapes are recorded, not thrown, until used") {
    const DirMeta bad =
        read_dir_meta(R"({"a": {"dtype": "float32", "shape": [-1]}, "b": {"dtype": 3, "shape": [1.5]}})", meta_file);
    CHECK(bad.members[0].kind == MemberKind::leaf);
    CHECK_FALSE(bad.members[0].dtype);
    CHECK_FALSE(bad.members[0].shape);
    CHECK_FALSE(bad.members[1].dtype);
    CHECK_FALSE(bad.members[1].shape);
  }
  REQUIRE_THROWS_WITH(read_dir_meta("[]", meta_file),
                      "tensorfile: dir/meta.json: invalid JSON; expected a JSON object, got '[' (at byte 0)");
}

TEST_CASE("meta.json floats: Python repr, NaN tokens or null", "[tensordict][json]") {
  CHECK(py_float(1.0) == "1.0");
  CHECK(py_float(2.5) == "2.5");
  CHECK(py_float(0.1) == "0.1");
  CHECK(py_float(-0.0) == "-0.0");
  CHECK(py_float(0.0) == "0.0");
  CHECK(py_float(0.0001) == "0.0001");
  CHECK(py_float(0.00001) == "1e-05");
  CHECK(py_float(1e15) == "1000000000000000.0");
  CHECK(py_float(1e16) == "1e+16");
  CHECK(py_float(1.5e300) == "1.5e+300");
  CHECK(py_float(123456789.125) == "123456789.125");
  CHECK(py_float(5e-324) == "5e-324");
  CHECK(py_float(1.0 / 3.0) == "0.3333333333333333");
  CHECK(py_float(std::nan("")) == "NaN");
  CHECK(py_float(HUGE_VAL) == "Infinity");
  CHECK(py_float(-HUGE_VAL) == "-Infinity");
  CHECK(py_float(std::nan(""), MetaJsonStyle::orjson) == "null");
}

TEST_CASE("JsonWriter writes Python's json (or orjson) bytes", "[tensordict][json]") {
  Dict d;
  d.set(Value("k"), Value(List{Value(1), Value(2.5), Value(None{}), Value(true)}));
  d.set(Value("t"), Value::tuple({Value("x")}));
  CHECK(dump(Value(d)) == R"({"k": [1, 2.5, null, true], "t": ["x"]})");
  CHECK(dump(Value(d), MetaJsonStyle::stdlib, true) == R"({"k":[1,2.5,null,true],"t":["x"]})");
  CHECK(dump(Value(d), MetaJsonStyle::orjson) == R"({"k":[1,2.5,null,true],"t":["x"]})");
  CHECK(dump(Value(Dict{})) == "{}");
  CHECK(dump(Value(List{})) == "[]");
  CHECK(dump(Value(BigInt{{0, 0, 0, 0, 0, 0, 0, 0x80, 0}})) == "9223372036854775808");

  SECTION("strings: ensure_ascii escapes for the stdlib, raw UTF-8 for orjson") {
    const std::string text = "q\"b\\n\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80";
    CHECK(dump(Value(text)) == R"("q\"b\\n\n\u0001\u007f\u00e9\ud83d\ude00")");
    CHECK(dump(Value(text), MetaJsonStyle::orjson) == "\"q\\\"b\\\\n\\n\\u0001\x7f\xc3\xa9\xf0\x9f\x98\x80\"");
    CHECK(dump(Value("\xed\xa0\x80")) == R"("\ud800")");  // a lone surrogate, as Python writes it
  }
  SECTION("round trips") {
    for (const char* text : {R"({"a": {"b": [1, -2, 3.25, "x\u00e9"]}, "c": NaN})",
                             R"([1e-05, 1e+16, -0.0, "\ud83d\ude00"])", R"({"": 18446744073709551616})"}) {
      INFO(text);
      const Value v = parse(text);
      if (std::string(text).find("NaN") == std::string::npos) CHECK(parse(dump(v)) == v);
      CHECK(dump(v) == text);
    }
  }
  SECTION("what JSON cannot hold is refused") {
    Dict int_keys;
    int_keys.set(Value(1), Value(2));
    REQUIRE_THROWS_WITH(dump(Value(int_keys)),
                        "tensorfile: dict key is int; expected str keys only (tensordict pickles other dicts)");
    REQUIRE_THROWS_WITH(dump(Value(Bytes{})),
                        "tensorfile: value is bytes; expected JSON data (None, bool, int, float, str, list, tuple or "
                        "dict): tensordict would pickle it, and tensorfile writes no pickles");
    REQUIRE_THROWS_AS(dump(Value(Set{})), UnsupportedError);  // json.dumps fails on sets too
    REQUIRE_THROWS_WITH(dump(Value("a\xff")),
                        "tensorfile: string is not valid UTF-8; expected UTF-8 text, got byte 255 at index 1");
  }
}

}  // namespace meta_json_tests
