// SPDX-License-Identifier: MIT
/// @file
/// Shape: a tensor's sizes or strides, a vector of int64 that keeps up to five of them inline (no allocation).
#pragma once

// fmt/core.h, not fmt/format.h: it declares fmt::formatter for a fraction of the parse time.
#include <fmt/core.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/config.hpp"

namespace tensorfile {

/// Sizes or strides of a tensor, in elements. Reads and changes as std::vector<std::int64_t> does (size, [],
/// range-for, push_back, insert, erase, resize...), converts to and from std::vector<std::int64_t> and to
/// std::span<const std::int64_t>, and compares equal to a vector of the same values. Up to `inline_capacity`
/// values live inside the object, so that the shapes of nearly every tensor cost no allocation; iterators are
/// pointers, invalidated as a vector's are (and by moving or swapping a Shape that holds its values inline).
class Shape {
 public:
  using value_type = std::int64_t;                                       ///< element type
  using size_type = std::size_t;                                         ///< index type
  using difference_type = std::ptrdiff_t;                                ///< iterator distance
  using reference = std::int64_t&;                                       ///< element reference
  using const_reference = const std::int64_t&;                           ///< element reference
  using pointer = std::int64_t*;                                         ///< element pointer
  using const_pointer = const std::int64_t*;                             ///< element pointer
  using iterator = std::int64_t*;                                        ///< contiguous iterator
  using const_iterator = const std::int64_t*;                            ///< contiguous iterator
  using reverse_iterator = std::reverse_iterator<iterator>;              ///< reverse iterator
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;  ///< reverse iterator
  /// Values held without allocating.
  static constexpr std::size_t inline_capacity = 5;

  Shape() noexcept {}  ///< empty (a 0-d tensor's shape)
  /// `count` values of `value` (zeros by default), as std::vector's (count, value).
  explicit Shape(size_type count, std::int64_t value = 0) { assign(count, value); }
  /// The values listed: `Shape{2, 3}`.
  Shape(std::initializer_list<std::int64_t> values) { assign(values.begin(), values.end()); }
  /// The values in [first, last).
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  /// The values of `values`.
  Shape(const std::vector<std::int64_t>& values) { assign(values.data(), values.data() + values.size()); }
  /// The values of `values` (explicit: a span says nothing about ownership).
  explicit Shape(std::span<const std::int64_t> values) { assign(values.data(), values.data() + values.size()); }
  /// Copies the values.
  Shape(const Shape& other) {
    if (other.heap()) {
      assign(other.begin(), other.end());
    } else {
      copy_inline(other);
    }
  }
  /// Takes `other`'s values, leaving it empty.
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {  ///< copies the values
    if (this == &other) return *this;
    if (!other.heap() && !heap()) {
      copy_inline(other);
    } else {
      assign(other.begin(), other.end());
    }
    return *this;
  }
  /// Takes `other`'s values, leaving it empty.
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<std::int64_t> values) {  ///< replaces the values
    assign(values.begin(), values.end());
    return *this;
  }
  ~Shape() { release(); }  ///< frees what was allocated

  /// The values as a std::vector.
  operator std::vector<std::int64_t>() const { return std::vector<std::int64_t>(begin(), end()); }

