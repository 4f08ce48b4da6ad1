// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/tensordict/value_tree.hpp>: state dicts and checkpoints to TensorDicts and back.
#include <tensorfile/formats/tensordict/value_tree.hpp>

#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>

#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("to_tensordict and to_value turn a state dict into a TensorDict and back", "[tensordict][value_tree]") {
  const Tensor w = Tensor::from_values<float>({1, 2, 3, 4}, {2, 2});
  const Tensor b = Tensor::from_values<float>({5, 6});
  Dict sd;
  sd.ordered = true;
  sd.set("fc.weight", w);
  sd.set("fc.bias", b);
  const Value state_dict(std::move(sd));

  const TensorDict td = to_tensordict(state_dict);
  CHECK(td.size() == 2);
  CHECK(td.get("fc.weight").as_tensor().equal(w));
  CHECK(td.get("fc.bias").as_tensor().storage().shares_owner_with(b.storage()));  // shared, not copied

  const Value back = to_value(td);
  CHECK(back.is_dict());
  CHECK(back["fc.weight"].as_tensor().equal(w));
  CHECK(back["fc.bias"].as_tensor().equal(b));
  CHECK(back.as_dict().items()[0].first.as_string() == "fc.weight");
}

TEST_CASE("to_tensordict nests checkpoints: dicts, lists of tensors, JSON leaves", "[tensordict][value_tree]") {
  const Tensor t = Tensor::from_values<float>({1, 2});
  Dict state;
  state.set(0, Dict{{"exp_avg", t}, {"step", 3}});
  const Value ckpt(Dict{{"model", Dict{{"w", t}}},
                        {"optim", Dict{{"state", std::move(state)}, {"groups", List{Dict{{"lr", 0.1}}}}}},
                        {"tensors", List{t, t}},
                        {"epoch", 7}});
  const TensorDict td = to_tensordict(ckpt, {.file = "ckpt.pt"});
  CHECK(td.get("model").as_tensordict().get("w").as_tensor().equal(t));
  CHECK(
      td.get("optim").as_tensordict().get("state").as_tensordict().get("0").as_tensordict().get("exp_avg").is_tensor());
  CHECK(td.get("optim").as_tensordict().get("groups").is_non_tensor());
  CHECK(td.get("tensors").as_tensordict().get("1").as_tensor().equal(t));
  CHECK(td.get("epoch").as_non_tensor().data().as_int() == 7);

  const Value back = to_value(td);
  CHECK(back.at_path({"optim", "state", 0, "exp_avg"}).as_tensor().equal(t));  // the int key comes back an int
  CHECK(back.at_path({"optim", "groups", 0, "lr"}).as_float() == 0.1);
  CHECK(back["tensors"].is_list());  // and the list a list
  CHECK(back.at_path({"tensors", 1}).as_tensor().equal(t));
  CHECK(back["epoch"].as_int() == 7);
  CHECK(back == ckpt);
}

namespace {

// An Adam checkpoint as torch.save writes it: an OrderedDict state_dict with `_metadata`, int-keyed optimizer
// state, param_groups naming parameters by int, a tuple of tensors.
Value adam_checkpoint() {
  const Tensor w = Tensor::from_values<float>({1, 2, 3, 4}, {2, 2});
  const Tensor b = Tensor::from_values<float>({5, 6});
  Dict model;
  model.ordered = true;
  model.set("fc.weight", w);
  model.set("fc.bias", b);
  model.set_attributes(Value(Dict{{"", Dict{{"version", 1}}}, {"fc", Dict{{"version", 1}}}}));
  Dict state;
  state.set(0, Dict{{"step", Tensor::from_values<float>({3})}, {"exp_avg", w}, {"exp_avg_sq", w}});
  state.set(1, Dict{{"step", Tensor::from_values<float>({3})}, {"exp_avg", b}, {"exp_avg_sq", b}});
  return Value(Dict{{"model", std::move(model)},
                    {"optimizer", Dict{{"state", std::move(state)},
                                       {"param_groups", List{Dict{{"lr", 0.001}, {"params", List{0, 1}}}}}}},
                    {"pair", Value::tuple({w, b})},
                    {"epoch", 7}});
}

}  // namespace

TEST_CASE("a torch -> memmap -> torch round trip keeps int keys, OrderedDicts, attributes, lists and tuples",
          "[tensordict][value_tree]") {
  const Value ckpt = adam_checkpoint();
  const TensorDict td = to_tensordict(ckpt);
  const TensorDict& state = td.get("optimizer").as_tensordict().get("state").as_tensordict();
  CHECK(state.torch_container().int_keys == std::vector<std::string>{"0", "1"});
  CHECK(td.get("model").as_tensordict().torch_container().kind == TorchContainer::Kind::ordered_dict);
  CHECK(td.get("pair").as_tensordict().torch_container().kind == TorchContainer::Kind::tuple);

  const tensorfile_test::ScratchDir dir;
  save_memmap(td, dir / "tree");
  const TensorDict loaded = load_memmap(dir / "tree");
  CHECK(loaded == td);
  const Value back = to_value(loaded);
  CHECK(back == ckpt);
  CHECK(back.at_path({"optimizer", "state", 1, "exp_avg"}).as_tensor().equal(Tensor::from_values<float>({5, 6})));
  CHECK(back["model"].as_dict().ordered);
  CHECK(back["model"].as_dict().attributes() == ckpt["model"].as_dict().attributes());
  CHECK(back["pair"].is_tuple());
}

