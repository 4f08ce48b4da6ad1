// SPDX-License-Identifier: MIT
// Tests of <tensorfile/detail/ordered_index.hpp>: order, lookup, growth, erase, and the strong guarantee.
#include <tensorfile/detail/ordered_index.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile_catch.hpp"

namespace {

struct Item {
  std::string key;
  int value = 0;
};

struct StringKeys {
  static std::size_t hash(std::string_view key) noexcept { return std::hash<std::string_view>{}(key); }
  static std::size_t hash_item(const Item& item) noexcept { return hash(item.key); }
  static bool matches(const Item& item, std::string_view key) noexcept { return item.key == key; }
};

// Few distinct hashes: long probe runs that wrap around the table's end, for probing and erase.
struct CollidingKeys {
  static std::size_t hash(std::string_view key) noexcept { return key.size() % 3; }
  static std::size_t hash_item(const Item& item) noexcept { return hash(item.key); }
  static bool matches(const Item& item, std::string_view key) noexcept { return item.key == key; }
};

// Allocations left before the next one throws std::bad_alloc; negative: no limit.
int allocations_left = -1;

template <class T>
struct FailingAllocator {
  using value_type = T;
  FailingAllocator() = default;
  template <class U>
  FailingAllocator(const FailingAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor): rebinding
  T* allocate(std::size_t n) {
    if (allocations_left == 0) throw std::bad_alloc();
    if (allocations_left > 0) --allocations_left;
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>{}.deallocate(p, n); }
  friend bool operator==(const FailingAllocator&, const FailingAllocator&) noexcept { return true; }
};

template <class Index>
void append(Index& index, const std::string& key, int value) {
  auto [item, inserted] = index.find_or_append(std::string_view(key), [&] { return Item{key, value}; });
  if (!inserted) item.value = value;
}

// The index holds exactly `expected`, in that order, each found at its position.
template <class Index>
void check_holds(const Index& index, const std::vector<Item>& expected) {
  REQUIRE(index.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(index[i].key == expected[i].key);
    CHECK(index[i].value == expected[i].value);
    CHECK(index.find(std::string_view(expected[i].key)) == i);
  }
}

std::string key_number(int i) { return "key" + std::to_string(i); }

}  // namespace

using tensorfile::detail::OrderedIndex;

TEMPLATE_TEST_CASE("OrderedIndex keeps insertion order and finds every key as it grows", "[ordered_index]", StringKeys,
                   CollidingKeys) {
  OrderedIndex<Item, TestType> index;
  CHECK(index.empty());
  CHECK(index.find(std::string_view("absent")) == index.npos);
  std::vector<Item> expected;
  for (int i = 0; i < 300; ++i) {  // through the scan limit and several doublings of the table
    append(index, key_number(i), i);
    expected.push_back({key_number(i), i});
    if (i < 20 || i % 37 == 0) check_holds(index, expected);
  }
  check_holds(index, expected);
  CHECK(index.find(std::string_view("key300")) == index.npos);
  CHECK(index.find(std::string_view("")) == index.npos);

  SECTION("appending a present key finds it and keeps its position") {
    append(index, "key5", -5);
    expected[5].value = -5;
    check_holds(index, expected);
    const auto found =
        index.find_or_append(std::string_view("key7"), []() -> Item { throw std::logic_error("not called"); });
    CHECK_FALSE(found.inserted);
    CHECK(found.item.value == 7);
  }
  SECTION("copies are independent") {
    auto copy = index;
    append(copy, "extra", 1);
    CHECK(copy.size() == index.size() + 1);
    CHECK(index.find(std::string_view("extra")) == index.npos);
    check_holds(index, expected);
  }
}

TEST_CASE("OrderedIndex scans small maps and indexes larger ones, with empty and repeated-hash keys",
          "[ordered_index]") {
  OrderedIndex<Item, StringKeys> index;
  append(index, "", 0);  // the empty key is a key like any other
  for (std::size_t i = 1; i <= OrderedIndex<Item, StringKeys>::scan_limit + 1; ++i)
    append(index, std::string(i, 'a'), static_cast<int>(i));
  CHECK(index.find(std::string_view("")) == 0);
  CHECK(index.find(std::string_view("aaa")) == 3);
  CHECK(index.find(std::string_view("b")) == index.npos);
}

