// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/tensor_view.hpp>: multi-index access and C-order iteration over strides.
#include <tensorfile/core/tensor.hpp>
#include <tensorfile/core/tensor_view.hpp>

#include <numeric>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("TensorView indexes and iterates through strides", "[tensor_view]") {
  std::vector<std::int32_t> values(24);
  std::iota(values.begin(), values.end(), 0);
  const Tensor cube = Tensor::from_values(std::span<const std::int32_t>(values), {2, 3, 4});
  SECTION("multi-index") {
    const auto v = cube.view<const std::int32_t>();
    CHECK(v(1, 2, 3) == 23);
    CHECK(v(0, 1, 0) == 4);
    CHECK(v.at({1, 0, 2}) == 14);
    CHECK(v.dim() == 3);
    CHECK(v.numel() == 24);
    REQUIRE_THROWS_WITH(v.at({1, 3, 0}), "tensorfile: index 3 is out of range for dimension 1; expected 0 to 2");
    REQUIRE_THROWS_WITH(v.at({1, 0}), "tensorfile: index has 2 entries; expected 3");
  }
  SECTION("iteration follows C order of the view, not of memory") {
    const Tensor p = cube.permute({2, 1, 0}).slice(0, 1, 4, 2);  // sizes (2, 3, 2)
    std::vector<std::int32_t> seen(p.view<const std::int32_t>().begin(), p.view<const std::int32_t>().end());
    CHECK(seen == std::vector<std::int32_t>{1, 13, 5, 17, 9, 21, 3, 15, 7, 19, 11, 23});
  }
  SECTION("writes through a mutable view") {
    auto v = cube.select(0, 1).view<std::int32_t>();
    for (auto& x : v) x = -x;
    CHECK(cube.view<const std::int32_t>()(1, 0, 0) == -12);
    CHECK(cube.view<const std::int32_t>()(0, 2, 3) == 11);
  }
  SECTION("0-d and empty views") {
    const auto scalar = cube.select(0, 0).select(0, 0).select(0, 0).view<const std::int32_t>();
    CHECK(scalar.dim() == 0);
    CHECK(std::distance(scalar.begin(), scalar.end()) == 1);
    CHECK(*scalar.begin() == 0);
    CHECK(scalar() == 0);
    const auto none = cube.slice(1, 1, 1).view<const std::int32_t>();
    CHECK(none.begin() == none.end());
  }
}

TEST_CASE("TensorView::at takes one index per dimension, checked", "[tensor_view]") {
  std::vector<std::int32_t> values(24);
  std::iota(values.begin(), values.end(), 0);
  const Tensor cube = Tensor::from_values(std::span<const std::int32_t>(values), {2, 3, 4});
  SECTION("a rank-1 view takes a bare index") {
    const auto row = Tensor::from_values(std::span<const std::int32_t>(values)).view<const std::int32_t>();
    CHECK(row.at(10) == 10);
    CHECK(row.at(std::size_t{23}) == 23);
    CHECK(row.at(std::uint8_t{7}) == 7);
    CHECK(row.at({10}) == 10);
    REQUIRE_THROWS_WITH(row.at(24), "tensorfile: index 24 is out of range for dimension 0; expected 0 to 23");
    REQUIRE_THROWS_WITH(row.at(-1), "tensorfile: index -1 is out of range for dimension 0; expected 0 to 23");
    REQUIRE_THROWS_WITH(row.at(std::uint64_t{1} << 63),
                        "tensorfile: index 9223372036854775808 is out of range for dimension 0; expected 0 to 23");
  }
  SECTION("rank N takes N indices, through the view's strides") {
    const auto v = cube.permute({2, 0, 1}).view<const std::int32_t>();  // sizes (4, 2, 3)
    for (std::int64_t i = 0; i < 4; ++i) {
      for (std::int64_t j = 0; j < 2; ++j) {
        for (std::int64_t k = 0; k < 3; ++k) {
          CHECK(v.at(i, j, k) == v(i, j, k));
          CHECK(v.at(i, j, k) == v.at({i, j, k}));
          CHECK(v.at(i, j, k) == static_cast<std::int32_t>(j * 12 + k * 4 + i));
        }
      }
    }
    REQUIRE_THROWS_WITH(v.at(3, 1, 3), "tensorfile: index 3 is out of range for dimension 2; expected 0 to 2");
    REQUIRE_THROWS_WITH(v.at(0u, 2, 0L), "tensorfile: index 2 is out of range for dimension 1; expected 0 to 1");
  }
  SECTION("a wrong count is refused: the rank is known at run time only") {
    const auto v = cube.view<const std::int32_t>();
    REQUIRE_THROWS_WITH(v.at(1), "tensorfile: index has 1 entries; expected 3");
    REQUIRE_THROWS_WITH(v.at(1, 2, 3, 0), "tensorfile: index has 4 entries; expected 3");
    REQUIRE_THROWS_WITH(v.at(), "tensorfile: index has 0 entries; expected 3");
    const auto scalar = cube.select(0, 1).select(0, 2).select(0, 3).view<const std::int32_t>();
    CHECK(scalar.at() == 23);
    REQUIRE_THROWS_WITH(scalar.at(0), "tensorfile: index has 1 entries; expected 0");
  }
  SECTION("writes through a mutable view") {
    auto v = cube.select(0, 1).view<std::int32_t>();
    v.at(2, 3) = -1;
    CHECK(cube.view<const std::int32_t>().at(1, 2, 3) == -1);
  }
}

TEST_CASE("A view from Tensor::view() keeps the storage alive past its tensor", "[tensor_view]") {
  // The range-for below iterates a view of a temporary: the transposed tensor's contiguous copy dies at the end
  // of the range expression, before the loop body runs. ASan and valgrind see a dangling read if the view does
  // not hold the copy's storage.
  const Tensor t = Tensor::from_values<std::int32_t>({0, 1, 2, 3, 4, 5}).reshape({2, 3}).transpose(0, 1);
  std::vector<std::int32_t> read;
  for (const std::int32_t x : t.contiguous().view<const std::int32_t>()) read.push_back(x);
  CHECK(read == std::vector<std::int32_t>{0, 3, 1, 4, 2, 5});
  TensorView<const std::int32_t> kept = Tensor::from_values<std::int32_t>({7, 8}).view<const std::int32_t>();
  CHECK(kept(1) == 8);
}
