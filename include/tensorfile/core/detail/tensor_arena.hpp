// SPDX-License-Identifier: MIT
// TensorArena: the tensor Values of one load, their boxes allocated together rather than one at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"

namespace tensorfile::detail {

/// Makes tensor Values whose boxes live in blocks that the arena owns: a file's thousands of tensors cost no
/// allocation and no control block each (about 32 bytes less per tensor), and are freed in a few calls. Every Value
/// made here shares the arena, so its boxes go when the last of those Values does; that is no change for a
/// loaded tensor, which already keeps the load's whole storage arena alive. make() is for one thread at a time; the
/// Values it returns are shared and destroyed from any thread, as others are.
class TensorArena {
 public:
  TensorArena() = default;
  TensorArena(const TensorArena&) = delete;
  TensorArena& operator=(const TensorArena&) = delete;
  ~TensorArena() {
    for (Block& block : blocks_) {
      for (std::size_t i = 0; i < block.used; ++i) std::destroy_at(block.boxes + i);
      std::allocator<Box>().deallocate(block.boxes, block.capacity);
    }
  }

  /// A tensor Value of `tensor`, boxed in `arena` (which must be this arena's owner).
  static Value make(const std::shared_ptr<TensorArena>& arena, Tensor&& tensor) {
    TensorArena& self = *arena;
    if (self.blocks_.empty() || self.blocks_.back().used == self.blocks_.back().capacity) self.add_block();
    Block& block = self.blocks_.back();
    Box* box = std::construct_at(block.boxes + block.used, std::move(tensor), false);
    ++block.used;
    return ValueAccess::tensor_in(std::shared_ptr<void>(arena, box));  // shares the arena's count
  }

 private:
  using Box = ValueAccess::TensorBox;
  struct Block {
    Box* boxes;
    std::size_t capacity;
    std::size_t used;
  };
  // Blocks double from 16 boxes to 256 (42 KB): a small file wastes little, a large one allocates rarely, and no
  // block is large enough for malloc to map it afresh (and fault its pages in again) on every load.
  void add_block() {
    const std::size_t capacity = blocks_.empty() ? 16 : std::min<std::size_t>(blocks_.back().capacity * 2, 256);
    // Room first, so that the push below cannot throw after the allocation; doubled, so that a load of millions
    // of tensors does not copy the block list once per block.
    if (blocks_.size() == blocks_.capacity()) blocks_.reserve(2 * blocks_.size() + 1);
    blocks_.push_back(Block{std::allocator<Box>().allocate(capacity), capacity, 0});
  }

  std::vector<Block> blocks_;
};

}  // namespace tensorfile::detail
