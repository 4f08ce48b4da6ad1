// SPDX-License-Identifier: MIT
// The safetensors hostile corpus, generated here: each crafted file raises exactly its error (class,
// file, tensor, byte offset) in every load mode; every truncation of valid files is a clean FormatError.
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/formats/safetensors/save.hpp>

#include <string>
#include <vector>

#include "hostile/hostile_outcome.hpp"
#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_hostile::outcome;
using tensorfile_hostile::replace_all;
using tensorfile_test::byte_span;
using tensorfile_test::write_file;

using tensorfile_test::le64;

namespace {

/// A file of `header` (unpadded) followed by `data` bytes of data.
std::string file_of(const std::string& header, std::size_t data) {
  return le64(header.size()) + header + std::string(data, '\x01');
}

struct Case {
  std::string name;
  std::string bytes;
  std::string error_class;
  std::string message;  // for in-memory input; path input adds "<file>: " after "tensorfile: "
};

const std::string w8 = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

std::vector<Case> corpus() {
  std::vector<Case> c;
  const auto add = [&](std::string name, std::string bytes, std::string error_class, std::string message) {
    c.push_back({std::move(name), std::move(bytes), std::move(error_class), std::move(message)});
  };
  // The length prefix.
  add("empty", "", "FormatError",
      "tensorfile: file is too short for a safetensors header length; expected at least 8 bytes, got 0 (at byte 0)");
  add("short_prefix", std::string(5, '\0'), "FormatError",
      "tensorfile: file is too short for a safetensors header length; expected at least 8 bytes, got 5 (at byte 0)");
  add("header_over_limit", le64(100'000'001) + "{}", "FormatError",
      "tensorfile: header length of 100000001 bytes exceeds the limit; expected at most 100000000 (at byte 0)");
  add("header_claims_exabytes", le64(~std::uint64_t{0}) + "{}", "FormatError",
      "tensorfile: header length of 18446744073709551615 bytes exceeds the limit; expected at most 100000000 (at byte "
      "0)");
  add("header_past_end", le64(1000) + "{}", "FormatError",
      "tensorfile: header length of 1000 bytes runs past the end of the file; expected at most 2 (at byte 0)");
  // The JSON text.
  add("header_empty", le64(0), "FormatError",
      "tensorfile: invalid JSON; expected '{' opening the header object, got end of file (at byte 8)");
  add("header_not_object", file_of("[]", 0), "FormatError",
      "tensorfile: invalid JSON; expected '{' opening the header object, got '[' (at byte 8)");
  add("header_invalid_utf8", file_of("{\"\xff\":1}", 0), "FormatError",
      "tensorfile: header is not valid UTF-8 (at byte 10)");
  add("header_encoded_surrogate", file_of("{\"\xed\xa0\x80\":1}", 0), "FormatError",
      "tensorfile: header is not valid UTF-8 (at byte 10)");
  add("header_trailing_text", file_of("{}x", 0), "FormatError",
      "tensorfile: invalid JSON; expected the end of the file, got 'x' (at byte 10)");
  add("header_unterminated", file_of("{\"w\":{\"dtype\":\"F32\"", 0), "FormatError",
      "tensorfile: w: invalid JSON; expected ',' or '}', got end of file (at byte 27)");
  add("entry_not_object", file_of(R"({"w":[1]})", 0), "FormatError",
      "tensorfile: w: invalid JSON; expected '{' opening a tensor entry, got '[' (at byte 13)");
  add("deep_nesting_in_unknown_key", file_of(R"({"w":{"x":)" + std::string(600, '[') + std::string(600, ']') + "}}", 0),
      "LimitError", "tensorfile: w: JSON nesting is too deep; expected at most 512 levels (at byte 530)");
  // Tensor entries.
  add("missing_dtype", file_of(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8), "FormatError",
      "tensorfile: w: tensor entry has no \"dtype\" (at byte 13)");
  add("missing_offsets", file_of(R"({"w":{"dtype":"F32","shape":[2]}})", 8), "FormatError",
      "tensorfile: w: tensor entry has no \"data_offsets\" (at byte 13)");
  add("duplicate_key", file_of(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
      "FormatError", "tensorfile: w: duplicate key \"dtype\" (at byte 28)");
  add("unknown_dtype", file_of(R"({"w":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", 8), "FormatError",
      "tensorfile: w: unknown dtype \"F128\"; expected a safetensors dtype name such as \"F32\" (at byte 22)");
  add("dtype_not_string", file_of(R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8), "FormatError",
      "tensorfile: w: invalid JSON; expected a string, got '4' (at byte 22)");
  add("sub_byte_dtype", file_of(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1), "UnsupportedError",
      "tensorfile: w: dtype F4 packs elements below a byte, which tensorfile cannot represent (at byte 22)");
  add("negative_extent", file_of(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "FormatError",
      "tensorfile: w: shape holds -2; expected a non-negative integer (at byte 37)");
  add("fractional_extent", file_of(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8), "FormatError",
      "tensorfile: w: shape holds 2.0; expected a non-negative integer (at byte 37)");
  add("extent_past_int64", file_of(R"({"w":{"dtype":"U8","shape":[9223372036854775808,0],"data_offsets":[0,0]}})", 0),
      "FormatError",
      "tensorfile: w: shape holds 9223372036854775808; expected at most 9223372036854775807 (at byte 36)");
  add("shape_not_list", file_of(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8), "FormatError",
      "tensorfile: w: invalid JSON; expected '[' opening shape, got '2' (at byte 36)");
  add("offsets_three", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8), "FormatError",
      "tensorfile: w: data_offsets has 3 entries; expected 2 [begin, end] (at byte 55)");
  add("offsets_reversed", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "FormatError",
      "tensorfile: w: data_offsets [8, 0] end before they begin (at byte 55)");
  add("offset_past_u64", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616]}})", 8),
      "FormatError",
      "tensorfile: w: data_offsets holds 18446744073709551616; expected at most 18446744073709551615 (at byte 58)");
  add("size_mismatch", file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20), "FormatError",
      "tensorfile: w: shape (2, 3) of F32 takes 24 bytes; expected data_offsets [0, 20] to hold as many, got 20 (at "
      "byte 13)");
  add("size_overflow", file_of(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
      "FormatError",
      "tensorfile: w: shape (4294967296, 4294967296) of F64 overflows 64-bit byte counts (each 0 counted as 1, as "
      "numpy counts); expected at most 9223372036854775807 bytes (at byte 36)");
  // Issue 39: no data, but dimension 0 would step by 2^64 elements (the reference accepts it; torch wraps the stride).
  add("empty_stride_overflow",
      file_of(R"({"w":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", 0), "FormatError",
      "tensorfile: w: shape (0, 4294967296, 4294967296) of F32 overflows 64-bit byte counts (each 0 counted as 1, as "
      "numpy counts); expected at most 9223372036854775807 bytes (at byte 36)");
  add("empty_trailing_zero_overflow",
      file_of(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 0), "FormatError",
      "tensorfile: w: shape (4294967296, 4294967296, 0) of U8 overflows 64-bit byte counts (each 0 counted as 1, as "
      "numpy counts); expected at most 9223372036854775807 bytes (at byte 35)");
  add("duplicate_name", file_of("{" + w8 + "," + w8 + "}", 16), "FormatError",
      "tensorfile: w: duplicate tensor name (at byte 62)");
  add("name_with_nul", file_of(R"({"a\u0000b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", 0), "FormatError",
      "tensorfile: tensor name holds a NUL character (at byte 9)");
  add("name_lone_surrogate", file_of(R"({"\ud800":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", 0), "FormatError",
      "tensorfile: tensor name is not valid UTF-8 (a lone surrogate escape) (at byte 9)");
  // Metadata.
  add("metadata_not_object", file_of(R"({"__metadata__":[]})", 0), "FormatError",
      "tensorfile: __metadata__: invalid JSON; expected '{' opening the __metadata__ object, got '[' (at byte 24)");
  add("metadata_value_not_string", file_of(R"({"__metadata__":{"a":1}})", 0), "FormatError",
      "tensorfile: __metadata__: value of \"a\" is not a string; expected a string, got 1 (at byte 29)");
  add("metadata_duplicate_key", file_of(R"({"__metadata__":{"a":"1","a":"2"}})", 0), "FormatError",
      "tensorfile: __metadata__: duplicate key \"a\" in __metadata__ (at byte 33)");
  add("metadata_twice", file_of(R"({"__metadata__":{},"__metadata__":{}})", 0), "FormatError",
      "tensorfile: __metadata__: duplicate __metadata__ entry (at byte 27)");
  // Tiling of the data section.
  add("offsets_hole",
      file_of(
          R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
          6),
      "FormatError",
      "tensorfile: b: data_offsets [4, 6] leave a hole; expected the tensor to start at byte 2 of the data section (at "
      "byte 61)");
  add("offsets_overlap",
      file_of(
          R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
          4),
      "FormatError",
      "tensorfile: b: data_offsets [2, 4] overlap tensor \"a\"; expected it to start at byte 4 of the data section (at "
      "byte 61)");
  add("offsets_not_from_zero", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16), "FormatError",
      "tensorfile: w: data_offsets [8, 16] leave a hole; expected the tensor to start at byte 0 of the data section "
      "(at byte 9)");
  add("data_past_end", file_of("{" + w8 + "}", 4), "FormatError",
      "tensorfile: the tensors cover 8 bytes of data; expected the 4 bytes after the header (at byte 66)");
  add("data_left_over", file_of("{" + w8 + "}", 12), "FormatError",
      "tensorfile: the tensors cover 8 bytes of data; expected the 12 bytes after the header (at byte 70)");
  add("data_without_tensors", file_of("{}", 3), "FormatError",
      "tensorfile: the tensors cover 0 bytes of data; expected the 3 bytes after the header (at byte 10)");
  // Valid edge cases.
  add("no_tensors", file_of("{}", 0), "OK", "");
  add("unordered_offsets_ok",
      file_of(
          R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
          4),
      "OK", "");
  add("unknown_keys_ignored", file_of(R"({"w":{"dtype":"F32","x":{"y":[null]},"shape":[2],"data_offsets":[0,8]}})", 8),
      "OK", "");
  add("metadata_null", file_of(R"({"__metadata__":null})", 0), "OK", "");
  add("empty_within_bound",
      file_of(R"({"w":{"dtype":"F32","shape":[0,1073741824,1073741824],"data_offsets":[0,0]}})", 0), "OK", "");
  return c;
}

}  // namespace

