// SPDX-License-Identifier: MIT
// Tests that save_torch() and load_torch() agree: what save_torch() writes, load_torch() with the same limits reads;
// what load_torch() would refuse, save_torch() refuses first (ArgumentError, nothing written).
#include <tensorfile/detail/zip/reader.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <functional>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
namespace fs = std::filesystem;

using tensorfile_test::names_in;
using tensorfile_test::span_of;

namespace {

/// `levels` lists, each inside the next; the innermost holds `leaf`.
Value nested_lists(std::size_t levels, const Value& leaf = Value(1)) {
  Value v(List{leaf});
  for (std::size_t i = 1; i < levels; ++i) v = Value(List{v});
  return v;
}

/// How many lists a chain of one-item lists has (a loop, not recursion: the chains are long).
std::size_t chain_length(Value v) {
  std::size_t n = 0;
  while (v.is_list()) {
    ++n;
    Value next = v.as_list().empty() ? Value() : v.as_list().front();
    v = std::move(next);
  }
  return n;
}

bool saves(const Value& v, const SaveOptions& options) {
  try {
    (void)save_torch_to_bytes(v, options);
    return true;
  } catch (const ArgumentError&) {
    return false;
  }
}

bool loads(std::span<const std::byte> bytes, const LoadOptions& options) {
  try {
    (void)load_torch(bytes, options);
    return true;
  } catch (const LimitError&) {
    return false;
  }
}

/// Values covering every way the writer nests: containers, and the tuples load_torch() builds around
/// tensors, sets, complex numbers, devices, layouts, bytes, objects and state_dict metadata.
std::vector<std::pair<std::string, Value>> nesting_samples() {
  const Tensor t = Tensor::from_values<float>({1, 2, 3});
  Dict metadata;
  metadata.set("", Dict{});
  Object object{"my.module", "Thing", Value::tuple({1, List{2}}), Value(Dict{}), false};
  object.state.as_dict().set("k", List{List{3}});
  const Value shared = nested_lists(3);
  return {
      {"int", Value(1)},
      {"empty tuple", Value::tuple({})},
      {"tensor", Value(t)},
      {"parameter", Value::parameter(t)},
      {"meta tensor", Value(Tensor::zeros({2}, DType::Float32, Device::meta()))},
      {"list of a tensor", Value(List{t})},
      {"set", Value(Set{{1, 2}, false})},
      {"set of a tuple", Value(Set{{Value::tuple({1, Value::tuple({2})})}, true})},
      {"complex", Value(std::complex<double>(1, 2))},
      {"device", Value(Device::parse("cuda:1"))},
      {"layout", Value(Global{"torch", "strided"})},
      {"bytes", Value(Bytes{{std::byte{1}}})},
      {"storage", Value(StorageValue{t, "cpu"})},
      {"state_dict", make_state_dict({{"w", t}}, Value(std::move(metadata)))},
      {"object", Value(std::move(object))},
      {"nested lists", nested_lists(5)},
      {"dict of tuples", Value(Dict{})},
      {"shared deep list, reached deeper the second time", Value(List{shared, List{List{shared}}})},
  };
}

}  // namespace

TEST_CASE("save_torch() refuses at every max_depth what load_torch() refuses at it, and nothing else",
          "[save][limits]") {
  for (auto& [name, value] : nesting_samples()) {
    if (name == "dict of tuples") value.as_dict().set(Value::tuple({1, Value::tuple({2})}), List{Value::tuple({})});
    const std::vector<std::byte> bytes = save_torch_to_bytes(value);
    for (std::size_t depth = 0; depth <= 8; ++depth) {  // load_torch() takes 0 as 1: one level is never refused
      INFO(name << ", max_depth " << depth);
      CHECK(saves(value, {.torch = {.max_depth = depth}}) ==
            loads(bytes, {.strict = false, .limits = {.max_depth = depth}}));
    }
  }
}

