// SPDX-License-Identifier: MIT
// Shape: a vector of int64 with inline room for small shapes, used as std::vector<std::int64_t> is.
#include <tensorfile/core/shape.hpp>

// fmt/ranges.h would print a Shape as a range; formatter<Shape> must win over it (only it takes a width).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile_catch.hpp"

using tensorfile::Shape;

namespace {
// A shape of `count` values 0, 1, ..., count - 1.
Shape iota_shape(std::size_t count) {
  Shape s(count);
  std::iota(s.begin(), s.end(), std::int64_t{0});
  return s;
}
std::int64_t sum(std::span<const std::int64_t> values) { return std::accumulate(values.begin(), values.end(), 0L); }
}  // namespace

TEST_CASE("Shape reads and converts as std::vector<std::int64_t>", "[shape]") {
  const Shape s{2, 3, 4};
  CHECK(s.size() == 3);
  CHECK_FALSE(s.empty());
  CHECK(s[1] == 3);
  CHECK(s.front() == 2);
  CHECK(s.back() == 4);
  CHECK(s == std::vector<std::int64_t>{2, 3, 4});
  CHECK(std::vector<std::int64_t>{2, 3, 4} == s);
  CHECK(s != Shape{2, 3});
  CHECK(Shape{2, 3} < s);
  const std::vector<std::int64_t> copy = s;
  CHECK(copy == std::vector<std::int64_t>{2, 3, 4});
  CHECK(sum(s) == 9);  // a span of its values
  std::int64_t total = 0;
  for (const auto v : s) total += v;
  CHECK(total == 9);
  CHECK(std::vector<std::int64_t>(s.rbegin(), s.rend()) == std::vector<std::int64_t>{4, 3, 2});
  CHECK(Shape(std::vector<std::int64_t>{5, 6}) == Shape{5, 6});
  CHECK(Shape(std::size_t{3}, 7) == Shape{7, 7, 7});
  CHECK(Shape().empty());
}

TEST_CASE("Shape keeps small shapes inline and grows past them", "[shape]") {
  SECTION("up to inline_capacity values allocate nothing") {
    Shape s = iota_shape(Shape::inline_capacity);
    CHECK(s.capacity() == Shape::inline_capacity);
    const std::int64_t* inline_data = s.data();
    Shape moved = std::move(s);
    CHECK(moved == iota_shape(Shape::inline_capacity));
    CHECK(moved.data() != inline_data);  // inline values are copied, not handed over
    CHECK(s.empty());                    // NOLINT(bugprone-use-after-move): moved-from is empty
  }
  SECTION("more values move to an allocation that moves are handed over with") {
    Shape s;
    for (std::int64_t i = 0; i < 40; ++i) s.push_back(i);
    CHECK(s.size() == 40);
    CHECK(s.capacity() >= 40);
    CHECK(s == iota_shape(40));
    const std::int64_t* heap_data = s.data();
    Shape moved = std::move(s);
    CHECK(moved.data() == heap_data);
    CHECK(s.empty());  // NOLINT(bugprone-use-after-move)
    Shape copy = moved;
    CHECK(copy == moved);
    CHECK(copy.data() != moved.data());
    copy = Shape{1, 2};  // a heap shape takes inline values
    CHECK(copy == Shape{1, 2});
    moved = copy;  // and copies them
    CHECK(moved == Shape{1, 2});
  }
  SECTION("copies and moves between inline and allocated shapes") {
    Shape small{1, 2};
    Shape large = iota_shape(12);
    small.swap(large);
    CHECK(small == iota_shape(12));
    CHECK(large == Shape{1, 2});
    large = small;
    CHECK(large == iota_shape(12));
    small = std::move(large);
    CHECK(small == iota_shape(12));
    const Shape& same = small;
    small = same;  // self-assignment keeps the values
    CHECK(small == iota_shape(12));
  }
}

TEST_CASE("Shape changes as std::vector<std::int64_t> does", "[shape]") {
  Shape s{1, 2, 3};
  SECTION("insert and erase keep the others in order") {
    s.insert(s.begin() + 1, 9);
    CHECK(s == Shape{1, 9, 2, 3});
    s.erase(s.begin());
    CHECK(s == Shape{9, 2, 3});
    const std::vector<std::int64_t> more{7, 8, 10, 11};
    s.insert(s.begin() + 1, more.begin(), more.end());  // past the inline capacity
    CHECK(s == Shape{9, 7, 8, 10, 11, 2, 3});
    s.erase(s.begin() + 1, s.begin() + 5);
    CHECK(s == Shape{9, 2, 3});
  }
  SECTION("resize, assign, pop_back and clear") {
    s.resize(5, 4);
    CHECK(s == Shape{1, 2, 3, 4, 4});
    s.resize(2);
    CHECK(s == Shape{1, 2});
    s.assign(std::size_t{8}, 1);
    CHECK(s == Shape(std::size_t{8}, 1));
    s.pop_back();
    CHECK(s.size() == 7);
    s = {4, 5};
    CHECK(s == Shape{4, 5});
    s.clear();
    CHECK(s.empty());
    s.emplace_back(6) += 1;
    CHECK(s == Shape{7});
  }
}

TEST_CASE("Shape prints as libtorch prints sizes", "[shape]") {
  const auto streamed = [](const Shape& shape) {
    std::ostringstream out;
    out << shape;
    return out.str();
  };
  SECTION("to_string, operator<< and fmt give one text") {
    const Shape heap{1, -2, 3, 4, 5, 6, INT64_MAX};  // past the inline capacity
    for (const Shape& s : {Shape{2, 3}, Shape{4}, Shape{}, heap}) {
      CHECK(streamed(s) == tensorfile::to_string(s));
      CHECK(fmt::format("{}", s) == tensorfile::to_string(s));
    }
    CHECK(tensorfile::to_string(Shape{2, 3}) == "[2, 3]");
    CHECK(tensorfile::to_string(Shape{4}) == "[4]");
    CHECK(tensorfile::to_string(Shape{}) == "[]");
    CHECK(tensorfile::to_string(heap) == "[1, -2, 3, 4, 5, 6, 9223372036854775807]");
    CHECK(tensorfile::to_string(Shape{INT64_MIN}) == "[-9223372036854775808]");
  }
  SECTION("a spec applies to the text as to a string's") {
    CHECK(fmt::format("{:>8}|", Shape{2, 3}) == "  [2, 3]|");
    CHECK(fmt::format("{:*^10}", Shape{4}) == "***[4]****");
    CHECK(fmt::format("{:<4}|{:s}", Shape{}, Shape{1}) == "[]  |[1]");
    CHECK(fmt::format("{:.3}", Shape{10, 20}) == "[10");
    CHECK(fmt::format("{} and {:>5}", std::vector<Shape>{{2}, {}}, Shape{3}) == "[[2], []] and   [3]");
  }
  SECTION("a spec fmt would refuse for a string is refused") {
    REQUIRE_THROWS_AS(fmt::format(fmt::runtime("{:d}"), Shape{2}), fmt::format_error);
    REQUIRE_THROWS_AS(fmt::format(fmt::runtime("{:>{}}"), Shape{2}, 8), fmt::format_error);
    CHECK(fmt::format(fmt::runtime("{:>" + std::string(2, '9') + "}"), Shape{2}) == std::string(96, ' ') + "[2]");
  }
}
