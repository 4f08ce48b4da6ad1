// SPDX-License-Identifier: MIT
// llama.cpp's split GGUF models (gguf-split's `<prefix>-00001-of-0000N.gguf` files): written by save_gguf's split
// options and read whole from any part through the front door (heap, mmap, select, slices, open, a folder); hostile
// split sets as errors naming the part; and the GGUF header limits of LoadOptions::gguf.
#include <tensorfile/checkpoint.hpp>
#include <tensorfile/formats/gguf/dequantize.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/gguf/save.hpp>
#include <tensorfile/state_dict.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_writer.hpp"
#include "tensorfile_catch.hpp"

namespace gguf_split_test {

using namespace tensorfile;
using namespace tensorfile_gguf_test;
using tensorfile_test::ScratchDir;

/// A float32 tensor of `shape` holding 0.5 * i + `base`.
Tensor floats(Shape shape, float base) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  Tensor t(heap_storage(static_cast<std::size_t>(n) * 4), DType::Float32, std::move(shape));
  auto* v = reinterpret_cast<float*>(t.mutable_raw_data());
  for (std::int64_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) + base;
  return t;
}

std::vector<std::byte> bytes_of(const Tensor& t) {
  std::vector<std::byte> out(t.nbytes());
  t.copy_into(out);
  return out;
}

void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  const std::string text = tensorfile_test::read_text(path);
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

/// A model of five tensors (one quantized to Q8_0 on save), with metadata: what the tests split.
struct Model {
  NamedTensors tensors{{"token_embd.weight", floats({4, 32}, 0)},
                       {"blk.0.attn_q.weight", floats({2, 64}, 1)},
                       {"blk.0.attn_norm.weight", floats({64}, 2)},
                       {"blk.1.attn_q.weight", floats({3, 32}, 3)},
                       {"output_norm.weight", floats({8}, 4)}};
  Value metadata;
  Model() {
    Dict m;
    m.set("general.architecture", Value("llama"));
    m.set("llama.block_count", Value(std::int64_t{2}));
    metadata = Value(std::move(m));
  }
  /// The single-file model, written to `path` (q8_0 for the 2-d tensors of whole blocks).
  void save_single(const std::filesystem::path& path) const {
    save_gguf(tensors, path, {.gguf = {.metadata = metadata, .quantize = "q8_0"}});
  }
};

/// The split.* keys of a file as its header stores them: key -> (type name, value).
std::map<std::string, std::pair<std::string, std::int64_t>> split_keys(const std::filesystem::path& path) {
  const GgufHeader header = read_gguf_header(path);
  std::map<std::string, std::pair<std::string, std::int64_t>> out;
  for (const GgufKeyInfo& key : header.keys) {
    if (key.key.starts_with("split.")) {
      out[key.key] = {detail::gguf_value_type_name(static_cast<std::uint32_t>(key.type)),
                      header.metadata.as_dict().find(key.key)->as_int()};
    }
  }
  return out;
}

/// A folder over a directory's files, read by ranges as a remote folder is (no mapping).
class DirectoryFolder final : public FolderReader {
 public:
  explicit DirectoryFolder(std::filesystem::path root) : root_(std::move(root)) {}
  std::unique_ptr<RangeReader> open(const std::string& relative) override {
    std::error_code error;
    if (!std::filesystem::is_regular_file(root_ / relative, error)) return nullptr;
    return std::make_unique<Reader>(read_file(root_ / relative), relative);
  }
  std::string name() const override { return "folder://models"; }

 private:
  class Reader final : public RangeReader {
   public:
    Reader(std::vector<std::byte> bytes, std::string name) : bytes_(std::move(bytes)), name_(std::move(name)) {}
    std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
      if (offset >= bytes_.size()) return 0;
      const std::size_t n = std::min<std::size_t>(out.size(), bytes_.size() - static_cast<std::size_t>(offset));
      std::memcpy(out.data(), bytes_.data() + offset, n);
      return n;
    }
    std::optional<std::uint64_t> size() const override { return bytes_.size(); }
    std::string name() const override { return name_; }

   private:
    std::vector<std::byte> bytes_;
    std::string name_;
  };
  std::filesystem::path root_;
};