TEST_CASE("the torch container record is a member tensordict skips, and a bad one is a FormatError",
          "[tensordict][value_tree]") {
  const tensorfile_test::ScratchDir dir;
  save_memmap(to_tensordict(adam_checkpoint()), dir / "tree");
  const std::filesystem::path meta = dir / "tree" / "optimizer" / "state" / "meta.json";
  std::string text = tensorfile_test::read_text(meta);
  // The exact record, closed: an object with neither "type" nor "dtype"+"shape", which tensordict's loader skips.
  const std::string record = "\"_tensorfile_torch_container\": {\"container\": \"dict\", \"int_keys\": [\"0\", \"1\"]}";
  REQUIRE(text.find(record) != std::string::npos);

  text.replace(text.find("\"0\", \"1\""), 3, "\"x\"");
  tensorfile_test::write_text(meta, text);
  REQUIRE_THROWS_AS(load_memmap(dir / "tree"), FormatError);
  REQUIRE_THROWS_WITH(load_memmap(dir / "tree"), Catch::Matchers::Contains("_tensorfile_torch_container") &&
                                                     Catch::Matchers::Contains("decimal int texts"));
}

TEST_CASE("to_tensordict reports keys it turns into text and attributes it leaves out", "[tensordict][value_tree]") {
  const Tensor t = Tensor::from_values<float>({1});
  Dict odd;
  odd.set(2.5, t);
  odd.set(true, t);
  const Value root(Dict{{"odd", std::move(odd)}});
  REQUIRE_THROWS_WITH(to_tensordict(root, {.file = "x.pt"}),
                      "tensorfile: x.pt: odd/2.5: the float key 2.5 becomes the str key '2.5'; expected a tree that "
                      "converts unchanged (or a left_out list to collect changes)");
  std::vector<LeftOut> changes;
  const TensorDict td = to_tensordict(root, {.left_out = &changes});
  REQUIRE(changes.size() == 2);
  CHECK(changes[1].path == "odd/True");
  CHECK(changes[1].what == "the bool key True becomes the str key 'True'");
  CHECK(td.get("odd").as_tensordict().contains("True"));

  Dict with_code;
  with_code.set("w", t);
  detail::ValueAccess::attributes(with_code) = Value(Dict{{"t", t}});
  changes.clear();
  (void)to_tensordict(Value(std::move(with_code)), {.left_out = &changes});
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].what == "the dict's attributes are left out (they are not JSON values)");
}

TEST_CASE("save_memmap then load_memmap gives back an equal TensorDict, with or without a device",
          "[tensordict][value_tree]") {
  const tensorfile_test::ScratchDir dir;
  const TensorDict no_device({{"a", Tensor::from_values<float>({1, 2})}}, {2});
  save_memmap(no_device, dir / "none");
  CHECK(load_memmap(dir / "none") == no_device);
  const TensorDict on_cpu({{"a", Tensor::from_values<float>({1, 2})}}, {2}, Device::cpu());
  save_memmap(on_cpu, dir / "cpu");
  CHECK(load_memmap(dir / "cpu") == on_cpu);

  TensorDict clash;
  clash.set("_tensorfile_torch_container", Tensor::from_values<float>({1}));
  REQUIRE_THROWS_AS(save_memmap(clash, dir / "clash"), ArgumentError);
}

TEST_CASE("to_tensordict refuses what has no tensordict form, naming the file and the path",
          "[tensordict][value_tree]") {
  REQUIRE_THROWS_WITH(to_tensordict(Value(3), {.file = "x.pt"}),
                      "tensorfile: x.pt: the root is of type int; expected a dict, or a list of tensors (a tensordict "
                      "tree is a dict of tensors)");
  REQUIRE_THROWS_WITH(to_tensordict(Value(Dict{{"a/b", Dict{{"c", Bytes{}}}}}), {.file = "x.pt"}),
                      "tensorfile: x.pt: a/b/c: a value of type bytes has no tensordict form; expected tensors, "
                      "containers of them, or JSON values (None, bool, int, float, str, lists, str-keyed dicts)");
  Dict clash;
  clash.set(1, Tensor::from_values<float>({1}));
  clash.set("1", Tensor::from_values<float>({2}));
  REQUIRE_THROWS_AS(to_tensordict(Value(std::move(clash))), ArgumentError);
}

TEST_CASE("to_value lists pickled non-tensor data it leaves out, or refuses it", "[tensordict][value_tree]") {
  NonTensorData pickled;
  pickled.pickle = Bytes{{std::byte{0x80}}};
  TensorDict td;
  td.set("w", Tensor::from_values<float>({1}));
  td.set("opaque", std::move(pickled));

  std::vector<LeftOut> left_out;
  const Value v = to_value(td, {.left_out = &left_out});
  CHECK(v.size() == 1);
  REQUIRE(left_out.size() == 1);
  CHECK(left_out[0].path == "opaque");
  CHECK(left_out[0].what == "pickled NonTensorData");
  REQUIRE_THROWS_AS(to_value(td), UnsupportedError);
}
