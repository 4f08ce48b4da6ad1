// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/value.hpp>: building Values in C++, access, equality, clone, refused cycles.
#include <tensorfile/core/value.hpp>
#include <tensorfile/core/value_print.hpp>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("Values are easy to build and read in C++", "[value]") {
  const Tensor w = Tensor::from_values<float>({1, 2, 3, 4}, {2, 2});
  Dict state;
  state.ordered = true;
  state.set("layer.weight", w);
  state.set("step", 3);
  state.set("lr", 0.5);
  state.set("name", "adam");
  state.set(7, List{Value(), true, Value::tuple({1, 2})});
  const Value v(std::move(state));

  CHECK(v.is_dict());
  CHECK(v.size() == 5);
  CHECK(v["layer.weight"].as_tensor().equal(w));
  CHECK(v["step"].as_int() == 3);
  CHECK(v["step"].as_float() == 3.0);
  CHECK(v["lr"].as_float() == 0.5);
  CHECK(v["name"].as_string() == "adam");
  CHECK(v[7][0].is_none());
  CHECK(v[7][1].as_bool());
  CHECK(v[7][2][1].as_int() == 2);
  CHECK(v[7][-1].is_tuple());
  CHECK(v[7].at(2).size() == 2);
  CHECK(v.as_dict().items()[0].first.as_string() == "layer.weight");
  CHECK(named_tensors(v).size() == 1);
  CHECK(named_tensors(v)[0].first == "layer.weight");
}

TEST_CASE("Value access errors name both kinds", "[value]") {
  const Value v(Dict{{"a", 1}});
  REQUIRE_THROWS_WITH(v["b"], "tensorfile: key \"b\" is not in the dict");
  REQUIRE_THROWS_WITH(v["a"].as_string(), "tensorfile: value is int; expected str");
  REQUIRE_THROWS_WITH(v.at(0), "tensorfile: value is dict; expected list");
  REQUIRE_THROWS_WITH(Value(List{1})[3], "tensorfile: index 3 is out of range; expected below 1");
  REQUIRE_THROWS_WITH(v[5], "tensorfile: key 5 is not in the dict");
  REQUIRE_THROWS_WITH(Value(1.5).size(), "tensorfile: value is float; expected a container");
}

TEST_CASE("Dict keeps insertion order and replaces in place, with Python's key equality", "[value]") {
  Dict d;
  d.set("x", 1);
  d.set(1, "one");
  d.set("x", 2);
  d.set(Value::tuple({1, "a"}), 3);
  CHECK(d.size() == 3);
  CHECK(d.items()[0].second.as_int() == 2);
  CHECK(d.find(Value(true)) != nullptr);  // True == 1, as in Python
  CHECK(d.find(Value(1.0))->as_string() == "one");
  CHECK(d.find(Value::tuple({1, "a"}))->as_int() == 3);
  CHECK(d.find(Value::tuple({1, "b"})) == nullptr);
}

TEST_CASE("Dict finds keys among many by Python's key equality, str keys without a Value", "[value]") {
  Dict d;
  for (int i = 0; i < 100; ++i) d.set("k" + std::to_string(i), i);
  for (int i = 0; i < 100; ++i) d.set(i, -i);
  d.set(Value::tuple({1, "a"}), 3);
  d.set(2.5, "float");
  CHECK(d.size() == 202);
  CHECK(d.find(std::string_view("k42"))->as_int() == 42);
  CHECK(d.find(std::string_view("k100")) == nullptr);
  CHECK(d.find(std::string_view("1")) == nullptr);  // a str never equals an int
  CHECK(d.find(Value(true))->as_int() == -1);       // True == 1
  CHECK(d.find(Value(7.0))->as_int() == -7);        // 7.0 == 7
  CHECK(d.find(Value(2.5))->as_string() == "float");
  CHECK(d.find(Value::tuple({1, "a"}))->as_int() == 3);
  CHECK(d.find(Value(Bytes{})) == nullptr);
  d.set(Value(false), "zero");  // False == 0: replaces 0's value in place
  CHECK(d.size() == 202);
  CHECK(d.items()[100].first.as_int() == 0);
  CHECK(d.items()[100].second.as_string() == "zero");
  CHECK(d.items().front().first.as_string() == "k0");
  CHECK(d.items().back().first.as_float() == 2.5);
}

