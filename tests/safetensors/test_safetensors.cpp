// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/safetensors/*.hpp>: the reference's samples read in every mode and rebuilt
// byte for byte, the reference layout, round trips, map_location, and what saving refuses.
#include <tensorfile/formats/safetensors/header.hpp>
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/formats/safetensors/save.hpp>
#include <tensorfile/tensorfile.hpp>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "page_cache.hpp"
#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::byte_span;
using tensorfile_test::file_bytes;
using tensorfile_test::write_file;

using tensorfile_test::le64;

namespace {

std::filesystem::path safetensors_sample(const std::string& name) {
  return tensorfile_test::data_dir() / "safetensors" / (name + ".safetensors");
}

template <class T>
Tensor six(std::initializer_list<T> values) {
  return Tensor::from_values<T>(values, {6});
}

/// The tensors of the samples, from DUMPS.txt: the values -3..2 in each element kind, by tensor name.
Tensor sample_tensor(char name) {
  switch (name) {
    case 'B': return six<std::uint8_t>({253, 254, 255, 0, 1, 2});
    case 'H': return six<std::uint16_t>({65533, 65534, 65535, 0, 1, 2});
    case 'I': return six<std::uint32_t>({4294967293u, 4294967294u, 4294967295u, 0, 1, 2});
    case 'b': return six<std::int8_t>({-3, -2, -1, 0, 1, 2});
    case 'd': return six<double>({-3, -2, -1, 0, 1, 2});
    case 'e': return six<Half>({Half(-3.f), Half(-2.f), Half(-1.f), Half(0.f), Half(1.f), Half(2.f)});
    case 'f': return six<float>({-3, -2, -1, 0, 1, 2});
    case 'h': return six<std::int16_t>({-3, -2, -1, 0, 1, 2});
    default: return six<std::int32_t>({-3, -2, -1, 0, 1, 2});
  }
}

const std::string all_names = "BHIbdefhi";

std::vector<std::string> sample_names() {
  std::vector<std::string> out;
  for (const char c : all_names) out.emplace_back(1, c);
  out.emplace_back("overall");
  return out;
}

NamedTensors sample_tensors(const std::string& sample_name) {
  NamedTensors out;
  for (const char c : sample_name == "overall" ? all_names : sample_name)
    out.emplace_back(std::string(1, c), sample_tensor(c));
  return out;
}

void check_sample(const Value& loaded, const std::string& name) {
  REQUIRE(loaded.is_dict());
  const Dict& dict = loaded.as_dict();
  CHECK(dict.ordered);
  const auto expected = sample_tensors(name);
  REQUIRE(dict.size() == expected.size());
  std::size_t i = 0;
  for (const auto& [key, value] : dict) {
    CHECK(key.as_string() == expected[i].first);
    CHECK(value.as_tensor().equal(expected[i].second));
    ++i;
  }
  const Dict* metadata = safetensors_metadata(loaded);
  REQUIRE(metadata != nullptr);
  REQUIRE(metadata->size() == 1);
  CHECK(metadata->find(std::string_view("test"))->as_string() == "a");
}

std::string to_string(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

TEST_CASE("load_safetensors reads every reference sample in every mode", "[safetensors][load]") {
  const tensorfile_test::ScratchDir scratch;
  for (const std::string& name : sample_names()) {
    INFO(name);
    const auto path = safetensors_sample(name);
    const std::string bytes = file_bytes(path);
    check_sample(load_safetensors(path), name);
    check_sample(load_safetensors(path, {.mmap = MapMode::read_only}), name);
    check_sample(load_safetensors(path, {.mmap = MapMode::copy_on_write}), name);
    check_sample(load_safetensors(byte_span(bytes)), name);
    check_sample(load_safetensors(byte_span(bytes), {.mmap = MapMode::read_only}), name);
    std::istringstream in(bytes);
    check_sample(load_safetensors(in), name);
    const Value meta = load_safetensors(path, {.map_location = "meta"});
    for (const auto& [key, value] : meta.as_dict()) {
      CHECK(value.as_tensor().device().is_meta());
      CHECK(value.as_tensor().sizes() == Shape{6});
    }
    CHECK(safetensors_metadata(meta) != nullptr);
    CHECK(detect_format(path) == FileFormat::safetensors);
    CHECK(detect_format(byte_span(bytes)) == FileFormat::safetensors);
  }
}

TEST_CASE("Heap loads share one buffer, mmap loads are views of one mapping, shared writes reach the file",
          "[safetensors][load][mmap]") {
  const tensorfile_test::ScratchDir scratch;
  const auto copy = scratch / "overall.safetensors";
  std::filesystem::copy_file(safetensors_sample("overall"), copy);
  const Value heap = load_safetensors(copy);
  CHECK(heap.as_dict().find(std::string_view("B"))->as_tensor().storage().kind() == StorageKind::heap);
  const Value mapped = load_safetensors(copy, {.mmap = MapMode::read_only});
  const Tensor b = mapped.as_dict().find(std::string_view("b"))->as_tensor();
  CHECK(b.storage().kind() == StorageKind::mmap);
  CHECK_FALSE(b.is_writable());
  CHECK(b.storage().shares_owner_with(mapped.as_dict().find(std::string_view("d"))->as_tensor().storage()));
  {
    const Value shared = load_safetensors(copy, {.mmap = MapMode::shared});
    shared.as_dict().find(std::string_view("b"))->as_tensor().data<std::int8_t>()[0] = 42;
  }
  CHECK(load_safetensors(copy).as_dict().find(std::string_view("b"))->as_tensor().data<const std::int8_t>()[0] == 42);
  // Heap loads give every tensor aligned memory, even in this unsorted file where "I" sits at data byte 18.
  for (const auto& [key, value] : heap.as_dict()) {
    const Tensor& t = value.as_tensor();
    CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % t.element_size() == 0);
  }
}

TEST_CASE("Heap loads of a path read the data by several threads, around the page cache when asked",
          "[safetensors][load][direct]") {
  const tensorfile_test::ScratchDir scratch;
  Dict dict;
  for (int i = 0; i < 3; ++i) {  // 3 x 1.2 MB, with an odd-sized int8 tensor between: data larger than 2 MiB
    Tensor t(heap_storage(300000 * 4), DType::Float32, {300000});
    for (std::int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = static_cast<float>(i * 1000000 + k);
    dict.set(Value("w" + std::to_string(i)), Value(t));
    Tensor odd(heap_storage(3), DType::Int8, {3});
    dict.set(Value("b" + std::to_string(i)), Value(odd));
  }
  const Value expected(dict);
  const auto path = scratch / "big.safetensors";
  save_safetensors(expected, path);
  const bool direct_possible = tensorfile_test::direct_reads_possible(path);
  if (!direct_possible)
    WARN("the file system of " << scratch.path() << " refuses O_DIRECT: only the fallback is checked");
  for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
    INFO(threads << " threads");
    tensorfile_test::evict_from_page_cache(path);
    // Saved sorted (by dtype, then name): compared by name.
    const auto same_tensors = [&](const Value& loaded) {
      REQUIRE(loaded.as_dict().size() == expected.as_dict().size());
      for (const auto& [key, value] : expected.as_dict()) CHECK(loaded[key.as_string()] == value);
    };
    const Value loaded = load_safetensors(path, {.threads = threads, .direct_reads = DirectReads::always});
    same_tensors(loaded);
    if (direct_possible) CHECK(tensorfile_test::cached_fraction_of(path) < 0.1);
    for (const auto& [key, value] : loaded.as_dict()) {
      const Tensor& t = value.as_tensor();
      CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % t.element_size() == 0);
    }
    tensorfile_test::evict_from_page_cache(path);
    same_tensors(load_safetensors(path, {.threads = threads, .direct_reads = DirectReads::never}));
    CHECK(tensorfile_test::cached_fraction_of(path) > 0.9);
  }
}

