// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/tensordict/tensordict.hpp>: building, reading, iterating and comparing TensorDicts.
#include <tensorfile/formats/tensordict/tensordict.hpp>

#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {
Tensor floats(std::initializer_list<float> values, Shape shape = {}) {
  return Tensor::from_values<float>(values, shape);
}
}  // namespace

TEST_CASE("TensorDict is built in C++ with nested TensorDicts and non-tensor data", "[tensordict]") {
  TensorDict td(
      {{"a", floats({0, 1, 2, 3, 4, 5}, {2, 3})},
       {"nested", TensorDict({{"b", floats({1, 1})}, {"deeper", TensorDict({{"c", floats({7, 8})}}, {2})}}, {2})},
       {"s", non_tensor("a string!")}},
      {2});
  CHECK(td.size() == 3);
  CHECK(td.batch_size() == Shape{2});
  CHECK_FALSE(td.device().has_value());
  CHECK(td.kind() == TensorDictKind::plain);
  CHECK(td.type_name() == tensordict_type);
  CHECK(td.class_name() == "TensorDict");
  CHECK(td.keys() == std::vector<std::string_view>{"a", "nested", "s"});

  SECTION("access by key and by nested key") {
    CHECK(td["a"].as_tensor().sizes() == Shape{2, 3});
    CHECK(td["nested"]["b"].as_tensor().data<const float>()[1] == 1.0f);
  }
  SECTION("nested keys") {
    CHECK(td.get({"nested", "deeper", "c"}).as_tensor().equal(floats({7, 8})));
    CHECK(td["nested"]["deeper"]["c"] == td.get({"nested", "deeper", "c"}));
    const NestedKey key{"nested", "b"};
    CHECK(td.get(std::span<const std::string>(key)).is_tensor());
    CHECK(td.contains({"nested", "deeper"}));
    CHECK_FALSE(td.contains({"nested", "zzz"}));
    CHECK(td.find({"a", "b"}) == nullptr);  // "a" is a tensor
    CHECK(td["s"].as_non_tensor().data().as_string() == "a string!");
  }
  SECTION("missing keys and wrong kinds throw ArgumentError with clear messages") {
    REQUIRE_THROWS_WITH(td["zzz"],
                        "tensorfile: key \"zzz\" is not in the TensorDict; expected one of \"a\", \"nested\", \"s\"");
    REQUIRE_THROWS_WITH(td.get({"nested", "x"}),
                        "tensorfile: key \"x\" is not in the TensorDict; expected one of \"b\", \"deeper\"");
    REQUIRE_THROWS_WITH(td.get({"a", "x"}),
                        "tensorfile: key \"a\" holds a Tensor; expected a TensorDict to look up \"x\" in");
    REQUIRE_THROWS_WITH(td["a"].as_tensordict(), "tensorfile: entry is a Tensor; expected a TensorDict");
    REQUIRE_THROWS_WITH(td["a"]["x"], "tensorfile: entry is a Tensor; expected a TensorDict");
    REQUIRE_THROWS_AS(td["nested"]["b"].as_tensor().item<float>(), ArgumentError);
  }
}

TEST_CASE("TensorDict::set inserts, replaces in place and checks the batch size", "[tensordict]") {
  TensorDict td(Shape{2});
  td.set("x", floats({1, 2}));
  td.set("y", floats({3, 4}));
  td.set("x", floats({5, 6}));  // replaced, keeps its position
  CHECK(td.keys() == std::vector<std::string_view>{"x", "y"});
  CHECK(td["x"].as_tensor().equal(floats({5, 6})));

  SECTION("nested set creates missing TensorDicts with the parent's batch size") {
    td.set({"n", "m", "z"}, floats({1, 2, 3, 4}, {2, 2}));
    CHECK(td["n"].as_tensordict().batch_size() == Shape{2});
    CHECK(td.get({"n", "m", "z"}).as_tensor().sizes() == Shape{2, 2});
    REQUIRE_THROWS_WITH(td.set({"x", "q"}, floats({1, 2})),
                        "tensorfile: key \"x\" holds a Tensor; expected a TensorDict to set \"q\" in");
  }
  SECTION("leading dimensions must match") {
    REQUIRE_THROWS_WITH(td.set("bad", floats({1, 2, 3})),
                        "tensorfile: key \"bad\": tensor of shape (3,) does not match the batch size; expected leading "
                        "dimensions (2,), got (3,)");
    REQUIRE_THROWS_WITH(td.set("sub", TensorDict(Shape{3})),
                        "tensorfile: key \"sub\": TensorDict of batch size (3,) does not match the batch size; "
                        "expected leading dimensions (2,), got (3,)");
    CHECK_NOTHROW(td.set("sub", TensorDict(Shape{2, 5})));
    CHECK_NOTHROW(td.set("text", non_tensor(Value(List{Value(1), Value(2)}))));
    REQUIRE_THROWS_AS(td.set_batch_size({3}), ArgumentError);
    td.set_batch_size({});
    CHECK(td.batch_size().empty());
  }
  SECTION("erase") {
    CHECK(td.erase("x"));
    CHECK_FALSE(td.erase("x"));
    CHECK(td.keys() == std::vector<std::string_view>{"y"});
  }
}