TEST_CASE("gguf split names: llama.cpp's <prefix>-%05d-of-%05d.gguf") {
  CHECK(gguf_split_file_name("dir/model", 0, 3) == "dir/model-00001-of-00003.gguf");
  CHECK(gguf_split_file_name("m", 65534, 65535) == "m-65535-of-65535.gguf");
  const auto name = parse_gguf_split_name("dir/model-00002-of-00003.gguf");
  REQUIRE(name.has_value());
  CHECK(name->prefix == "dir/model");
  CHECK(name->no == 1);
  CHECK(name->count == 3);
  CHECK_FALSE(parse_gguf_split_name("model.gguf").has_value());
  CHECK_FALSE(parse_gguf_split_name("model-00000-of-00003.gguf").has_value());  // parts count from 1
  CHECK_FALSE(parse_gguf_split_name("model-00004-of-00003.gguf").has_value());
  CHECK_FALSE(parse_gguf_split_name("model-0001-of-00003.gguf").has_value());  // five digits
  CHECK_FALSE(parse_gguf_split_name("-00001-of-00003.gguf").has_value());      // no prefix
  CHECK_FALSE(parse_gguf_split_name("model-00001-of-00003.safetensors").has_value());
}

TEST_CASE("save_gguf split: llama.cpp's files and keys, read whole from any part") {
  const Model model;
  ScratchDir dir;
  model.save_single(dir / "single.gguf");
  const Value single = load(dir / "single.gguf");
  save(single, dir / "model.gguf", {.gguf = {.split_max_tensors = 2}});
  const std::vector<std::filesystem::path> parts{dir / "model-00001-of-00003.gguf", dir / "model-00002-of-00003.gguf",
                                                 dir / "model-00003-of-00003.gguf"};
  CHECK(tensorfile_test::names_in(dir.path()) == std::vector<std::string>{"model-00001-of-00003.gguf",
                                                                          "model-00002-of-00003.gguf",
                                                                          "model-00003-of-00003.gguf", "single.gguf"});

  SECTION("every part carries split.no (uint16), split.count (uint16) and split.tensors.count (int32)") {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      INFO(parts[k]);
      const auto keys = split_keys(parts[k]);
      CHECK(keys.at("split.no") == std::pair<std::string, std::int64_t>{"uint16", static_cast<std::int64_t>(k)});
      CHECK(keys.at("split.count") == std::pair<std::string, std::int64_t>{"uint16", 3});
      CHECK(keys.at("split.tensors.count") == std::pair<std::string, std::int64_t>{"int32", 5});
      const GgufHeader header = read_gguf_header(parts[k]);
      CHECK(header.tensors.size() == (k < 2 ? 2u : 1u));
      CHECK(header.metadata.as_dict().contains("general.architecture") == (k == 0));  // the first part's alone
    }
  }
  SECTION("load() of any part is the whole model, heap and mapped, with its metadata and ggml types") {
    for (const std::filesystem::path& part : parts) {
      for (const bool mapped : {false, true}) {
        INFO(part << (mapped ? " mapped" : " heap"));
        LoadOptions options;
        if (mapped) options.mmap = MapMode::read_only;
        const Value loaded = load(part, options);
        const NamedTensors got = named_tensors(loaded);
        const NamedTensors want = named_tensors(single);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          CHECK(got[i].first == want[i].first);
          CHECK(got[i].second.dtype() == want[i].second.dtype());
          CHECK(got[i].second.sizes() == want[i].second.sizes());
          CHECK(bytes_of(got[i].second) == bytes_of(want[i].second));
        }
        CHECK(gguf_tensor_type(loaded, "blk.1.attn_q.weight") == GgmlType::Q8_0);  // a later part's type
        CHECK(bytes_of(dequantize(loaded, "blk.1.attn_q.weight")) ==
              bytes_of(dequantize(single, "blk.1.attn_q.weight")));
        const Dict& metadata = loaded.as_dict().attributes().as_dict().find("__metadata__")->as_dict();
        CHECK(metadata.find("general.architecture")->as_string() == "llama");
        CHECK_FALSE(metadata.contains("split.count"));  // the files' keys, not the model's
      }
    }
  }
  SECTION("merged back into one file, the split model is the single file byte for byte") {
    save(load(parts[1]), dir / "merged.gguf");
    CHECK(read_file(dir / "merged.gguf") == read_file(dir / "single.gguf"));
  }
  SECTION("open(): entries of every part, locations in their files, the first part's metadata") {
    const Checkpoint checkpoint = open(parts[2]);
    CHECK(checkpoint.format() == FileFormat::gguf);
    CHECK(checkpoint.sharded());
    REQUIRE(checkpoint.entries().size() == 5);
    CHECK(checkpoint.entries()[3].path == "blk.1.attn_q.weight");
    CHECK(checkpoint.entries()[3].ggml_type == GgmlType::Q8_0);
    REQUIRE(checkpoint.entries()[3].location.has_value());
    CHECK(checkpoint.entries()[3].location->file == parts[1]);
    CHECK(checkpoint.metadata().as_dict().find("general.architecture")->as_string() == "llama");
    CHECK_FALSE(checkpoint.metadata().as_dict().contains("split.no"));
    CHECK(bytes_of(checkpoint.tensor("output_norm.weight")) == bytes_of(model.tensors[4].second));
    const Value all = checkpoint.load_all();
    CHECK(named_tensors(all).size() == 5);
    CHECK(gguf_tensor_type(all, "token_embd.weight") == GgmlType::Q8_0);
  }
  SECTION("open()'s values are the single file's meta tensors: a block tensor's raw bytes' shape, for q8_0 and q4_0") {
    for (const char* quantize : {"q8_0", "q4_0"}) {  // q4_0 has fewer bytes than elements
      INFO(quantize);
      save_gguf(model.tensors, dir / "one.gguf", {.gguf = {.metadata = model.metadata, .quantize = quantize}});
      save_gguf(model.tensors, dir / "two.gguf",
                {.gguf = {.metadata = model.metadata, .quantize = quantize, .split_max_tensors = 3}});
      const NamedTensors want = named_tensors(open(dir / "one.gguf").values());
      const NamedTensors got = named_tensors(open(dir / "two-00002-of-00002.gguf").values());
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO(got[i].first);
        CHECK(got[i].first == want[i].first);
        CHECK(got[i].second.dtype() == want[i].second.dtype());
        CHECK(got[i].second.sizes() == want[i].second.sizes());
        CHECK(got[i].second.device().is_meta());
      }
      CHECK(want[0].second.sizes() == Shape{4, quantize == std::string("q8_0") ? 34 : 18});  // 1 block of 32 a row
    }
  }
  SECTION("select and slices over the parts") {
    const Value some = load(parts[0], {.select = select_paths({"blk.1.*"}), .select_drops = true});
    REQUIRE(named_tensors(some).size() == 1);
    CHECK(gguf_tensor_type(some, "blk.1.attn_q.weight") == GgmlType::Q8_0);
    CHECK(some.as_dict().attributes().as_dict().find("__metadata__")->as_dict().contains("general.architecture"));
    const Value meta = load(parts[0], {.select = select_paths({"output_norm.weight"})});
    CHECK(named_tensors(meta).size() == 5);  // the others as meta tensors
    CHECK(meta.as_dict().find("blk.0.attn_norm.weight")->as_tensor().device().is_meta());
    const Value sliced =
        load(parts[0], {.slice = [](std::string_view path, const Shape&) -> std::optional<TensorSlice> {
               if (path != "blk.0.attn_norm.weight") return std::nullopt;
               return TensorSlice{.dim = 0, .begin = 8, .end = 16};
             }});
    const Tensor norm = sliced.as_dict().find("blk.0.attn_norm.weight")->as_tensor();
    CHECK(norm.sizes() == Shape{8});
    CHECK(reinterpret_cast<const float*>(norm.raw_data())[0] == 0.5f * 8 + 2);
    CHECK(gguf_tensor_type(sliced, "output_norm.weight") == GgmlType::F32);
  }
  SECTION("a folder (as a URL's) reads the parts beside the one named") {
    std::filesystem::create_directories(dir / "sub");
    for (const std::filesystem::path& part : parts) std::filesystem::copy_file(part, dir / "sub" / part.filename());
    DirectoryFolder folder(dir.path());
    const Checkpoint checkpoint = open(Source::folder(folder, "sub/model-00002-of-00003.gguf"));
    CHECK(checkpoint.sharded());
    CHECK(checkpoint.name() == "folder://models/sub/model-00001-of-00003.gguf");
    CHECK(checkpoint.entries().size() == 5);
    CHECK(checkpoint.metadata().as_dict().find("general.architecture")->as_string() == "llama");
    const Value loaded = checkpoint.load_all();
    const NamedTensors got = named_tensors(loaded);
    const NamedTensors want = named_tensors(single);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(bytes_of(got[i].second) == bytes_of(want[i].second));
    CHECK(gguf_tensor_type(loaded, "blk.1.attn_q.weight") == GgmlType::Q8_0);
    CHECK(bytes_of(checkpoint.tensor("blk.1.attn_q.weight")) == bytes_of(want[3].second));
    std::filesystem::remove(dir / "sub" / "model-00003-of-00003.gguf");
    try {
      (void)open(Source::folder(folder, "sub/model-00001-of-00003.gguf"));
      FAIL("no error");
    } catch (const FormatError& e) {
      CHECK(e.reason().find("part 3 of the split model's 3 is missing") != std::string::npos);
      CHECK(e.path() == "folder://models/sub/model-00003-of-00003.gguf");
    }
  }
  SECTION("load_state_dict and resolve_state_dict see the parts as shards") {
    const StateDictLayout layout = resolve_state_dict(parts[1]);
    CHECK(layout.sharded());
    CHECK(layout.format == FileFormat::gguf);
    CHECK(layout.index == parts[0]);
    CHECK(layout.files == parts);
    CHECK(layout.weight_map.size() == 5);
    CHECK(state_dict_format_name(layout) == "gguf-sharded");
    CHECK(named_tensors(load_state_dict(parts[2])).size() == 5);
  }
  SECTION("split by bytes: a new part before the tensor that would pass the bound") {
    // Data bytes, aligned to 32: q8_0 [4, 32]: 136 -> 160; q8_0 [2, 64]: 136 -> 160; f32 [64]: 256; q8_0 [3, 32]:
    // 102 -> 128; f32 [8]: 32.
    save(single, dir / "bytes.gguf", {.gguf = {.split_max_size = 320}});
    CHECK(read_gguf_header(dir / "bytes-00001-of-00003.gguf").tensors.size() == 2);  // 160 + 160
    CHECK(read_gguf_header(dir / "bytes-00002-of-00003.gguf").tensors.size() == 1);  // 256 (+ 128 would pass)
    CHECK(read_gguf_header(dir / "bytes-00003-of-00003.gguf").tensors.size() == 2);  // 128 + 32
    save(single, dir / "tiny.gguf", {.gguf = {.split_max_size = 1}});  // a tensor larger alone gets its own file
    CHECK(split_keys(dir / "tiny-00005-of-00005.gguf").at("split.no").second == 4);
  }
  SECTION("another alignment is written in every part") {
    save(single, dir / "wide.gguf", {.gguf = {.alignment = 64, .split_max_tensors = 3}});
    CHECK(read_gguf_header(dir / "wide-00002-of-00002.gguf").alignment == 64);
    CHECK(named_tensors(load(dir / "wide-00002-of-00002.gguf")).size() == 5);
  }
  SECTION("a save into another count replaces the set: the old parts removed after the new ones are in place") {
    save(single, dir / "model-00002-of-00003.gguf", {.gguf = {.split_max_tensors = 4}});  // the prefix of a part name
    CHECK(tensorfile_test::names_in(dir.path()) ==
          std::vector<std::string>{"model-00001-of-00002.gguf", "model-00002-of-00002.gguf", "single.gguf"});
    CHECK(named_tensors(load(dir / "model-00002-of-00002.gguf")).size() == 5);
  }
  SECTION("a failing save leaves the old parts as they were, and no temporaries") {
    const std::vector<std::byte> before = read_file(parts[0]);
    Tensor bad(heap_storage(4), DType::Bool, {4});  // GGUF has no bool type
    NamedTensors tensors = named_tensors(single);
    tensors.emplace_back("bad", bad);
    CHECK_THROWS_AS(save_gguf(tensors, dir / "model.gguf", {.gguf = {.split_max_tensors = 1}}), DTypeError);
    CHECK(read_file(parts[0]) == before);
    CHECK(leftover_save_temporaries(dir.path()).empty());
    CHECK(tensorfile_test::names_in(dir.path()).size() == 4);
  }
  SECTION("split options need a path") {
    CHECK_THROWS_AS(save_gguf_to_bytes(single, {.gguf = {.split_max_tensors = 1}}), ArgumentError);
  }
}