TEST_CASE("save_torch() at max_depth loads back, one level more is refused before anything is written",
          "[save][limits]") {
  SECTION("a small limit set on both sides") {
    const std::vector<std::byte> bytes = save_torch_to_bytes(nested_lists(50), {.torch = {.max_depth = 50}});
    CHECK(chain_length(load_torch(span_of(bytes), {.limits = {.max_depth = 50}})) == 50);
    REQUIRE_THROWS_WITH(load_torch(span_of(bytes), {.limits = {.max_depth = 49}}),
                        "tensorfile: archive/data.pkl: nesting exceeds 49 levels (at byte 203)");
    REQUIRE_THROWS_AS(save_torch_to_bytes(nested_lists(51), {.torch = {.max_depth = 50}}), ArgumentError);
    REQUIRE_THROWS_WITH(save_torch_to_bytes(nested_lists(51), {.torch = {.max_depth = 50}}),
                        "tensorfile: cannot save a value nested more than 50 levels deep; raise "
                        "SaveOptions::torch.max_depth and LoadOptions::limits.max_depth together to save and load it");
  }
  SECTION("the defaults: 5,000 levels, as torch loads (the writer's recursion holds them, under ASan too)") {
    CHECK(SaveOptions{}.torch.max_depth == 5000);
    CHECK(LoadOptions{}.limits.max_depth == 5000);
    const std::vector<std::byte> bytes = save_torch_to_bytes(nested_lists(5000));
    CHECK(chain_length(load_torch(span_of(bytes))) == 5000);
    REQUIRE_THROWS_AS(save_torch_to_bytes(nested_lists(5001)), ArgumentError);
  }
  SECTION("to a path: the old file stays, no temporary is left") {
    const tensorfile_test::ScratchDir dir;
    const fs::path path = dir / "deep.pt";
    save_torch(Value(1), path);
    REQUIRE_THROWS_AS(save_torch(nested_lists(11), path, {.torch = {.max_depth = 10}}), ArgumentError);
    CHECK(names_in(dir.path()) == std::vector<std::string>{"deep.pt"});
    CHECK(load_torch(path) == Value(1));
  }
}

TEST_CASE("save_torch() refuses an undefined tensor, which load_torch() could not rebuild", "[save][limits]") {
  const std::string message =
      "tensorfile: cannot save an undefined tensor (Tensor()); load_torch() could not rebuild it";
  REQUIRE_THROWS_AS(save_torch_to_bytes(Value(Tensor())), ArgumentError);
  REQUIRE_THROWS_WITH(save_torch_to_bytes(Value(Tensor())), message);
  REQUIRE_THROWS_WITH(
      save_torch_to_bytes(make_state_dict({{"w", Tensor::from_values<float>({1})}, {"missing", Tensor()}})), message);
  REQUIRE_THROWS_WITH(save_torch_to_bytes(Value::parameter(Tensor())), message);
  REQUIRE_THROWS_WITH(save_torch_to_bytes(Value(StorageValue{Tensor(), "cpu"})), message);
  const tensorfile_test::ScratchDir dir;
  REQUIRE_THROWS_AS(save_torch(Value(List{Tensor()}), dir / "undefined.pt"), ArgumentError);
  CHECK(names_in(dir.path()).empty());
}

// The public mutators refuse cycles (tests/core/test_value.cpp); save_torch() checks again, for trees built through
// detail::ValueAccess, which skips those checks.
TEST_CASE("save_torch() refuses a container that contains itself, shared containers are fine", "[save][limits]") {
  using detail::ValueAccess;
  SECTION("a list inside itself") {
    Value list(List{1});
    REQUIRE_THROWS_AS(list.as_list().push_back(list), ArgumentError);
    ValueAccess::list_items(list).push_back(list);
    REQUIRE_THROWS_AS(save_torch_to_bytes(list), ArgumentError);
    REQUIRE_THROWS_WITH(save_torch_to_bytes(list),
                        "tensorfile: cannot save a list that contains itself; load_torch() refuses cycles");
    const tensorfile_test::ScratchDir dir;
    REQUIRE_THROWS_AS(save_torch(list, dir / "cycle.pt"), ArgumentError);
    CHECK(names_in(dir.path()).empty());
    ValueAccess::list_items(list).clear();  // break the cycle, or the list never goes
  }
  SECTION("a dict reached again through a tuple and a list") {
    Value dict{Dict{}};
    REQUIRE_THROWS_AS(dict.as_dict().set("x", Value::tuple({List{dict}})), ArgumentError);
    ValueAccess::set(ValueAccess::dict(dict), "x", Value::tuple({List{dict}}));
    REQUIRE_THROWS_WITH(save_torch_to_bytes(dict),
                        "tensorfile: cannot save a dict that contains itself; load_torch() refuses cycles");
    ValueAccess::set(ValueAccess::dict(dict), "x", Value());
  }
  SECTION("an object whose arguments hold it") {
    Value object{Object{"m", "C", Value::tuple({}), Value(), false}};
    ValueAccess::object(object).args = Value::tuple({List{object}});
    REQUIRE_THROWS_WITH(save_torch_to_bytes(object),
                        "tensorfile: cannot save a object that contains itself; load_torch() refuses cycles");
    ValueAccess::object(object).args = Value::tuple({});
  }
  SECTION("one list reached twice is no cycle") {
    const Value shared(List{1, 2});
    Value twice(List{shared, Dict{}, shared});
    Value middle = twice.as_list()[1];
    middle.as_dict().set("again", shared);
    const Value back = load_torch(span_of(save_torch_to_bytes(twice)));
    CHECK(back == twice);
    CHECK(back.as_list()[0].identity() == back.as_list()[2].identity());
  }
}