TEST_CASE("save_safetensors rebuilds every reference sample byte for byte", "[safetensors][save]") {
  const tensorfile_test::ScratchDir scratch;
  for (const std::string& name : sample_names()) {
    INFO(name);
    const std::string expected = file_bytes(safetensors_sample(name));
    // The samples come from an older writer: unpadded headers, tensors laid out by name.
    const SaveOptions as_written{.safetensors = {.metadata = {{"test", "a"}}, .sort = false, .pad_header = false}};
    CHECK(to_string(save_safetensors_to_bytes(sample_tensors(name), as_written)) == expected);
    save_safetensors(sample_tensors(name), scratch / "out.safetensors", as_written);
    CHECK(file_bytes(scratch / "out.safetensors") == expected);
    std::ostringstream out;
    save_safetensors(sample_tensors(name), out, as_written);
    CHECK(out.str() == expected);
    // A load and a save of the Value keep the metadata and, unsorted and unpadded, every byte.
    CHECK(to_string(save_safetensors_to_bytes(load_safetensors(safetensors_sample(name)),
                                              {.safetensors = {.sort = false, .pad_header = false}})) == expected);
  }
}

TEST_CASE("save_safetensors writes the current reference layout: sorted by dtype rank then name, padded",
          "[safetensors][save]") {
  // The reference sorts by its dtype list in descending order (U64 I64 F64 C64 F32 U32 I32 BF16 F16 U16 I16
  // ... I8 U8 BOOL), then by name; it pads the header with spaces to a multiple of 8.
  std::string header = R"({"__metadata__":{"test":"a"},)"
                       R"("d":{"dtype":"F64","shape":[6],"data_offsets":[0,48]},)"
                       R"("f":{"dtype":"F32","shape":[6],"data_offsets":[48,72]},)"
                       R"("I":{"dtype":"U32","shape":[6],"data_offsets":[72,96]},)"
                       R"("i":{"dtype":"I32","shape":[6],"data_offsets":[96,120]},)"
                       R"("e":{"dtype":"F16","shape":[6],"data_offsets":[120,132]},)"
                       R"("H":{"dtype":"U16","shape":[6],"data_offsets":[132,144]},)"
                       R"("h":{"dtype":"I16","shape":[6],"data_offsets":[144,156]},)"
                       R"("b":{"dtype":"I8","shape":[6],"data_offsets":[156,162]},)"
                       R"("B":{"dtype":"U8","shape":[6],"data_offsets":[162,168]}})";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string expected = le64(header.size()) + header;
  for (const char c : std::string("dfIieHhbB")) {
    const Tensor t = sample_tensor(c);
    expected.append(reinterpret_cast<const char*>(t.raw_data()), t.nbytes());
  }
  const std::string got =
      to_string(save_safetensors_to_bytes(sample_tensors("overall"), {.safetensors = {.metadata = {{"test", "a"}}}}));
  CHECK(got == expected);
  CHECK(got.size() % 8 == 0);
  // Every tensor lands aligned in a mapping of the padded file.
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(got.data()),
                                     reinterpret_cast<const std::byte*>(got.data()) + got.size());
  const SafetensorsHeader parsed = parse_safetensors_header(bytes, bytes.size());
  for (const auto& info : parsed.tensors) CHECK((parsed.data_offset + info.begin) % element_size(info.dtype) == 0);
  // Same dtype rank: by name, bytewise ("B" < "a" < "b").
  const auto same = save_safetensors_to_bytes(
      NamedTensors{{"b", sample_tensor('f')}, {"B", sample_tensor('f')}, {"a", sample_tensor('f')}});
  const SafetensorsHeader ordered = parse_safetensors_header(same, same.size());
  CHECK(ordered.tensors[0].name == "B");
  CHECK(ordered.tensors[1].name == "a");
  CHECK(ordered.tensors[2].name == "b");
  CHECK_FALSE(ordered.metadata.has_value());
  CHECK(to_string(same).substr(8, 6) == "{\"B\":{");
}

