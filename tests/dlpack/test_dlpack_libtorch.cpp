// SPDX-License-Identifier: MIT
// DLPack against a real consumer and producer: libtorch's at::fromDLPack and at::toDLPack, both directions.
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <torch/version.h>

#include <tensorfile/interop/dlpack.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

#include "tensorfile_catch.hpp"

using tensorfile::DType;
using tensorfile::Shape;
using tensorfile::Tensor;

namespace {

/// Wraps a managed tensor so that its deleter's calls are counted; the wrapper forwards to the real deleter.
struct CountingWrapper {
  DLManagedTensor outer{};
  DLManagedTensor* inner = nullptr;
  int* calls = nullptr;

  static DLManagedTensor* wrap(DLManagedTensor* inner, int* calls) {
    auto* wrapper = new CountingWrapper{*inner, inner, calls};
    wrapper->outer.manager_ctx = wrapper;
    wrapper->outer.deleter = [](DLManagedTensor* self) {
      auto* owner = static_cast<CountingWrapper*>(self->manager_ctx);
      ++*owner->calls;
      owner->inner->deleter(owner->inner);
      delete owner;
    };
    return &wrapper->outer;
  }
};

/// The dtypes DLPack, tensorfile and this libtorch all name (libtorch 1.13 has no uint16/32/64 and no float8).
struct Pair {
  DType ours;
  at::ScalarType theirs;
};
const std::array<Pair, 12> shared_dtypes{{
    {DType::UInt8, at::kByte},
    {DType::Int8, at::kChar},
    {DType::Int16, at::kShort},
    {DType::Int32, at::kInt},
    {DType::Int64, at::kLong},
    {DType::Float16, at::kHalf},
    {DType::BFloat16, at::kBFloat16},
    {DType::Float32, at::kFloat},
    {DType::Float64, at::kDouble},
    {DType::Complex32, at::kComplexHalf},
    {DType::Complex64, at::kComplexFloat},
    {DType::Complex128, at::kComplexDouble},
}};

/// Deterministic bytes (every bit pattern is a valid value of an integer dtype; floats may hold NaNs, which is
/// why values are compared by their bytes).
void fill_pattern(std::byte* data, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 37 + 11) % 251);
}

/// Bytes as unsigned char: Catch prints a failing comparison through glog's vector printer, which has no std::byte.
using Bytes = std::vector<unsigned char>;

Bytes bytes_of(const at::Tensor& tensor) {
  const at::Tensor dense = tensor.contiguous();
  const auto* first = static_cast<const unsigned char*>(dense.data_ptr());
  return {first, first + dense.nbytes()};
}

Bytes bytes_of(const Tensor& tensor) {
  Bytes out(tensor.nbytes());
  tensor.copy_into(reinterpret_cast<std::byte*>(out.data()));
  return out;
}

Shape shape_of(at::IntArrayRef values) { return {values.begin(), values.end()}; }

}  // namespace

TEST_CASE("libtorch consumes to_dlpack without a copy", "[dlpack][libtorch]") {
  for (const auto& [ours, theirs] : shared_dtypes) {
    CAPTURE(tensorfile::dtype_name(ours));
    int calls = 0;
    const Tensor base = Tensor::zeros({4, 6}, ours);
    fill_pattern(base.storage().mutable_data(), base.storage().size_bytes());
    const Tensor view = base.transpose(0, 1).narrow(0, 1, 4);  // sizes (4, 4), strides (1, 6), offset 1
    const long owners = base.storage().use_count();
    {
      const at::Tensor torch_view = at::fromDLPack(CountingWrapper::wrap(tensorfile::to_dlpack(view), &calls));
      CHECK(torch_view.scalar_type() == theirs);
      CHECK(torch_view.data_ptr() == view.raw_data());  // zero-copy
      CHECK(shape_of(torch_view.sizes()) == view.sizes());
      CHECK(shape_of(torch_view.strides()) == view.strides());
      CHECK(bytes_of(torch_view) == bytes_of(view));
      CHECK(base.storage().use_count() == owners + 1);
      CHECK(calls == 0);
    }
    CHECK(calls == 1);  // libtorch called the deleter once, and tensorfile's export let go of the storage
    CHECK(base.storage().use_count() == owners);
  }
  SECTION("writes through libtorch land in tensorfile's storage; the storage outlives tensorfile's handles") {
    int calls = 0;
    at::Tensor torch_view;
    Tensor keep;
    {
      const Tensor values = Tensor::from_values<float>({1, 2, 3, 4, 5, 6}, {2, 3});
      keep = values.select(1, 1);  // (2,) stride 3 offset 1: 2, 5
      torch_view = at::fromDLPack(CountingWrapper::wrap(tensorfile::to_dlpack(values.transpose(0, 1)), &calls));
    }
    torch_view.mul_(10);
    CHECK(keep.data<const float>()[0] == 20);
    CHECK(keep.data<const float>()[3] == 50);
    keep = Tensor{};
    CHECK(torch_view.sum().item<float>() == 210);  // only the DLPack export keeps the memory now
    torch_view = at::Tensor{};
    CHECK(calls == 1);
  }
  SECTION("bool") {
    int calls = 0;
    const Tensor flags = Tensor::from_values<bool>({true, false, true});
#if TORCH_VERSION_MAJOR < 2
    // libtorch 1.13 predates kDLBool (DLPack 0.8) and refuses code 6; the struct is then still ours to free.
    DLManagedTensor* managed = tensorfile::to_dlpack(flags);
    CHECK_THROWS_WITH(at::fromDLPack(managed), Catch::Matchers::Contains("Unsupported code 6"));
    managed->deleter(managed);
    // (at::getDLDataType, not at::toDLPack: 1.13's toDLPack leaks its struct when the type is refused)
    CHECK_THROWS_WITH(at::getDLDataType(at::ones({2}, at::kBool)),
                      Catch::Matchers::Contains("Bool type is not supported by dlpack"));
#else
    {
      const at::Tensor torch_flags = at::fromDLPack(CountingWrapper::wrap(tensorfile::to_dlpack(flags), &calls));
      CHECK(torch_flags.scalar_type() == at::kBool);
      CHECK(bytes_of(torch_flags) == bytes_of(flags));
    }
    CHECK(calls == 1);
#endif
    (void)calls;
  }
}