  [[nodiscard]] size_type size() const noexcept { return size_; }                   ///< number of values
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }                  ///< no value
  [[nodiscard]] size_type capacity() const noexcept { return capacity_; }           ///< values held without growing
  [[nodiscard]] std::int64_t* data() noexcept { return heap() ? heap_ : inline_; }  ///< first value
  [[nodiscard]] const std::int64_t* data() const noexcept { return heap() ? heap_ : inline_; }  ///< first value
  [[nodiscard]] iterator begin() noexcept { return data(); }                                    ///< first value
  [[nodiscard]] const_iterator begin() const noexcept { return data(); }                        ///< first value
  [[nodiscard]] iterator end() noexcept { return data() + size_; }                              ///< past the last value
  [[nodiscard]] const_iterator end() const noexcept { return data() + size_; }                  ///< past the last value
  [[nodiscard]] const_iterator cbegin() const noexcept { return begin(); }                      ///< first value
  [[nodiscard]] const_iterator cend() const noexcept { return end(); }                          ///< past the last value
  [[nodiscard]] reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }          ///< last value
  /// Last value.
  [[nodiscard]] const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  [[nodiscard]] reverse_iterator rend() noexcept { return reverse_iterator(begin()); }  ///< before the first
  /// Before the first value.
  [[nodiscard]] const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  /// Value `i` (< size(), unchecked).
  [[nodiscard]] std::int64_t& operator[](size_type i) noexcept { return data()[i]; }
  /// Value `i`, read only (< size(), unchecked).
  [[nodiscard]] const std::int64_t& operator[](size_type i) const noexcept { return data()[i]; }
  [[nodiscard]] std::int64_t& front() noexcept { return data()[0]; }                     ///< first value (not empty)
  [[nodiscard]] const std::int64_t& front() const noexcept { return data()[0]; }         ///< first value (not empty)
  [[nodiscard]] std::int64_t& back() noexcept { return data()[size_ - 1]; }              ///< last value (not empty)
  [[nodiscard]] const std::int64_t& back() const noexcept { return data()[size_ - 1]; }  ///< last value

  /// Makes room for `count` values.
  void reserve(size_type count) {
    if (count > capacity_) grow_to(count);
  }
  /// Removes every value (the capacity stays).
  void clear() noexcept { size_ = 0; }
  /// Replaces the values with those in [first, last).
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>) {
      const auto count = static_cast<size_type>(std::distance(first, last));
      reserve(count);
      std::int64_t* out = data();
      for (; first != last; ++first) *out++ = static_cast<std::int64_t>(*first);
      size_ = static_cast<std::uint32_t>(count);
    } else {
      for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
    }
  }
  /// Replaces the values with `count` copies of `value`.
  void assign(size_type count, std::int64_t value) {
    clear();
    resize(count, value);
  }
  /// Appends `value`.
  void push_back(std::int64_t value) {
    if (size_ == capacity_) grow_to(static_cast<size_type>(capacity_) * 2);  // in size_type: uint32 would wrap
    data()[size_++] = value;
  }
  /// Appends `value` and returns it.
  std::int64_t& emplace_back(std::int64_t value) {
    push_back(value);
    return back();
  }
  /// Removes the last value (not empty).
  void pop_back() noexcept { --size_; }
  /// Keeps the first `count` values, or appends copies of `value` up to `count`.
  void resize(size_type count, std::int64_t value = 0) {
    reserve(count);
    for (size_type i = size_; i < count; ++i) data()[i] = value;
    size_ = static_cast<std::uint32_t>(count);
  }
  /// Inserts `value` before `position`; returns where it now is.
  iterator insert(const_iterator position, std::int64_t value) {
    const auto at = static_cast<size_type>(position - begin());
    push_back(value);
    rotate_tail(at, size_ - 1);
    return begin() + at;
  }
  /// Inserts the values in [first, last) (not from this shape) before `position`; returns where the first now is.
  template <std::input_iterator It>
  iterator insert(const_iterator position, It first, It last) {
    const auto at = static_cast<size_type>(position - begin());
    const size_type old_size = size_;
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
    rotate_tail(at, old_size);
    return begin() + at;
  }
  /// Removes the value at `position`; returns what follows it.
  iterator erase(const_iterator position) noexcept { return erase(position, position + 1); }
  /// Removes the values in [first, last); returns what follows them.
  iterator erase(const_iterator first, const_iterator last) noexcept {
    const auto at = static_cast<size_type>(first - begin());
    const auto count = static_cast<size_type>(last - first);
    if (count != 0) std::memmove(begin() + at, begin() + at + count, (size_ - at - count) * sizeof(std::int64_t));
    size_ -= static_cast<std::uint32_t>(count);
    return begin() + at;
  }
  /// Exchanges the values of two shapes.
  void swap(Shape& other) noexcept {
    Shape held(std::move(other));
    other = std::move(*this);
    *this = std::move(held);
  }

  /// Same values in the same order.
  friend bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.size_ == b.size_ && same_values(a.data(), b.data(), a.size_);
  }
  /// Lexicographic order, as std::vector's.
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept {
    const size_type common = a.size_ < b.size_ ? a.size_ : b.size_;
    for (size_type i = 0; i < common; ++i) {
      if (a[i] != b[i]) return a[i] < b[i] ? std::strong_ordering::less : std::strong_ordering::greater;
    }
    return a.size_ <=> b.size_;
  }
  /// Same values as `b`, without converting it.
  friend bool operator==(const Shape& a, const std::vector<std::int64_t>& b) noexcept {
    return a.size_ == b.size() && same_values(a.data(), b.data(), a.size_);
  }

 private:
  [[nodiscard]] bool heap() const noexcept { return capacity_ > inline_capacity; }
  // Hand-written rather than <algorithm>'s, whose instantiations every including TU would pay for.
  static bool same_values(const std::int64_t* a, const std::int64_t* b, size_type count) noexcept {
    for (size_type i = 0; i < count; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  // Moves the values from `middle` on to `at`, shifting those in [at, middle) after them (std::rotate).
  void rotate_tail(size_type at, size_type middle) noexcept {
    std::int64_t* values = data();
    for (size_type i = middle; i < size_; ++i) {  // each value of the tail sinks to its place, as insertion does
      const std::int64_t moved = values[i];
      std::memmove(values + at + 1, values + at, (i - at) * sizeof(std::int64_t));
      values[at++] = moved;
    }
  }
  // Moves the values to an allocation of at least `count` (and at least twice the inline capacity).
  void grow_to(size_type count) {
    if (count < 2 * inline_capacity) count = 2 * inline_capacity;
    if (count > UINT32_MAX) throw std::bad_alloc();
    auto* bigger = new std::int64_t[count];
    if (size_ != 0) std::memcpy(bigger, data(), size_ * sizeof(std::int64_t));
    release();
    heap_ = bigger;
    capacity_ = static_cast<std::uint32_t>(count);
  }
  // Copies the inline values of `other` into *this, which holds no allocation.
  void copy_inline(const Shape& other) noexcept {
    std::memcpy(inline_, other.inline_, sizeof inline_);
    size_ = other.size_;
  }
  void release() noexcept {
    if (heap()) delete[] heap_;
    capacity_ = inline_capacity;
  }
  // Takes `other`'s values into *this, which holds no allocation; `other` is left empty and inline.
  void take(Shape& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.heap()) {
      heap_ = other.heap_;
    } else {
      std::memcpy(inline_, other.inline_, sizeof inline_);  // a fixed size: a few moves, no call
    }
    other.size_ = 0;
    other.capacity_ = inline_capacity;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = inline_capacity;
  union {
    std::int64_t inline_[inline_capacity] = {};
    std::int64_t* heap_;
  };
};

/// The values in brackets, as libtorch prints sizes and inspect and Value trees show them: "[2, 3]", "[4]", "[]".
[[nodiscard]] TENSORFILE_ENTRY std::string to_string(const Shape& shape);

/// Writes to_string(shape).
TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const Shape& shape);

}  // namespace tensorfile

