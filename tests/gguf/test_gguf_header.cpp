// SPDX-License-Identifier: MIT
// GGUF headers: the ggml type table, every value type into the Value tree, tensor infos and the data section, and
// each hostile header as its own error (class, member, byte offset) from files written field by field.
#include <tensorfile/formats/gguf/ggml_types.hpp>
#include <tensorfile/formats/gguf/header.hpp>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gguf/gguf_writer.hpp"
#include "tensorfile_catch.hpp"

namespace gguf_header_test {

using namespace tensorfile;
using namespace tensorfile_gguf_test;

// What a parse of `bytes` throws: the class (by the check), the reason holding `text`, the member and the offset.
template <class E>
void expect_error(const std::vector<std::byte>& bytes, const std::string& text, std::uint64_t offset,
                  const std::string& member = {}, const GgufLimits& limits = {}) {
  try {
    (void)parse_gguf_header(bytes, "m.gguf", limits);
    FAIL("no error; expected one saying: " << text);
  } catch (const E& e) {
    INFO(e.what());
    CHECK(e.reason().find(text) != std::string::npos);
    CHECK(e.path() == "m.gguf");
    CHECK(e.member() == member);
    REQUIRE(e.offset().has_value());
    CHECK(*e.offset() == offset);
  } catch (const Error& e) {
    FAIL("another error class: " << e.what());
  }
}

TEST_CASE("ggml_types: ids, block sizes and bytes per block as ggml defines them") {
  struct Row {
    std::uint32_t id;
    const char* name;
    std::uint32_t block_size;
    std::uint32_t block_bytes;
  };
  // From ggml's enum ggml_type, type traits and the block structs' static_asserts (ggml-common.h).
  const Row rows[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},      {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},
      {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74},
      {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},   {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},
      {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
      {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},
      {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
      {40, "nvfp4", 64, 36},    {41, "q1_0", 128, 18},    {42, "q2_0", 64, 18},
  };
  CHECK(ggml_types().size() == std::size(rows));
  for (const Row& row : rows) {
    INFO(row.name);
    const GgmlTypeInfo* info = find_ggml_type(row.id);
    REQUIRE(info != nullptr);
    CHECK(static_cast<std::uint32_t>(info->type) == row.id);
    CHECK(info->name == row.name);
    CHECK(info->block_size == row.block_size);
    CHECK(info->block_bytes == row.block_bytes);
    CHECK(&ggml_type_info(row.id) == info);
  }
  SECTION("the plain types have a tensorfile dtype, the block types none") {
    CHECK(ggml_type_info(GgmlType::F32).dtype == DType::Float32);
    CHECK(ggml_type_info(GgmlType::F16).dtype == DType::Float16);
    CHECK(ggml_type_info(GgmlType::BF16).dtype == DType::BFloat16);
    CHECK(ggml_type_info(GgmlType::F64).dtype == DType::Float64);
    CHECK(ggml_type_info(GgmlType::I8).dtype == DType::Int8);
    CHECK(ggml_type_info(GgmlType::I16).dtype == DType::Int16);
    CHECK(ggml_type_info(GgmlType::I32).dtype == DType::Int32);
    CHECK(ggml_type_info(GgmlType::I64).dtype == DType::Int64);
    int plain = 0;
    for (const GgmlTypeInfo& info : ggml_types()) {
      plain += info.dtype ? 1 : 0;
      CHECK(info.is_quantized() == (info.block_size > 1));
    }
    CHECK(plain == 8);
    CHECK(ggml_type_name(GgmlType::Q2_K) == "q2_K");
  }
  SECTION("unknown and removed ids are refused") {
    CHECK(find_ggml_type(4) == nullptr);
    CHECK(find_ggml_type(43) == nullptr);
    CHECK_THROWS_AS(ggml_type_info(4), UnsupportedError);
    CHECK_THROWS_AS(ggml_type_info(31), UnsupportedError);
    CHECK_THROWS_AS(ggml_type_info(43), FormatError);
    CHECK_THROWS_AS(ggml_type_info(0xFFFFFFFFu), FormatError);
    try {
      (void)ggml_type_info(33, {"f", "t", 7});
    } catch (const UnsupportedError& e) {
      CHECK(e.message() == "tensorfile: f: t: ggml type 33 (q4_0_8_8) was removed from ggml; not read (at byte 7)");
    }
  }
}

// A file of every value type, nested arrays, alignment 64 and three tensors.
std::vector<std::byte> every_value_type() {
  GgufWriter w;
  w.start(3, 16);
  w.key("u8", t_u8).u8(200);
  w.key("i8", t_i8).put(std::int8_t{-100});
  w.key("u16", t_u16).put(std::uint16_t{65000});
  w.key("i16", t_i16).put(std::int16_t{-30000});
  w.key("u32", t_u32).u32(4000000000u);
  w.key("i32", t_i32).put(std::int32_t{-2000000000});
  w.key("f32", t_f32).put(1.5f);
  w.key("bool", t_bool).u8(1);
  w.key("string", t_string).str("héllo");
  w.key("u64", t_u64).u64(std::uint64_t{1} << 40);
  w.key("u64.big", t_u64).u64(0xFFFFFFFFFFFFFFFFull);
  w.key("i64", t_i64).put(std::int64_t{-5});
  w.key("f64", t_f64).put(-0.25);
  w.key("general.alignment", t_u32).u32(64);
  w.key("tokens", t_array).u32(t_string).u64(3).str("a").str("").str("ccc");
  // [[1, 2], [], [[true]]]: an array of arrays whose elements have their own types
  w.key("nested", t_array).u32(t_array).u64(3);
  w.u32(t_i32).u64(2).put(std::int32_t{1}).put(std::int32_t{2});
  w.u32(t_f32).u64(0);
  w.u32(t_array).u64(1).u32(t_bool).u64(1).u8(1);
  w.tensor("w", {3, 2}, 0, 0);        // f32, 6 elements: 24 bytes
  w.tensor("q", {64, 2}, 8, 64);      // q8_0, 4 blocks: 136 bytes
  w.tensor("empty", {0, 5}, 1, 192);  // f16, no bytes
  w.pad(64);
  w.fill(64 + 136);
  return w.bytes;
}

TEST_CASE("parse_gguf_header: every value type, nested arrays, alignment and tensor infos") {
  const std::vector<std::byte> bytes = every_value_type();
  const GgufHeader h = parse_gguf_header(bytes, "m.gguf");
  CHECK(h.version == 3);
  CHECK(h.alignment == 64);
  CHECK(h.file_size == bytes.size());
  CHECK(h.data_offset % 64 == 0);
  CHECK(h.data_offset + 200 == bytes.size());
  const Dict& m = h.metadata.as_dict();
  REQUIRE(m.size() == 16);
  CHECK(m.at("u8").as_int() == 200);
  CHECK(m.at("i8").as_int() == -100);
  CHECK(m.at("u16").as_int() == 65000);
  CHECK(m.at("i16").as_int() == -30000);
  CHECK(m.at("u32").as_int() == 4000000000);
  CHECK(m.at("i32").as_int() == -2000000000);
  CHECK(m.at("f32").as_float() == 1.5);
  CHECK(m.at("bool").as_bool() == true);
  CHECK(m.at("string").as_string() == "héllo");
  CHECK(m.at("u64").as_int() == std::int64_t{1} << 40);
  REQUIRE(m.at("u64.big").is_big_int());
  CHECK(m.at("u64.big").as_big_int().str() == "18446744073709551615");
  CHECK(m.at("i64").as_int() == -5);
  CHECK(m.at("f64").as_float() == -0.25);
  const List& tokens = m.at("tokens").as_list();
  REQUIRE(tokens.size() == 3);
  CHECK(tokens[0].as_string() == "a");
  CHECK(tokens[1].as_string().empty());
  CHECK(tokens[2].as_string() == "ccc");
  const List& nested = m.at("nested").as_list();
  REQUIRE(nested.size() == 3);
  CHECK(nested[0].as_list().size() == 2);
  CHECK(nested[0].as_list()[1].as_int() == 2);
  CHECK(nested[1].as_list().empty());
  CHECK(nested[2].as_list()[0].as_list()[0].as_bool());
  // The keys in file order with their stored types.
  REQUIRE(h.keys.size() == 16);
  CHECK(h.keys[0].key == "u8");
  CHECK(h.keys[0].offset == 24);
  CHECK(h.keys[4].type == GgufValueType::u32);
  CHECK(h.keys[14].type == GgufValueType::array);
  CHECK(h.keys[14].element_type == GgufValueType::string);
  CHECK(h.keys[15].element_type == GgufValueType::array);
  CHECK(m.items()[9].first.as_string() == "u64");

  REQUIRE(h.tensors.size() == 3);
  const GgufTensorInfo& w = h.tensors[0];
  CHECK(w.name == "w");
  CHECK(w.type == GgmlType::F32);
  CHECK(w.dims == Shape{3, 2});
  CHECK(w.shape() == Shape{2, 3});  // torch order: ne reversed
  CHECK(w.numel() == 6);
  CHECK(w.bytes == 24);
  CHECK(w.offset == 0);
  const GgufTensorInfo& q = h.tensors[1];
  CHECK(q.type == GgmlType::Q8_0);
  CHECK(q.shape() == Shape{2, 64});
  CHECK(q.bytes == 4 * 34);
  CHECK(q.offset == 64);
  CHECK(h.tensors[2].bytes == 0);
  CHECK(h.tensors[2].numel() == 0);
  CHECK(h.tensors[2].offset == 192);  // an empty tensor may overlap others' padding
}

TEST_CASE("parse_gguf_header: versions, defaults and the ranged reads") {
  SECTION("version 2, no metadata, default alignment 32") {
    GgufWriter w;
    w.start(1, 0, 2).tensor("x", {4}, 26, 0).pad(32).fill(16);
    const GgufHeader h = parse_gguf_header(w.bytes);
    CHECK(h.version == 2);
    CHECK(h.alignment == 32);
    CHECK(h.metadata.as_dict().empty());
    CHECK(h.data_offset == 64);
    CHECK(h.tensors[0].type == GgmlType::I32);
    CHECK(h.tensors[0].bytes == 16);
  }
  SECTION("no tensors: the data section is the end of the file when no padding follows") {
    GgufWriter w;
    w.start(0, 1).key("a", t_u8).u8(1);
    const GgufHeader h = parse_gguf_header(w.bytes);
    CHECK(h.data_offset == w.size());
    CHECK(h.tensors.empty());
  }
  SECTION("a 0-d tensor of a plain type is one element") {
    GgufWriter w;
    w.start(1, 0).tensor("s", {}, 0, 0).pad(32).fill(4);
    const GgufHeader h = parse_gguf_header(w.bytes);
    CHECK(h.tensors[0].shape().empty());
    CHECK(h.tensors[0].bytes == 4);
  }
  SECTION("reads stay within the file and within 64 KiB windows, and skip the data") {
    GgufWriter w;
    w.start(1, 1).key("long", t_string).str(std::string(200000, 'x')).tensor("t", {1 << 18}, 0, 0).pad(32);
    const std::size_t header_end = w.size();
    w.fill(std::size_t{1} << 20);
    std::uint64_t read_bytes = 0;
    std::uint64_t furthest = 0;
    int reads = 0;
    const auto reader = [&](std::uint64_t offset, std::span<std::byte> out) {
      REQUIRE(offset + out.size() <= w.size());
      read_bytes += out.size();
      furthest = std::max<std::uint64_t>(furthest, offset + out.size());
      ++reads;
      std::copy_n(w.bytes.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
    };
    const GgufHeader h = parse_gguf_header(reader, w.size(), "r.gguf");
    CHECK(h.metadata.as_dict().at("long").as_string().size() == 200000);
    CHECK(h.data_offset == header_end);
    CHECK(furthest <= header_end + 64 * 1024);
    CHECK(read_bytes <= header_end + 2 * 64 * 1024);
    CHECK(reads < 10);
  }
  SECTION("read_gguf_header reads a file") {
    tensorfile_test::ScratchDir dir;
    const std::vector<std::byte> bytes = every_value_type();
    const auto path = dir.path() / "m.gguf";
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    const GgufHeader h = read_gguf_header(path);
    CHECK(h.tensors.size() == 3);
    CHECK(h.metadata.as_dict().size() == 16);
    GgufWriter bad;
    bad.start(0, 0, 1);
    std::ofstream(dir.path() / "v1.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(bad.bytes.data()), static_cast<std::streamsize>(bad.size()));
    try {
      (void)read_gguf_header(dir.path() / "v1.gguf");
      FAIL("no error");
    } catch (const UnsupportedError& e) {
      CHECK(e.path() == dir.path() / "v1.gguf");
      CHECK(e.offset() == 4);
    }
  }
}

TEST_CASE("parse_gguf_header: the preamble of hostile files") {
  SECTION("not GGUF") {
    GgufWriter w;
    w.u32(0x46554746).u32(3).u64(0).u64(0);
    expect_error<FormatError>(w.bytes, "not a GGUF file; expected the magic \"GGUF\" first", 0);
    expect_error<FormatError>(std::vector<std::byte>(3), "too short for the GGUF magic", 0);
  }
  SECTION("truncated inside the counts") {
    GgufWriter w;
    w.start(0, 0);
    w.bytes.resize(12);
    expect_error<FormatError>(w.bytes, "the file ends inside the tensor count; expected 8 bytes, got 4", 12);
  }
  SECTION("big-endian") {
    GgufWriter w;
    w.u32(0x46554747).u32(0x03000000).u64(0).u64(0);
    expect_error<UnsupportedError>(w.bytes, "a big-endian GGUF file; only little-endian files are read", 4);
  }
  SECTION("version 1, 0 and newer versions") {
    GgufWriter v1;
    v1.start(0, 0, 1);
    expect_error<UnsupportedError>(v1.bytes, "GGUF version 1 (32-bit counts and lengths) is not read", 4);
    GgufWriter v0;
    v0.start(0, 0, 0);
    expect_error<FormatError>(v0.bytes, "GGUF version 0 is no version", 4);
    GgufWriter v4;
    v4.start(0, 0, 4);
    expect_error<UnsupportedError>(v4.bytes, "GGUF version 4 is newer than this reader", 4);
  }
  SECTION("counts beyond the file") {
    GgufWriter w;
    w.start(0, std::uint64_t{1} << 60);
    expect_error<FormatError>(w.bytes, "the metadata count 1152921504606846976 runs past the end of the file", 16);
    GgufWriter t;
    t.start(0xFFFFFFFFFFFFFFFFull, 0).fill(100);
    expect_error<FormatError>(t.bytes,
                              "the tensor count 18446744073709551615 runs past the end of the file; "
                              "expected at most 4 tensor infos in the 100 bytes left",
                              8);
  }
}

TEST_CASE("parse_gguf_header: hostile metadata") {
  SECTION("a key's length beyond the file, and one that would overflow") {
    GgufWriter w;
    w.start(0, 1).u64(1000).fill(20);
    expect_error<FormatError>(w.bytes, "the length of a metadata key (1000 bytes) runs past the end of the file", 24,
                              "metadata key 0");
    GgufWriter o;
    o.start(0, 1).u64(0xFFFFFFFFFFFFFFFFull).fill(20);
    expect_error<FormatError>(o.bytes, "(18446744073709551615 bytes) runs past the end of the file", 24,
                              "metadata key 0");
  }
  SECTION("a string value beyond the file, and beyond the limit") {
    GgufWriter w;
    w.start(0, 1).key("k", t_string);
    const std::size_t at = w.size();
    w.u64(50).fill(49);
    expect_error<FormatError>(w.bytes, "the length of a string value (50 bytes) runs past the end of the file", at,
                              "k");
    w.fill(1);
    CHECK(parse_gguf_header(w.bytes).metadata.as_dict().at("k").as_string().size() == 50);
    expect_error<LimitError>(w.bytes, "(50 bytes) is more than the limit of 49", at, "k",
                             GgufLimits{.max_string_bytes = 49});
  }
  SECTION("an array's count beyond the file") {
    GgufWriter w;
    w.start(0, 1).key("a", t_array).u32(t_u32);
    const std::size_t at = w.size();
    w.u64(std::uint64_t{1} << 62).fill(16);
    expect_error<FormatError>(w.bytes, "the array of 4611686018427387904 uint32 values runs past the end", at, "a");
    GgufWriter s;  // strings take at least their 8-byte length each
    s.start(0, 1).key("a", t_array).u32(t_string).u64(3).fill(23);
    expect_error<FormatError>(s.bytes, "the array of 3 string values runs past the end of the file; expected at most 2",
                              24 + 9 + 4 + 4, "a");
  }
  SECTION("arrays nested beyond the limit") {
    GgufWriter w;
    w.start(0, 1).key("deep", t_array);
    std::size_t innermost = 0;
    for (int level = 0; level < 9; ++level) {
      innermost = w.size();
      w.u32(t_array).u64(1);
    }
    w.u32(t_u8).u64(0);
    expect_error<LimitError>(w.bytes, "arrays nest deeper than the limit of 8 levels", innermost, "deep");
    CHECK(parse_gguf_header(w.bytes, {}, {.max_depth = 10}).metadata.as_dict().size() == 1);
  }
  SECTION("unknown value types") {
    GgufWriter w;
    w.start(0, 1).key("k", 13).u8(0);
    expect_error<FormatError>(w.bytes, "unknown value type 13; expected 0-12", 24 + 9, "k");
    GgufWriter a;
    a.start(0, 1).key("k", t_array).u32(0x80000000u).u64(0);
    expect_error<FormatError>(a.bytes, "unknown array element type 2147483648", 24 + 13, "k");
  }
  SECTION("empty and duplicate keys") {
    GgufWriter e;
    e.start(0, 1).key("", t_u8).u8(0);
    expect_error<FormatError>(e.bytes, "the metadata key is empty", 24, "metadata key 0");
    GgufWriter d;
    d.start(0, 2).key("k", t_u8).u8(0);
    const std::size_t second = d.size();
    d.key("k", t_u8).u8(1);
    expect_error<FormatError>(d.bytes, "the metadata key is given twice", second, "k");
  }
  SECTION("general.alignment not a power of two, 0, or not a u32") {
    for (const std::uint32_t value : {48u, 0u}) {
      GgufWriter w;
      w.start(0, 1).key("general.alignment", t_u32).u32(value);
      expect_error<FormatError>(w.bytes, "general.alignment is " + std::to_string(value) + "; expected a power of two",
                                24, "general.alignment");
    }
    GgufWriter u;
    u.start(0, 1).key("general.alignment", t_u64).u64(64);
    expect_error<FormatError>(u.bytes, "general.alignment is a uint64; expected a uint32", 24, "general.alignment");
  }
  SECTION("more values than the limit") {
    GgufWriter w;
    w.start(0, 1).key("a", t_array).u32(t_u8);
    const std::size_t at = w.size();
    w.u64(100).fill(100);
    expect_error<LimitError>(w.bytes, "more than the limit of 50 values", at, "a", GgufLimits{.max_values = 50});
  }
}

// A file of one tensor info with `dims`, `type` and `offset`, and `data` bytes of data after the aligned header.
std::vector<std::byte> one_tensor(std::initializer_list<std::uint64_t> dims, std::uint32_t type, std::uint64_t offset,
                                  std::size_t data) {
  GgufWriter w;
  w.start(1, 0).tensor("t", dims, type, offset).pad(32).fill(data);
  return w.bytes;
}

TEST_CASE("parse_gguf_header: hostile tensor infos") {
  const std::uint64_t info = 24;           // the tensor info's start
  const std::uint64_t n_dims_at = 24 + 9;  // after the name "t"
  SECTION("a name beyond the file") {
    GgufWriter w;
    w.start(1, 0).u64(1000).fill(30);
    expect_error<FormatError>(w.bytes, "the length of a tensor name (1000 bytes) runs past the end", info,
                              "tensor info 0");
  }
  SECTION("more than 4 dimensions") {
    expect_error<FormatError>(one_tensor({1, 1, 1, 1, 1}, 0, 0, 4), "the tensor has 5 dimensions; expected at most 4",
                              n_dims_at, "t");
  }
  SECTION("a dimension beyond int64") {
    expect_error<FormatError>(one_tensor({4, 0x8000000000000000ull}, 0, 0, 4),
                              "dimension 1 is 9223372036854775808; expected at most 9223372036854775807",
                              n_dims_at + 12, "t");
  }
  SECTION("dimensions whose product overflows, and one that overflows with a 0 beside it") {
    expect_error<FormatError>(one_tensor({std::uint64_t{1} << 32, std::uint64_t{1} << 32}, 24, 0, 4),
                              "the tensor's dimensions [4294967296, 4294967296] of i8 overflow 64-bit sizes", n_dims_at,
                              "t");
    expect_error<FormatError>(one_tensor({0, std::uint64_t{1} << 40, std::uint64_t{1} << 40}, 0, 0, 4),
                              "overflow 64-bit sizes", n_dims_at, "t");
    // elements fit, bytes do not: 2^61 f64 elements
    expect_error<FormatError>(one_tensor({std::uint64_t{1} << 61}, 28, 0, 4), "overflow 64-bit sizes", n_dims_at, "t");
  }
  SECTION("unknown and removed ggml types") {
    expect_error<FormatError>(one_tensor({4}, 99, 0, 4), "unknown ggml type 99", n_dims_at + 12, "t");
    expect_error<UnsupportedError>(one_tensor({32}, 4, 0, 32), "ggml type 4 (q4_2) was removed from ggml",
                                   n_dims_at + 12, "t");
  }
  SECTION("rows that are not whole blocks") {
    expect_error<FormatError>(one_tensor({48, 2}, 8, 0, 1000),
                              "the tensor's rows hold 48 q8_0 elements; expected a multiple of its block size 32",
                              n_dims_at, "t");
    expect_error<FormatError>(one_tensor({}, 12, 0, 1000), "rows hold 1 q4_K elements", n_dims_at, "t");
  }
  SECTION("an offset not aligned") {
    expect_error<FormatError>(one_tensor({4}, 0, 16, 64),
                              "the tensor's offset 16 is not a multiple of the alignment 32", n_dims_at + 4 + 8 + 4,
                              "t");
  }
  SECTION("bytes past the end of the file") {
    expect_error<FormatError>(one_tensor({8}, 0, 0, 31),
                              "the tensor's 32 bytes at offset 0 of the data section run past the end of the file",
                              n_dims_at + 16, "t");
    expect_error<FormatError>(one_tensor({1}, 0, 0xFFFFFFFFFFFFFFE0ull, 64), "run past the end of the file",
                              n_dims_at + 16, "t");
  }
  SECTION("the data section itself past the end") {
    GgufWriter w;
    w.start(1, 0).tensor("t", {0}, 0, 0);
    const std::size_t end = w.size();
    expect_error<FormatError>(w.bytes, "past the end of the file", end);
  }
  SECTION("overlapping tensors, in any order") {
    GgufWriter w;
    w.start(3, 0).tensor("a", {16}, 0, 64).tensor("b", {8}, 0, 0);
    const std::size_t c_at = w.size();
    w.tensor("c", {9}, 0, 96).pad(32).fill(256);
    expect_error<FormatError>(w.bytes,
                              "the tensor's bytes [96, 132) of the data section overlap those of 'a' [64, 128)",
                              c_at + 9 + 4 + 8 + 4, "c");
  }
  SECTION("duplicate tensor names") {
    GgufWriter w;
    w.start(2, 0).tensor("t", {8}, 0, 0);
    const std::size_t second = w.size();
    w.tensor("t", {8}, 0, 32).pad(32).fill(64);
    expect_error<FormatError>(w.bytes, "the tensor name is given twice", second, "t");
  }
  SECTION("every truncation of a valid file is a FormatError") {
    const std::vector<std::byte> bytes = every_value_type();
    const std::size_t header_end = parse_gguf_header(bytes).data_offset;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      INFO(n);
      const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK_THROWS_AS(parse_gguf_header(cut), FormatError);
      if (n > header_end) break;
    }
  }
}

}  // namespace gguf_header_test