/// A part of a hand-made split set: split keys of the given types and values, then one F32 tensor of one element
/// for each name.
struct Part {
  std::vector<std::string> names;
  std::uint32_t no_type = t_u16;
  std::int64_t no = 0;
  std::int64_t count = 2;
  std::int64_t tensors = 2;
  bool with_count = true;

  [[nodiscard]] std::vector<std::byte> bytes() const {
    GgufWriter w;
    w.start(names.size(), with_count ? 3 : 2);
    w.key("split.no", no_type);
    if (no_type == t_u16) {
      w.put(static_cast<std::uint16_t>(no));
    } else {
      w.u32(static_cast<std::uint32_t>(no));
    }
    if (with_count) w.key("split.count", t_u16).put(static_cast<std::uint16_t>(count));
    w.key("split.tensors.count", t_i32).u32(static_cast<std::uint32_t>(tensors));
    std::uint64_t offset = 0;
    for (const std::string& name : names) {
      w.tensor(name, {1}, 0, offset);
      offset += 32;
    }
    w.pad(32);
    for (std::size_t i = 0; i < names.size(); ++i) w.put(static_cast<float>(i)).fill(28);
    return w.bytes;
  }
};

/// The FormatError a load of `path` gives: its text holds `text`, and it names `file`.
void expect_split_error(const std::filesystem::path& path, const std::string& text, const std::filesystem::path& file) {
  for (const bool by_open : {false, true}) {
    try {
      if (by_open) {
        (void)open(path);
      } else {
        (void)load(path);
      }
      FAIL("no error; expected one saying: " << text);
    } catch (const FormatError& e) {
      INFO(e.what());
      CHECK(e.reason().find(text) != std::string::npos);
      CHECK(e.path() == file);
    }
  }
}

