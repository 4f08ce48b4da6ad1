// SPDX-License-Identifier: MIT
// Tests of <tensorfile/state_dict.hpp> and <tensorfile/formats/safetensors/save_sharded.hpp>: format
// detection, sharded checkpoints written by torch and by hand over the reference's files, every refusal,
// and save_safetensors_sharded's files and index against the Hugging Face layout.
#include <tensorfile/detail/posix/byte_sink.hpp>
#include <tensorfile/formats/safetensors/save_sharded.hpp>
#include <tensorfile/state_dict.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "dict_helpers.hpp"
#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::file_bytes;
using tensorfile_test::keys_of;
using tensorfile_test::write_file;

namespace {

std::filesystem::path data(const std::string& relative) { return tensorfile_test::data_dir() / relative; }

/// A copy of the torch_bin fixture in `dir`, with `index` as its index text when given.
std::filesystem::path copy_torch_bin(const std::filesystem::path& dir, const std::string& index = "") {
  std::filesystem::copy(data("sharded/torch_bin"), dir / "ckpt");
  if (!index.empty()) write_file(dir / "ckpt" / "pytorch_model.bin.index.json", index);
  return dir / "ckpt";
}

std::string index_text(const std::vector<std::pair<std::string, std::string>>& map) {
  std::string out = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
  for (std::size_t i = 0; i < map.size(); ++i) {
    out += (i ? ", \"" : "\"") + map[i].first + "\": \"" + map[i].second + "\"";
  }
  return out + "}}";
}

const std::string s1 = "pytorch_model-00001-of-00003.bin";
const std::string s2 = "pytorch_model-00002-of-00003.bin";
const std::string s3 = "pytorch_model-00003-of-00003.bin";

/// The fixture's index as written, minus nothing: every name with its shard.
std::vector<std::pair<std::string, std::string>> fixture_map() {
  return {{"0.bias", s1},         {"0.weight", s1},      {"1.bias", s2},   {"1.num_batches_tracked", s3},
          {"1.running_mean", s2}, {"1.running_var", s2}, {"1.weight", s1}, {"2.weight", s3},
          {"extra.bf16", s3}};
}

/// Runs `f`, which must throw E with `text` in its message.
template <class E, class F>
void expect_error(F&& f, const std::string& text) {
  std::string message = "(nothing thrown)";
  try {
    f();
  } catch (const E& error) {
    message = error.what();
  }
  INFO("message: " << message << "\nexpected in it: " << text);
  CHECK(message.find(text) != std::string::npos);
}

}  // namespace

TEST_CASE("resolve_state_dict tells layouts from their contents") {
  SECTION("single files and trees") {
    CHECK(resolve_state_dict(data("torch/state_dict_linear_bn.pt")).format == FileFormat::torch_zip);
    CHECK(resolve_state_dict(data("torch/legacy_format.pt")).format == FileFormat::torch_legacy);
    CHECK(resolve_state_dict(data("safetensors/overall.safetensors")).format == FileFormat::safetensors);
    const StateDictLayout tree = resolve_state_dict(data("tensordict/s01_basic"));
    CHECK(tree.format == FileFormat::tensordict);
    CHECK_FALSE(tree.sharded());
    CHECK(state_dict_format_name(tree) == "tensordict");
  }
  SECTION("an index file, and a directory holding one") {
    for (const auto& path : {data("sharded/torch_bin/pytorch_model.bin.index.json"), data("sharded/torch_bin")}) {
      const StateDictLayout layout = resolve_state_dict(path);
      CHECK(layout.sharded());
      CHECK(layout.format == FileFormat::torch_zip);
      CHECK(state_dict_format_name(layout) == "torch-zip-sharded");
      CHECK(layout.total_size == 140u);
      REQUIRE(layout.files.size() == 3);
      CHECK(layout.files[0].filename() == s1);
      CHECK(layout.files[1].filename() == s2);
      CHECK(layout.files[2].filename() == s3);
      REQUIRE(layout.weight_map.size() == 9);
      CHECK(layout.weight_map[3] == std::pair<std::string, std::size_t>{"1.num_batches_tracked", 2});
    }
    const StateDictLayout samples = resolve_state_dict(data("safetensors/samples.safetensors.index.json"));
    CHECK(state_dict_format_name(samples) == "safetensors-sharded");
  }
  SECTION("a directory with nothing known in it") {
    tensorfile_test::ScratchDir dir;
    expect_error<FormatError>([&] { (void)resolve_state_dict(dir.path()); },
                              "the directory holds no meta.json, model.safetensors(.index.json)");
  }
}