TEST_CASE("TensorDict keeps insertion order and finds keys among many", "[tensordict]") {
  TensorDict td;
  for (int i = 0; i < 1000; ++i) td.set("k" + std::to_string(999 - i), Tensor::zeros({1}, DType::Int64));
  CHECK(td.size() == 1000);
  CHECK(td.items().front().key == "k999");
  CHECK(td.items().back().key == "k0");
  for (int i = 0; i < 1000; ++i) CHECK(td.contains("k" + std::to_string(i)));
  CHECK_FALSE(td.contains("k1000"));
  CHECK(td.erase("k500"));
  CHECK_FALSE(td.contains("k500"));
  CHECK(td.contains("k499"));
  CHECK(td.size() == 999);
  td.set("", floats({1}));  // the empty key is a key
  CHECK(td.contains(""));
  CHECK(td.items().back().key.empty());
}

TEST_CASE("TensorDict keeps order and lookups while erasing down to a few keys", "[tensordict]") {
  TensorDict td;
  for (int i = 0; i < 20; ++i) td.set("k" + std::to_string(i), Tensor::zeros({1}, DType::Int64));
  for (int i = 0; i < 20; i += 2) CHECK(td.erase("k" + std::to_string(i)));  // 10 left, then 9, ... a scan
  CHECK(td.size() == 10);
  for (int i = 0; i < 20; ++i) CHECK(td.contains("k" + std::to_string(i)) == (i % 2 == 1));
  for (std::size_t i = 0; i < td.size(); ++i) CHECK(td.items()[i].key == "k" + std::to_string(2 * i + 1));
  td.set("k3", floats({7}));  // replacing keeps the position
  CHECK(td.items()[1].key == "k3");
  CHECK(td.get("k3").as_tensor().numel() == 1);
  for (int i = 20; i < 30; ++i) td.set("k" + std::to_string(i), Tensor::zeros({1}, DType::Int64));
  CHECK(td.items().back().key == "k29");
  CHECK(td.contains("k25"));
  CHECK_FALSE(td.contains("k4"));
}

TEST_CASE("TensorDict iterates over leaves with their nested keys", "[tensordict]") {
  const TensorDict td({{"a", floats({1})},
                       {"n", TensorDict({{"b", floats({2})}, {"m", TensorDict({{"c", non_tensor(3)}})}})},
                       {"d", floats({4})}});
  const auto leaves = td.leaves();
  REQUIRE(leaves.size() == 4);
  CHECK(leaves[0].key == NestedKey{"a"});
  CHECK(leaves[1].key == NestedKey{"n", "b"});
  CHECK(leaves[2].key == NestedKey{"n", "m", "c"});
  CHECK(leaves[2].value->as_non_tensor().data().as_int() == 3);
  CHECK(leaves[3].key == NestedKey{"d"});
  int count = 0;
  td.for_each_leaf([&](const NestedKey& key, const Entry& entry) {
    CHECK(entry.is_leaf());
    CHECK_FALSE(key.empty());
    ++count;
  });
  CHECK(count == 4);
}

