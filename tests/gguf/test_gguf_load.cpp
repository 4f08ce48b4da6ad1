// SPDX-License-Identifier: MIT
// GGUF through the front door and load_gguf(): a file written field by field (every plain type, Q8_0 and Q4_0
// blocks quantized by quantize()), opened and loaded from every byte source, on the heap and mapped, with select,
// into, slices and dequantize, each value checked against what was written; hostile files as errors naming the
// file, the tensor and the byte offset.
#include <tensorfile/checkpoint.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/gguf/dequantize.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/gguf/save.hpp>
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/scan.hpp>
#include <tensorfile/verify.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_writer.hpp"
#include "tensorfile_catch.hpp"

namespace gguf_load_test {

using namespace tensorfile;
using namespace tensorfile_gguf_test;
using tensorfile_test::ScratchDir;

/// One tensor written: its ggml type id, GGUF dims (ne[0] first), and its bytes in the data section.
struct Written {
  std::string name;
  std::uint32_t type;
  std::vector<std::uint64_t> dims;
  std::vector<std::byte> bytes;
  std::uint64_t offset = 0;  // in the data section
};

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// Floats 0.25 * (i - 40) + a wiggle, n of them: every block has a different scale.
std::vector<float> ramp(std::size_t n) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = 0.25f * (static_cast<float>(i) - 40.0f) + 0.01f * static_cast<float>(i % 7);
  }
  return out;
}

std::vector<std::byte> quantized(GgmlType type, const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() / 32 * ggml_type_info(type).block_bytes);
  quantize(type, values, out);
  return out;
}

/// The test file: metadata of several types, then one tensor of each plain type and two of blocks.
struct TestFile {
  std::vector<Written> tensors;
  std::vector<std::byte> bytes;
  std::uint64_t data_offset = 0;
  std::uint64_t alignment = 32;

  explicit TestFile(std::uint64_t align = 32) : alignment(align) {
    const std::vector<std::uint16_t> f16{0x3C00, 0x4000, 0xC200, 0x0000};   // 1, 2, -3, 0
    const std::vector<std::uint16_t> bf16{0x3F80, 0x4040, 0xBF00, 0x4120};  // 1, 3, -0.5, 10
    tensors = {
        {"token_embd.weight", 0, {3, 2}, bytes_of(std::vector<float>{0, 1, 2, 10, 11, 12})},
        {"h.f16", 1, {4}, bytes_of(f16)},
        {"h.bf16", 30, {2, 2}, bytes_of(bf16)},
        {"h.f64", 28, {2}, bytes_of(std::vector<double>{1.5, -2.25})},
        {"h.i8", 24, {3}, bytes_of(std::vector<std::int8_t>{-1, 2, -128})},
        {"h.i16", 25, {3}, bytes_of(std::vector<std::int16_t>{-300, 2, 32767})},
        {"h.i32", 26, {3}, bytes_of(std::vector<std::int32_t>{-70000, 2, 5})},
        {"h.i64", 27, {1, 3}, bytes_of(std::vector<std::int64_t>{-5000000000, 2, 7})},
        {"blk.0.q8", 8, {64, 3}, quantized(GgmlType::Q8_0, ramp(192))},
        {"blk.0.q4", 2, {32, 4}, quantized(GgmlType::Q4_0, ramp(128))},
    };
    GgufWriter w;
    const bool custom = align != 32;
    w.start(tensors.size(), custom ? 5 : 4);
    w.key("general.architecture", t_string).str("llama");
    w.key("llama.block_count", t_u32).u32(1);
    w.key("tokenizer.ggml.scores", t_array).u32(t_f32).u64(2).put(0.5f).put(-1.0f);
    w.key("general.file_type", t_u64).u64(7);
    if (custom) w.key("general.alignment", t_u32).u32(static_cast<std::uint32_t>(align));
    std::uint64_t at = 0;
    for (Written& t : tensors) {
      t.offset = at;
      at += t.bytes.size();
      at = (at + align - 1) / align * align;
      w.str(t.name).u32(static_cast<std::uint32_t>(t.dims.size()));
      for (const std::uint64_t d : t.dims) w.u64(d);
      w.u32(t.type).u64(t.offset);
    }
    w.pad(static_cast<std::size_t>(align));
    data_offset = w.size();
    for (const Written& t : tensors) {
      w.pad(static_cast<std::size_t>(align));
      REQUIRE(w.size() == data_offset + t.offset);
      w.bytes.insert(w.bytes.end(), t.bytes.begin(), t.bytes.end());
    }
    w.pad(static_cast<std::size_t>(align));  // after the last tensor too, as ggml and gguf-py write
    bytes = std::move(w.bytes);
  }

  [[nodiscard]] const Written& get(const std::string& name) const {
    for (const Written& t : tensors) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }

  void write(const std::filesystem::path& path) const {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
};

/// The torch-order shape GGUF dims give: reversed.
Shape torch_shape(const std::vector<std::uint64_t>& dims) {
  Shape out;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) out.push_back(static_cast<std::int64_t>(*d));
  return out;
}

/// The tensor's bytes, in C order.
std::vector<std::byte> tensor_bytes(const Tensor& t) {
  std::vector<std::byte> out(t.nbytes());
  t.copy_into(out);
  return out;
}

/// Every tensor of `loaded` is the written one: dtype, torch-order shape (raw bytes' for blocks) and bytes.
void check_all(const Value& loaded, const TestFile& file) {
  REQUIRE(loaded.is_dict());
  const NamedTensors tensors = named_tensors(loaded);
  REQUIRE(tensors.size() == file.tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Written& w = file.tensors[i];
    INFO(w.name);
    CHECK(tensors[i].first == w.name);
    const GgmlTypeInfo& info = ggml_type_info(w.type);
    CHECK(tensors[i].second.dtype() == info.dtype.value_or(DType::UInt8));
    Shape shape = torch_shape(w.dims);
    if (info.is_quantized()) shape.back() = shape.back() / info.block_size * info.block_bytes;
    CHECK(tensors[i].second.sizes() == shape);
    CHECK(tensor_bytes(tensors[i].second) == w.bytes);
  }
}

/// A reader of bytes in memory, `chunk` bytes a read at most, mappable or not.
class MemoryReader final : public RangeReader {
 public:
  MemoryReader(const std::vector<std::byte>& bytes, bool mappable) : bytes_(bytes), mappable_(mappable) {}
  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min<std::size_t>({out.size(), 1000, bytes_.size() - static_cast<std::size_t>(offset)});
    std::memcpy(out.data(), bytes_.data() + offset, n);
    read_ += n;
    return n;
  }
  std::optional<std::uint64_t> size() const override { return bytes_.size(); }
  std::string name() const override { return "mem://model.gguf"; }
  std::optional<std::span<const std::byte>> mapped() const override {
    return mappable_ ? std::optional<std::span<const std::byte>>(bytes_) : std::nullopt;
  }
  std::uint64_t read_ = 0;

 private:
  const std::vector<std::byte>& bytes_;
  bool mappable_;
};

/// A folder of one file, "models/m.gguf".
class OneFileFolder final : public FolderReader {
 public:
  explicit OneFileFolder(const std::vector<std::byte>& bytes) : bytes_(bytes) {}
  std::unique_ptr<RangeReader> open(const std::string& relative) override {
    if (relative != "models/m.gguf") return nullptr;
    return std::make_unique<MemoryReader>(bytes_, false);
  }
  std::string name() const override { return "folder://root"; }

 private:
  const std::vector<std::byte>& bytes_;
};

TEST_CASE("detect_format: the GGUF magic") {
  const TestFile file;
  CHECK(detect_format(file.bytes) == FileFormat::gguf);
  CHECK(format_name(FileFormat::gguf) == "gguf");
  ScratchDir dir;
  file.write(dir / "weights.bin");  // told by its content, not its name
  CHECK(detect_format(dir / "weights.bin") == FileFormat::gguf);
}

TEST_CASE("a loader given the other's file names the right one") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  try {
    (void)load_safetensors(dir / "m.gguf");
    FAIL("no error");
  } catch (const FormatError& e) {
    INFO(e.what());
    CHECK(e.reason().find("the file is gguf data, not safetensors") != std::string::npos);
    CHECK(e.reason().find("(read it with load_gguf())") != std::string::npos);
  }
  try {
    (void)load_gguf(tensorfile_test::sample("safetensors", "f.safetensors"));
    FAIL("no error");
  } catch (const FormatError& e) {
    INFO(e.what());
    CHECK(e.reason().find("the file is safetensors data, not gguf; expected the GGUF magic") != std::string::npos);
  }
}