TEST_CASE("load_state_dict merges torch-written pytorch_model.bin shards") {
  const Value full = load_torch(data("sharded/torch_bin_full.pt"));
  for (const std::size_t threads : {1u, 2u, 8u}) {
    for (const bool mapped : {false, true}) {
      LoadOptions options{.threads = threads};
      if (mapped) options.mmap = MapMode::read_only;
      const Value merged = load_state_dict(data("sharded/torch_bin"), options);
      std::vector<std::string> expected_order;
      for (const auto& [name, file] : fixture_map()) expected_order.push_back(name);
      CHECK(keys_of(merged) == expected_order);  // the index's order
      for (const auto& [key, tensor] : full.as_dict()) {
        const Value* got = merged.as_dict().find(std::string_view(key.as_string()));
        REQUIRE(got != nullptr);
        CHECK(got->as_tensor().dtype() == tensor.as_tensor().dtype());
        CHECK(got->as_tensor().equal(tensor.as_tensor()));
      }
    }
  }
  SECTION("map_location reaches every shard") {
    const Value meta = load_state_dict(data("sharded/torch_bin"), {.map_location = "meta"});
    for (const auto& [key, tensor] : meta.as_dict()) CHECK(tensor.as_tensor().device().is_meta());
  }
  SECTION("a CUDA map_location without CUDA is a DeviceError, torch and safetensors shards alike") {
    // This build has no CUDA copy installed (or no device): each shard's placement refuses clearly. With a
    // device the tensors would land there; the streaming CUDA loader is not used for shards (see the report).
    for (const auto& path : {data("sharded/torch_bin"), data("safetensors/samples.safetensors.index.json")}) {
      INFO(path);
      try {
        const Value placed = load_state_dict(path, {.map_location = "cuda:0"});
        for (const auto& [key, tensor] : placed.as_dict()) CHECK(tensor.as_tensor().device().is_cuda());
      } catch (const DeviceError& e) {
        CHECK(std::string(e.what()).find("CUDA") != std::string::npos);
      }
    }
  }
}

TEST_CASE("load_state_dict reads safetensors shards, single files and trees") {
  const Value merged = load_state_dict(data("safetensors/samples.safetensors.index.json"));
  CHECK(keys_of(merged) == std::vector<std::string>{"B", "H", "f"});
  for (const std::string name : {"B", "H", "f"}) {
    const Value one = load_safetensors(data("safetensors/" + name + ".safetensors"));
    CHECK(merged[name].as_tensor().equal(one[name].as_tensor()));
  }
  CHECK(keys_of(load_state_dict(data("safetensors/overall.safetensors"))).size() == 9);
  CHECK(load_state_dict(data("torch/state_dict_linear_bn.pt")).is_dict());
  const Value tree = load_state_dict(data("tensordict/s01_basic"));
  CHECK(tree.as_dict().find(std::string_view("a")) != nullptr);
}

