// SPDX-License-Identifier: MIT
#include <tensorfile/core/detail/tensor_arena.hpp>
#include <tensorfile/core/heap_backend.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile::detail::TensorArena;

TEST_CASE("TensorArena: tensor Values boxed together act as any other, and the boxes go with the last of them",
          "[value][arena]") {
  // One storage for every tensor, as a heap load's arena: its use count shows when the boxes are destroyed.
  const Storage block = heap_storage(4000 * sizeof(std::int32_t));
  for (std::int32_t i = 0; i < 4000; ++i) reinterpret_cast<std::int32_t*>(block.mutable_data())[i] = i;
  const long alone = block.use_count();

  std::vector<Value> values;
  {
    auto arena = std::make_shared<TensorArena>();
    // 1,500 tensors: several blocks (16, 32, ... 256 boxes), the last one partly used.
    for (std::int64_t i = 0; i < 1500; ++i) {
      values.push_back(TensorArena::make(arena, Tensor(block, DType::Int32, {2}, {1}, 2 * i)));
    }
  }  // the arena's owner is gone: the Values keep it
  REQUIRE(values.size() == 1500);
  CHECK(block.use_count() == alone + 1500);
  for (std::size_t i = 0; i < values.size(); i += 97) {
    const Value& v = values[i];
    REQUIRE(v.is_tensor());
    CHECK_FALSE(v.is_parameter());
    CHECK(v.as_tensor().data<std::int32_t>()[1] == static_cast<std::int32_t>(2 * i + 1));
    CHECK(v == Value(v.as_tensor()));  // equal to a separately boxed tensor with the same bytes
  }
  CHECK(values[3] != values[4]);
  const Value copy = values[7];  // a copy shares the box, as for any boxed kind
  CHECK(&copy.as_tensor() == &values[7].as_tensor());

  // Dropping all but one Value destroys nothing: the boxes share the arena's lifetime.
  const Value last = values.back();
  values.clear();
  CHECK(block.use_count() == alone + 1500);
  CHECK(last.as_tensor().data<std::int32_t>()[0] == 2 * 1499);
}

TEST_CASE("TensorArena: Values outlive the arena's own handle and are destroyed once", "[value][arena]") {
  const Storage block = heap_storage(64);
  const long alone = block.use_count();
  {
    Value kept;
    {
      auto arena = std::make_shared<TensorArena>();
      kept = TensorArena::make(arena, Tensor(block, DType::UInt8, {64}));
      const Value dropped = TensorArena::make(arena, Tensor(block, DType::UInt8, {8}));
      CHECK(block.use_count() == alone + 2);
    }
    CHECK(block.use_count() == alone + 2);  // `dropped`'s box lives as long as `kept` does
    CHECK(kept.as_tensor().numel() == 64);
  }
  CHECK(block.use_count() == alone);  // the last Value took the arena and both boxes with it
}