TEST_CASE("open: a GGUF file's entries, metadata and meta tree") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  const Checkpoint checkpoint = open(dir / "m.gguf");
  CHECK(checkpoint.format() == FileFormat::gguf);
  const std::vector<CheckpointEntry>& entries = checkpoint.entries();
  REQUIRE(entries.size() == file.tensors.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Written& w = file.tensors[i];
    INFO(w.name);
    const CheckpointEntry& entry = entries[i];
    CHECK(entry.path == w.name);
    CHECK(entry.shape == torch_shape(w.dims));  // the shape in elements, torch order
    CHECK(entry.nbytes == w.bytes.size());
    REQUIRE(entry.ggml_type.has_value());
    CHECK(static_cast<std::uint32_t>(*entry.ggml_type) == w.type);
    REQUIRE(entry.location.has_value());
    CHECK(entry.location->file == (dir / "m.gguf"));
    CHECK(entry.location->offset == file.data_offset + w.offset);
    CHECK(entry.dtype == ggml_type_info(w.type).dtype.value_or(DType::UInt8));
  }
  SECTION("the shape is GGUF's dims reversed: ne[0] is the last, contiguous extent") {
    const CheckpointEntry* embd = checkpoint.find("token_embd.weight");
    REQUIRE(embd != nullptr);
    CHECK(embd->shape == Shape{2, 3});
    const Tensor t = checkpoint.tensor("token_embd.weight");
    CHECK(t.sizes() == Shape{2, 3});
    const auto* values = reinterpret_cast<const float*>(t.raw_data());
    CHECK(values[1 * 3 + 2] == 12.0f);  // row 1, column 2: the sixth float written
    CHECK(checkpoint.find("blk.0.q4")->shape == Shape{4, 32});
  }
  SECTION("every metadata value comes into the Value tree") {
    const Value& meta = checkpoint.metadata();
    REQUIRE(meta.is_dict());
    CHECK(meta.as_dict().size() == 4);
    CHECK(meta.as_dict().find("general.architecture")->as_string() == "llama");
    CHECK(meta.as_dict().find("llama.block_count")->as_int() == 1);
    CHECK(meta.as_dict().find("general.file_type")->as_int() == 7);
    const Value* scores = meta.as_dict().find("tokenizer.ggml.scores");
    REQUIRE(scores != nullptr);
    REQUIRE(scores->is_list());
    CHECK(scores->as_list().size() == 2);
    CHECK(scores->as_list()[1].as_float() == -1.0);
  }
  SECTION("values(): meta tensors, the metadata and the ggml types in the attributes") {
    const Value& values = checkpoint.values();
    for (const auto& [name, tensor] : named_tensors(values)) CHECK(tensor.device().is_meta());
    CHECK(gguf_tensor_type(values, "blk.0.q8") == GgmlType::Q8_0);
    CHECK(gguf_tensor_type(values, "h.bf16") == GgmlType::BF16);
    CHECK_FALSE(gguf_tensor_type(values, "nothing").has_value());
    const Value& attributes = values.as_dict().attributes();
    CHECK(attributes.as_dict().find("__metadata__")->as_dict().size() == 4);
  }
}

TEST_CASE("load: GGUF tensors from every byte source, heap and mapped") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  SECTION("a path, heap and mmap, through load() and open()") {
    check_all(load(dir / "m.gguf"), file);
    check_all(load(dir / "m.gguf", {.threads = 3}), file);
    check_all(open(dir / "m.gguf").load_all(), file);
    const Value mapped = load(dir / "m.gguf", {.mmap = MapMode::read_only});
    check_all(mapped, file);
    const Value viewed = open(dir / "m.gguf", {.mmap = MapMode::read_only}).load_all();
    check_all(viewed, file);
    for (const Value* v : {&mapped, &viewed}) {
      for (const auto& [name, tensor] : named_tensors(*v)) {
        INFO(name);
        CHECK(tensor.storage().kind() == StorageKind::mmap);  // zero-copy, block tensors too
      }
    }
    check_all(load_gguf(dir / "m.gguf"), file);
  }
  SECTION("the mapped tensors are the file's bytes in place") {
    const Checkpoint checkpoint = open(dir / "m.gguf", {.mmap = MapMode::read_only});
    const Tensor a = checkpoint.tensor("blk.0.q4");
    const Tensor b = checkpoint.tensor("token_embd.weight");
    CHECK(a.storage().kind() == StorageKind::mmap);
    const Written& wa = file.get("blk.0.q4");
    const Written& wb = file.get("token_embd.weight");
    CHECK(a.raw_data() - b.raw_data() ==
          static_cast<std::ptrdiff_t>(wa.offset) - static_cast<std::ptrdiff_t>(wb.offset));
  }
  SECTION("memory, heap and borrowed views") {
    check_all(load(Source::memory(file.bytes, "m.gguf")), file);
    const Value viewed = load(Source::memory(file.bytes, "m.gguf"), {.mmap = MapMode::read_only});
    check_all(viewed, file);
    const Tensor q4 = viewed.as_dict().find("blk.0.q4")->as_tensor();
    CHECK(q4.raw_data() == file.bytes.data() + file.data_offset + file.get("blk.0.q4").offset);
    check_all(load_gguf(std::span<const std::byte>(file.bytes)), file);
  }
  SECTION("a stream") {
    std::istringstream in(std::string(reinterpret_cast<const char*>(file.bytes.data()), file.bytes.size()));
    check_all(load(Source::stream(in, "m.gguf")), file);
    std::istringstream again(std::string(reinterpret_cast<const char*>(file.bytes.data()), file.bytes.size()));
    check_all(load_gguf(again), file);
  }
  SECTION("a reader, by ranges, and mapped") {
    MemoryReader reader(file.bytes, false);
    const Checkpoint checkpoint = open(Source::reader(reader));
    check_all(checkpoint.load_all(), file);
    reader.read_ = 0;
    const Tensor one = checkpoint.tensor("h.i64");
    CHECK(tensor_bytes(one) == file.get("h.i64").bytes);
    CHECK(reader.read_ == 24);  // its range alone
    MemoryReader mappable(file.bytes, true);
    const Value viewed = load(Source::reader(mappable), {.mmap = MapMode::read_only});
    check_all(viewed, file);
    CHECK(viewed.as_dict().find("h.f64")->as_tensor().raw_data() ==
          file.bytes.data() + file.data_offset + file.get("h.f64").offset);
  }
  SECTION("a folder") {
    OneFileFolder folder(file.bytes);
    const Checkpoint checkpoint = open(Source::folder(folder, "models/m.gguf"));
    CHECK(checkpoint.format() == FileFormat::gguf);
    CHECK(checkpoint.name() == "folder://root/models/m.gguf");
    check_all(checkpoint.load_all(), file);
  }
  SECTION("an alignment of 1 (general.alignment): unaligned tensors are copied to aligned memory on the heap") {
    const TestFile packed(1);
    packed.write(dir / "packed.gguf");
    const Value loaded = load(dir / "packed.gguf");
    check_all(loaded, packed);
    for (const auto& [name, tensor] : named_tensors(loaded)) {
      INFO(name);
      CHECK(reinterpret_cast<std::uintptr_t>(tensor.raw_data()) % tensor.element_size() == 0);
    }
    check_all(load(dir / "packed.gguf", {.mmap = MapMode::read_only}), packed);
    check_all(load(Source::memory(packed.bytes, "p.gguf")), packed);
  }
  SECTION("map_location meta reads no data") {
    const Value meta = load(dir / "m.gguf", {.map_location = "meta"});
    for (const auto& [name, tensor] : named_tensors(meta)) CHECK(tensor.device().is_meta());
  }
}