TEST_CASE("Dict keys tensors by what they are (the same view of the same storage), never by their values", "[value]") {
  const Tensor a = Tensor::from_values<float>({1, 2, 3});
  const Tensor b = Tensor::from_values<float>({1, 2, 3});  // equal values, another storage: another key, as in torch
  Dict d;
  d.set(Value(a), "a");
  d.set(Value(b), "b");
  d.set(Value::tuple({Value(a), 1}), "a1");
  CHECK(d.size() == 3);
  CHECK(d.find(Value(a))->as_string() == "a");  // a new Value of the same tensor finds it
  CHECK(d.find(Value(b))->as_string() == "b");
  CHECK(d.find(Value::tuple({Value(b), 1})) == nullptr);
  CHECK(d.find(Value::tuple({Value(Tensor(a.storage(), a.dtype(), {3}, {1}, 0)), 1}))->as_string() == "a1");
  CHECK(d.find(Value(Tensor(a.storage(), a.dtype(), {2}, {1}, 1))) == nullptr);  // another view of it
  CHECK(d.find(Value::parameter(a)) == nullptr);
  d.set(Value(Tensor(a.storage(), a.dtype(), {3}, {1}, 0)), "again");  // the same view: replaces "a"
  CHECK(d.size() == 3);
  CHECK(d.items()[0].second.as_string() == "again");
}

TEST_CASE("Values share containers like Python references, clone() copies deeply", "[value]") {
  const Value list(List{1, 2});
  Value alias = list;  // a handle: it shares the list, and a non-const handle may change it
  alias.as_list().push_back(3);
  CHECK(list.size() == 3);
  Value copy = list.clone();
  copy.as_list().push_back(4);
  CHECK(list.size() == 3);
  CHECK(copy.size() == 4);
  const Value t(Tensor::from_values<std::int32_t>({1, 2}));
  const Value t2 = t.clone();
  CHECK(t == t2);
  CHECK_FALSE(t2.as_tensor().storage().shares_owner_with(t.as_tensor().storage()));
  CHECK(Value::parameter(t.as_tensor()) != t);
  CHECK(Value::parameter(t.as_tensor()).is_parameter());
}

TEST_CASE("BigInt prints in decimal", "[value]") {
  CHECK(BigInt{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}}.str() == "18446744073709551616");
  CHECK(BigInt{{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE}}.str() == "-18446744073709551617");
  CHECK(BigInt{}.str() == "0");
}

TEST_CASE("A container that would hold itself is refused, whatever the path", "[value][cycle]") {
  const std::string list_cycle =
      "tensorfile: a list cannot hold itself; expected a value that does not contain the list it is put into (no "
      "cycles)";
  const std::string dict_cycle =
      "tensorfile: a dict cannot hold itself; expected a value that does not contain the dict it is put into (no "
      "cycles)";
  SECTION("a list into itself, by push_back, insert, set, emplace_back and assignment") {
    Value v(List{1});
    REQUIRE_THROWS_AS(v.as_list().push_back(v), ArgumentError);
    REQUIRE_THROWS_WITH(v.as_list().push_back(v), list_cycle);
    REQUIRE_THROWS_WITH(v.as_list().insert(0, v), list_cycle);
    REQUIRE_THROWS_WITH(v.as_list().set(0, v), list_cycle);
    REQUIRE_THROWS_WITH(v.as_list().emplace_back(v), list_cycle);
    REQUIRE_THROWS_WITH((v.as_list() = List{2, v}), list_cycle);
    CHECK(v == Value(List{1}));  // unchanged by every refusal
  }
  SECTION("the issue's two dicts, through each other") {
    Value root(Dict{});
    Value child(Dict{});
    root.as_dict().set("child", child);
    REQUIRE_THROWS_WITH(child.as_dict().set("root", root), dict_cycle);
    REQUIRE_THROWS_WITH(child.as_dict().set(Value::tuple({root}), 1), dict_cycle);  // a key holding it
    REQUIRE_THROWS_WITH(child.as_dict().set_attributes(Value(Dict{{"r", root}})), dict_cycle);
    REQUIRE_THROWS_WITH((child.as_dict() = Dict{{"root", root}}), dict_cycle);
    CHECK(child.as_dict().empty());
    CHECK(child.as_dict().attributes().is_none());
    CHECK(to_string(root) == "{\n  'child': {}\n}");  // prints, as every refusal left the tree whole
  }
  SECTION("deep and through every container kind: tuple, set, list") {
    Value outer(List{});
    Value inner(List{});
    Value set(Set{});
    set.as_set().items.push_back(Value::tuple({1, inner}));
    outer.as_list().push_back(Value(Dict{{"s", set}}));
    REQUIRE_THROWS_WITH(inner.as_list().push_back(outer), list_cycle);
    REQUIRE_THROWS_WITH(set.as_set().items.push_back(outer), list_cycle);
    REQUIRE_THROWS_WITH((set.as_set() = Set{List{outer}, false}), list_cycle);
    CHECK(inner.size() == 0);
    CHECK(outer.clone() == outer);
  }
  SECTION("sharing without a cycle stays allowed") {
    Value shared(List{1, 2});
    Value root(Dict{});
    root.as_dict().set("a", shared);
    root.as_dict().set("b", shared);
    Value top(List{root, root, shared});
    CHECK_NOTHROW(shared.as_list().push_back(Value(List{3})));
    CHECK(top[0]["b"][2][0].as_int() == 3);
    Value free(List{});
    CHECK_NOTHROW(free.as_list().push_back(top));
  }
  SECTION("a diamond of shared lists is walked once per list") {
    Value level(List{1});
    for (int i = 0; i < 64; ++i) level = Value(List{level, level});  // 2^64 paths, 65 lists
    Value other(List{});
    CHECK_NOTHROW(other.as_list().push_back(level));
  }
}

