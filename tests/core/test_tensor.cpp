// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/tensor.hpp>: construction checks, typed access, views, copies, equality.
#include <tensorfile/backends/borrowed.hpp>
#include <tensorfile/core/tensor.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {
Tensor arange_f32(std::int64_t n, Shape sizes) {
  std::vector<float> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0.0f);
  return Tensor::from_values(std::span<const float>(values), std::move(sizes));
}
std::vector<float> values_of(const Tensor& t) {
  std::vector<float> out;
  for (float v : t.view<const float>()) out.push_back(v);
  return out;
}
}  // namespace

TEST_CASE("Tensor metadata", "[tensor]") {
  const Tensor t = arange_f32(6, {2, 3});
  CHECK(t.defined());
  CHECK(t.dim() == 2);
  CHECK(t.sizes() == Shape{2, 3});
  CHECK(t.strides() == Shape{3, 1});
  CHECK(t.size(-1) == 3);
  CHECK(t.stride(0) == 3);
  CHECK(t.numel() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(t.element_size() == 4);
  CHECK(t.is_contiguous());
  CHECK(t.is_writable());
  CHECK(t.device() == Device::cpu());
  CHECK_FALSE(t.requires_grad());
  CHECK_FALSE(Tensor().defined());
  const Tensor scalar = Tensor::from_values<double>({2.5}, {});
  CHECK(scalar.sizes() == Shape{1});
  const Tensor zero_d(heap_storage(8), DType::Float64, Shape{}, Shape{});
  CHECK(zero_d.dim() == 0);
  CHECK(zero_d.numel() == 1);
  CHECK(zero_d.is_contiguous());
  CHECK_THROWS_AS(t.size(2), ArgumentError);
}

TEST_CASE("Tensor construction checks the view against its storage", "[tensor]") {
  const Storage s = heap_storage(24);  // six float32
  SECTION("fits") {
    CHECK_NOTHROW(Tensor(s, DType::Float32, {2, 3}, {3, 1}, 0));
    CHECK_NOTHROW(Tensor(s, DType::Float32, {3}, {2}, 1));          // elements 1, 3, 5
    CHECK_NOTHROW(Tensor(s, DType::Float32, {0, 100}, {1, 1}, 6));  // empty tensors touch nothing
    CHECK_NOTHROW(Tensor(s, DType::Float32, {1000}, {0}, 5));       // stride 0 broadcasts
  }
  SECTION("leaves the storage") {
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float32, {2, 3}, {3, 1}, 1),
                        "tensorfile: view with sizes (2, 3), strides (3, 1) and offset 1 leaves its storage; "
                        "expected at most 24 bytes, got 28");
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float64, {4}, {1}),
                        "tensorfile: view with sizes (4,), strides (1,) and offset 0 leaves its storage; "
                        "expected at most 24 bytes, got 32");
  }
  SECTION("negative or overflowing") {
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float32, {2}, {-1}, 1),
                        "tensorfile: negative size or stride in sizes (2,), strides (-1,)");
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float32, {-2}, {1}),
                        "tensorfile: negative size or stride in sizes (-2,), strides (1,)");
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float32, {2}, {1}, -1), "tensorfile: negative storage offset -1");
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float32, {2, 2}, {std::numeric_limits<std::int64_t>::max(), 1}),
                        "tensorfile: view extent overflows int64");
    REQUIRE_THROWS_WITH(Tensor(s, DType::Float32, {2}, {1, 1}),
                        "tensorfile: sizes (2,) and strides (1, 1) differ in length");
    REQUIRE_THROWS_WITH(Tensor::zeros({std::int64_t{1} << 62, 4}, DType::Float32),
                        "tensorfile: shape (4611686018427387904, 4) of float32 overflows int64 bytes (each 0 counted "
                        "as 1, as numpy counts); expected at most 9223372036854775807 bytes");
  }
}