TEST_CASE("load_state_dict refuses broken or hostile indexes") {
  tensorfile_test::ScratchDir dir;
  auto map = fixture_map();
  SECTION("a name the shard lacks") {
    map.emplace_back("ghost", s2);
    const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                              s2 + ": ghost: tensor \"ghost\" is listed in the index but missing from "
                                   "its shard");
  }
  SECTION("a shard holding a name the index does not list") {
    map.erase(map.begin());  // 0.bias, in shard 1
    const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                              "the shard holds tensor \"0.bias\", which the index does not list");
    const Value kept = load_state_dict(ckpt, {.sharded = {.allow_unlisted = true}});
    CHECK(kept.as_dict().find(std::string_view("0.bias")) == nullptr);
    CHECK(kept.as_dict().size() == 8);
  }
  SECTION("two shards claiming one name") {
    map[0].second = s2;  // 0.bias is in shard 1, the index says shard 2
    const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                              "tensor \"0.bias\" is in two shards: the index lists it in " + s2);
  }
  SECTION("a name listed twice") {
    map.emplace_back("0.bias", s1);
    const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); }, "tensor \"0.bias\" is listed twice in weight_map");
  }
  SECTION("one shard spelled several ways is one shard, loaded once") {
    const Value expected = load_state_dict(data("sharded/torch_bin"));
    const std::vector<std::string> spellings{"./", ".//", "././"};
    std::size_t n = 0;
    for (auto& [name, file] : map) {
      if (file == s1) file = spellings[n++ % spellings.size()] + s1;
    }
    REQUIRE(n >= 2);
    const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
    const StateDictLayout layout = resolve_state_dict(ckpt);
    CHECK(layout.files.size() == 3);
    CHECK(layout.files[0].filename() == s1);
    CHECK(load_state_dict(ckpt) == expected);
  }
  SECTION("shards that leave the directory") {
    for (const std::string& bad :
         std::vector<std::string>{"/etc/passwd", "../torch_bin/" + s1, "sub/../../x.bin", ""}) {
      map[0].second = bad;
      const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
      expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                                "shard \"" + bad + "\" leaves the index's directory");
      std::filesystem::remove_all(ckpt);
    }
    std::filesystem::create_directory(dir / "outside");
    std::filesystem::copy_file(data("sharded/torch_bin") / s1, dir / "outside" / s1);
    map[0].second = "link.bin";
    const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
    std::filesystem::create_symlink(dir / "outside" / s1, ckpt / "link.bin");
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                              "shard \"link.bin\" leads out of the index's directory");
    std::filesystem::remove(ckpt / "link.bin");
    std::filesystem::create_symlink(s1, ckpt / "link.bin");  // a link that stays inside is followed
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); }, "is in two shards");
  }
  SECTION("broken JSON, no weight_map, a shard that is not a dict, a missing shard") {
    auto ckpt = copy_torch_bin(dir.path(), "{\"weight_map\": {\"a\": 1}}");
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); }, "invalid JSON; expected a string");
    write_file(ckpt / "pytorch_model.bin.index.json", "{\"metadata\": {}}");
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); }, "the index has no \"weight_map\"");
    std::filesystem::copy_file(data("torch/t_float32_2x3.pt"), ckpt / "tensor.pt");
    write_file(ckpt / "pytorch_model.bin.index.json", index_text({{"x", "tensor.pt"}}));
    expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                              "the shard holds a Tensor; expected a dict of name -> tensor");
    write_file(ckpt / "pytorch_model.bin.index.json", index_text({{"x", "gone.bin"}}));
    expect_error<IoError>([&] { (void)load_state_dict(ckpt); }, "gone.bin: cannot open the shard");
  }
}