TEST_CASE("Round trips keep names, dtypes, shapes, values and metadata", "[safetensors][save][load]") {
  const tensorfile_test::ScratchDir scratch;
  const Tensor matrix = Tensor::from_values<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  NamedTensors tensors{
      {"weight", matrix},
      {"transposed", matrix.clone().transpose(0, 1)},  // written contiguous
      {"empty", Tensor::zeros({0, 4}, DType::BFloat16)},
      {"scalar", Tensor::from_values<std::int64_t>({7}, {})},
      {"flags", Tensor::from_values<bool>({true, false, true}, {3})},
      {"f8", Tensor::zeros({5}, DType::Float8_e4m3fn)},
      {"e8m0", Tensor::zeros({3}, DType::Float8_e8m0fnu)},
      {"c64", Tensor::zeros({2}, DType::Complex64)},
      {"name with \"quotes\", \\ and \xC3\xA9\n", Tensor::zeros({1}, DType::UInt64)},
  };
  const auto path = scratch / "model.safetensors";
  save_safetensors(tensors, path, {.safetensors = {.metadata = {{"format", "pt"}, {"note", "\x01 and \"quoted\""}}}});
  for (const auto& options : {LoadOptions{}, LoadOptions{.mmap = MapMode::read_only}}) {
    const Value back = load_safetensors(path, options);
    REQUIRE(back.as_dict().size() == tensors.size());
    for (const auto& [name, tensor] : tensors) {
      INFO(name);
      const Value* got = back.as_dict().find(std::string_view(name));
      REQUIRE(got != nullptr);
      CHECK(got->as_tensor().equal(tensor));
      CHECK(got->as_tensor().is_contiguous());
    }
    const Dict* metadata = safetensors_metadata(back);
    REQUIRE(metadata != nullptr);
    CHECK(metadata->find(std::string_view("note"))->as_string() == "\x01 and \"quoted\"");
    // named_tensors and save_torch() (torch) see only the tensors.
    CHECK(named_tensors(back).size() == tensors.size());
    const Value torch_back = load_torch(std::span<const std::byte>(save_torch_to_bytes(back)));
    CHECK(named_tensors(torch_back).size() == tensors.size());
  }
  // A state dict loaded from torch saves as safetensors.
  const Value state = make_state_dict({{"a.weight", matrix}, {"a.bias", Tensor::zeros({3}, DType::Float32)}});
  const Value again = load_safetensors(std::span<const std::byte>(save_safetensors_to_bytes(state)));
  CHECK(again.as_dict().find(std::string_view("a.weight"))->as_tensor().equal(matrix));
  CHECK(safetensors_metadata(again) == nullptr);
}

