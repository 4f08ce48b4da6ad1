// SPDX-License-Identifier: MIT
/// @file
/// TensorView<T>: a typed, strided window on host memory with multi-index access and C-order iteration.
#pragma once

#include <cassert>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"

namespace tensorfile {

/// A typed view: element (i0, i1, ...) lives at data[i0*stride0 + i1*stride1 + ...]. T may be const (read-only
/// view). A view from Tensor::view() holds the tensor's storage, so it stays valid after the tensor is gone
/// (`for (float x : t.contiguous().view<const float>())` reads a temporary's copy safely); one built from a
/// pointer owns nothing.
template <class T>
class TensorView {
 public:
  /// C-order iterator over every element of the view.
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;  ///< a forward iterator
    using value_type = std::remove_cv_t<T>;               ///< the element type without const
    using difference_type = std::ptrdiff_t;               ///< a count of steps
    using pointer = T*;                                   ///< address of an element
    using reference = T&;                                 ///< an element, read-only when T is const

    iterator() = default;
    /// The current element.
    reference operator*() const noexcept { return view_->data_[offset_]; }
    /// The current element's address.
    pointer operator->() const noexcept { return view_->data_ + offset_; }
    /// Steps to the next element in C order (the last index moves fastest).
    iterator& operator++() noexcept {
      ++position_;
      // Odometer step: bump the last index, carrying into earlier ones.
      for (std::size_t d = index_.size(); d-- > 0;) {
        if (++index_[d] < view_->sizes_[d]) {
          offset_ += view_->strides_[d];
          return *this;
        }
        offset_ -= (index_[d] - 1) * view_->strides_[d];
        index_[d] = 0;
      }
      return *this;
    }
    /// Steps to the next element, returning the iterator as it was.
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++*this;
      return old;
    }
    /// Same position in the walk (iterators of one view).
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.position_ == b.position_; }

   private:
    friend class TensorView;
    iterator(const TensorView* view, std::int64_t position)
        : view_(view), index_(view->sizes_.size(), 0), position_(position) {}

    const TensorView* view_ = nullptr;
    std::vector<std::int64_t> index_;
    std::int64_t offset_ = 0;
    std::int64_t position_ = 0;
  };

  /// A view of `sizes`/`strides` (in elements) starting at `data`.
  /// `owner`, when given, is kept alive as long as the view. Throws ArgumentError when a size is negative or the
  /// element count overflows int64.
  TensorView(T* data, std::vector<std::int64_t> sizes, std::vector<std::int64_t> strides, Storage owner = {})
      : data_(data), sizes_(std::move(sizes)), strides_(std::move(strides)), owner_(std::move(owner)) {
    numel_ = 1;
    for (auto s : sizes_) {
      if (s < 0)
        throw ArgumentError("a view's size is negative; expected sizes of 0 or more, got " + std::to_string(s));
      if (s == 0) numel_ = 0;  // before multiplying: the other sizes of an empty view may overflow together
    }
    for (std::size_t d = 0; d < sizes_.size() && numel_ != 0; ++d) {
      const auto product = detail::checked_mul(numel_, sizes_[d]);
      if (!product) throw ArgumentError("a view's element count overflows int64");
      numel_ = *product;
    }
  }

  /// Element at a full multi-index. Precondition (asserted): one in-range index per dimension.
  template <std::integral... I>
  [[nodiscard]] T& operator()(I... index) const noexcept {
    assert(sizeof...(I) == sizes_.size());
    std::int64_t offset = 0;
    std::size_t d = 0;
    ((assert(index >= 0 && static_cast<std::int64_t>(index) < sizes_[d]),
      offset += static_cast<std::int64_t>(index) * strides_[d++]),
     ...);
    return data_[offset];
  }

  /// Element at a full multi-index, checked: `view.at(10)`, `view.at(1, 2)`. The rank is known only at run time, so
  /// a count of indices other than dim() throws ArgumentError, as an index outside its dimension does.
  template <std::integral... I>
  [[nodiscard]] T& at(I... index) const {
    check_count(sizeof...(I));
    std::int64_t offset = 0;
    std::size_t d = 0;
    ((offset += checked_index(index, d) * strides_[d], ++d), ...);
    return data_[offset];
  }
  /// Element at `index` (one entry per dimension), checked as at(i0, i1, ...).
  [[nodiscard]] T& at(std::span<const std::int64_t> index) const {
    check_count(index.size());
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < index.size(); ++d) offset += checked_index(index[d], d) * strides_[d];
    return data_[offset];
  }
  /// at() with a braced list: `view.at({1, 2})`.
  [[nodiscard]] T& at(std::initializer_list<std::int64_t> index) const {
    return at(std::span<const std::int64_t>(index.begin(), index.size()));
  }

  [[nodiscard]] iterator begin() const { return numel_ == 0 ? end() : iterator(this, 0); }  ///< first element
  [[nodiscard]] iterator end() const { return iterator(this, numel_); }                     ///< past the last

  [[nodiscard]] std::size_t dim() const noexcept { return sizes_.size(); }           ///< number of dims
  [[nodiscard]] std::int64_t size(std::size_t d) const { return sizes_.at(d); }      ///< extent of dim d
  [[nodiscard]] std::int64_t stride(std::size_t d) const { return strides_.at(d); }  ///< stride of dim d
  [[nodiscard]] std::int64_t numel() const noexcept { return numel_; }               ///< element count
  [[nodiscard]] T* data() const noexcept { return data_; }                           ///< element (0,...,0)

 private:
  void check_count(std::size_t count) const {
    if (count != sizes_.size()) {
      throw ArgumentError("index has " + std::to_string(count) + " entries; expected " + std::to_string(sizes_.size()));
    }
  }
  // `index` as an offset along dimension `d`; ArgumentError outside [0, size(d)). Unsigned indices are compared
  // unconverted, so one past INT64_MAX cannot wrap into range.
  template <std::integral I>
  [[nodiscard]] std::int64_t checked_index(I index, std::size_t d) const {
    bool inside = false;
    if constexpr (std::is_signed_v<I>) {
      inside = index >= 0 && index < sizes_[d];
    } else {
      inside = static_cast<std::uint64_t>(index) < static_cast<std::uint64_t>(sizes_[d]);
    }
    if (!inside) {
      throw ArgumentError("index " + std::to_string(index) + " is out of range for dimension " + std::to_string(d) +
                          "; expected 0 to " + std::to_string(sizes_[d] - 1));
    }
    return static_cast<std::int64_t>(index);
  }

  T* data_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::int64_t> strides_;
  std::int64_t numel_ = 1;
  Storage owner_;  // keeps the elements alive (empty for a view over a caller's pointer)
};

}  // namespace tensorfile