TEST_CASE("save_safetensors_sharded writes the Hugging Face layout") {
  tensorfile_test::ScratchDir dir;
  NamedTensors tensors;
  for (int i = 0; i < 5; ++i) {
    tensors.emplace_back("layer." + std::to_string(i) + ".weight",
                         Tensor::from_values<float>({float(i), float(i) + 0.5f, -1.f, 2.f}, {2, 2}));  // 16 bytes
  }
  tensors.emplace_back("big", Tensor::from_values<double>({1, 2, 3, 4, 5}, {5}));  // 40 bytes: alone
  tensors.emplace_back("tail", Tensor::from_values<std::int8_t>({7}, {1}));
  const SafetensorsShards written = save_safetensors_sharded(tensors, dir / "out", {.sharded = {.max_shard_size = 32}});
  // Shards by huggingface_hub's rule: [l0 l1] [l2 l3] [big] [l4 tail] (big is placed when met).
  REQUIRE(written.files.size() == 4);
  CHECK(written.files[0].filename() == "model-00001-of-00004.safetensors");
  CHECK(written.files[3].filename() == "model-00004-of-00004.safetensors");
  CHECK(written.total_size == 5 * 16 + 40 + 1);
  CHECK(written.index == dir / "out" / "model.safetensors.index.json");
  CHECK(file_bytes(written.index) ==
        "{\n  \"metadata\": {\n    \"total_size\": 121\n  },\n  \"weight_map\": {\n"
        "    \"big\": \"model-00003-of-00004.safetensors\",\n"
        "    \"layer.0.weight\": \"model-00001-of-00004.safetensors\",\n"
        "    \"layer.1.weight\": \"model-00001-of-00004.safetensors\",\n"
        "    \"layer.2.weight\": \"model-00002-of-00004.safetensors\",\n"
        "    \"layer.3.weight\": \"model-00002-of-00004.safetensors\",\n"
        "    \"layer.4.weight\": \"model-00004-of-00004.safetensors\",\n"
        "    \"tail\": \"model-00004-of-00004.safetensors\"\n  }\n}\n");
  const Value shard = load_safetensors(written.files[2]);
  CHECK(keys_of(shard) == std::vector<std::string>{"big"});
  REQUIRE(safetensors_metadata(shard) != nullptr);
  CHECK(safetensors_metadata(shard)->find(std::string_view("format"))->as_string() == "pt");

  const Value back = load_state_dict(dir / "out");
  CHECK(back.as_dict().size() == tensors.size());
  for (const auto& [name, tensor] : tensors) CHECK(back[name].as_tensor().equal(tensor));

  SECTION("one shard is model.safetensors without an index") {
    const SafetensorsShards one = save_safetensors_sharded(tensors, dir / "one");
    CHECK(one.files == std::vector<std::filesystem::path>{dir / "one" / "model.safetensors"});
    CHECK(one.index.empty());
    CHECK_FALSE(std::filesystem::exists(dir / "one" / "model.safetensors.index.json"));
    CHECK(load_state_dict(dir / "one").as_dict().size() == tensors.size());
  }
  SECTION("refusals come before any file is written") {
    NamedTensors shared = tensors;
    shared.emplace_back("alias", tensors[0].second.reshape({4}));
    expect_error<ArgumentError>([&] { (void)save_safetensors_sharded(shared, dir / "shared"); }, "share memory");
    NamedTensors twice = tensors;
    twice.push_back(tensors[0]);
    expect_error<ArgumentError>([&] { (void)save_safetensors_sharded(twice, dir / "twice"); }, "is given twice");
    expect_error<ArgumentError>(
        [&] { (void)save_safetensors_sharded(tensors, dir / "zero", {.sharded = {.max_shard_size = 0}}); },
        "max_shard_size is 0");
    CHECK_FALSE(std::filesystem::exists(dir / "shared"));
    CHECK_FALSE(std::filesystem::exists(dir / "twice"));
  }
  SECTION("a failure in a later shard leaves the earlier checkpoint intact") {
    // The old checkpoint's four files, byte for byte; the new save fails in its last shard (a name that is
    // not UTF-8, met only when that shard is written) after three shards are complete.
    std::vector<std::string> before;
    for (const auto& file : written.files) before.push_back(file_bytes(file));
    before.push_back(file_bytes(written.index));
    NamedTensors changed;
    for (const auto& [name, tensor] : tensors) changed.emplace_back(name, tensor.clone());
    for (auto& [name, tensor] : changed) std::fill_n(tensor.storage().mutable_data(), tensor.nbytes(), std::byte{9});
    changed.back().first = "tail\xff";
    expect_error<ArgumentError>(
        [&] { (void)save_safetensors_sharded(changed, dir / "out", {.sharded = {.max_shard_size = 32}}); },
        "not valid UTF-8");
    const auto check_untouched = [&] {
      for (std::size_t i = 0; i < written.files.size(); ++i) CHECK(file_bytes(written.files[i]) == before[i]);
      CHECK(file_bytes(written.index) == before.back());
      for (const auto& entry : std::filesystem::directory_iterator(dir / "out")) {
        CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
      }
    };
    check_untouched();
    // A directory where the index goes: refused before anything is written or renamed.
    std::filesystem::create_directory(dir / "dir_index");
    std::filesystem::create_directory(dir / "dir_index" / "model.safetensors.index.json");
    expect_error<IoError>(
        [&] { (void)save_safetensors_sharded(tensors, dir / "dir_index", {.sharded = {.max_shard_size = 32}}); },
        "cannot replace a directory with a file");
    CHECK(std::distance(std::filesystem::directory_iterator(dir / "dir_index"), {}) == 1);
  }
}