TEST_CASE("Shape arithmetic is checked, empty tensors included (issue 39)", "[tensor]") {
  constexpr std::int64_t big = std::int64_t{1} << 32;
  SECTION("row-major strides count a 0 as 1, and refuse what overflows") {
    CHECK(detail::contiguous_strides(Shape{0, 1 << 30, 1 << 30}) == Shape{std::int64_t{1} << 60, 1 << 30, 1});
    CHECK(detail::contiguous_strides(Shape{big, big, 0}) == Shape{big, 1, 1});
    CHECK(detail::contiguous_strides(Shape{std::int64_t{1} << 62, big}) == Shape{big, 1});  // dim 0 never multiplies
    REQUIRE_THROWS_WITH(detail::contiguous_strides(Shape{0, big, big}),
                        "tensorfile: the row-major strides of shape (0, 4294967296, 4294967296) overflow int64; "
                        "expected sizes after the first whose product (each 0 counted as 1) fits");
    CHECK_THROWS_AS(Tensor::zeros({0, big, big}, DType::Float32), ArgumentError);
    CHECK_THROWS_AS(Tensor::zeros({big, big, 0}, DType::Float32), ArgumentError);  // numpy refuses it too
    CHECK(Tensor::zeros({0, 1 << 30, 1 << 30}, DType::Float32).strides() == Shape{std::int64_t{1} << 60, 1 << 30, 1});
    CHECK_THROWS_AS(Tensor::zeros({0, 3}, DType::Float32).reshape({0, big, big}), ArgumentError);
  }
  SECTION("an empty tensor with torch's wrapped strides: views check their offsets, nothing overflows") {
    // torch.empty(0, 2**32, 2**32).stride() is (0, 2**32, 1): the first stride wrapped from 2^64.
    const Tensor t(heap_storage(8), DType::Float32, {0, big, big}, {0, big, 1});
    CHECK(t.numel() == 0);
    CHECK(t.nbytes() == 0);
    CHECK(t.is_contiguous());
    CHECK(t.unsqueeze(0).strides() == Shape{0, 0, big, 1});  // 0 * 0: torch's stride for the new dimension
    CHECK(t.unsqueeze(1).strides() == Shape{0, 1, big, 1});  // 2^32 * 2^32 overflows; 1 stands in
    CHECK(t.select(2, 5).storage_offset() == 5);
    REQUIRE_THROWS_WITH(t.select(1, big - 1),
                        "tensorfile: moving 4294967295 steps of stride 4294967296 along dimension 1 from storage "
                        "offset 0 overflows int64");
    CHECK_THROWS_AS(t.narrow(1, big, 0), ArgumentError);
    CHECK_THROWS_AS(t.slice(1, big - 1, big), ArgumentError);
    CHECK(t.transpose(0, 2).strides() == Shape{1, big, 0});
    CHECK(t.to_vector<float>().empty());
    CHECK_THROWS_AS(t.clone(), ArgumentError);  // its row-major strides cannot be written down
  }
  SECTION("an empty tensor's offset past its storage points at the storage's end") {
    const Storage s = heap_storage(8);
    const Tensor far(s, DType::Float32, {0}, {1}, std::numeric_limits<std::int64_t>::max());
    CHECK(far.data<const float>() == reinterpret_cast<const float*>(s.data() + 8));
    const Tensor near(s, DType::Float32, {0}, {1}, 1);
    CHECK(near.data<const float>() == reinterpret_cast<const float*>(s.data()) + 1);
  }
  SECTION("TensorView counts its elements with checked arithmetic") {
    float x = 0.0f;
    CHECK(TensorView<float>(&x, {big, big, 0}, {0, 0, 0}).numel() == 0);
    CHECK(TensorView<float>(&x, {big, big, 0}, {0, 0, 0}).begin() ==
          TensorView<float>(&x, {big, big, 0}, {0, 0, 0}).end());
    REQUIRE_THROWS_WITH(TensorView<float>(&x, {big, big}, {0, 0}),
                        "tensorfile: a view's element count overflows int64");
    REQUIRE_THROWS_WITH(TensorView<float>(&x, {-1}, {1}),
                        "tensorfile: a view's size is negative; expected sizes of 0 or more, got -1");
  }
}