TEST_CASE("split GGUF models: hostile sets refused naming the part") {
  ScratchDir dir;
  const auto part = [&](int no, int count) {
    return dir / gguf_split_file_name("m", static_cast<std::uint32_t>(no), static_cast<std::uint32_t>(count));
  };
  SECTION("a good hand-made set loads") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0}.bytes());
    write_file(part(1, 2), Part{.names = {"b"}, .no = 1}.bytes());
    const Value loaded = load(part(1, 2));
    CHECK(named_tensors(loaded).size() == 2);
    CHECK(reinterpret_cast<const float*>(loaded.as_dict().find("b")->as_tensor().raw_data())[0] == 0.0f);
  }
  SECTION("a first part of metadata alone (gguf-split --no-tensor-first-split) loads") {
    write_file(part(0, 3), Part{.names = {}, .no = 0, .count = 3}.bytes());
    write_file(part(1, 3), Part{.names = {"a"}, .no = 1, .count = 3}.bytes());
    write_file(part(2, 3), Part{.names = {"b"}, .no = 2, .count = 3}.bytes());
    CHECK(named_tensors(load(part(2, 3), {.mmap = MapMode::read_only})).size() == 2);
    CHECK(open(part(0, 3)).entries().size() == 2);
  }
  SECTION("a missing part") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0}.bytes());
    expect_split_error(part(0, 2), "part 2 of the split model's 2 is missing", part(1, 2));
  }
  SECTION("a part with another split.count") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0}.bytes());
    write_file(part(1, 2), Part{.names = {"b"}, .no = 1, .count = 3}.bytes());
    expect_split_error(part(0, 2), "split.count is 3; expected 2", part(1, 2));
  }
  SECTION("a part without split.count") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0}.bytes());
    write_file(part(1, 2), Part{.names = {"b"}, .no = 1, .with_count = false}.bytes());
    expect_split_error(part(0, 2), "split.no is given without split.count", part(1, 2));
  }
  SECTION("a tensor in two parts") {
    write_file(part(0, 2), Part{.names = {"a", "b"}, .no = 0, .tensors = 3}.bytes());
    write_file(part(1, 2), Part{.names = {"b"}, .no = 1, .tensors = 3}.bytes());
    expect_split_error(
        part(0, 2), "tensor \"b\" is in two parts of the split model: m-00001-of-00002.gguf and this one", part(1, 2));
  }
  SECTION("a part whose split.no is not its name's") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0}.bytes());
    write_file(part(1, 2), Part{.names = {"b"}, .no = 0}.bytes());
    expect_split_error(part(0, 2), "split.no is 0; expected 1, the part its file name says", part(1, 2));
    expect_split_error(part(1, 2), "the file's name makes it part 2, its split.no part 1", part(1, 2));
  }
  SECTION("a name of another count than split.count") {
    write_file(dir / "m-00001-of-00003.gguf", Part{.names = {"a"}, .no = 0}.bytes());
    expect_split_error(dir / "m-00001-of-00003.gguf", "the file's name says 3 parts, its split.count 2",
                       dir / "m-00001-of-00003.gguf");
  }
  SECTION("a part renamed out of llama.cpp's names") {
    write_file(dir / "renamed.gguf", Part{.names = {"a"}, .no = 0}.bytes());
    expect_split_error(dir / "renamed.gguf", "its name is not llama.cpp's split name", dir / "renamed.gguf");
  }
  SECTION("split.tensors.count that the parts do not hold") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0, .tensors = 7}.bytes());
    write_file(part(1, 2), Part{.names = {"b"}, .no = 1, .tensors = 7}.bytes());
    expect_split_error(part(1, 2), "split.tensors.count is 7; expected 2", part(0, 2));
  }
  SECTION("split keys of other types than llama.cpp writes, and split.no past split.count") {
    write_file(part(0, 2), Part{.names = {"a"}, .no_type = t_u32, .no = 0}.bytes());
    expect_split_error(part(0, 2), "split.no is a uint32; expected a uint16", part(0, 2));
    write_file(part(0, 2), Part{.names = {"a"}, .no = 5}.bytes());
    expect_split_error(part(0, 2), "split.no is 5; expected less than split.count 2", part(0, 2));
  }
  SECTION("a part that is no GGUF file") {
    write_file(part(0, 2), Part{.names = {"a"}, .no = 0}.bytes());
    tensorfile_test::write_text(part(1, 2), "not a gguf file at all, but long enough to be sniffed");
    try {
      (void)load(part(0, 2));
      FAIL("no error");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.path() == part(1, 2));
    }
  }
}

