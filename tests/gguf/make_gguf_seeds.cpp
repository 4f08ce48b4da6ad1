// SPDX-License-Identifier: MIT
// Writes the fuzz seeds of tests/fuzz/corpus/gguf and, given a second folder, of tests/fuzz/corpus/gguf_split (split
// models: the parts joined by fuzz_gguf_split's separator) with the tests' GGUF writer:
//   g++ -std=c++20 -Itests tests/gguf/make_gguf_seeds.cpp -o /tmp/seeds &&
//   /tmp/seeds tests/fuzz/corpus/gguf tests/fuzz/corpus/gguf_split
#include <fstream>
#include <string>
#include "gguf/gguf_writer.hpp"
static std::string dir = ".";
using namespace tensorfile_gguf_test;
static void out(const std::string& name, const GgufWriter& w) {
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(w.bytes.data()), static_cast<std::streamsize>(w.size()));
}
/// A part of a split model: llama.cpp's three split keys, then the tensors (name, elements, type, bytes).
struct SplitTensor {
  const char* name;
  std::uint64_t elements;
  std::uint32_t type;
  std::size_t bytes;
};
static GgufWriter split_part(std::uint16_t no, std::uint16_t count, std::int32_t total,
                             std::initializer_list<SplitTensor> tensors) {
  GgufWriter w;
  w.start(tensors.size(), 3)
      .key("split.no", t_u16)
      .put(no)
      .key("split.count", t_u16)
      .put(count)
      .key("split.tensors.count", t_i32)
      .put(total);
  std::uint64_t offset = 0;
  for (const SplitTensor& t : tensors) {
    w.tensor(t.name, {t.elements}, t.type, offset);
    offset += (t.bytes + 31) / 32 * 32;
  }
  w.pad(32);
  std::uint8_t value = 0x21;
  for (const SplitTensor& t : tensors) w.fill(t.bytes, value++).pad(32);
  return w;
}
static void out_split(const std::string& folder, const std::string& name, std::initializer_list<GgufWriter> parts) {
  std::ofstream file(folder + "/" + name, std::ios::binary);
  bool first = true;
  for (const GgufWriter& w : parts) {
    if (!first) file << "\n%%PART%%\n";
    first = false;
    file.write(reinterpret_cast<const char*>(w.bytes.data()), static_cast<std::streamsize>(w.size()));
  }
}
int main(int argc, char** argv) {
  if (argc > 1) dir = argv[1];
  {
    GgufWriter w;
    w.start(0, 0);
    out("empty.gguf", w);
  }
  {
    GgufWriter w;
    w.start(2, 4)
        .key("general.architecture", t_string)
        .str("llama")
        .key("general.alignment", t_u32)
        .u32(32)
        .key("tokenizer.ggml.tokens", t_array)
        .u32(t_string)
        .u64(3)
        .str("<s>")
        .str("a")
        .str("b")
        .key("scores", t_array)
        .u32(t_f32)
        .u64(2)
        .put(0.5f)
        .put(-1.0f)
        .tensor("tok_embd.weight", {32, 2}, 8, 0)
        .tensor("norm.weight", {4}, 0, 96)
        .pad(32)
        .fill(96 + 16, 0x11);
    out("llama_like.gguf", w);
  }
  {
    GgufWriter w;
    w.start(1, 13)
        .key("u8", t_u8)
        .u8(1)
        .key("i8", t_i8)
        .u8(0xFF)
        .key("u16", t_u16)
        .put(std::uint16_t{2})
        .key("i16", t_i16)
        .put(std::int16_t{-2})
        .key("u32", t_u32)
        .u32(3)
        .key("i32", t_i32)
        .put(std::int32_t{-3})
        .key("f32", t_f32)
        .put(1.0f)
        .key("b", t_bool)
        .u8(1)
        .key("s", t_string)
        .str("x")
        .key("u64", t_u64)
        .u64(4)
        .key("i64", t_i64)
        .put(std::int64_t{-4})
        .key("f64", t_f64)
        .put(2.0)
        .key("nested", t_array)
        .u32(t_array)
        .u64(2)
        .u32(t_u8)
        .u64(1)
        .u8(7)
        .u32(t_array)
        .u64(1)
        .u32(t_i32)
        .u64(0)
        .tensor("k", {256}, 12, 0)
        .pad(32)
        .fill(144, 0x5A);
    out("every_type.gguf", w);
  }
  {
    GgufWriter w;
    w.start(5, 0)
        .tensor("a", {32}, 2, 0)
        .tensor("b", {32}, 3, 32)
        .tensor("c", {32}, 6, 64)
        .tensor("d", {256}, 10, 96)
        .tensor("e", {256}, 14, 192)
        .pad(32)
        .fill(192 + 210, 0xA7);
    out("quants.gguf", w);
  }
  {
    GgufWriter w;
    w.start(1, 0, 2).tensor("x", {2, 3}, 30, 0).pad(32).fill(12, 0x3F);
    out("v2_bf16.gguf", w);
  }
  if (argc > 2) {
    const std::string split = argv[2];
    out_split(split, "two_parts.gguf",
              {split_part(0, 2, 2, {{"a", 8, 0, 32}}), split_part(1, 2, 2, {{"b", 32, 8, 34}})});
    out_split(
        split, "metadata_first.gguf",
        {split_part(0, 3, 2, {}), split_part(1, 3, 2, {{"w", 16, 1, 32}}), split_part(2, 3, 2, {{"q", 32, 2, 18}})});
    out_split(split, "one_file.gguf", {split_part(0, 1, 1, {{"x", 4, 0, 16}})});
  }
}
