// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/tensordict/value_tree.hpp>: state dicts and checkpoints to TensorDicts and back.
#include <tensorfile/formats/tensordict/value_tree.hpp>

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
  CHECK(back.at_path({"optim", "state", "0", "exp_avg"}).as_tensor().equal(t));  // int keys come back as text
  CHECK(back.at_path({"optim", "groups", 0, "lr"}).as_float() == 0.1);
  CHECK(back.at_path({"tensors", "1"}).as_tensor().equal(t));
  CHECK(back["epoch"].as_int() == 7);
}

TEST_CASE("to_tensordict refuses what has no tensordict form, naming the file and the path",
          "[tensordict][value_tree]") {
  REQUIRE_THROWS_WITH(to_tensordict(Value(3), {.file = "x.pt"}),
                      "tensorfile: x.pt: the root is of type int; expected a dict, or a list of tensors (a tensordict "
                      "tree is a dict of tensors)");
  REQUIRE_THROWS_WITH(to_tensordict(Value(Dict{{"a/b", Dict{{"c", Bytes{}}}}}), {.file = "x.pt"}),
                      "tensorfile: x.pt: /a~1b/c: a value of type bytes has no tensordict form; expected tensors, "
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
  CHECK(left_out[0].path == "/opaque");
  CHECK(left_out[0].what == "pickled NonTensorData");
  REQUIRE_THROWS_AS(to_value(td), UnsupportedError);
}