TEST_CASE("load: select, into and read_into of GGUF tensors") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  SECTION("select keeps the chosen tensors, the others meta or dropped") {
    const Value loaded = load(dir / "m.gguf", {.select = select_paths({"h.i*"})});
    for (const auto& [name, tensor] : named_tensors(loaded)) {
      INFO(name);
      CHECK(tensor.device().is_meta() == !name.starts_with("h.i"));
      if (!tensor.device().is_meta()) CHECK(tensor_bytes(tensor) == file.get(name).bytes);
    }
    const Value dropped =
        load(Source::memory(file.bytes, "m.gguf"), {.select = select_paths({"blk.*"}), .select_drops = true});
    CHECK(named_tensors(dropped).size() == 2);
    CHECK(tensor_bytes(dropped.as_dict().find("blk.0.q8")->as_tensor()) == file.get("blk.0.q8").bytes);
  }
  SECTION("read_into and into: plain tensors into buffers of their dtype, blocks into uint8 of their raw bytes") {
    const Checkpoint checkpoint = open(dir / "m.gguf");
    Tensor f32(heap_storage(24), DType::Float32, {2, 3});
    checkpoint.read_into("token_embd.weight", f32);
    CHECK(tensor_bytes(f32) == file.get("token_embd.weight").bytes);
    Tensor raw(heap_storage(4 * 18), DType::UInt8, {4, 18});
    checkpoint.read_into("blk.0.q4", raw);
    CHECK(tensor_bytes(raw) == file.get("blk.0.q4").bytes);
    const Value loaded = load(dir / "m.gguf", {.into = {{"h.i64", Tensor(heap_storage(24), DType::Int64, {3, 1})}}});
    CHECK(tensor_bytes(loaded.as_dict().find("h.i64")->as_tensor()) == file.get("h.i64").bytes);
  }
  SECTION("a quantized tensor where a plain dtype is asked for is a clear error") {
    const Checkpoint checkpoint = open(dir / "m.gguf");
    Tensor floats(heap_storage(4 * 32 * 4), DType::Float32, {4, 32});
    try {
      checkpoint.read_into("blk.0.q4", floats);
      FAIL("no error");
    } catch (const ArgumentError& e) {
      INFO(e.what());
      CHECK(e.reason() ==
            "the buffer for \"blk.0.q4\" is float32 (4, 32), but the tensor holds q4_0 blocks, whose raw bytes load as "
            "uint8 (4, 18); expected a uint8 buffer of that shape (dequantize() gives float32)");
      CHECK(e.path() == (dir / "m.gguf"));
    }
    CHECK_THROWS_AS(dequantize(checkpoint.tensor("h.i32"), GgmlType::Q4_0), ArgumentError);
    CHECK_THROWS_AS(dequantize(checkpoint.tensor("blk.0.q4"), GgmlType::F32), ArgumentError);
    CHECK_THROWS_AS(load_gguf(dir / "m.gguf", {.into = {{"h.i8", Tensor(heap_storage(3), DType::Int8, {3})}}}),
                    ArgumentError);
  }
}