TEST_CASE("data<T>() checks dtype, writability and device", "[tensor]") {
  Tensor t = arange_f32(4, {4});
  t.data<float>()[1] = 10.0f;
  CHECK(t.data<const float>()[1] == 10.0f);
  REQUIRE_THROWS_WITH(t.data<double>(), "tensorfile: tensor has dtype float32; expected float64 for this element type");
  REQUIRE_THROWS_WITH(t.data<const std::int32_t>(),
                      "tensorfile: tensor has dtype float32; expected int32 for this element type");
  SECTION("read-only storage") {
    const std::array<std::byte, 8> bytes{};
    const Tensor ro(Storage(BorrowedBackend(std::span<const std::byte>(bytes))), DType::Int32, {2});
    CHECK(ro.data<const std::int32_t>()[1] == 0);
    REQUIRE_THROWS_WITH(ro.data<std::int32_t>(),
                        "tensorfile: storage (borrowed) is read-only; expected a writable storage");
    CHECK_THROWS_AS(ro.mutable_raw_data(), ArgumentError);
    CHECK_FALSE(ro.is_writable());
  }
  SECTION("meta has no data") {
    const Tensor m = Tensor::zeros({2}, DType::Float32, Device::meta());
    REQUIRE_THROWS_WITH(m.data<const float>(),
                        "tensorfile: tensor is on meta and has no data; expected a tensor in host memory (a meta "
                        "tensor holds only sizes and dtype)");
  }
  SECTION("undefined") {
    REQUIRE_THROWS_WITH(Tensor().raw_data(), "tensorfile: tensor is undefined; expected a tensor with a storage");
  }
}

TEST_CASE("item() reads one-element tensors", "[tensor]") {
  CHECK(Tensor::from_values<std::int64_t>({42}, {}).item<std::int64_t>() == 42);  // shape (1,)
  const Tensor zero_d = Tensor::from_values<double>({2.5}).reshape({});
  CHECK(zero_d.item<double>() == 2.5);
  REQUIRE_THROWS_WITH(arange_f32(4, {4}).item<float>(), "tensorfile: item() needs exactly one element; got 4");
}