TEST_CASE("Safetensors hostile corpus: every input raises its exact error in every load mode",
          "[safetensors][hostile][safety]") {
  const tensorfile_test::ScratchDir scratch;
  std::size_t loads = 0;
  for (const Case& item : corpus()) {
    INFO(item.name);
    const std::pair<std::string, std::string> expected{item.error_class, item.message};
    const auto span = byte_span(item.bytes);
    const auto heap = outcome([&] { (void)load_safetensors(span); });
    INFO(heap.first + " " + heap.second);
    CHECK(heap == expected);
    CHECK(outcome([&] { (void)load_safetensors(span, {.mmap = MapMode::read_only}); }) == expected);
    CHECK(outcome([&] { (void)load_safetensors(span, {.map_location = "meta"}); }) == expected);
    const auto path = scratch / (item.name + ".safetensors");
    write_file(path, item.bytes);
    const std::pair<std::string, std::string> from_path{
        item.error_class,
        item.message.empty() ? "" : "tensorfile: <file>: " + item.message.substr(std::string("tensorfile: ").size())};
    for (const auto& options :
         {LoadOptions{}, LoadOptions{.mmap = MapMode::copy_on_write}, LoadOptions{.map_location = "meta"}}) {
      auto got = outcome([&] { (void)load_safetensors(path, options); });
      got.second = replace_all(got.second, path.string(), "<file>");
      CHECK(got == from_path);
    }
    auto header_only = outcome([&] { (void)read_safetensors_header(path); });
    header_only.second = replace_all(header_only.second, path.string(), "<file>");
    CHECK(header_only == from_path);
    loads += 7;
  }
  CHECK(loads > 300);
}