TEST_CASE("A const Value gives const access only", "[value]") {
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const Value&>().as_list()), const List&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const Value&>().as_dict()), const Dict&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const Value&>().as_set()), const Set&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<Value&>().as_list()), List&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<Value&>().as_dict()), Dict&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<Value&>().as_object()), const Object&>);
  STATIC_REQUIRE(std::is_same_v<decltype(*std::declval<List&>().begin()), const Value&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<List&>()[0]), const Value&>);
}

TEST_CASE("Dict and Value lookups: contains, get, erase, find by any string type", "[value]") {
  Dict d;
  d.set("lr", 0.1);
  d.set(0, "zero");
  d.set("betas", Value::tuple({0.9, 0.999}));
  const std::string key = "lr";
  const std::string_view view = "lr";
  CHECK(d.find(key)->as_float() == 0.1);  // std::string: once ambiguous
  CHECK(d.find(view)->as_float() == 0.1);
  CHECK(d.find("lr")->as_float() == 0.1);
  CHECK(d.find(0)->as_string() == "zero");  // 0 is the int key, not a null const char*
  CHECK(d.find(std::int64_t{0})->as_string() == "zero");
  CHECK(d.contains("betas"));
  CHECK(d.contains(key));
  CHECK_FALSE(d.contains("eps"));
  CHECK_FALSE(d.contains(1));
  CHECK(d.get("eps", 1e-8).as_float() == 1e-8);
  CHECK(d.get("lr", 1e-8).as_float() == 0.1);
  CHECK(d.get("missing").is_none());
  CHECK(d.at("lr").as_float() == 0.1);
  REQUIRE_THROWS_WITH(d.at("eps"), "tensorfile: key \"eps\" is not in the dict");
  REQUIRE_THROWS_WITH(d.at(3), "tensorfile: key 3 is not in the dict");

  CHECK(d.erase("lr"));
  CHECK_FALSE(d.erase("lr"));
  CHECK(d.erase(0));
  CHECK(d.size() == 1);
  CHECK(d.items()[0].first.as_string() == "betas");

  const Value v(Dict{{"lr", 0.1}});
  CHECK(v.contains("lr"));
  CHECK(v.contains(std::string("lr")));
  CHECK_FALSE(v.contains(0));
  CHECK(v.get("eps", 1e-8).as_float() == 1e-8);
  CHECK(v[std::string("lr")].as_float() == 0.1);
  REQUIRE_THROWS_WITH(Value(List{}).contains("x"), "tensorfile: value is list; expected dict");

  SECTION("erase keeps the order and the index right, past the scan limit") {
    Dict many;
    for (int i = 0; i < 40; ++i) many.set("k" + std::to_string(i), i);
    for (int i = 0; i < 40; i += 2) CHECK(many.erase("k" + std::to_string(i)));
    CHECK(many.size() == 20);
    for (int i = 0; i < 40; ++i) CHECK(many.contains("k" + std::to_string(i)) == (i % 2 == 1));
    CHECK(many.items()[0].second.as_int() == 1);
    CHECK(many.items()[19].second.as_int() == 39);
  }
}

TEST_CASE("List: checked changes, vector-like reading", "[value]") {
  Value v(List{1, 2, 3});
  List& list = v.as_list();
  list.insert(1, "x");
  list.set(0, 10);
  list.erase(3);
  list.emplace_back(2.5);
  CHECK(v == Value(List{10, "x", 2, 2.5}));
  CHECK(list.at(1).as_string() == "x");
  CHECK(list.front().as_int() == 10);
  CHECK(list.back().as_float() == 2.5);
  REQUIRE_THROWS_WITH(list.at(4), "tensorfile: index 4 is out of range; expected below 4");
  REQUIRE_THROWS_WITH(list.set(4, 1), "tensorfile: index 4 is out of range; expected below 4");
  REQUIRE_THROWS_WITH(list.insert(5, 1), "tensorfile: index 5 is out of range; expected below 5");
  REQUIRE_THROWS_WITH(list.erase(9), "tensorfile: index 9 is out of range; expected below 4");
  std::int64_t ints = 0;
  for (const Value& item : list) ints += item.is_int() ? 1 : 0;
  CHECK(ints == 2);
  list.pop_back();
  CHECK(list.size() == 3);
  list.clear();
  CHECK(v.size() == 0);
}