TEST_CASE("dequantize: the blocks a GGUF load gives, to float32 of the shape in elements") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  for (const bool mapped : {false, true}) {
    INFO("mmap " << mapped);
    const Value loaded = mapped ? load(dir / "m.gguf", {.mmap = MapMode::read_only}) : load(dir / "m.gguf");
    const Tensor q8 = dequantize(loaded, "blk.0.q8");
    CHECK(q8.dtype() == DType::Float32);
    CHECK(q8.sizes() == Shape{3, 64});
    std::vector<float> expected(192);
    dequantize(GgmlType::Q8_0, file.get("blk.0.q8").bytes, expected);
    const std::vector<float> source = ramp(192);
    const auto* got = reinterpret_cast<const float*>(q8.raw_data());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      INFO(i);
      CHECK(got[i] == expected[i]);
      float amax = 0;
      for (std::size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(source[j]));
      CHECK(std::fabs(got[i] - source[i]) <= amax / 127 / 2 * 1.01f);  // within half a step of the block's scale
    }
    const Tensor q4 = dequantize(loaded, "blk.0.q4");
    CHECK(q4.sizes() == Shape{4, 32});
    std::vector<float> expected4(128);
    dequantize(GgmlType::Q4_0, file.get("blk.0.q4").bytes, expected4);
    CHECK(std::memcmp(q4.raw_data(), expected4.data(), 128 * sizeof(float)) == 0);
    const Tensor f16 = dequantize(loaded, "h.f16");
    CHECK(f16.sizes() == Shape{4});
    const auto* h = reinterpret_cast<const float*>(f16.raw_data());
    CHECK((h[0] == 1.0f && h[1] == 2.0f && h[2] == -3.0f && h[3] == 0.0f));
    CHECK_THROWS_AS(dequantize(loaded, "nothing"), ArgumentError);
  }
}

TEST_CASE("slices of GGUF tensors: plain ones anywhere, block ones on whole blocks") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  for (const bool mapped : {false, true}) {
    INFO("mmap " << mapped);
    const Checkpoint checkpoint = mapped ? open(dir / "m.gguf", {.mmap = MapMode::read_only}) : open(dir / "m.gguf");
    SECTION("a plain tensor's columns") {
      const Tensor part = checkpoint.tensor("token_embd.weight", {.dim = 1, .begin = 1, .end = 3});
      CHECK(part.sizes() == Shape{2, 2});
      CHECK(tensor_bytes(part) == bytes_of(std::vector<float>{1, 2, 11, 12}));
    }
    SECTION("rows of a block tensor: whole rows of blocks") {
      const Tensor part = checkpoint.tensor("blk.0.q4", {.dim = 0, .begin = 1, .end = 3});
      CHECK(part.dtype() == DType::UInt8);
      CHECK(part.sizes() == Shape{2, 18});
      const std::vector<std::byte>& all = file.get("blk.0.q4").bytes;
      CHECK(tensor_bytes(part) == std::vector<std::byte>(all.begin() + 18, all.begin() + 54));
      const std::vector<std::byte> whole = tensor_bytes(dequantize(checkpoint.tensor("blk.0.q4"), GgmlType::Q4_0));
      CHECK(tensor_bytes(dequantize(part, GgmlType::Q4_0)) ==
            std::vector<std::byte>(whole.begin() + 1 * 32 * 4, whole.begin() + 3 * 32 * 4));
    }
    SECTION("the last dimension of a block tensor, on block boundaries") {
      const Tensor part = checkpoint.tensor("blk.0.q8", {.dim = 1, .begin = 32, .end = 64});
      CHECK(part.sizes() == Shape{3, 34});
      const std::vector<std::byte>& all = file.get("blk.0.q8").bytes;
      std::vector<std::byte> expected;
      for (std::size_t row = 0; row < 3; ++row) {
        expected.insert(expected.end(), all.begin() + static_cast<std::ptrdiff_t>(row * 68 + 34),
                        all.begin() + static_cast<std::ptrdiff_t>(row * 68 + 68));
      }
      CHECK(tensor_bytes(part) == expected);
      Tensor buffer(heap_storage(3 * 34), DType::UInt8, {3, 34});
      checkpoint.read_into("blk.0.q8", buffer, {.dim = 1, .begin = 32, .end = 64});
      CHECK(tensor_bytes(buffer) == expected);
    }
    SECTION("a slice that cuts blocks is an ArgumentError naming the tensor") {
      try {
        (void)checkpoint.tensor("blk.0.q8", {.dim = 1, .begin = 16, .end = 48});
        FAIL("no error");
      } catch (const ArgumentError& e) {
        INFO(e.what());
        CHECK(e.member() == "blk.0.q8");
        CHECK(e.reason().find("cuts its q8_0 blocks; expected a begin and an end that are multiples of its block "
                              "size 32") != std::string::npos);
      }
    }
    SECTION("a slice rule through load()") {
      const Value loaded =
          load(dir / "m.gguf", {.mmap = checkpoint.options().mmap,
                                .slice = [](std::string_view path, const Shape& shape) -> std::optional<TensorSlice> {
                                  if (path != "blk.0.q4") return std::nullopt;
                                  CHECK(shape == Shape{4, 32});  // asked with the shape in elements
                                  return TensorSlice{0, 2, 4};
                                }});
      const Tensor part = loaded.as_dict().find("blk.0.q4")->as_tensor();
      const std::vector<std::byte>& all = file.get("blk.0.q4").bytes;
      CHECK(tensor_bytes(part) == std::vector<std::byte>(all.begin() + 36, all.end()));
      CHECK(tensor_bytes(loaded.as_dict().find("h.i8")->as_tensor()) == file.get("h.i8").bytes);
    }
  }
}

