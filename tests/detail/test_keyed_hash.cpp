// SPDX-License-Identifier: MIT
// Tests of <tensorfile/detail/bytes/keyed_hash.hpp>, and that Dict's key index uses it: keys a file picks to share
// one table tag under a fixed hash get tags of their own.
#include <tensorfile/core/value.hpp>
#include <tensorfile/detail/bytes/keyed_hash.hpp>

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
