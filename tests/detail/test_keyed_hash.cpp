// SPDX-License-Identifier: MIT
// Tests of <tensorfile/detail/bytes/keyed_hash.hpp>, and that Dict's key index uses it: keys a file picks to share
// one table tag under a fixed hash get tags of their own.
#include <tensorfile/core/value.hpp>
#include <tensorfile/detail/bytes/keyed_hash.hpp>

#include <bit>
#include <complex>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using tensorfile::detail::siphash13;

TEST_CASE("siphash13 is SipHash-1-3: CPython's bytes hash under the zero key", "[keyed_hash]") {
  // PYTHONHASHSEED=0 python3 -c 'print(hash(bytes(range(n))) % 2**64)' (CPython 3.11, sys.hash_info.algorithm
  // 'siphash13', cutoff 0); lengths around the 8-byte words.
  const std::vector<std::pair<std::size_t, std::uint64_t>> cpython{
      {1, 7541581120933061747ull},  {7, 3389392686435873370ull},   {8, 16921169381604339434ull},
      {9, 8471974163824919394ull},  {15, 17514137373579004394ull}, {16, 9904005486622393783ull},
      {17, 5225236159122152477ull}, {31, 1627832755361535131ull},  {64, 8493894268803903686ull}};
  for (const auto& [length, expected] : cpython) {
    std::vector<std::byte> bytes(length);
    for (std::size_t i = 0; i < length; ++i) bytes[i] = static_cast<std::byte>(i);
    INFO(length);
    CHECK(siphash13(0, 0, bytes) == expected);
  }
  const std::string name = "layers.0.attention.wq.weight";
  CHECK(siphash13(0, 0, std::as_bytes(std::span(name.data(), name.size()))) == 7681264823191582877ull);
  // The key matters.
  CHECK(siphash13(1, 0, std::as_bytes(std::span(name.data(), name.size()))) != 7681264823191582877ull);
}

namespace {

// `count` ints that all share one table tag when an int hashes as itself (std::hash): m * k lands in one 2^32
// block for the index's multiplier m, so k = m^-1 * (block + j).
std::vector<std::int64_t> ints_of_one_fixed_tag(std::size_t count) {
  constexpr std::uint64_t multiplier = 0x9e3779b97f4a7c15ull;
  std::uint64_t inverse = multiplier;  // Newton's iteration for the inverse mod 2^64 (odd multiplier)
  for (int i = 0; i < 5; ++i) inverse *= 2 - multiplier * inverse;
  std::vector<std::int64_t> keys;
  for (std::uint64_t j = 0; j < count; ++j) keys.push_back(static_cast<std::int64_t>(inverse * ((12345ull << 32) + j)));
  return keys;
}

template <class Index>
std::size_t distinct_tags(const std::vector<std::size_t>& hashes) {
  std::set<std::uint32_t> tags;
  for (const std::size_t h : hashes) tags.insert(Index::tag_of(h));
  return tags.size();
}

}  // namespace

TEST_CASE("Dict hashes keys with the process's key, so keys a file chooses do not share tags",
          "[keyed_hash][value][hostile]") {
  using DictIndex = tensorfile::detail::OrderedIndex<tensorfile::Dict::Item, tensorfile::detail::DictKeys>;
  const std::vector<std::int64_t> keys = ints_of_one_fixed_tag(20000);
  std::vector<std::size_t> fixed, keyed;
  for (const std::int64_t k : keys) {
    fixed.push_back(std::hash<std::int64_t>{}(k));
    keyed.push_back(tensorfile::detail::DictKeys::hash(tensorfile::Value(k)));
  }
  REQUIRE(distinct_tags<DictIndex>(fixed) == 1);   // the keys are the attack: one tag under a fixed hash
  CHECK(distinct_tags<DictIndex>(keyed) > 19900);  // random 32-bit tags: about 0.05 pairs collide
  // Floats that are ints hash as those ints; str keys (the str and the string_view lookup) agree.
  CHECK(tensorfile::detail::DictKeys::hash(tensorfile::Value(3.0)) ==
        tensorfile::detail::DictKeys::hash(tensorfile::Value(std::int64_t{3})));
  CHECK(tensorfile::detail::DictKeys::hash(tensorfile::Value(std::string("w"))) ==
        tensorfile::detail::DictKeys::hash(std::string_view("w")));

  // Views of one storage that differ in shape alone are distinct keys, and hash apart.
  const tensorfile::Tensor base = tensorfile::Tensor::zeros({64}, tensorfile::DType::Float32);
  std::vector<std::size_t> views;
  for (std::int64_t n = 1; n <= 64; ++n) {
    views.push_back(tensorfile::detail::DictKeys::hash(
        tensorfile::Value(tensorfile::Tensor(base.storage(), base.dtype(), {n}, {1}, 0))));
  }
  CHECK(std::set<std::size_t>(views.begin(), views.end()).size() == 64);
}