TEST_CASE("save_safetensors_sharded never writes over a live index's shards") {
  tensorfile_test::ScratchDir dir;
  const auto tensors_of = [](float value) {
    NamedTensors tensors;
    for (int i = 0; i < 3; ++i) tensors.emplace_back("t" + std::to_string(i), Tensor::from_values<float>({value}, {1}));
    return tensors;
  };
  const auto names_in = [&] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "out")) names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  const SaveOptions options{.sync = false, .sharded = {.max_shard_size = 4}};
  const SafetensorsShards first = save_safetensors_sharded(tensors_of(1), dir / "out", options);
  CHECK(first.files[0].filename() == "model-00001-of-00003.safetensors");
  const SafetensorsShards second = save_safetensors_sharded(tensors_of(2), dir / "out", options);
  CHECK(second.files[0].filename() == "model-00001-of-00003-g1.safetensors");  // the plain names were live
  CHECK(names_in() == std::vector<std::string>{"model-00001-of-00003-g1.safetensors",
                                               "model-00002-of-00003-g1.safetensors",
                                               "model-00003-of-00003-g1.safetensors", "model.safetensors.index.json"});
  CHECK(load_state_dict(dir / "out")["t2"].as_tensor().to_vector<float>() == std::vector<float>{2});
  const SafetensorsShards third = save_safetensors_sharded(tensors_of(3), dir / "out", options);
  CHECK(third.files[2].filename() == "model-00003-of-00003.safetensors");  // free again
  CHECK(names_in().size() == 4);

  SECTION("one shard over an index: model.safetensors alone") {
    const SafetensorsShards one = save_safetensors_sharded(tensors_of(4), dir / "out", {.sync = false});
    CHECK(one.index.empty());
    CHECK(names_in() == std::vector<std::string>{"model.safetensors"});
    CHECK(load_state_dict(dir / "out")["t0"].as_tensor().to_vector<float>() == std::vector<float>{4});
  }
  SECTION("a stale single file beside an index is never read, and the next save removes it") {
    save_safetensors(tensors_of(9), dir / "out" / "model.safetensors");
    CHECK(resolve_state_dict(dir / "out").sharded());
    CHECK(load_state_dict(dir / "out")["t0"].as_tensor().to_vector<float>() == std::vector<float>{3});
    (void)save_safetensors_sharded(tensors_of(5), dir / "out", options);
    CHECK_FALSE(std::filesystem::exists(dir / "out" / "model.safetensors"));
  }
  SECTION("safetensors come before a torch index in a directory") {
    std::filesystem::copy(data("sharded/torch_bin"), dir / "both");
    (void)save_safetensors_sharded(tensors_of(6), dir / "both", {.sync = false});
    const StateDictLayout layout = resolve_state_dict(dir / "both");
    CHECK_FALSE(layout.sharded());
    CHECK(layout.files.front().filename() == "model.safetensors");
    CHECK(keys_of(load_state_dict(dir / "both")) == std::vector<std::string>{"t0", "t1", "t2"});
  }
}

TEST_CASE("save_safetensors_sharded refuses shard names the directory cannot hold instead of searching forever") {
  // Review: a 230-byte prefix made every name ENAMETOOLONG, which counted as taken, so the search for free names
  // never ended (holding the directory's lock).
  tensorfile_test::ScratchDir dir;
  NamedTensors tensors;
  for (int i = 0; i < 2; ++i)
    tensors.emplace_back("t" + std::to_string(i), Tensor::from_values<float>({1, 2, 3, 4}, {4}));
  const SaveOptions options{.sync = false, .sharded = {.max_shard_size = 16, .prefix = std::string(230, 'p')}};
  CHECK_THROWS_AS(save_safetensors_sharded(tensors, dir / "out", options), IoError);
  CHECK_THROWS_WITH(save_safetensors_sharded(tensors, dir / "out", options),
                    Catch::Matchers::Contains("cannot check the name"));
}