TEST_CASE("Every truncation of valid safetensors files is a clean FormatError", "[safetensors][hostile][safety]") {
  const tensorfile_test::ScratchDir scratch;
  const auto sample = tensorfile_test::file_bytes(tensorfile_test::data_dir() / "safetensors" / "overall.safetensors");
  const auto written = save_safetensors_to_bytes(
      {{"a", Tensor::from_values<float>({1, 2, 3}, {3})}, {"b", Tensor::from_values<std::int16_t>({4, 5}, {2})}},
      {.safetensors = {.metadata = {{"k", "v"}}}});
  const std::string ours(reinterpret_cast<const char*>(written.data()), written.size());
  std::size_t cuts = 0;
  for (const std::string& whole : {sample, ours}) {
    for (std::size_t length = 0; length < whole.size(); ++length) {
      INFO(length);
      const std::string cut = whole.substr(0, length);
      const auto span = byte_span(cut);
      CHECK(outcome([&] { (void)load_safetensors(span); }).first == "FormatError");
      CHECK(outcome([&] { (void)load_safetensors(span, {.mmap = MapMode::read_only}); }).first == "FormatError");
      CHECK(outcome([&] { (void)load_safetensors(span, {.map_location = "meta"}); }).first == "FormatError");
      if (length % 7 == 0) {  // through files too, on a sample of lengths
        write_file(scratch / "cut.safetensors", cut);
        CHECK(outcome([&] { (void)load_safetensors(scratch / "cut.safetensors"); }).first == "FormatError");
        CHECK(outcome([&] {
                (void)load_safetensors(scratch / "cut.safetensors", {.mmap = MapMode::read_only});
              }).first == "FormatError");
      }
      ++cuts;
    }
    CHECK(outcome([&] { (void)load_safetensors(byte_span(whole)); }).first == "OK");
  }
  CHECK(cuts == sample.size() + ours.size());
}
