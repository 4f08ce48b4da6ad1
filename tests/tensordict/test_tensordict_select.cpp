// SPDX-License-Identifier: MIT
// Tests of LoadOptions::select and select_drops: which leaves of a tensordict memmap tree a load reads.
#include <tensorfile/formats/select.hpp>
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>
#include <tensorfile/formats/tensordict/value_tree.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile_test::sample;
namespace fs = std::filesystem;

namespace {

/// A copy of a committed sample in `dir` (the samples themselves are never changed).
fs::path copy_sample(const tensorfile_test::ScratchDir& dir, const std::string& name) {
  const fs::path to = dir / name;
  fs::copy(sample("tensordict", name), to, fs::copy_options::recursive);
  return to;
}

/// The leaf at `key` is a meta tensor of `dtype` and `shape`.
void check_meta(const TensorDict& td, const NestedKey& key, DType dtype, const Shape& shape) {
  const Entry* leaf = td.find(key);
  REQUIRE(leaf != nullptr);
  REQUIRE(leaf->is_tensor());
  CHECK(leaf->as_tensor().device().is_meta());
  CHECK(leaf->as_tensor().dtype() == dtype);
  CHECK(leaf->as_tensor().sizes() == shape);
}

/// The leaf at `key` is a host tensor mapping its file, equal to the same leaf of a full load.
void check_read(const TensorDict& td, const TensorDict& full, const NestedKey& key) {
  const Entry* leaf = td.find(key);
  REQUIRE(leaf != nullptr);
  REQUIRE(leaf->is_tensor());
  CHECK(leaf->as_tensor().device().is_cpu());
  CHECK(leaf->as_tensor().storage().kind() == StorageKind::mmap);
  CHECK(leaf->as_tensor().equal(full.get(key).as_tensor()));
}

/// A TensorDict with dotted keys (as a state dict's), a sub-collection with a non-tensor leaf, an empty
/// sub-collection, a nested tensor and a lazy stack, saved to `prefix`.
void save_model_tree(const fs::path& prefix) {
  TensorDict layers({{"layers.0.weight", Tensor::from_values<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                     {"layers.0.bias", Tensor::from_values<float>({7, 8}, {2})},
                     {"layers.1.weight", Tensor::from_values<std::int64_t>({9, 10, 11, 12}, {2, 2})},
                     {"note", non_tensor(Value("kept"))}},
                    {2});
  const std::vector<Tensor> parts{Tensor::from_values<float>({1, 2, 3}, {3}), Tensor::from_values<float>({4}, {1})};
  TensorDict stack = TensorDict::lazy_stack({TensorDict({{"x", Tensor::from_values<std::int16_t>({1, 2}, {2})}}, {2}),
                                             TensorDict({{"x", Tensor::from_values<std::int16_t>({3, 4}, {2})}}, {2})});
  TensorDict td({{"model", std::move(layers)},
                 {"empty", TensorDict(Shape{2})},
                 {"jagged", NestedTensor::from_components(parts)},
                 {"stack", std::move(stack)},
                 {"step", Tensor::from_values<std::int32_t>({5, 6}, {2})}},
                {2});
  save_memmap(td, prefix);
}

/// The paths named_tensors() gives the tensors of the tree at `prefix` (as a torch object tree).
std::vector<std::string> named_paths(const fs::path& prefix) {
  std::vector<LeftOut> left_out;  // pickled non-tensor data: not tensors anyway
  std::vector<std::string> out;
  for (const auto& named : named_tensors(to_value(load_memmap(prefix), {.left_out = &left_out}))) {
    out.push_back(named.first);
  }
  return out;
}

/// A TensorSelect that keeps nothing and records every path it is asked.
TensorSelect record_paths(std::vector<std::string>& asked) {
  return [&asked](std::string_view path) {
    asked.emplace_back(path);
    return false;
  };
}
}  // namespace

TEST_CASE("load_memmap select names leaves by their keys joined by '/'", "[tensordict][select]") {
  std::vector<std::string> asked;
  (void)load_memmap(sample("tensordict", "s01_basic"), {.select = record_paths(asked)});
  CHECK(asked == std::vector<std::string>{"a", "nested/b", "nested/deeper/c"});
  CHECK(asked == named_paths(sample("tensordict", "s01_basic")));  // the library's one naming of tensor paths

  asked.clear();  // relative to the directory loaded
  (void)load_memmap(sample("tensordict", "s01_basic") / "nested", {.select = record_paths(asked)});
  CHECK(asked == std::vector<std::string>{"b", "deeper/c"});

  asked.clear();  // a tensorclass's fields by their own keys (no "_tensordict"); NonTensorData is not asked
  (void)load_memmap(sample("tensordict", "s07_tensorclass"), {.select = record_paths(asked)});
  CHECK(asked == std::vector<std::string>{"tc/x", "y"});
  CHECK(asked == named_paths(sample("tensordict", "s07_tensorclass")));

  const tensorfile_test::ScratchDir dir;
  save_model_tree(dir / "model");
  asked.clear();  // dotted keys stay whole, a lazy stack's children are "0", "1"
  (void)load_memmap(dir / "model", {.select = record_paths(asked)});
  CHECK(asked == std::vector<std::string>{"model/layers.0.weight", "model/layers.0.bias", "model/layers.1.weight",
                                          "jagged", "stack/0/x", "stack/1/x", "step"});
}

TEST_CASE("load_memmap select reads the selected leaves and makes the others meta", "[tensordict][select]") {
  const TensorDict full = load_memmap(sample("tensordict", "s01_basic"));
  const TensorDict td =
      load_memmap(sample("tensordict", "s01_basic"), {.select = select_paths({"a", "nested/deeper/*"})});
  CHECK(td.keys() == full.keys());
  check_read(td, full, {"a"});
  check_read(td, full, {"nested", "deeper", "c"});
  check_meta(td, {"nested", "b"}, DType::BFloat16, {2});
  CHECK(td.batch_size() == full.batch_size());
  CHECK(td["nested"].as_tensordict().keys() == full["nested"].as_tensordict().keys());

  SECTION("nothing selected: every leaf meta, every sub-collection still there") {
    const TensorDict none = load_memmap(sample("tensordict", "s01_basic"), {.select = select_paths({})});
    check_meta(none, {"a"}, DType::Float32, {2, 3});
    check_meta(none, {"nested", "b"}, DType::BFloat16, {2});
    check_meta(none, {"nested", "deeper", "c"}, DType::Int64, {2});
    CHECK(none.device() == Device::cpu());
  }
  SECTION("globs over a saved tree with dotted keys, a nested tensor and a lazy stack") {
    const tensorfile_test::ScratchDir dir;
    save_model_tree(dir / "model");
    const TensorDict all = load_memmap(dir / "model");
    const TensorDict some =
        load_memmap(dir / "model", {.select = select_paths({"model/layers.*.weight", "stack/1/*", "jagged"})});
    check_read(some, all, {"model", "layers.0.weight"});
    check_read(some, all, {"model", "layers.1.weight"});
    check_meta(some, {"model", "layers.0.bias"}, DType::Float32, {2});
    check_read(some, all, {"stack", "1", "x"});
    check_meta(some, {"stack", "0", "x"}, DType::Int16, {2});
    check_meta(some, {"step"}, DType::Int32, {2});
    CHECK(some["model"]["note"].as_non_tensor().data().as_string() == "kept");
    CHECK(some["jagged"].as_nested_tensor().values.equal(all["jagged"].as_nested_tensor().values));
    CHECK(some["jagged"].as_nested_tensor().nested_sizes.equal(all["jagged"].as_nested_tensor().nested_sizes));
    CHECK(some["stack"].as_tensordict().kind() == TensorDictKind::lazy_stack);
    CHECK(some["empty"].as_tensordict().empty());

    const TensorDict unjagged = load_memmap(dir / "model", {.select = select_paths({"step"})});
    const Entry& jagged = unjagged["jagged"];  // as a meta load: a meta tensor of the size table's shape
    REQUIRE(jagged.is_tensor());
    CHECK(jagged.as_tensor().device().is_meta());
    CHECK(jagged.as_tensor().sizes() == Shape{2, 1});
    check_read(unjagged, all, {"step"});
  }
}

TEST_CASE("load_memmap select_drops leaves out unselected leaves and emptied sub-collections", "[tensordict][select]") {
  const TensorDict full = load_memmap(sample("tensordict", "s01_basic"));
  const TensorDict only_a =
      load_memmap(sample("tensordict", "s01_basic"), {.select = select_paths({"a"}), .select_drops = true});
  CHECK(only_a.keys() == std::vector<std::string_view>{"a"});  // nested and nested/deeper emptied: left out
  check_read(only_a, full, {"a"});

  const TensorDict only_b =
      load_memmap(sample("tensordict", "s01_basic"), {.select = select_paths({"nested/b"}), .select_drops = true});
  CHECK(only_b.keys() == std::vector<std::string_view>{"nested"});
  CHECK(only_b["nested"].as_tensordict().keys() == std::vector<std::string_view>{"b"});
  check_read(only_b, full, {"nested", "b"});

  const tensorfile_test::ScratchDir dir;
  save_model_tree(dir / "model");
  const TensorDict all = load_memmap(dir / "model");
  const TensorDict none = load_memmap(dir / "model", {.select = select_paths({}), .select_drops = true});
  // Kept: the non-tensor leaf (and so its collection), the sub-collection empty in the file, the lazy stack's
  // (now empty) children.
  CHECK(none.keys() == std::vector<std::string_view>{"model", "empty", "stack"});
  CHECK(none["model"].as_tensordict().keys() == std::vector<std::string_view>{"note"});
  CHECK(none["empty"].as_tensordict().empty());
  CHECK(none["stack"].as_tensordict().keys() == std::vector<std::string_view>{"0", "1"});
  CHECK(none["stack"]["0"].as_tensordict().empty());
  CHECK(none["stack"].as_tensordict().batch_size() == all["stack"].as_tensordict().batch_size());

  const TensorDict nontensor =
      load_memmap(sample("tensordict", "s05_nontensor"), {.select = select_paths({}), .select_drops = true});
  const TensorDict nontensor_full = load_memmap(sample("tensordict", "s05_nontensor"));
  CHECK(nontensor.keys() == std::vector<std::string_view>{"s", "i", "dct", "obj"});
  CHECK(nontensor["obj"].as_non_tensor() == nontensor_full["obj"].as_non_tensor());  // pickle sidecar kept
  CHECK(nontensor["obj"].as_non_tensor().pickle.has_value());

  const TensorDict tc =
      load_memmap(sample("tensordict", "s07_tensorclass"), {.select = select_paths({"y"}), .select_drops = true});
  CHECK(tc.keys() == std::vector<std::string_view>{"tc", "y"});  // tc keeps its NonTensorData fields
  CHECK(tc["tc"].as_tensordict().kind() == TensorDictKind::tensorclass);
  CHECK(tc["tc"].as_tensordict().keys() == std::vector<std::string_view>{"label", "extra"});
}

TEST_CASE("load_memmap select never opens an unselected leaf's file", "[tensordict][select]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = copy_sample(dir, "s01_basic");
  const TensorDict full = load_memmap(td_dir);
  fs::remove(td_dir / "nested" / "b.memmap");  // any open, stat or map of it would fail

  const TensorDict td = load_memmap(td_dir, {.select = select_paths({"a", "nested/deeper/c"})});
  check_read(td, full, {"a"});
  check_read(td, full, {"nested", "deeper", "c"});
  check_meta(td, {"nested", "b"}, DType::BFloat16, {2});

  const TensorDict dropped = load_memmap(td_dir, {.select = select_paths({"nested/deeper/c"}), .select_drops = true});
  CHECK(dropped.keys() == std::vector<std::string_view>{"nested"});
  CHECK(dropped["nested"].as_tensordict().keys() == std::vector<std::string_view>{"deeper"});

  std::vector<fs::path> skipped;  // never opened, so never missing: skip_missing reports nothing
  (void)load_memmap(td_dir, {.select = select_paths({"a"}), .tensordict = {.skip_missing = true, .skipped = &skipped}});
  CHECK(skipped.empty());

  // A selected leaf's missing file is still an error naming it, or skipped on request.
  REQUIRE_THROWS_WITH(load_memmap(td_dir, {.select = select_paths({"nested/*"})}),
                      "tensorfile: " + (td_dir / "nested" / "b.memmap").string() +
                          ": b: data file is missing; expected at least 4 bytes, got no file");
  (void)load_memmap(td_dir,
                    {.select = select_paths({"nested/b"}), .tensordict = {.skip_missing = true, .skipped = &skipped}});
  CHECK(skipped == std::vector<fs::path>{td_dir / "nested" / "b.memmap"});

  const fs::path model = dir / "model";  // also inside a lazy stack and for a nested tensor's two files
  save_model_tree(model);
  fs::remove(model / "stack" / "0" / "x.memmap");
  fs::remove(model / "jagged.memmap");
  fs::remove(model / "jagged.shape.memmap");
  const TensorDict some = load_memmap(model, {.select = select_paths({"stack/1/x", "model/*"})});
  CHECK(some["stack"]["1"]["x"].as_tensor().storage().kind() == StorageKind::mmap);
  CHECK(some["stack"]["0"]["x"].as_tensor().device().is_meta());
  CHECK(some["jagged"].as_tensor().device().is_meta());
  REQUIRE_THROWS_WITH(load_memmap(model, {.select = select_paths({"stack/*"})}),
                      Catch::Contains((model / "stack" / "0" / "x.memmap").string() + ": x: data file is missing"));
}

TEST_CASE("load_memmap select with out fills only what it reads", "[tensordict][select]") {
  const TensorDict full = load_memmap(sample("tensordict", "s01_basic"));
  TensorDict out({{"a", Tensor::zeros({2, 3}, DType::Int64)},
                  {"nested", TensorDict({{"extra", Tensor::zeros({2}, DType::Bool)}}, {2})}},
                 {2});
  TensorDict* nested_before = &out["nested"].as_tensordict();
  (void)load_memmap(sample("tensordict", "s01_basic"),
                    {.select = select_paths({"nested/b"}), .select_drops = true, .tensordict = {.out = &out}});
  CHECK(out["a"].as_tensor().dtype() == DType::Int64);  // dropped: out's entry as it was
  CHECK(out["a"].as_tensor().device().is_cpu());
  CHECK(&out["nested"].as_tensordict() == nested_before);
  CHECK(out["nested"].as_tensordict().keys() == std::vector<std::string_view>{"extra", "b"});  // deeper emptied
  check_read(out, full, {"nested", "b"});

  (void)load_memmap(sample("tensordict", "s01_basic"),
                    {.select = select_paths({"nested/b"}), .tensordict = {.out = &out}});
  check_meta(out, {"a"}, DType::Float32, {2, 3});  // without select_drops: replaced by a meta tensor
}

TEST_CASE("load_memmap select to cuda copies only the selected leaves", "[tensordict][select]") {
  if (detail::device_copy_hook().copy != nullptr) return;  // built with CUDA: a copy would succeed
  // Without CUDA any copy throws, so a load that copies nothing succeeds: the unselected leaves stay meta.
  const TensorDict td =
      load_memmap(sample("tensordict", "s01_basic"), {.map_location = Device::cuda(0), .select = select_paths({})});
  CHECK(td.device() == Device::cuda(0));
  check_meta(td, {"a"}, DType::Float32, {2, 3});
  check_meta(td, {"nested", "deeper", "c"}, DType::Int64, {2});
  REQUIRE_THROWS_AS(
      load_memmap(sample("tensordict", "s01_basic"), {.map_location = Device::cuda(0), .select = select_paths({"a"})}),
      DeviceError);
}

TEST_CASE("load_memmap select in a lazy view: unselected source leaves stay meta through the op",
          "[tensordict][select]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path view = dir / "view";  // a _SubTensorDict (index 1) of a source saved by save_memmap
  fs::create_directories(view);
  save_memmap(TensorDict({{"a", Tensor::from_values<float>({0, 1, 2, 3, 4, 5}, {2, 3})},
                          {"b", Tensor::from_values<std::int8_t>({7, 9}, {2})}},
                         {2}),
              view / "_source");
  tensorfile_test::write_text(view / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":1})");
  fs::remove(view / "_source" / "a.memmap");

  const TensorDict td = load_memmap(view, {.select = select_paths({"b"})});  // by its own keys, no "_source"
  check_meta(td, {"a"}, DType::Float32, {3});
  REQUIRE(td["b"].as_tensor().sizes() == Shape{});
  CHECK(*td["b"].as_tensor().data<const std::int8_t>() == 9);
  CHECK(load_memmap(view, {.select = select_paths({"b"}), .select_drops = true}).keys() ==
        std::vector<std::string_view>{"b"});
  REQUIRE_THROWS_WITH(load_memmap(view, {.select = select_paths({"a"})}), Catch::Contains("a: data file is missing"));

  if (detail::device_copy_hook().copy != nullptr) return;  // built with CUDA: a copy would succeed
  const TensorDict none = load_memmap(view, {.map_location = Device::cuda(0), .select = select_paths({})});  // no copy
  check_meta(none, {"b"}, DType::Int8, {});
}