TEST_CASE("leftover_save_temporaries lists what killed saves left, the next save removes its own") {
  tensorfile_test::ScratchDir dir;
  const std::filesystem::path out = dir / "out";
  std::filesystem::create_directory(out);
  write_file(out / ".model-00001-of-00002.safetensors.tmp-0123456789abcdef", "partial");
  write_file(out / ".model.safetensors.index.json.tmp-fedcba9876543210", "{");
  write_file(out / ".weights.pt.tmp-00000000000000ff", "partial");  // a torch save's, another name
  write_file(out / ".model.safetensors.tmp-xyz", "not one: no 16 hex digits");
  std::filesystem::create_directory(out / ".dir.tmp-0123456789abcdef");  // not a file
  CHECK(leftover_save_temporaries(out) ==
        std::vector<std::filesystem::path>{out / ".model-00001-of-00002.safetensors.tmp-0123456789abcdef",
                                           out / ".model.safetensors.index.json.tmp-fedcba9876543210",
                                           out / ".weights.pt.tmp-00000000000000ff"});
  NamedTensors tensors{{"a", Tensor::from_values<float>({1}, {1})}, {"b", Tensor::from_values<float>({2}, {1})}};
  (void)save_safetensors_sharded(tensors, out, {.sync = false, .sharded = {.max_shard_size = 4}});
  CHECK(leftover_save_temporaries(out) == std::vector<std::filesystem::path>{out / ".weights.pt.tmp-00000000000000ff"});
  expect_error<IoError>([&] { (void)leftover_save_temporaries(dir / "missing"); }, "cannot open the directory");
}

TEST_CASE("a sharded save leaves a live single-file save's temporary alone") {
  // Review: save_safetensors(dir / "model.safetensors") takes no directory lock, and a sharded save beside it
  // removed its temporary as a killed save's leftover, so its commit failed.
  tensorfile_test::ScratchDir dir;
  std::filesystem::create_directories(dir / "out");
  detail::AtomicFileSink writer(dir / "out" / "model.safetensors", false);
  writer.write(std::as_bytes(std::span(std::string_view("in progress"))));
  const std::vector<std::filesystem::path> live = leftover_save_temporaries(dir / "out");
  REQUIRE(live.size() == 1);
  NamedTensors tensors;
  for (int i = 0; i < 2; ++i) tensors.emplace_back("t" + std::to_string(i), Tensor::from_values<float>({1, 2}, {2}));
  (void)save_safetensors_sharded(tensors, dir / "out", {.sync = false, .sharded = {.max_shard_size = 8}});
  CHECK(std::filesystem::exists(live[0]));  // still there, still its writer's
  writer.commit();
  CHECK(std::filesystem::file_size(dir / "out" / "model.safetensors") == 11);
}

TEST_CASE("load_state_dict reports every disagreement of an index with its shards") {
  tensorfile_test::ScratchDir dir;
  auto map = fixture_map();
  map.erase(map.begin());         // 0.bias, in shard 1: present but unlisted
  map.emplace_back("ghost", s2);  // listed but missing
  const auto ckpt = copy_torch_bin(dir.path(), index_text(map));
  expect_error<FormatError>([&] { (void)load_state_dict(ckpt); },
                            "pytorch_model.bin.index.json: the index and its shards disagree on 2 tensors; expected "
                            "every listed tensor in its shard and no other: (1) " +
                                (ckpt / s1).string() + ": 0.bias: the shard holds tensor \"0.bias\"");
  expect_error<FormatError>(
      [&] { (void)load_state_dict(ckpt); },
      "(2) " + (ckpt / s2).string() + ": ghost: tensor \"ghost\" is listed in the index but missing from its shard");
  std::vector<FormatError> mismatches;
  const Value agreed =
      load_state_dict(ckpt, {.map_location = "meta", .strict = false, .sharded = {.mismatches = &mismatches}});
  REQUIRE(mismatches.size() == 2);
  CHECK(mismatches[0].member() == "0.bias");
  CHECK(mismatches[0].path() == ckpt / s1);
  CHECK(mismatches[1].member() == "ghost");
  CHECK(mismatches[1].path() == ckpt / s2);
  CHECK(agreed.as_dict().size() == 8);  // the index's names less the ghost
}
