// SPDX-License-Identifier: MIT
// Tests of <tensorfile/io/from_buffer.hpp>: torch.frombuffer's semantics, every dtype, every error.
#include <tensorfile/io/from_buffer.hpp>

#include <array>
#include <memory>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEMPLATE_TEST_CASE("from_buffer shares the buffer for every dtype", "[from_buffer]", bool, std::uint8_t, std::int8_t,
                   std::int16_t, std::int32_t, std::int64_t, std::uint16_t, std::uint32_t, std::uint64_t, Half,
                   BFloat16, float, double, ComplexHalf, std::complex<float>, std::complex<double>) {
  std::vector<std::byte> buffer(6 * sizeof(TestType));
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::byte>(i % 2);
  const DType dtype = dtype_of<TestType>;
  const Tensor all = from_buffer(std::span<std::byte>(buffer), {.dtype = dtype});
  CHECK(all.numel() == 6);
  CHECK(all.raw_data() == buffer.data());
  const Tensor part =
      from_buffer(std::span<std::byte>(buffer), {.dtype = dtype, .count = 2, .offset = sizeof(TestType)});
  CHECK(part.numel() == 2);
  CHECK(part.raw_data() == buffer.data() + sizeof(TestType));
  buffer[sizeof(TestType)] = std::byte{1};
  CHECK(part.raw_data()[0] == std::byte{1});
}

TEST_CASE("from_buffer of const memory is read-only", "[from_buffer]") {
  const std::array<std::byte, 8> bytes{};
  const Tensor t = from_buffer(std::span<const std::byte>(bytes), {.dtype = DType::Int16});
  CHECK_FALSE(t.is_writable());
  CHECK(t.numel() == 4);
  REQUIRE_THROWS_WITH(t.data<std::int16_t>(),
                      "tensorfile: storage (borrowed) is read-only; expected a writable storage");
}

TEST_CASE("from_buffer keeps a keep-alive owner", "[from_buffer]") {
  auto owner = std::make_shared<std::vector<std::byte>>(16, std::byte{3});
  const std::weak_ptr<std::vector<std::byte>> watch = owner;
  Tensor t = from_buffer(std::span<std::byte>(*owner), owner, {.dtype = DType::UInt8});
  const Tensor view = t.narrow(0, 4, 4);
  owner.reset();
  t = {};
  CHECK_FALSE(watch.expired());
  CHECK(view.data<const std::uint8_t>()[0] == 3);
}

// The same cases torch.frombuffer rejects (the interop test checks torch agrees).
TEST_CASE("from_buffer rejects what torch.frombuffer rejects", "[from_buffer]") {
  std::array<std::byte, 10> bytes{};
  const std::span<std::byte> buffer(bytes);
  CHECK(from_buffer(buffer, {.dtype = DType::Int16, .count = -5}).numel() == 5);  // any negative count means "all"
  CHECK(from_buffer(buffer, {.dtype = DType::Int32, .count = 2, .offset = 2}).numel() == 2);
  CHECK(from_buffer(buffer, {.dtype = DType::UInt8, .offset = 9}).numel() == 1);
  REQUIRE_THROWS_WITH(from_buffer(buffer.first(0), {.dtype = DType::UInt8}),
                      "tensorfile: buffer is empty; expected at least 1 byte");
  REQUIRE_THROWS_WITH(from_buffer(buffer, {.dtype = DType::UInt8, .count = 0}),
                      "tensorfile: count is 0; expected a positive count, or -1 for the whole buffer");
  REQUIRE_THROWS_WITH(from_buffer(buffer, {.dtype = DType::UInt8, .offset = 10}),
                      "tensorfile: offset is outside the buffer; expected 0 to 9, got 10");
  REQUIRE_THROWS_WITH(from_buffer(buffer, {.dtype = DType::UInt8, .offset = -1}),
                      "tensorfile: offset is outside the buffer; expected 0 to 9, got -1");
  REQUIRE_THROWS_WITH(from_buffer(buffer, {.dtype = DType::Float32}),
                      "tensorfile: buffer length after offset is not a whole number of float32 elements; expected a "
                      "multiple of 4 bytes, got 10");
  REQUIRE_THROWS_WITH(from_buffer(buffer, {.dtype = DType::Float32, .count = 3}),
                      "tensorfile: 3 float32 elements after offset 0 do not fit the buffer; expected at most 10 bytes, "
                      "got 12");
  REQUIRE_THROWS_WITH(from_buffer(buffer, {.dtype = DType::Float64, .count = std::int64_t{1} << 61}),
                      "tensorfile: 2305843009213693952 float64 elements after offset 0 do not fit the buffer; "
                      "expected at most 10 bytes, got an overflow");
}
