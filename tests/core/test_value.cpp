// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/value.hpp>: building Values in C++, access, equality, clone.
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

TEST_CASE("Values share containers like Python references; clone() copies deeply", "[value]") {
  const Value list(List{1, 2});
  const Value alias = list;  // NOLINT(performance-unnecessary-copy-initialization): sharing is the point
  alias.as_list().push_back(3);
  CHECK(list.size() == 3);
  const Value copy = list.clone();
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