TEST_CASE("verify and scan: GGUF files") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  const VerifyReport report = verify(dir / "m.gguf");
  CHECK(report.format == FileFormat::gguf);
  CHECK(report.ok());
  CHECK(report.tensors == file.tensors.size());
  GgufWriter w;
  w.start(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).pad(32).fill(32);
  {
    std::ofstream out(dir / "overlap.gguf", std::ios::binary);
    out.write(reinterpret_cast<const char*>(w.bytes.data()), static_cast<std::streamsize>(w.bytes.size()));
  }
  const VerifyReport bad = verify(dir / "overlap.gguf");
  CHECK(bad.format == FileFormat::gguf);
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors.front().find("overlap those of 'a'") != std::string::npos);
  const ScanReport scanned = scan(dir / "m.gguf");
  CHECK(scanned.format == FileFormat::gguf);
  CHECK(scanned.globals.empty());
  CHECK(scanned.safe());
}

TEST_CASE("save_gguf: a GGUF load written back is the same file, tensors and metadata written and read back") {
  const TestFile file;
  ScratchDir dir;
  file.write(dir / "m.gguf");
  SECTION("a load written back, block tensors and metadata types included, gives the same bytes") {
    CHECK(save_gguf_to_bytes(load(dir / "m.gguf")) == file.bytes);
    CHECK(save_gguf_to_bytes(load(dir / "m.gguf", {.mmap = MapMode::read_only})) == file.bytes);
    const TestFile wide(64);  // general.alignment 64, kept
    CHECK(save_gguf_to_bytes(load(Source::memory(wide.bytes, "wide.gguf"))) == wide.bytes);
    const TestFile packed(1);
    CHECK(save_gguf_to_bytes(load(Source::memory(packed.bytes, "packed.gguf"))) == packed.bytes);
    save(open(dir / "m.gguf").load_all(), dir / "again.gguf");
    check_all(load(dir / "again.gguf"), file);
    CHECK(tensorfile_test::read_text(dir / "again.gguf") == tensorfile_test::read_text(dir / "m.gguf"));
  }
  SECTION("named tensors with metadata of inferred and given types, and another alignment") {
    Tensor f32(heap_storage(24), DType::Float32, {2, 3});
    auto* v = reinterpret_cast<float*>(f32.mutable_raw_data());
    for (int i = 0; i < 6; ++i) v[i] = static_cast<float>(i) * 1.5f;
    Tensor f16(heap_storage(6), DType::Float16, {3});
    Tensor bf16(heap_storage(4), DType::BFloat16, {1, 2});
    Dict metadata;
    metadata.set("general.architecture", Value("test"));
    metadata.set("n", Value(std::int64_t{5}));
    metadata.set("big", Value(std::int64_t{1} << 40));
    metadata.set("x", Value(2.5));
    metadata.set("ids", Value(List(std::vector<Value>{Value(std::int64_t{1}), Value(std::int64_t{2})})));
    Dict types;
    types.set("n", Value("uint32"));
    const NamedTensors tensors{{"w", f32}, {"h", f16}, {"b", bf16}};
    save_gguf(
        tensors, dir / "new.gguf",
        {.gguf = {.alignment = 64, .metadata = Value(std::move(metadata)), .metadata_types = Value(std::move(types))}});
    const GgufHeader header = read_gguf_header(dir / "new.gguf");
    CHECK(header.alignment == 64);
    CHECK(header.data_offset % 64 == 0);
    REQUIRE(header.tensors.size() == 3);
    CHECK(header.tensors[0].dims == Shape{3, 2});  // torch [2, 3] reversed
    CHECK(header.tensors[1].type == GgmlType::F16);
    CHECK(header.tensors[2].type == GgmlType::BF16);
    for (const GgufTensorInfo& info : header.tensors) CHECK(info.offset % 64 == 0);
    const Value loaded = load(dir / "new.gguf");
    CHECK(tensor_bytes(loaded.as_dict().find("w")->as_tensor()) == tensor_bytes(f32));
    CHECK(loaded.as_dict().find("w")->as_tensor().sizes() == Shape{2, 3});
    const Dict& kinds = loaded.as_dict().attributes().as_dict().find("__metadata_types__")->as_dict();
    CHECK(kinds.find("n")->as_string() == "uint32");
    CHECK(kinds.find("big")->as_string() == "int64");
    CHECK(kinds.find("x")->as_string() == "float32");
    CHECK(kinds.find("ids")->as_string() == "array[int32]");
    CHECK(kinds.find("general.alignment")->as_string() == "uint32");
    const Value& meta = open(dir / "new.gguf").metadata();
    CHECK(meta.as_dict().find("big")->as_int() == (std::int64_t{1} << 40));
    CHECK(meta.as_dict().find("x")->as_float() == 2.5);
  }
  SECTION("quantize: 2-d float tensors of whole blocks to q8_0 or q4_0, the others as they are") {
    const std::vector<float> values = ramp(192);
    Tensor w(heap_storage(192 * 4), DType::Float32, {3, 64});
    std::memcpy(w.mutable_raw_data(), values.data(), 192 * 4);
    Tensor norm(heap_storage(64 * 4), DType::Float32, {64});
    std::memcpy(norm.mutable_raw_data(), values.data(), 64 * 4);
    Tensor odd(heap_storage(3 * 48 * 4), DType::Float32, {3, 48});  // rows of 48: not whole blocks
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      INFO(ggml_type_name(type));
      save(NamedTensors{{"w", w}, {"norm", norm}, {"odd", odd}}, dir / "q.gguf",
           {.gguf = {.quantize = std::string(ggml_type_name(type))}});
      const Checkpoint checkpoint = open(dir / "q.gguf");
      CHECK(checkpoint.find("w")->ggml_type == type);
      CHECK(checkpoint.find("w")->shape == Shape{3, 64});
      CHECK(checkpoint.find("norm")->ggml_type == GgmlType::F32);
      CHECK(checkpoint.find("odd")->ggml_type == GgmlType::F32);
      CHECK(tensor_bytes(checkpoint.tensor("w")) == quantized(type, values));
      const Tensor back = dequantize(checkpoint.load_all(), "w");
      CHECK(back.sizes() == Shape{3, 64});
    }
    CHECK_THROWS_AS(save_gguf(NamedTensors{{"w", w}}, dir / "q.gguf", {.gguf = {.quantize = "q5_0"}}), ArgumentError);
  }
  SECTION("what GGUF cannot hold is refused before anything is written") {
    Tensor c(heap_storage(8), DType::Complex64, {1});
    CHECK_THROWS_AS(save_gguf(NamedTensors{{"c", c}}, dir / "bad.gguf"), DTypeError);
    Tensor ok(heap_storage(4), DType::Float32, {1});
    CHECK_THROWS_AS(save_gguf(NamedTensors{{std::string(64, 'n'), ok}}, dir / "bad.gguf"), ArgumentError);
    CHECK_THROWS_AS(save_gguf(NamedTensors{{"a", ok}}, dir / "bad.gguf", {.gguf = {.alignment = 48}}), ArgumentError);
    Dict metadata;
    metadata.set("n", Value(std::int64_t{-1}));
    Dict types;
    types.set("n", Value("uint8"));
    CHECK_THROWS_AS(
        save_gguf(NamedTensors{{"a", ok}}, dir / "bad.gguf",
                  {.gguf = {.metadata = Value(std::move(metadata)), .metadata_types = Value(std::move(types))}}),
        ArgumentError);
    CHECK_FALSE(std::filesystem::exists(dir / "bad.gguf"));
  }
}