TEMPLATE_TEST_CASE("OrderedIndex::erase keeps the others' order and lookups", "[ordered_index]", StringKeys,
                   CollidingKeys) {
  std::mt19937 random(12);
  for (const int count : {3, 9, 10, 40, 200}) {
    OrderedIndex<Item, TestType> index;
    std::vector<Item> expected;
    for (int i = 0; i < count; ++i) {
      append(index, key_number(i), i);
      expected.push_back({key_number(i), i});
    }
    while (!expected.empty()) {  // random positions, down through the scan limit to empty
      const std::size_t position = random() % expected.size();
      const std::string gone = expected[position].key;
      index.erase(position);
      expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(position));
      CHECK(index.find(std::string_view(gone)) == index.npos);
      check_holds(index, expected);
    }
    CHECK(index.empty());
    append(index, "again", 1);  // usable after emptying
    CHECK(index.find(std::string_view("again")) == 0);
  }
}

TEMPLATE_TEST_CASE("OrderedIndex::reserve_more makes room for the items and their table at once", "[ordered_index]",
                   StringKeys, CollidingKeys) {
  for (const int before : {0, 3, 20}) {
    INFO(before << " items before");
    OrderedIndex<Item, TestType> index;
    std::vector<Item> expected;
    for (int i = 0; i < before; ++i) {
      append(index, key_number(i), i);
      expected.push_back({key_number(i), i});
    }
    index.reserve_more(500);
    REQUIRE(index.items().capacity() >= static_cast<std::size_t>(before) + 500);
    check_holds(index, expected);  // a table made for the room while the items are still few finds them too
    const Item* const first = index.items().data();
    for (int i = before; i < before + 500; ++i) {
      append(index, key_number(i), i);
      expected.push_back({key_number(i), i});
    }
    CHECK(index.items().data() == first);  // not moved on the way
    check_holds(index, expected);
    for (int i = 0; i < before + 490; ++i) index.erase(0);  // down through the scan limit
    expected.erase(expected.begin(), expected.begin() + before + 490);
    check_holds(index, expected);
  }
}

TEST_CASE("OrderedIndex agrees with a plain vector under random appends, replacements and erases", "[ordered_index]") {
  std::mt19937 random(99);
  OrderedIndex<Item, CollidingKeys> index;
  std::vector<Item> expected;
  for (int step = 0; step < 4000; ++step) {
    const std::string key = key_number(static_cast<int>(random() % 120));
    const auto at = std::find_if(expected.begin(), expected.end(), [&](const Item& item) { return item.key == key; });
    if (random() % 3 == 0) {
      if (at != expected.end()) {
        index.erase(static_cast<std::size_t>(at - expected.begin()));
        expected.erase(at);
      }
    } else {
      append(index, key, step);
      if (at != expected.end())
        at->value = step;
      else
        expected.push_back({key, step});
    }
    if (step % 97 == 0) check_holds(index, expected);
  }
  check_holds(index, expected);
}

TEST_CASE("OrderedIndex stays as it was when an insertion throws", "[ordered_index]") {
  using Index = OrderedIndex<Item, StringKeys, FailingAllocator<Item>>;
  // Each size, each allocation of the insertion failing in turn: across the scan limit, the first
  // table and its doublings.
  for (int count = 0; count <= 70; ++count) {
    Index index;
    std::vector<Item> expected;
    for (int i = 0; i < count; ++i) {
      append(index, key_number(i), i);
      expected.push_back({key_number(i), i});
    }
    for (int budget = 0;; ++budget) {
      Index copy = index;
      allocations_left = budget;
      bool threw = false;
      try {
        append(copy, "new", -1);
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      allocations_left = -1;
      if (!threw) {
        CHECK(copy.find(std::string_view("new")) == static_cast<std::size_t>(count));
        break;
      }
      check_holds(copy, expected);
      CHECK(copy.find(std::string_view("new")) == copy.npos);
      append(copy, "new", -1);  // and it still works
      CHECK(copy.find(std::string_view("new")) == static_cast<std::size_t>(count));
    }
  }

  SECTION("when making the item throws") {
    Index index;
    std::vector<Item> expected;
    for (int i = 0; i < 8; ++i) {  // the next insertion makes the first table, then the item throws
      append(index, key_number(i), i);
      expected.push_back({key_number(i), i});
    }
    CHECK_THROWS_AS(index.find_or_append(std::string_view("new"), []() -> Item { throw std::runtime_error("no"); }),
                    std::runtime_error);
    check_holds(index, expected);
    append(index, "new", 8);
    CHECK(index.find(std::string_view("new")) == 8);
  }
}