TEST_CASE("Keys of every kind spread over the tags, and keys that are one key hash alike",
          "[keyed_hash][value][hostile]") {
  using tensorfile::Value;
  using DictIndex = tensorfile::detail::OrderedIndex<tensorfile::Dict::Item, tensorfile::detail::DictKeys>;
  const auto hash = [](const Value& v) { return tensorfile::detail::DictKeys::hash(v); };
  const auto object = [](Value args) {
    return Value(tensorfile::Object{.module = "__main__", .name = "K", .args = std::move(args), .state = {}});
  };
  // Each kind was once one constant hash: a strict load of a dict of 20,000 complex keys took 0.9 s, a permissive
  // one (as verify() makes) of 20,000 opaque-object keys 4.6 s, each growing as n^2. An object key hashes by
  // identity (the objects are kept alive: a freed box's address comes back); hash_value, for objects inside a
  // list or dict key, by what it holds.
  const auto structural = [](const Value& v) { return tensorfile::detail::hash_value(v); };
  std::vector<std::pair<std::string, std::vector<std::size_t>>> kinds{{"complex", {}},
                                                                      {"device", {}},
                                                                      {"global", {}},
                                                                      {"object key", {}},
                                                                      {"object of an int", {}},
                                                                      {"object of a list", {}},
                                                                      {"object of a tensor's shape", {}}};
  constexpr std::int64_t count = 2000;
  std::vector<Value> objects;
  for (std::int64_t i = 0; i < count; ++i) {
    kinds[0].second.push_back(hash(Value(std::complex<double>(0.5, static_cast<double>(i)))));
    kinds[1].second.push_back(hash(Value(tensorfile::Device::cuda(static_cast<int>(i)))));
    kinds[2].second.push_back(hash(Value(tensorfile::Global{"m", "f" + std::to_string(i)})));
    objects.push_back(object(Value::tuple(tensorfile::List{Value(0)})));
    kinds[3].second.push_back(hash(objects.back()));
    kinds[4].second.push_back(structural(object(Value::tuple(tensorfile::List{Value(i)}))));
    kinds[5].second.push_back(structural(object(Value::tuple(tensorfile::List{Value(tensorfile::List{Value(i)})}))));
    kinds[6].second.push_back(structural(
        object(Value::tuple(tensorfile::List{Value(tensorfile::Tensor::zeros({i}, tensorfile::DType::UInt8))}))));
  }
  for (const auto& [kind, hashes] : kinds) {
    INFO(kind);
    CHECK(distinct_tags<DictIndex>(hashes) > count - 10);  // random 32-bit tags: almost never a collision
  }

  // Equal under operator== (and so the same key), equal hashes.
  const double nan_a = std::bit_cast<double>(0x7ff8000000000001ull);
  const double nan_b = std::bit_cast<double>(0xfff8000000000002ull);
  const Value c1(std::complex<double>(-0.0, nan_a));
  const Value c2(std::complex<double>(0.0, nan_b));
  REQUIRE(c1 == c2);
  CHECK(hash(c1) == hash(c2));
  CHECK(hash(Value(nan_a)) == hash(Value(nan_b)));
  // Objects equal by what they hold (two tensors of equal bytes in separate storages) hash alike...
  tensorfile::Tensor t1 = tensorfile::Tensor::zeros({3}, tensorfile::DType::Float32);
  tensorfile::Tensor t2 = tensorfile::Tensor::zeros({3}, tensorfile::DType::Float32);
  tensorfile::Dict state;
  state.set("w", Value(std::move(t1)));
  const Value o1 = object(Value::tuple(tensorfile::List{Value(std::move(state)), Value(tensorfile::Device::cpu())}));
  tensorfile::Dict state2;
  state2.set("w", Value(std::move(t2)));
  const Value o2 = object(Value::tuple(tensorfile::List{Value(std::move(state2)), Value(tensorfile::Device::cpu())}));
  REQUIRE(o1 == o2);
  CHECK(tensorfile::detail::hash_value(o1) == tensorfile::detail::hash_value(o2));
  // ...but as keys they are two objects, as in Python; a handle to one is that key, and so is a tuple holding it.
  tensorfile::Dict dict;
  dict.set(o1, Value(1));
  dict.set(o2, Value(2));
  dict.set(Value(o1), Value(3));
  dict.set(Value::tuple(tensorfile::List{o1}), Value(4));
  CHECK(dict.size() == 3);
  CHECK(dict.find(o1)->as_int() == 3);
  CHECK(dict.find(o2)->as_int() == 2);
  CHECK(dict.find(Value::tuple(tensorfile::List{o1}))->as_int() == 4);
  CHECK(dict.find(Value::tuple(tensorfile::List{o2})) == nullptr);
}