/// A file of `n_tensors` F32 tensors of one element and `n_kv` u8 keys.
std::vector<std::byte> counted(std::size_t n_tensors, std::size_t n_kv) {
  GgufWriter w;
  w.start(n_tensors, n_kv);
  for (std::size_t i = 0; i < n_kv; ++i) w.key("k" + std::to_string(i), t_u8).u8(1);
  for (std::size_t i = 0; i < n_tensors; ++i) w.tensor("t" + std::to_string(i), {1}, 0, 32 * i);
  w.pad(32);
  for (std::size_t i = 0; i < n_tensors; ++i) w.fill(32);
  return w.bytes;
}

/// The LimitError a load of `bytes` with `options` gives holds `text`.
void expect_limit(const std::vector<std::byte>& bytes, const LoadOptions& options, const std::string& text) {
  try {
    (void)load(Source::memory(bytes, "limits.gguf"), options);
    FAIL("no error; expected one saying: " << text);
  } catch (const LimitError& e) {
    INFO(e.what());
    CHECK(e.reason().find(text) != std::string::npos);
    CHECK(e.path() == "limits.gguf");
  }
}

TEST_CASE("LoadOptions::gguf: the header limits, tightened and loosened") {
  const std::vector<std::byte> bytes = counted(3, 4);
  ScratchDir dir;
  write_file(dir / "l.gguf", bytes);
  SECTION("the defaults read the file") { CHECK(named_tensors(load(dir / "l.gguf")).size() == 3); }
  SECTION("max_tensors and max_keys") {
    expect_limit(bytes, {.gguf = {.max_tensors = 2}},
                 "the tensor count 3 is more than the limit of 2 tensors (LoadOptions::gguf.max_tensors)");
    expect_limit(bytes, {.gguf = {.max_keys = 3}},
                 "the metadata count 4 is more than the limit of 3 pairs (LoadOptions::gguf.max_keys)");
    CHECK(
        named_tensors(load(Source::memory(bytes, "limits.gguf"), {.gguf = {.max_tensors = 3, .max_keys = 4}})).size() ==
        3);
    // Every road to the parser takes them: a path, open(), load_gguf(), and a split set's parts.
    CHECK_THROWS_AS(load(dir / "l.gguf", {.gguf = {.max_tensors = 2}}), LimitError);
    CHECK_THROWS_AS(load(dir / "l.gguf", {.mmap = MapMode::read_only, .gguf = {.max_tensors = 2}}), LimitError);
    CHECK_THROWS_AS(open(dir / "l.gguf", {.gguf = {.max_keys = 1}}), LimitError);
    CHECK_THROWS_AS(load_gguf(dir / "l.gguf", {.gguf = {.max_keys = 1}}), LimitError);
    const Value single = load(dir / "l.gguf");
    save(single, dir / "s.gguf", {.gguf = {.split_max_tensors = 2}});
    CHECK_THROWS_AS(load(dir / "s-00001-of-00002.gguf", {.gguf = {.max_keys = 2}}), LimitError);
    CHECK(named_tensors(load(dir / "s-00001-of-00002.gguf", {.gguf = {.max_keys = 7}})).size() == 3);
  }
  SECTION("strings, values and depth") {
    GgufWriter w;
    w.start(0, 2).key("name", t_string).str(std::string(40, 'x'));
    w.key("list", t_array).u32(t_array).u64(1).u32(t_u8).u64(20).fill(20);
    expect_limit(w.bytes, {.gguf = {.max_string_bytes = 39}}, "(LoadOptions::gguf.max_string_bytes)");
    expect_limit(w.bytes, {.gguf = {.max_values = 20}}, "LoadOptions::gguf.max_values");
    expect_limit(w.bytes, {.gguf = {.max_depth = 1}}, "arrays nest deeper than the limit of 1 levels");
    const Value loaded = load(Source::memory(w.bytes, "limits.gguf"),
                              {.gguf = {.max_depth = 2, .max_string_bytes = 40, .max_values = 23}});
    CHECK(loaded.as_dict().attributes().as_dict().find("__metadata__")->as_dict().size() == 2);
  }
  SECTION("huge claimed counts are refused by the file's size, never allocated, however loose the limits") {
    GgufWriter w;
    w.start(std::uint64_t{1} << 40, 0).fill(64);
    const LoadOptions loose{.gguf = {.max_tensors = ~std::uint64_t{0}, .max_keys = ~std::uint64_t{0}}};
    CHECK_THROWS_WITH(load(Source::memory(w.bytes, "huge.gguf"), loose),
                      Catch::Contains("the tensor count 1099511627776 runs past the end of the file"));
    GgufWriter k;
    k.start(0, std::uint64_t{1} << 50).fill(64);
    CHECK_THROWS_WITH(load(Source::memory(k.bytes, "huge.gguf"), loose),
                      Catch::Contains("the metadata count 1125899906842624 runs past the end"));
    GgufWriter a;  // an array claiming 2^40 elements, with values loosened past it
    a.start(0, 1).key("a", t_array).u32(t_u8).u64(std::uint64_t{1} << 40).fill(16);
    CHECK_THROWS_WITH(load(Source::memory(a.bytes, "huge.gguf"), {.gguf = {.max_values = ~std::uint64_t{0}}}),
                      Catch::Contains("runs past the end of the file"));
  }
}

}  // namespace gguf_split_test