TEST_CASE("from_dlpack takes libtorch's tensors without a copy", "[dlpack][libtorch]") {
  for (const auto& [ours, theirs] : shared_dtypes) {
    CAPTURE(tensorfile::dtype_name(ours));
    int calls = 0;
    at::Tensor source = at::empty({4, 6}, at::TensorOptions().dtype(theirs));
    fill_pattern(static_cast<std::byte*>(source.data_ptr()), source.nbytes());
    at::Tensor torch_view = source.t().slice(0, 1, 5);  // sizes (4, 4), strides (1, 6), offset 1
    const Bytes expected = bytes_of(torch_view);
    void* const address = torch_view.data_ptr();
    const Shape strides = shape_of(torch_view.strides());
    Tensor tensor = tensorfile::from_dlpack(CountingWrapper::wrap(at::toDLPack(torch_view), &calls));
    CHECK(tensor.dtype() == ours);
    CHECK(tensor.raw_data() == address);  // zero-copy
    CHECK(tensor.sizes() == Shape{4, 4});
    CHECK(tensor.strides() == strides);
    CHECK(tensor.is_writable());
    CHECK(bytes_of(tensor) == expected);
    source = at::Tensor{};
    torch_view = at::Tensor{};
    CHECK(bytes_of(tensor) == expected);  // the managed tensor keeps libtorch's storage alive
    Tensor row = tensor.select(0, 3);
    tensor = Tensor{};
    CHECK(calls == 0);  // a view still uses it
    CHECK(bytes_of(row) == Bytes(expected.end() - static_cast<std::ptrdiff_t>(row.nbytes()), expected.end()));
    row = Tensor{};
    CHECK(calls == 1);
  }
  SECTION("writes through tensorfile land in libtorch's tensor") {
    const at::Tensor source = at::arange(6, at::kFloat).reshape({2, 3});
    int calls = 0;
    {
      const Tensor column = tensorfile::from_dlpack(CountingWrapper::wrap(at::toDLPack(source.select(1, 2)), &calls));
      auto values = column.view<float>();
      values(0) = -1;
      values(1) = -2;
    }
    CHECK(calls == 1);
    CHECK(source[0][2].item<float>() == -1);
    CHECK(source[1][2].item<float>() == -2);
  }
  SECTION("0-d and empty tensors") {
    int calls = 0;
    {
      const Tensor scalar =
          tensorfile::from_dlpack(CountingWrapper::wrap(at::toDLPack(at::scalar_tensor(2.5, at::kDouble)), &calls));
      CHECK(scalar.dim() == 0);
      CHECK(scalar.item<double>() == 2.5);
      const Tensor empty = tensorfile::from_dlpack(CountingWrapper::wrap(at::toDLPack(at::empty({0, 3})), &calls));
      CHECK(empty.numel() == 0);
      CHECK(empty.sizes() == Shape{0, 3});
    }
    CHECK(calls == 2);
  }
}
