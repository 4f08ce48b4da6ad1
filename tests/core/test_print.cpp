// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/print.hpp>: the text equals torch 1.13's repr for the same tensors.
#include <tensorfile/core/print.hpp>

#include <limits>
#include <numeric>
#include <sstream>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {
template <class T>
Tensor arange(std::int64_t n, Shape sizes) {
  std::vector<T> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(i);
  return Tensor::from_values(std::span<const T>(values), std::move(sizes));
}
}  // namespace

// Expected strings were printed by torch 1.13's repr() for the same tensors.
TEST_CASE("Tensors print like torch's repr", "[print]") {
  CHECK(to_string(arange<float>(6, {2, 3})) == "tensor([[0., 1., 2.],\n        [3., 4., 5.]])");
  CHECK(to_string(arange<std::int32_t>(6, {6})) == "tensor([0, 1, 2, 3, 4, 5], dtype=torch.int32)");
  CHECK(to_string(Tensor::from_values<float>({3.5f}).reshape({})) == "tensor(3.5000)");
  CHECK(to_string(Tensor::from_values<float>({0.5f, 1.25f})) == "tensor([0.5000, 1.2500])");
  CHECK(to_string(Tensor::from_values<bool>({true, false})) == "tensor([ True, False])");
  CHECK(to_string(Tensor::zeros({0}, DType::Float32)) == "tensor([])");
  CHECK(to_string(Tensor::zeros({2, 0}, DType::Float32)) == "tensor([], size=(2, 0))");
  CHECK(to_string(Tensor::zeros({2, 0}, DType::Int64)) == "tensor([], size=(2, 0), dtype=torch.int64)");
  CHECK(to_string(Tensor::zeros({2, 3}, DType::Float32, Device::meta())) == "tensor(..., device='meta', size=(2, 3))");
  CHECK(to_string(Tensor::zeros({2, 3}, DType::Float64, Device::meta())) ==
        "tensor(..., device='meta', size=(2, 3), dtype=torch.float64)");
  CHECK(to_string(arange<float>(8, {2, 2, 2})) ==
        "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  CHECK(to_string(arange<std::int64_t>(2000, {2000})) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(to_string(Tensor::from_values<std::complex<float>>({{1, 2}, {3, -4}})) == "tensor([1.+2.j, 3.-4.j])");
  CHECK(to_string(Tensor::from_values<float>({1e10f, 1.0f})) == "tensor([1.0000e+10, 1.0000e+00])");
  CHECK(to_string(Tensor::from_values<float>({1.0f, 1.0f}).set_requires_grad(true)) ==
        "tensor([1., 1.], requires_grad=True)");
  CHECK(to_string(Tensor::from_values<Half>({Half(1.0f), Half(2.0f)})) == "tensor([1., 2.], dtype=torch.float16)");
  CHECK(to_string(arange<float>(3000, {1000, 3})) ==
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00],\n"
        "        [3.0000e+00, 4.0000e+00, 5.0000e+00],\n"
        "        [6.0000e+00, 7.0000e+00, 8.0000e+00],\n"
        "        ...,\n"
        "        [2.9910e+03, 2.9920e+03, 2.9930e+03],\n"
        "        [2.9940e+03, 2.9950e+03, 2.9960e+03],\n"
        "        [2.9970e+03, 2.9980e+03, 2.9990e+03]])");
  CHECK(to_string(Tensor::from_values<float>({-1.5f, 2.25f, 100.0f})) == "tensor([ -1.5000,   2.2500, 100.0000])");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(to_string(Tensor::from_values<float>({nan, 1.0f, inf})) == "tensor([nan, 1., inf])");
  CHECK(to_string(Tensor::from_values<float>({1e-5f, 1.0f})) == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(to_string(Tensor::from_values<std::int64_t>({-3, 10, 200})) == "tensor([ -3,  10, 200])");
  CHECK(to_string(Tensor::from_values<bool>({true}).reshape({})) == "tensor(True)");
  CHECK(to_string(arange<std::uint8_t>(4, {2, 2})) == "tensor([[0, 1],\n        [2, 3]], dtype=torch.uint8)");
  CHECK(to_string(Tensor()) == "tensor(undefined)");
}

TEST_CASE("operator<< and fmt print the same text", "[print]") {
  const Tensor t = arange<double>(3, {3});
  std::ostringstream out;
  out << t;
  CHECK(out.str() == "tensor([0., 1., 2.], dtype=torch.float64)");
  CHECK(fmt::format("{}", t) == out.str());
  CHECK(fmt::format("[{:>45}]", t) == "[    tensor([0., 1., 2.], dtype=torch.float64)]");
}