TEST_CASE("Views share the storage", "[tensor][views]") {
  const Tensor base = arange_f32(12, {3, 4});
  SECTION("select") {
    const Tensor row = base.select(0, 1);
    CHECK(row.sizes() == Shape{4});
    CHECK(row.storage_offset() == 4);
    CHECK(values_of(row) == std::vector<float>{4, 5, 6, 7});
    CHECK(values_of(base.select(1, -1)) == std::vector<float>{3, 7, 11});
    CHECK(row.storage().shares_owner_with(base.storage()));
    REQUIRE_THROWS_WITH(base.select(0, 3), "tensorfile: select index 3 is out of range for dimension 0 of size 3");
  }
  SECTION("narrow and slice") {
    CHECK(values_of(base.narrow(1, 1, 2)) == std::vector<float>{1, 2, 5, 6, 9, 10});
    CHECK(values_of(base.slice(1, 0, 4, 2)) == std::vector<float>{0, 2, 4, 6, 8, 10});
    CHECK(values_of(base.slice(0, -1, 100)) == std::vector<float>{8, 9, 10, 11});
    CHECK(base.slice(0, 2, 1).numel() == 0);
    REQUIRE_THROWS_WITH(base.narrow(0, 2, 2), "tensorfile: narrow [2, +2) is out of range for dimension 0 of size 3");
    REQUIRE_THROWS_WITH(base.slice(0, 0, 1, 0), "tensorfile: slice step must be positive; got 0");
  }
  SECTION("transpose and permute") {
    const Tensor t = base.transpose(0, 1);
    CHECK(t.sizes() == Shape{4, 3});
    CHECK(t.strides() == Shape{1, 4});
    CHECK_FALSE(t.is_contiguous());
    CHECK(values_of(t) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
    const Tensor cube = arange_f32(24, {2, 3, 4});
    const Tensor p = cube.permute({2, 0, 1});
    CHECK(p.sizes() == Shape{4, 2, 3});
    CHECK(p.strides() == Shape{1, 12, 4});
    REQUIRE_THROWS_WITH(cube.permute({0, 0, 1}), "tensorfile: permute repeats dimension 0");
    REQUIRE_THROWS_WITH(cube.permute({0, 1}), "tensorfile: permute needs 3 dimensions; got 2");
  }
  SECTION("reshape") {
    const Tensor r = base.reshape({2, -1});
    CHECK(r.sizes() == Shape{2, 6});
    CHECK(r.storage().shares_owner_with(base.storage()));
    CHECK(base.reshape({12}).strides() == Shape{1});
    CHECK(base.select(0, 0).reshape({2, 2}).storage_offset() == 0);
    REQUIRE_THROWS_WITH(base.reshape({5, -1}), "tensorfile: shape (5, -1) is invalid for 12 elements");
    REQUIRE_THROWS_WITH(base.reshape({5, 2}), "tensorfile: shape (5, 2) is invalid for 12 elements");
    REQUIRE_THROWS_WITH(base.transpose(0, 1).reshape({12}),
                        "tensorfile: reshape needs a contiguous tensor; call contiguous() first");
  }
  SECTION("expand and unsqueeze") {
    const Tensor col = base.select(1, 0).unsqueeze(1);  // (3, 1)
    CHECK(col.sizes() == Shape{3, 1});
    const Tensor wide = col.expand({2, 3, 5});
    CHECK(wide.sizes() == Shape{2, 3, 5});
    CHECK(wide.strides() == Shape{0, 4, 0});
    CHECK(values_of(wide.select(0, 1).select(0, 2)) == std::vector<float>{8, 8, 8, 8, 8});
    CHECK(col.expand({-1, 2}).sizes() == Shape{3, 2});
    REQUIRE_THROWS_WITH(base.expand({3, 8}),
                        "tensorfile: cannot expand dimension 1 of size 4 to 8; only size-1 dimensions expand");
    REQUIRE_THROWS_WITH(base.expand({4}), "tensorfile: expand to (4,) has fewer dimensions than (3, 4)");
  }
  SECTION(
      "shapes whose element count overflows or goes negative are refused (a wrapped numel once let copies write past "
      "their buffer)") {
    const Tensor row = arange_f32(4, {1, 4});
    REQUIRE_THROWS_WITH(row.expand({3, 6148914691236517206, 4}),
                        "tensorfile: sizes (3, 6148914691236517206, 4) hold more elements than int64 counts");
    REQUIRE_THROWS_WITH(row.expand({-5, 4}), "tensorfile: expand to (-5, 4) has a negative size");
    REQUIRE_THROWS_WITH(row.expand({-2, 1, 4}), "tensorfile: expand cannot deduce new leading dimension 0");
    // Python's t[0:10:sys.maxsize] has one element; the stride is never used to step.
    const Tensor one = base.slice(0, 0, 10, INT64_MAX);
    CHECK(one.sizes() == Shape{1, 4});
    CHECK(values_of(one) == std::vector<float>{0, 1, 2, 3});
    CHECK(base.slice(1, 1, 4, INT64_MAX - 1).sizes() == Shape{3, 1});
    // An empty tensor may have other sizes whose product overflows; it still has no elements.
    const Tensor empty = Tensor::zeros({0}, DType::Float32).unsqueeze(0).expand({INT64_MAX, INT64_MAX, 0});
    CHECK(empty.numel() == 0);
    CHECK(empty.contiguous().numel() == 0);
  }
}

TEST_CASE("contiguous and clone copy values in C order", "[tensor]") {
  const Tensor base = arange_f32(12, {3, 4});
  const Tensor t = base.transpose(0, 1).slice(0, 0, 4, 2);  // (2, 3), strides (2, 4)
  const Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.storage().shares_owner_with(base.storage()));
  CHECK(values_of(c) == std::vector<float>{0, 4, 8, 2, 6, 10});
  CHECK(base.contiguous().storage().shares_owner_with(base.storage()));
  Tensor copy = base.clone();
  copy.data<float>()[0] = 100.0f;
  CHECK(base.data<const float>()[0] == 0.0f);
  CHECK(Tensor::zeros({0, 3}, DType::Int8).clone().numel() == 0);
  const Tensor graded = arange_f32(2, {2}).set_requires_grad(true);
  CHECK(graded.clone().requires_grad());
}

