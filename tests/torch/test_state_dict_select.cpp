// SPDX-License-Identifier: MIT
// Tests of LoadOptions::select: each file's loader gets it, and with an index a shard holding no
// selected tensor is never read (with select_drops never opened: the tests delete it before loading).
#include <tensorfile/formats/numpy/npz.hpp>
#include <tensorfile/formats/safetensors/save_sharded.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/state_dict.hpp>

#include <string>
#include <vector>

#include "dict_helpers.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile_test::keys_of;
using tensorfile_test::tensor_at;

namespace {

/// Six tensors of distinct values, 64 bytes each: with max_shard_size 128, two per shard, three shards.
NamedTensors six_tensors() {
  NamedTensors out;
  for (int i = 0; i < 6; ++i) {
    Tensor t = Tensor::zeros({16}, i % 2 == 0 ? DType::Float32 : DType::Int32);
    for (int k = 0; k < 16; ++k) {
      if (i % 2 == 0) {
        t.data<float>()[k] = static_cast<float>(100 * i + k);
      } else {
        t.data<std::int32_t>()[k] = 100 * i + k;
      }
    }
    out.emplace_back("layers." + std::to_string(i) + ".weight", t);
  }
  return out;
}

}  // namespace

TEST_CASE("load_state_dict select over safetensors shards: unselected shards unread, or header-only meta",
          "[state_dict][select]") {
  tensorfile_test::ScratchDir dir;
  const NamedTensors tensors = six_tensors();
  const SafetensorsShards shards =
      save_safetensors_sharded(tensors, dir.path(), {.sync = false, .sharded = {.max_shard_size = 128}});
  REQUIRE(shards.files.size() == 3);
  const TensorSelect select = select_paths({"layers.1.*"});  // in the first shard

  // without drops: every name, the unselected ones meta (the other shards' from their headers alone)
  for (const std::size_t threads : {1u, 4u}) {
    const Value part = load_state_dict(dir.path(), {.select = select, .threads = threads});
    REQUIRE(part.as_dict().size() == tensors.size());
    for (const auto& [name, tensor] : tensors) {
      INFO(name);
      const Tensor& got = tensor_at(part, name);
      CHECK(got.dtype() == tensor.dtype());
      CHECK(got.sizes() == tensor.sizes());
      if (name == "layers.1.weight") {
        CHECK(got.equal(tensor));
      } else {
        CHECK(got.device().is_meta());
      }
    }
  }
  // with drops: the shards holding nothing selected are never opened, so deleting them changes nothing
  std::filesystem::remove(shards.files[1]);
  std::filesystem::remove(shards.files[2]);
  const Value dropped =
      load_state_dict(dir.path(), {.select = select_paths({"layers.0.*", "layers.1.weight"}), .select_drops = true});
  CHECK(keys_of(dropped) == std::vector<std::string>{"layers.0.weight", "layers.1.weight"});
  CHECK(tensor_at(dropped, "layers.0.weight").equal(tensors[0].second));
  // a selected tensor in a deleted shard: the shard is needed, and its absence is an error
  CHECK_THROWS_AS(load_state_dict(dir.path(), {.select = select_paths({"layers.5.weight"}), .select_drops = true}),
                  IoError);
  // without drops the deleted shards' headers are needed for the meta tensors
  CHECK_THROWS_AS(load_state_dict(dir.path(), {.select = select}), IoError);
}

TEST_CASE("load_state_dict select over torch .bin shards and single files", "[state_dict][select]") {
  const auto fixture = tensorfile_test::data_dir() / "sharded";
  const Value full = load_torch(fixture / "torch_bin_full.pt");
  tensorfile_test::ScratchDir dir;
  std::filesystem::copy(fixture / "torch_bin", dir / "ckpt");
  // the index lists 2.weight in shard 3, with 1.num_batches_tracked and extra.bf16
  const Value part = load_state_dict(dir / "ckpt", {.select = select_paths({"2.weight"})});
  CHECK(keys_of(part) == std::vector<std::string>{"1.num_batches_tracked", "2.weight", "extra.bf16"});
  CHECK(tensor_at(part, "2.weight").equal(full.as_dict().find(std::string_view("2.weight"))->as_tensor()));
  CHECK(tensor_at(part, "extra.bf16").device().is_meta());
  CHECK(tensor_at(part, "extra.bf16").dtype() == DType::BFloat16);

  std::filesystem::remove(dir / "ckpt" / "pytorch_model-00001-of-00003.bin");
  std::filesystem::remove(dir / "ckpt" / "pytorch_model-00002-of-00003.bin");
  const Value dropped = load_state_dict(dir / "ckpt", {.select = select_paths({"2.*"}), .select_drops = true});
  CHECK(keys_of(dropped) == std::vector<std::string>{"2.weight"});

  // a single torch file and a single .npz take select too
  const Value one =
      load_state_dict(fixture / "torch_bin_full.pt", {.select = select_paths({"0.*"}), .select_drops = true});
  CHECK(keys_of(one) == std::vector<std::string>{"0.weight", "0.bias"});
  const Value npz = load_state_dict(tensorfile_test::data_dir() / "numpy" / "stored.npz",
                                    {.select = [](std::string_view) { return false; }, .select_drops = true});
  CHECK(npz.as_dict().size() == 0);
  // a tensordict tree: its leaves by their keys joined by "/", unselected ones meta or left out
  const auto tree = tensorfile_test::data_dir() / "tensordict" / "s01_basic";
  const Value whole = load_state_dict(tree);
  const Value meta_rest = load_state_dict(tree, {.select = select_paths({"nested/*"})});
  CHECK(meta_rest["a"].as_tensor().device().is_meta());
  CHECK(meta_rest["a"].as_tensor().sizes() == whole["a"].as_tensor().sizes());
  CHECK(meta_rest["nested"] == whole["nested"]);
  const Value nested_only = load_state_dict(tree, {.select = select_paths({"nested/*"}), .select_drops = true});
  CHECK(keys_of(nested_only) == std::vector<std::string>{"nested"});
}