TEST_CASE("read_safetensors_header reads the header only", "[safetensors][header]") {
  const SafetensorsHeader header = read_safetensors_header(safetensors_sample("overall"));
  CHECK(header.header_bytes == 526);
  CHECK(header.data_offset == 534);
  CHECK(header.data_bytes == 168);
  REQUIRE(header.tensors.size() == 9);
  CHECK(header.tensors[4].name == "d");
  CHECK(header.tensors[4].dtype == DType::Float64);
  CHECK(header.tensors[4].begin == 48);
  CHECK(header.tensors[4].end == 96);
  REQUIRE(header.metadata.has_value());
  CHECK(header.metadata->at(0) == std::pair<std::string, std::string>("test", "a"));
}

TEST_CASE("map_location takes load_torch()'s forms", "[safetensors][load][map_location]") {
  const auto path = safetensors_sample("overall");
  SECTION("a callable sees each tensor's CPU bytes with the tag \"cpu\"") {
    std::vector<std::string> tags;
    std::size_t bytes = 0;
    const Value v = load_safetensors(
        path,
        {.map_location = MapLocation::Function([&](const Storage& cpu, std::string_view tag) -> std::optional<Storage> {
           tags.emplace_back(tag);
           bytes += cpu.size_bytes();
           return std::nullopt;
         })});
    CHECK(tags == std::vector<std::string>(9, "cpu"));
    CHECK(bytes == 168);
    check_sample(v, "overall");
  }
  SECTION("a tag map to meta") {
    const Value v = load_safetensors(path, {.map_location = std::map<std::string, std::string>{{"cpu", "meta"}}});
    CHECK(v.as_dict().find(std::string_view("d"))->as_tensor().device().is_meta());
  }
  SECTION("meta never reads the data: a file whose data cannot be read still loads") {
    const Value v = load_safetensors(path, {.map_location = "meta", .mmap = MapMode::read_only});
    CHECK(v.as_dict().size() == 9);
  }
  SECTION("CUDA goes through Tensor::to, which names the missing support") {
    if (detail::device_copy_hook().copy == nullptr) {
      CHECK_THROWS_AS(load_safetensors(path, {.map_location = "cuda:0"}), DeviceError);
    }
  }
}