TEST_CASE("at_path and find_path walk keys and indices", "[value]") {
  const Tensor exp_avg = Tensor::from_values<float>({1, 2});
  Dict state;
  state.set(0, Dict{{"exp_avg", exp_avg}, {"step", 3}});
  const Value ckpt(Dict{{"optimizer", Dict{{"state", std::move(state)}, {"groups", List{Dict{{"lr", 0.1}}}}}}});

  CHECK(ckpt.at_path({"optimizer", "state", 0, "exp_avg"}).as_tensor().equal(exp_avg));
  CHECK(ckpt.at_path({"optimizer", "groups", 0, "lr"}).as_float() == 0.1);
  CHECK(ckpt.at_path({"optimizer", "groups", -1, "lr"}).as_float() == 0.1);
  CHECK(ckpt.at_path({std::string("optimizer"), std::string_view("groups"), std::size_t{0}}).is_dict());
  CHECK(&ckpt.at_path({}) == &ckpt);
  const std::vector<PathStep> path{"optimizer", "state", 0, "step"};
  CHECK(ckpt.at_path(path).as_int() == 3);
  CHECK(ckpt.find_path(path)->as_int() == 3);
  CHECK(ckpt.find_path({"optimizer", "state", 1}) == nullptr);
  CHECK(ckpt.find_path({"optimizer", "groups", "lr"}) == nullptr);

  REQUIRE_THROWS_WITH(ckpt.at_path({"optimizer", "state", 1, "exp_avg"}),
                      "tensorfile: no value at [\"optimizer\"][\"state\"][1][\"exp_avg\"]: at "
                      "[\"optimizer\"][\"state\"], key 1 is not in the dict");
  REQUIRE_THROWS_WITH(ckpt.at_path({"optimizer", "groups", 2}),
                      "tensorfile: no value at [\"optimizer\"][\"groups\"][2]: at [\"optimizer\"][\"groups\"], index 2 "
                      "is out of range; expected below 1");
  REQUIRE_THROWS_WITH(ckpt.at_path({"optimizer", "groups", "lr"}),
                      "tensorfile: no value at [\"optimizer\"][\"groups\"][\"lr\"]: at [\"optimizer\"][\"groups\"], a "
                      "list has no key \"lr\"; expected an index");
  REQUIRE_THROWS_WITH(ckpt.at_path({"missing"}),
                      "tensorfile: no value at [\"missing\"]: key \"missing\" is not in the dict");
  REQUIRE_THROWS_WITH(ckpt.at_path({"optimizer", "state", 0, "step", 0}),
                      "tensorfile: no value at [\"optimizer\"][\"state\"][0][\"step\"][0]: at "
                      "[\"optimizer\"][\"state\"][0][\"step\"], value is int; expected a dict, list or tuple");
}

TEST_CASE("A state dict iterates as name -> Tensor without casts", "[value]") {
  const Tensor w = Tensor::from_values<float>({1, 2});
  const Tensor b = Tensor::from_values<float>({3});
  const Value sd(Dict{{"fc.weight", w}, {"fc.bias", b}});
  std::vector<std::string> names;
  for (const auto& [name, tensor] : named_tensors(sd)) {
    names.push_back(name);
    CHECK(tensor.dtype() == DType::Float32);
  }
  CHECK(names == std::vector<std::string>{"fc.weight", "fc.bias"});
}

TEST_CASE("Deep trees: tensor paths and printed indentation grow with the tree, not with depth squared",
          "[value][hostile]") {
  // 100 levels of dicts under one 1,000-byte key each, a tensor at the bottom: its path is the 100 keys joined.
  const std::string key(1000, 'k');
  Value v(Tensor::zeros({1}, DType::Float32));
  for (int level = 0; level < 100; ++level) {
    Dict dict;
    dict.set(key, v);
    v = Value(std::move(dict));
  }
  const auto tensors = named_tensors(v);
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].first.size() == 100 * key.size() + 99);
  CHECK(tensors[0].first.substr(0, key.size() + 1) == key + "/");

  // 100 nested lists: the innermost lines are indented as at level 64 (128 spaces), no further.
  Value list(std::int64_t{7});
  for (int level = 0; level < 100; ++level) list = Value(List{list});
  const std::string text = to_string(list);
  CHECK(text.find("\n" + std::string(128, ' ') + "7\n") != std::string::npos);
  CHECK(text.find(std::string(129, ' ')) == std::string::npos);
  CHECK(text.starts_with("[\n  [\n    [\n"));
}
