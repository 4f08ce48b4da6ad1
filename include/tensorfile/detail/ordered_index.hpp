// SPDX-License-Identifier: MIT
// OrderedIndex: items kept in insertion order and found by key through a flat open-addressing table.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorfile/core/error.hpp"

namespace tensorfile::detail {

/// How an OrderedIndex finds its `Item`s by a `Key` (the items' own key type, or a cheaper view of it):
/// `Keys::hash(key)`, `Keys::hash_item(item)` and `Keys::matches(item, key)`, where a matching item
/// and key must hash equal.
template <class Keys, class Item, class Key>
concept IndexKeys = requires(const Item& item, const Key& key) {
  { Keys::hash(key) } -> std::convertible_to<std::size_t>;
  { Keys::hash_item(item) } -> std::convertible_to<std::size_t>;
  { Keys::matches(item, key) } -> std::convertible_to<bool>;
};

/// A vector of items in insertion order with a key index over it: the one map behind Dict and
/// TensorDict. Lookups scan up to `scan_limit` items and probe a table above that. Every insertion
/// either completes or, when something throws (an allocation, the item's construction), leaves the
/// index as it was.
template <class Item, class Keys, class Allocator = std::allocator<Item>>
class OrderedIndex {
 public:
  /// What find() returns for a missing key.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  /// Up to this many items no table is kept: a scan is as fast, and small maps allocate nothing more.
  static constexpr std::size_t scan_limit = 8;
  /// The most items one index holds (the table stores 32-bit positions); more throws LimitError.
  static constexpr std::size_t max_items = std::size_t{1} << 31;

  /// The result of find_or_append: the item with the key, and whether it was just appended.
  struct Found {
    Item& item;     ///< the existing or new item
    bool inserted;  ///< the item was appended
  };

