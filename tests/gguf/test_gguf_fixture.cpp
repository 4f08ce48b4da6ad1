// SPDX-License-Identifier: MIT
// A GGUF file the real ggml wrote (tests/data/gguf/ggml_small.gguf, by make_ggml_fixture.py; its provenance in
// tests/data/gguf/PROVENANCE.md), read through the front door with every value checked, its block tensors
// dequantized to ggml's own floats; and the two defects gguf.peer found against ggml: save_gguf's last tensor
// unpadded (ggml refused the file), quantize() of blocks whose 1 / d overflows.
#include <tensorfile/checkpoint.hpp>
#include <tensorfile/formats/gguf/dequantize.hpp>
#include <tensorfile/formats/gguf/header.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/gguf/save.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

namespace gguf_fixture_test {

using namespace tensorfile;

const std::filesystem::path fixture_dir = std::filesystem::path(TENSORFILE_TEST_DATA_DIR) / "gguf";

std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
  const std::string text = tensorfile_test::read_text(path);
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::byte> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return {c.raw_data(), c.raw_data() + c.nbytes()};
}

std::vector<std::uint32_t> float_bits(const Tensor& t) {
  std::vector<std::uint32_t> out(static_cast<std::size_t>(t.numel()));
  std::memcpy(out.data(), t.raw_data(), out.size() * 4);
  return out;
}

TEST_CASE("ggml_small.gguf: a file the real ggml wrote, through the front door") {
  const std::filesystem::path path = fixture_dir / "ggml_small.gguf";
  // ggml's to_float of the two block tensors, in order (make_ggml_fixture.py).
  const std::vector<std::byte> expected = file_bytes(fixture_dir / "ggml_small.dequantized.f32");
  REQUIRE(expected.size() == (64 + 256) * 4);
  std::vector<std::uint32_t> ggml_floats(expected.size() / 4);
  std::memcpy(ggml_floats.data(), expected.data(), expected.size());

  SECTION("open: entries in elements with their ggml types and ggml's offsets") {
    const Checkpoint checkpoint = open(path);
    const std::vector<CheckpointEntry>& entries = checkpoint.entries();
    REQUIRE(entries.size() == 5);
    const char* names[] = {"token_embd.weight", "blk.0.attn_norm.weight", "blk.0.ffn_down.weight",
                           "blk.0.ffn_up.weight", "h.i32"};
    const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::I32};
    const Shape shapes[] = {{2, 4}, {8}, {2, 32}, {256}, {3}};     // ggml wrote h.i32's ne [3, 1] as one dim
    const std::uint64_t offsets[] = {960, 992, 1024, 1120, 1280};  // as gguf_init_from_file reads them
    for (std::size_t i = 0; i < entries.size(); ++i) {
      INFO(names[i]);
      CHECK(entries[i].path == names[i]);
      CHECK(entries[i].ggml_type == types[i]);
      CHECK(entries[i].shape == shapes[i]);
      CHECK(entries[i].location->offset == offsets[i]);
    }
    CHECK(entries[2].nbytes == 2 * 34);
    CHECK(entries[3].nbytes == 144);
  }
  SECTION("metadata: every scalar type and three arrays, as ggml stored them") {
    const Value loaded = load(path);
    const Dict& attributes = loaded.as_dict().attributes().as_dict();
    const Dict& meta = attributes.find("__metadata__")->as_dict();
    const Dict& types = attributes.find("__metadata_types__")->as_dict();
    REQUIRE(meta.size() == 18);
    CHECK(meta.find("general.architecture")->as_string() == "llama");
    CHECK(meta.find("general.name")->as_string() == "tensorfile fixture \xE2\x96\x81");
    CHECK(meta.find("llama.block_count")->as_int() == 1);
    CHECK(types.find("llama.block_count")->as_string() == "uint32");
    CHECK(meta.find("llama.rope.freq_base")->as_float() == 10000.0);
    CHECK(static_cast<float>(meta.find("llama.attention.layer_norm_rms_epsilon")->as_float()) == 1e-5f);
    CHECK(types.find("llama.attention.layer_norm_rms_epsilon")->as_string() == "float32");
    const List& tokens = meta.find("tokenizer.ggml.tokens")->as_list();
    REQUIRE(tokens.size() == 3);
    CHECK(tokens[2].as_string() == "\xE2\x96\x81hi");
    CHECK(types.find("tokenizer.ggml.tokens")->as_string() == "array[string]");
    CHECK(meta.find("tokenizer.ggml.scores")->as_list()[1].as_float() == -1.5);
    CHECK(types.find("tokenizer.ggml.scores")->as_string() == "array[float32]");
    CHECK(meta.find("tokenizer.ggml.token_type")->as_list()[2].as_int() == 1);
    CHECK(meta.find("t.u8")->as_int() == 200);
    CHECK(meta.find("t.i8")->as_int() == -100);
    CHECK(meta.find("t.u16")->as_int() == 60000);
    CHECK(meta.find("t.i16")->as_int() == -30000);
    CHECK(meta.find("t.i32")->as_int() == -2000000000);
    CHECK(meta.find("t.bool")->as_bool());
    CHECK(meta.find("t.u64")->as_big_int().str() == "18446744073709551614");
    CHECK(types.find("t.u64")->as_string() == "uint64");
    CHECK(meta.find("t.i64")->as_int() == -(std::int64_t{1} << 62));
    CHECK(meta.find("t.f64")->as_float() == 0.1);
    CHECK(types.find("t.f64")->as_string() == "float64");
  }
  for (const bool mapped : {false, true}) {
    DYNAMIC_SECTION("tensors, " << (mapped ? "mapped" : "on the heap")) {
      const Value loaded = mapped ? load(path, {.mmap = MapMode::read_only}) : load(path);
      const Tensor& embd = loaded.as_dict().find("token_embd.weight")->as_tensor();
      REQUIRE(embd.dtype() == DType::Float32);
      CHECK(embd.sizes() == Shape{2, 4});
      std::vector<float> want(8);
      for (int i = 0; i < 8; ++i) want[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i) - 1.0f;
      CHECK(bytes_of(embd) == std::vector<std::byte>(reinterpret_cast<const std::byte*>(want.data()),
                                                     reinterpret_cast<const std::byte*>(want.data()) + 32));
      const Tensor& norm = loaded.as_dict().find("blk.0.attn_norm.weight")->as_tensor();
      REQUIRE(norm.dtype() == DType::Float16);
      const std::uint16_t norm_bits[] = {0x3C00, 0x4000, 0xC200, 0x0000, 0x8000, 0x7BFF, 0x0001, 0x3555};
      CHECK(std::memcmp(norm.raw_data(), norm_bits, sizeof norm_bits) == 0);
      const Tensor& ints = loaded.as_dict().find("h.i32")->as_tensor();
      REQUIRE(ints.dtype() == DType::Int32);
      CHECK(ints.sizes() == Shape{3});
      const std::int32_t int_values[] = {-7, 0, 2147483647};
      CHECK(std::memcmp(ints.raw_data(), int_values, sizeof int_values) == 0);

      // Q8_0: ggml quantized (i - 20) * 0.375 with its reference rounding; quantize() gives the same bytes.
      const Tensor& down = loaded.as_dict().find("blk.0.ffn_down.weight")->as_tensor();
      CHECK(down.dtype() == DType::UInt8);
      CHECK(down.sizes() == Shape{2, 34});
      std::vector<float> source(64);
      for (int i = 0; i < 64; ++i) source[static_cast<std::size_t>(i)] = static_cast<float>(i - 20) * 0.375f;
      std::vector<std::byte> ours(68);
      quantize(GgmlType::Q8_0, source, ours);
      CHECK(bytes_of(down) == ours);
      CHECK(gguf_tensor_type(loaded, "blk.0.ffn_down.weight") == GgmlType::Q8_0);
      const Tensor down_floats = dequantize(loaded, "blk.0.ffn_down.weight");
      CHECK(down_floats.sizes() == Shape{2, 32});
      CHECK(float_bits(down_floats) == std::vector<std::uint32_t>(ggml_floats.begin(), ggml_floats.begin() + 64));

      // Q4_K: ggml's own quantizer; dequantize() gives ggml's to_float bit for bit.
      const Tensor up_floats = dequantize(loaded, "blk.0.ffn_up.weight");
      CHECK(up_floats.sizes() == Shape{256});
      CHECK(float_bits(up_floats) == std::vector<std::uint32_t>(ggml_floats.begin() + 64, ggml_floats.end()));
    }
  }
  SECTION("written back by save_gguf: the same bytes as ggml wrote") {
    CHECK(save_gguf_to_bytes(load(path)) == file_bytes(path));
  }
}