TEST_CASE("save_torch() and load_torch() share the record limit: one record per storage plus 6", "[save][limits]") {
  CHECK(SaveOptions{}.torch.max_records == (std::uint64_t{1} << 24));
  CHECK(LoadOptions{}.limits.max_records == SaveOptions{}.torch.max_records);
  CHECK(detail::ZipLimits{}.max_entries == SaveOptions{}.torch.max_records);  // archive_info() and verify() agree too
  const auto tensors = [](int n) {
    NamedTensors items;
    for (int i = 0; i < n; ++i) items.emplace_back("t" + std::to_string(i), Tensor::from_values<float>({float(i)}));
    return make_state_dict(items);
  };
  const std::vector<std::byte> bytes = save_torch_to_bytes(tensors(4), {.torch = {.max_records = 10}});
  CHECK(load_torch(span_of(bytes), {.limits = {.max_records = 10}}).as_dict().size() == 4);
  REQUIRE_THROWS_WITH(
      load_torch(span_of(bytes), {.limits = {.max_records = 9}}),
      Catch::Matchers::StartsWith("tensorfile: the archive declares 10 entries, more than the limit of 9 (at byte "));
  REQUIRE_THROWS_AS(save_torch_to_bytes(tensors(5), {.torch = {.max_records = 10}}), ArgumentError);
  REQUIRE_THROWS_WITH(
      save_torch_to_bytes(tensors(5), {.torch = {.max_records = 10}}),
      "tensorfile: cannot save 11 records (5 storages); expected at most max_records = 10; raise "
      "SaveOptions::torch.max_records and LoadOptions::limits.max_records together to save and load it");
  const tensorfile_test::ScratchDir dir;
  REQUIRE_THROWS_AS(save_torch(tensors(5), dir / "many.pt", {.torch = {.max_records = 10}}), ArgumentError);
  CHECK(names_in(dir.path()).empty());
}

TEST_CASE("save_torch() refuses containers and memos that load_torch() would refuse with the same limits",
          "[save][limits]") {
  const Value list(List{1, 2, 3});
  const std::vector<std::byte> bytes = save_torch_to_bytes(list);
  for (std::size_t items = 0; items <= 4; ++items) {
    INFO("max_container " << items);
    CHECK(saves(list, {.torch = {.max_container = items}}) == loads(bytes, {.limits = {.max_container = items}}));
  }
  REQUIRE_THROWS_WITH(
      save_torch_to_bytes(list, {.torch = {.max_container = 2}}),
      "tensorfile: cannot save a container of 3 items; expected at most max_container = 2 (load_torch() "
      "refuses more)");
  const Value state = make_state_dict({{"a", Tensor::from_values<float>({1})}, {"b", Tensor::from_values<float>({2})}});
  const std::vector<std::byte> state_bytes = save_torch_to_bytes(state);
  for (std::size_t memo = 0; memo <= 12; ++memo) {
    INFO("max_memo " << memo);
    CHECK(saves(state, {.torch = {.max_memo = memo}}) == loads(state_bytes, {.limits = {.max_memo = memo}}));
  }
}