/// What opening `bytes` (as memory named "bad.gguf", and as a file) throws: the class, a reason holding `text`,
/// the member and the offset.
template <class E>
void expect_open_error(const std::vector<std::byte>& bytes, const std::string& text, const std::string& member,
                       std::uint64_t offset) {
  ScratchDir dir;
  {
    std::ofstream out(dir / "bad.gguf", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const std::vector<std::pair<std::string, std::function<void()>>> ways{
      {"memory", [&] { (void)open(Source::memory(bytes, "bad.gguf")); }},
      {(dir / "bad.gguf").string(), [&] { (void)open(dir / "bad.gguf"); }},
      {(dir / "bad.gguf").string(), [&] { (void)load(dir / "bad.gguf"); }},
  };
  for (const auto& [name, way] : ways) {
    INFO(name);
    try {
      way();
      FAIL("no error; expected one saying: " << text);
    } catch (const E& e) {
      INFO(e.what());
      CHECK(e.reason().find(text) != std::string::npos);
      CHECK((e.path() == name || (name == "memory" && e.path() == "bad.gguf")));
      CHECK(e.member() == member);
      REQUIRE(e.offset().has_value());
      CHECK(*e.offset() == offset);
    } catch (const Error& e) {
      FAIL("another error class: " << e.what());
    }
  }
}

TEST_CASE("arrays of arrays: their inner types are named, and written back as they were") {
  // One tensor (4 float32 at offset 0) and three nested arrays: inner arrays of one type, of two, and three deep.
  GgufWriter w;
  w.start(1, 3);
  w.key("a.rows", t_array).u32(t_array).u64(2);
  w.u32(t_u8).u64(2).u8(1).u8(2);
  w.u32(t_u8).u64(1).u8(255);
  w.key("a.mixed", t_array).u32(t_array).u64(2);
  w.u32(t_u8).u64(1).u8(7);
  w.u32(t_i16).u64(1).put(std::int16_t{-3});
  w.key("a.deep", t_array).u32(t_array).u64(1);
  w.u32(t_array).u64(1).u32(t_string).u64(1).str("x");
  w.tensor("t", {4}, 0, 0);
  w.pad(32).fill(16).pad(32);
  const GgufHeader header = parse_gguf_header(w.bytes, "nested.gguf");
  REQUIRE(header.keys.size() == 3);
  CHECK(header.keys[0].type_name == "array[array[uint8]]");
  CHECK(header.keys[1].type_name == "array[array]");
  CHECK(header.keys[2].type_name == "array[array[array[string]]]");
  const Value loaded = load(Source::memory(w.bytes, "nested.gguf"));
  const Dict& kinds = loaded.as_dict().attributes().as_dict().find("__metadata_types__")->as_dict();
  CHECK(kinds.find("a.rows")->as_string() == "array[array[uint8]]");
  // Written back: the same inner types where the load named them (the mixed one's are inferred, int32).
  const std::vector<std::byte> saved = save_gguf_to_bytes(loaded);
  const GgufHeader again = parse_gguf_header(saved, "saved.gguf");
  REQUIRE(again.keys.size() == 3);
  CHECK(again.keys[0].type_name == "array[array[uint8]]");
  CHECK(again.keys[1].type_name == "array[array[int32]]");
  CHECK(again.keys[2].type_name == "array[array[array[string]]]");
  CHECK(again.metadata == header.metadata);
}

TEST_CASE("hostile GGUF files through the front door: errors naming the file, the tensor and the byte offset") {
  SECTION("a tensor whose bytes run past the end of the file") {
    const TestFile file;
    // The last tensor's own bytes cut, not only the padding after it: a file may leave that out (save_gguf did until
    // gguf.peer showed that ggml refuses it) and still loads.
    const Written& last = file.tensors.back();
    const auto end = static_cast<std::ptrdiff_t>(file.data_offset + last.offset + last.bytes.size());
    const std::vector<std::byte> unpadded(file.bytes.begin(), file.bytes.begin() + end);
    check_all(load(Source::memory(unpadded, "unpadded.gguf")), file);
    std::vector<std::byte> cut(file.bytes.begin(), file.bytes.begin() + end - 10);
    try {
      (void)open(Source::memory(cut, "cut.gguf"));
      FAIL("no error");
    } catch (const FormatError& e) {
      INFO(e.what());
      CHECK(e.path() == "cut.gguf");
      CHECK(e.member() == "blk.0.q4");
      CHECK(e.reason().find("run past the end of the file") != std::string::npos);
      REQUIRE(e.offset().has_value());
    }
  }
  SECTION("an unknown ggml type") {
    GgufWriter w;
    w.start(1, 0).tensor("w", {4}, 99, 0).pad(32).fill(16);
    expect_open_error<FormatError>(w.bytes, "unknown ggml type 99", "w", 24 + 8 + 1 + 4 + 8);
  }
  SECTION("overlapping tensors") {
    GgufWriter w;
    w.start(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).pad(32).fill(32);
    const std::uint64_t b_offset_field = 24 + (8 + 1 + 4 + 8 + 4 + 8) + (8 + 1 + 4 + 8 + 4);
    expect_open_error<FormatError>(w.bytes, "overlap those of 'a'", "b", b_offset_field);
  }
  SECTION("an unaligned offset") {
    GgufWriter w;
    w.start(1, 0).tensor("a", {4}, 0, 4).pad(32).fill(32);
    expect_open_error<FormatError>(w.bytes, "is not a multiple of the alignment 32", "a", 24 + 8 + 1 + 4 + 8 + 4);
  }
  SECTION("a string length that overflows") {
    GgufWriter w;
    w.start(0, 1).key("k", t_string).u64(~std::uint64_t{0});
    expect_open_error<FormatError>(w.bytes, "runs past the end of the file", "k", 24 + 8 + 1 + 4);
  }
  SECTION("arrays nested deeply") {
    GgufWriter w;
    w.start(0, 1).key("deep", t_array);
    for (int i = 0; i < 20; ++i) w.u32(t_array).u64(1);
    w.u32(t_u8).u64(0);
    expect_open_error<LimitError>(w.bytes, "arrays nest deeper than the limit of 8 levels", "deep",
                                  24 + 8 + 4 + 4 + 8 * 12);
  }
}

}  // namespace gguf_load_test