TEST_CASE("for_each_byte_run hands over the values in C order, contiguous runs in place", "[tensor]") {
  struct Runs {
    std::vector<std::byte> bytes;
    std::size_t calls = 0;
    std::size_t in_place = 0;  // runs that point into the storage rather than a scratch buffer
  };
  const auto collect = [](const Tensor& t) {
    Runs runs;
    const std::byte* begin = t.storage().data();
    t.for_each_byte_run([&](std::span<const std::byte> bytes) {
      ++runs.calls;
      if (bytes.data() >= begin && bytes.data() < begin + t.storage().size_bytes()) ++runs.in_place;
      runs.bytes.insert(runs.bytes.end(), bytes.begin(), bytes.end());
    });
    return runs;
  };
  const auto dense = [](const Tensor& t) {
    std::vector<std::byte> out(t.nbytes());
    t.copy_into(out.data());
    return out;
  };
  const Tensor base = arange_f32(12, {3, 4});
  SECTION("a contiguous tensor: one run per row, straight from the storage") {
    const Runs runs = collect(base);
    CHECK(runs.bytes == dense(base));
    CHECK((runs.calls == 3 && runs.in_place == 3));
  }
  SECTION("a strided view: gathered runs that concatenate to copy_into's bytes") {
    const Tensor t = base.transpose(0, 1).slice(0, 0, 4, 2);  // (2, 3), strides (2, 4)
    const Runs runs = collect(t);
    CHECK(runs.bytes == dense(t));
    CHECK((runs.calls == 2 && runs.in_place == 0));
  }
  SECTION("a scalar gives one run, an empty tensor none") {
    CHECK(collect(arange_f32(1, {})).bytes.size() == 4);
    CHECK(collect(Tensor::zeros({0, 3}, DType::Float32)).calls == 0);
  }
}

TEST_CASE("to(Device) moves between cpu and meta, cuda needs the CUDA header", "[tensor][device]") {
  const Tensor t = arange_f32(6, {2, 3});
  const Tensor m = t.to(Device::meta());
  CHECK(m.device().is_meta());
  CHECK(m.sizes() == t.sizes());
  CHECK(m.dtype() == DType::Float32);
  CHECK(t.to(Device::cpu()).storage().shares_owner_with(t.storage()));
  REQUIRE_THROWS_WITH(m.to(Device::cpu()), "tensorfile: cannot copy a meta tensor to cpu: it has no data");
  REQUIRE_THROWS_WITH(t.to(Device::cuda(0)),
                      "tensorfile: cannot move a tensor to cuda:0: tensorfile was built without CUDA "
                      "(include <tensorfile/cuda.hpp> and link tensorfile::cuda)");
  CHECK_THROWS_AS(Tensor::zeros({2}, DType::Float32, Device::cuda()), DeviceError);
}

TEST_CASE("equal() compares dtype, sizes and values as torch.equal does", "[tensor]") {
  const Tensor a = arange_f32(6, {2, 3});
  CHECK(a.equal(a.clone()));
  CHECK(a.transpose(0, 1).equal(a.transpose(0, 1).contiguous()));
  CHECK_FALSE(a.equal(a.reshape({3, 2})));
  CHECK_FALSE(a.equal(Tensor::zeros({2, 3}, DType::Int32)));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor n = Tensor::from_values<float>({nan});
  CHECK_FALSE(n.equal(n));  // NaN is never equal, as in torch
  CHECK(Tensor::from_values<float>({0.0f}).equal(Tensor::from_values<float>({-0.0f})));
  CHECK(Tensor::from_values<Half>({Half(1.5f)}).equal(Tensor::from_values<Half>({Half(1.5f)})));
  CHECK(Tensor::zeros({0}, DType::Int8).equal(Tensor::zeros({0}, DType::Int8)));
}