  OrderedIndex() = default;
  /// An empty index allocating its item vector and table through `allocator`.
  explicit OrderedIndex(const Allocator& allocator) : items_(allocator), slots_(SlotAllocator(allocator)) {}

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }  ///< number of items
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }       ///< no item
  /// The items in insertion order.
  [[nodiscard]] const std::vector<Item, Allocator>& items() const noexcept { return items_; }
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }  ///< first item
  [[nodiscard]] auto end() const noexcept { return items_.end(); }      ///< past the last item
  /// The item at `position` (< size()); its key must not be changed through the reference.
  [[nodiscard]] const Item& operator[](std::size_t position) const noexcept { return items_[position]; }
  [[nodiscard]] Item& operator[](std::size_t position) noexcept { return items_[position]; }
  /// The items for changing what is not their key.
  [[nodiscard]] std::span<Item> mutable_items() noexcept { return items_; }
  /// Makes room for `count` items without moving them again.
  void reserve(std::size_t count) { items_.reserve(count); }
  /// Makes room for `count` more items, growing by at least a quarter: amortized as push_back's doubling, with
  /// less room left over when items come in batches of known size.
  void reserve_more(std::size_t count) {
    const std::size_t wanted = items_.size() + count;
    const std::size_t grown = items_.capacity() + items_.capacity() / 4;
    if (wanted <= items_.capacity()) return;
    const std::size_t room = wanted > grown ? wanted : grown;
    items_.reserve(room);
    // The table too, when it will be needed: built once for the room rather than doubled on the way there.
    if (room > scan_limit && table_size_for(room) > slots_.size()) {
      if (slots_.empty()) {
        index_all(table_size_for(room));
      } else {
        regrow(table_size_for(room));
      }
    }
  }

  /// Gives back the room beyond the items, and a table larger than they need (best effort: on an allocation
  /// failure the index keeps its room).
  void shrink_to_fit() noexcept {
    try {
      items_.shrink_to_fit();
      if (items_.size() > scan_limit && table_size_for(items_.size()) < slots_.size()) {
        regrow(table_size_for(items_.size()));
      }
    } catch (...) {  // (std::bad_alloc) the larger room stays; nothing else changed
    }
  }

  /// The position of the item matching `key`, or npos.
  template <class Key>
  requires IndexKeys<Keys, Item, Key>
  [[nodiscard]] std::size_t find(const Key& key) const {
    if (slots_.empty()) return scan(key);
    return probe(key, tag_of(Keys::hash(key)));
  }

  /// The item matching `key`, or else `make_item()` appended (its key must match `key`, which is not read
  /// once make_item runs, so make_item may move from it). Strong guarantee.
  template <class Key, class MakeItem>
  requires IndexKeys<Keys, Item, Key> && std::invocable<MakeItem&> Found find_or_append(const Key& key,
                                                                                        MakeItem&& make_item) {
    std::uint32_t tag = 0;
    if (slots_.empty()) {
      if (const std::size_t position = scan(key); position != npos) return {items_[position], false};
      if (items_.size() >= scan_limit) {
        tag = tag_of(Keys::hash(key));
        index_all(table_size_for(items_.size() + 1));
      }
    } else {
      tag = tag_of(Keys::hash(key));
      if (const std::size_t position = probe(key, tag); position != npos) return {items_[position], false};
      if (over_load(items_.size() + 1, slots_.size())) regrow(slots_.size() * 2);
    }
    if (items_.size() >= max_items) {
      throw LimitError("too many keys in one map; expected at most " + std::to_string(max_items));
    }
    // A table made above already holds every present item, so it stays right if this throws.
    items_.emplace_back(make_item());
    if (!slots_.empty()) place(slots_, items_.size() - 1, tag);
    return {items_.back(), true};
  }

  /// Removes the item at `position` (< size()), keeping the others' order.
  void erase(std::size_t position) noexcept {
    static_assert(std::is_nothrow_move_assignable_v<Item>, "erase shifts items by move assignment");
    if (!slots_.empty()) {
      if (items_.size() - 1 <= scan_limit) {
        slots_.clear();
      } else {
        unlink(position);
      }
    }
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(position));
  }

  /// Removes every item `drop` accepts, keeping the others' order, in one pass and one new table (erase() of each
  /// in turn costs a pass over the items and the table apiece). Returns how many were removed. Should the new
  /// table's allocation fail, lookups scan the items instead until the index next grows.
  template <class Drop>
  std::size_t erase_if(Drop&& drop) {
    static_assert(std::is_nothrow_move_assignable_v<Item>, "erase_if shifts items by move assignment");
    const auto kept_end = std::remove_if(items_.begin(), items_.end(), std::forward<Drop>(drop));
    const auto removed = static_cast<std::size_t>(items_.end() - kept_end);
    if (removed == 0) return 0;
    items_.erase(kept_end, items_.end());
    slots_.clear();
    if (items_.size() > scan_limit) index_all(table_size_for(items_.size()));
    return removed;
  }

  /// The 32 bits of a key's hash that the table keeps (its home slot among them): keys that share a tag are found
  /// by comparing them one after another, so the Keys a file's keys go through hash them with a key of the
  /// process's own (detail::keyed_hash).
  static std::uint32_t tag_of(std::size_t hash) noexcept {
    // Multiplying spreads hashes that differ in their low bits alone over the high bits.
    return static_cast<std::uint32_t>((std::uint64_t{hash} * 0x9e3779b97f4a7c15ull) >> 32);
  }

 private:
  // A table slot: the item's position + 1 (0: empty) and 32 bits of its mixed hash, which give the home
  // slot and let probes skip most mismatches without reading the item, and let the table grow without
  // hashing any key again.
  struct Slot {
    std::uint32_t position_plus_one;
    std::uint32_t tag;
  };
  using SlotAllocator = typename std::allocator_traits<Allocator>::template rebind_alloc<Slot>;
  using Table = std::vector<Slot, SlotAllocator>;
  static constexpr std::size_t smallest_table = 32;

  // At most three quarters full: linear probing stays short (a tag compare per slot), and a file's dict of
  // thousands of tensors keeps a table half the size a half-full rule would.
  static bool over_load(std::size_t count, std::size_t slots) noexcept { return count * 4 > slots * 3; }
  static std::size_t table_size_for(std::size_t count) noexcept {
    std::size_t slots = smallest_table;
    while (over_load(count, slots)) slots *= 2;
    return slots;
  }

  template <class Key>
  std::size_t scan(const Key& key) const {
    for (std::size_t i = 0; i < items_.size(); ++i) {
      if (Keys::matches(items_[i], key)) return i;
    }
    return npos;
  }
  template <class Key>
  std::size_t probe(const Key& key, std::uint32_t tag) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = tag & mask;; s = (s + 1) & mask) {
      const Slot slot = slots_[s];
      if (slot.position_plus_one == 0) return npos;
      if (slot.tag == tag && Keys::matches(items_[slot.position_plus_one - 1], key)) return slot.position_plus_one - 1;
    }
  }

  static void place(Table& table, std::size_t position, std::uint32_t tag) noexcept {
    const std::size_t mask = table.size() - 1;
    std::size_t s = tag & mask;
    while (table[s].position_plus_one != 0) s = (s + 1) & mask;
    table[s] = Slot{static_cast<std::uint32_t>(position + 1), tag};
  }
  // Builds a table of `slot_count` over every item; the old state stands until the swap.
  void index_all(std::size_t slot_count) {
    Table table(slot_count, Slot{0, 0}, slots_.get_allocator());
    for (std::size_t i = 0; i < items_.size(); ++i) place(table, i, tag_of(Keys::hash_item(items_[i])));
    slots_.swap(table);
  }
  void regrow(std::size_t slot_count) {
    Table table(slot_count, Slot{0, 0}, slots_.get_allocator());
    for (const Slot slot : slots_) {
      if (slot.position_plus_one != 0) place(table, slot.position_plus_one - 1, slot.tag);
    }
    slots_.swap(table);
  }
  // Drops `position`'s slot and renumbers the later items' slots, then closes the gap by moving back
  // the slots after it that may live there (linear probing needs no tombstones then).
  void unlink(std::size_t position) noexcept {
    const auto target = static_cast<std::uint32_t>(position + 1);
    std::size_t hole = 0;
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s].position_plus_one == target)
        hole = s;
      else if (slots_[s].position_plus_one > target)
        --slots_[s].position_plus_one;
    }
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t next = (hole + 1) & mask; slots_[next].position_plus_one != 0; next = (next + 1) & mask) {
      const std::size_t home = slots_[next].tag & mask;
      if (((next - home) & mask) >= ((next - hole) & mask)) {
        slots_[hole] = slots_[next];
        hole = next;
      }
    }
    slots_[hole] = Slot{0, 0};
  }

  std::vector<Item, Allocator> items_;
  Table slots_;
};

}  // namespace tensorfile::detail