TEST_CASE("TensorDict equality: keys in any order, values, batch size, kind", "[tensordict]") {
  const TensorDict a({{"x", floats({1, 2})}, {"y", non_tensor("s")}}, {2});
  const TensorDict b({{"y", non_tensor("s")}, {"x", floats({1, 2})}}, {2});
  CHECK(a == b);
  CHECK_FALSE(a == TensorDict({{"x", floats({1, 3})}, {"y", non_tensor("s")}}, {2}));
  CHECK_FALSE(a == TensorDict({{"x", floats({1, 2})}, {"y", non_tensor("t")}}, {2}));
  CHECK_FALSE(a == TensorDict({{"x", floats({1, 2})}, {"y", non_tensor("s")}}));
  CHECK_FALSE(a == TensorDict({{"x", floats({1, 2})}}, {2}));
  TensorDict c = a;
  c.set_device(Device::cpu());
  CHECK_FALSE(a == c);
  CHECK_FALSE(a == TensorDict::tensorclass("<class '__main__.TC'>", a));
  SECTION("copies are deep for the tree, shallow for tensors; clone copies tensors") {
    TensorDict copy = a;
    copy["x"].as_tensor().data<float>()[0] = 9;
    CHECK(a["x"].as_tensor().data<const float>()[0] == 9);  // shared storage
    copy.set("z", floats({0, 0}));
    CHECK_FALSE(a.contains("z"));
    TensorDict cloned = a.clone();
    cloned["x"].as_tensor().data<float>()[0] = 1;
    CHECK(a["x"].as_tensor().data<const float>()[0] == 9);
  }
}

TEST_CASE("tensorclasses, lazy stacks and non-tensor stacks", "[tensordict]") {
  SECTION("tensorclass") {
    Dict attrs;
    attrs.set(Value("extra"), Value(None{}));
    const TensorDict tc = TensorDict::tensorclass("<class '__main__.MyTC'>",
                                                  TensorDict({{"x", floats({1, 1, 1, 1}, {2, 2})}}, {2}), attrs);
    CHECK(tc.kind() == TensorDictKind::tensorclass);
    CHECK(tc.class_name() == "MyTC");
    CHECK(tc.class_fields().size() == 1);
    CHECK(tc["x"].as_tensor().sizes() == Shape{2, 2});
  }
  SECTION("lazy stack of heterogeneous TensorDicts") {
    std::vector<Entry> items;
    items.emplace_back(TensorDict({{"a", floats({1})}}));
    items.emplace_back(TensorDict({{"a", floats({1, 2})}}));
    const TensorDict stack = TensorDict::lazy_stack(std::move(items), 0);
    CHECK(stack.kind() == TensorDictKind::lazy_stack);
    CHECK(stack.class_name() == "LazyStackedTensorDict");
    CHECK(stack.batch_size() == Shape{2});
    CHECK(stack.keys() == std::vector<std::string_view>{"0", "1"});
    CHECK(stack.get({"1", "a"}).as_tensor().sizes() == Shape{2});
    std::vector<Entry> more;
    more.emplace_back(TensorDict(Shape{3}));
    CHECK(TensorDict::lazy_stack(std::move(more), -1).batch_size() == Shape{3, 1});
  }
  SECTION("non-tensor stack") {
    const NonTensorData stack = non_tensor_stack(List{Value("s0"), Value("s1")});
    CHECK(stack.is_stack());
    CHECK(stack.stack_dim() == 0);
    CHECK(stack.data().size() == 2);
    CHECK_FALSE(non_tensor(1).is_stack());
    NonTensorData pickled;
    pickled.type_name = non_tensor_stack_type;
    pickled.fields.set(Value("data"), Value("pickle.pkl"));
    CHECK(pickled.data().is_none());
  }
}

TEST_CASE("NestedTensor packs components and views them back", "[tensordict]") {
  const std::vector<Tensor> parts{floats({1, 2, 3, 4, 5, 6}, {2, 3}), floats({7, 8, 9}, {1, 3})};
  const NestedTensor nt = NestedTensor::from_components(parts);
  CHECK(nt.size() == 2);
  CHECK(nt.values.sizes() == Shape{9});
  CHECK(nt.nested_sizes.sizes() == Shape{2, 2});
  CHECK(nt.component_shape(1) == Shape{1, 3});
  CHECK(nt.component(0).equal(parts[0]));
  CHECK(nt.component(1).equal(parts[1]));
  CHECK(nt.component(1).storage().shares_owner_with(nt.values.storage()));
  CHECK(nt.equal(NestedTensor::from_components(parts)));
  REQUIRE_THROWS_WITH(nt.component(2), "tensorfile: nested tensor component 2 is out of range; expected below 2");
  const std::vector<Tensor> mixed{floats({1}), Tensor::zeros({1, 1}, DType::Float32)};
  REQUIRE_THROWS_WITH(NestedTensor::from_components(mixed),
                      "tensorfile: nested tensor components differ; expected float32 of rank 1, got float32 of rank 2");
  TensorDict td(Shape{2});
  CHECK_NOTHROW(td.set("nt", nt));
  REQUIRE_THROWS_AS(TensorDict(Shape{3}).set("nt", nt), ArgumentError);
}