TEST_CASE("save_safetensors refuses what the format cannot hold", "[safetensors][save]") {
  const Tensor base = Tensor::from_values<float>({1, 2, 3, 4}, {4});
  SECTION("tensors sharing memory, as the reference's save_file does") {
    CHECK_THROWS_WITH(save_safetensors_to_bytes(NamedTensors{{"a", base}, {"b", base.narrow(0, 1, 2)}}),
                      "tensorfile: tensors \"a\" and \"b\" share memory; safetensors stores each tensor's bytes once "
                      "per name, so save clones (tensor.clone()) or drop the duplicate names");
    // Disjoint views of one storage are fine.
    CHECK_NOTHROW(save_safetensors_to_bytes(NamedTensors{{"a", base.narrow(0, 0, 2)}, {"b", base.narrow(0, 2, 2)}}));
    CHECK_NOTHROW(save_safetensors_to_bytes(NamedTensors{{"a", base}, {"b", base.clone()}}));
  }
  SECTION("a dtype without a safetensors name") {
    CHECK_THROWS_WITH(save_safetensors_to_bytes(NamedTensors{{"z", Tensor::zeros({2}, DType::Complex128)}}),
                      "tensorfile: tensor \"z\" has dtype complex128, which safetensors has no name for");
  }
  SECTION("a name given twice") {
    CHECK_THROWS_WITH(save_safetensors_to_bytes(NamedTensors{{"a", base}, {"a", base.clone()}}),
                      "tensorfile: tensor name \"a\" is given twice");
  }
  SECTION("a name that is not UTF-8") {
    CHECK_THROWS_AS(save_safetensors_to_bytes(NamedTensors{{"\xff", base}}), ArgumentError);
  }
  SECTION("a failed save leaves the old file and no temporary") {
    const tensorfile_test::ScratchDir scratch;
    write_file(scratch / "x.safetensors", "old");
    CHECK_THROWS_AS(save_safetensors(NamedTensors{{"a", base}, {"a", base}}, scratch / "x.safetensors"), ArgumentError);
    CHECK(file_bytes(scratch / "x.safetensors") == "old");
    CHECK(std::distance(std::filesystem::directory_iterator(scratch.path()), {}) == 1);
  }
}

TEST_CASE("detect_format tells safetensors apart from pickles and zips", "[safetensors][format]") {
  // Header lengths whose low byte is a pickle opening (0x80 PROTO, '(' MARK, 0x8a LONG1).
  for (const std::uint64_t n : {0x80u, 0x28u, 0x8au}) {
    const std::string bytes = le64(n) + "{";
    CHECK(detect_format(byte_span(bytes)) == FileFormat::safetensors);
  }
  CHECK(detect_format(byte_span(std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20", 10))) ==
        FileFormat::torch_legacy);
  CHECK(detect_format(byte_span(le64(100'000'001) + "{")) == FileFormat::unknown);
  CHECK(detect_format(byte_span(le64(2) + "[")) == FileFormat::unknown);
  CHECK(format_name(FileFormat::safetensors) == "safetensors");
  CHECK_THROWS_WITH(load_torch(byte_span(file_bytes(safetensors_sample("f")))),
                    "tensorfile: this is a safetensors file; read it with load_safetensors");
}