/// @namespace fmt
/// {fmt}: tensorfile specializes its `formatter` for Shape, Tensor, PrintedTensor and Value.

/// fmt support: `fmt::format("{}", t.sizes())` is to_string(shape); a spec applies to that text as to a string's
/// ("{:>12}", "{:*^20}"), with its width written out ("{:>{}}" is a fmt::format_error).
template <>
struct fmt::formatter<tensorfile::Shape> {
  /// Checks the spec as a string's and keeps it.
  template <class ParseContext>
  constexpr auto parse(ParseContext& ctx) -> decltype(ctx.begin()) {
    fmt::formatter<fmt::string_view> as_string;
    const auto end = as_string.parse(ctx);
    spec_ = fmt::string_view(ctx.begin(), static_cast<std::size_t>(end - ctx.begin()));
    return end;
  }
  /// Writes to_string(shape) under the spec.
  template <class Context>
  auto format(const tensorfile::Shape& shape, Context& ctx) const -> decltype(ctx.out()) {
    // With fmt/core.h alone, formatter<string_view>::format and format_to's core are declared, not defined;
    // vformat is compiled in libfmt. The spec views the format string (as fmt's chrono formatter keeps its own),
    // which lives through the one format call.
    std::string pattern = "{:";
    pattern.append(spec_.data(), spec_.size()).append("}");
    const std::string text = tensorfile::to_string(shape);
    const std::string formatted = fmt::vformat(pattern, fmt::make_format_args(text));
    auto out = ctx.out();
    for (const char c : formatted) *out++ = c;
    return out;
  }

 private:
  fmt::string_view spec_{};
};

#if TENSORFILE_DEFINITIONS_OF(core_shape)
#include <ostream>

namespace tensorfile {

TENSORFILE_ENTRY std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << to_string(shape); }

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(core_shape)