TEST_CASE("save_gguf: the last tensor is padded to the alignment, as ggml reads the data section") {
  // ggml's gguf_init_from_file reads every tensor's padded size as one blob: a file that ends right after its last
  // tensor was refused ("failed to read tensor data binary blob").
  const tensorfile_test::ScratchDir dir;
  Tensor t(heap_storage(12), DType::Float32, {3});
  std::memset(t.mutable_raw_data(), 0x41, 12);
  for (const std::uint64_t alignment : {std::uint64_t{32}, std::uint64_t{64}, std::uint64_t{8}}) {
    INFO(alignment);
    save_gguf(NamedTensors{{"a", t}, {"b", t}}, dir.path() / "p.gguf", {.gguf = {.alignment = alignment}});
    const std::vector<std::byte> bytes = file_bytes(dir.path() / "p.gguf");
    const GgufHeader header = parse_gguf_header(bytes);
    CHECK(header.data_offset % alignment == 0);
    CHECK(bytes.size() == header.data_offset + 2 * ((12 + alignment - 1) / alignment * alignment));
  }
}

TEST_CASE("quantize: blocks whose scale's inverse overflows get zero quants, as x86-64 ggml writes") {
  // amax below 127 * 2^-128: d = amax / 127 is under 2^-128 and 1 / d is infinite. ggml_quantize_chunk gives zero
  // quants there (its float-to-int8 conversion of +-inf), and an f16 scale of 0.
  std::vector<float> tiny(32);
  for (std::size_t i = 0; i < 32; ++i) tiny[i] = (i % 2 ? 1.0f : -1.0f) * 1.0e-40f * static_cast<float>(i + 1);
  std::vector<std::byte> q8(34, std::byte{0xAA});
  quantize(GgmlType::Q8_0, tiny, q8);
  CHECK(q8 == std::vector<std::byte>(34, std::byte{0}));
  std::vector<std::byte> q4(18, std::byte{0xAA});
  quantize(GgmlType::Q4_0, tiny, q4);
  std::vector<std::byte> want_q4(18, std::byte{0});
  want_q4[1] = std::byte{0x80};  // d = max / -8 = -0 in f16: the sign bit (the block's largest value is positive)
  CHECK(q4 == want_q4);
}

}  // namespace gguf_fixture_test
