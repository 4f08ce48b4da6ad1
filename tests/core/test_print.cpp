// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/print.hpp>: the text equals torch 1.13's repr for the same tensors.
#include <tensorfile/core/print.hpp>
#include <tensorfile/core/value_print.hpp>

#include <algorithm>
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

// Expected strings were printed by torch 1.13 after torch.set_printoptions with the same options.
TEST_CASE("PrintOptions change the text as torch.set_printoptions does", "[print]") {
  const Tensor x = Tensor::from_values<float>({1.12345f, -2.5f, 100.0f});
  SECTION("defaults are torch's") {
    const PrintOptions defaults;
    CHECK(defaults.precision == 4);
    CHECK(defaults.threshold == 1000);
    CHECK(defaults.edgeitems == 3);
    CHECK(defaults.linewidth == 80);
    CHECK_FALSE(defaults.sci_mode.has_value());
    CHECK(to_string(arange<float>(20, {20})) ==
          "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
          "        14., 15., 16., 17., 18., 19.])");
  }
  SECTION("precision") {
    CHECK(to_string(x, {.precision = 2}) == "tensor([  1.12,  -2.50, 100.00])");
    CHECK(to_string(x, {.precision = 0}) == "tensor([  1,  -2, 100])");
  }
  SECTION("sci_mode forced on and off") {
    CHECK(to_string(x, {.sci_mode = true}) == "tensor([1.1235e+00, -2.5000e+00, 1.0000e+02])");
    CHECK(to_string(Tensor::from_values<float>({1e10f, 1.0f}), {.sci_mode = false}) ==
          "tensor([10000000000.,         1.])");
    // As torch: with no non-zero finite value the forced mode is ignored.
    CHECK(to_string(Tensor::from_values<float>({0.0f, 0.0f}), {.sci_mode = true}) == "tensor([0., 0.])");
  }
  SECTION("threshold and edgeitems") {
    const Tensor ten = arange<std::int64_t>(10, {10});
    CHECK(to_string(ten, {.threshold = 5}) == "tensor([0, 1, 2,  ..., 7, 8, 9])");
    CHECK(to_string(ten, {.threshold = 5, .edgeitems = 1}) == "tensor([0,  ..., 9])");
    CHECK(to_string(ten, {.threshold = 5, .edgeitems = 0}) == "tensor([ ..., 0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");
    CHECK(to_string(arange<float>(12, {3, 4}), {.threshold = 5, .edgeitems = 1}) ==
          "tensor([[ 0.,  ...,  3.],\n        ...,\n        [ 8.,  ..., 11.]])");
    const std::string full = to_string(arange<std::int64_t>(2000, {2000}), {.threshold = INFINITY, .linewidth = 10000});
    CHECK(full.find("...") == std::string::npos);
    // torch wraps those 2000 values once, after "1664,", at linewidth 10000.
    CHECK(std::count(full.begin(), full.end(), '\n') == 1);
    CHECK(full.find("1663, 1664,\n        1665, 1666,") != std::string::npos);
    CHECK(full.ends_with("1997, 1998, 1999])"));
  }
  SECTION("linewidth wraps rows and suffixes") {
    CHECK(to_string(arange<std::int64_t>(12, {12}), {.linewidth = 20}) ==
          "tensor([ 0,  1,  2,\n         3,  4,  5,\n         6,  7,  8,\n         9, 10, 11])");
    CHECK(to_string(arange<double>(8, {8}).set_requires_grad(true), {.linewidth = 40}) ==
          "tensor([0., 1., 2., 3., 4., 5., 6., 7.],\n       dtype=torch.float64,\n       requires_grad=True)");
  }
  SECTION("invalid options are refused") {
    CHECK_THROWS_AS(to_string(x, {.precision = -1}), ArgumentError);
    CHECK_THROWS_AS(to_string(x, {.edgeitems = -2}), ArgumentError);
    CHECK_THROWS_AS(to_string(x, {.threshold = NAN}), ArgumentError);
  }
  SECTION("printed() carries the options to streams and fmt") {
    std::ostringstream out;
    out << printed(x, {.precision = 2});
    CHECK(out.str() == "tensor([  1.12,  -2.50, 100.00])");
    CHECK(fmt::format("{}", printed(x, {.precision = 2})) == out.str());
  }
}

// Issue 13's examples, as torch 1.13 prints them.
TEST_CASE("Summarized values do not widen columns, -0. keeps its own width", "[print]") {
  CHECK(to_string(Tensor::zeros({2000}, DType::Int64)) == "tensor([0, 0, 0,  ..., 0, 0, 0])");
  CHECK(to_string(Tensor::from_values<float>({-0.0f, 1.5f})) == "tensor([-0.0000, 1.5000])");
  CHECK(to_string(Tensor::from_values<float>({-0.0f, 1.0f})) == "tensor([-0., 1.])");
}

TEST_CASE("tensor_repr prints Parameters as torch does", "[print]") {
  // torch 1.13: repr(torch.nn.Parameter(torch.tensor([1., 2.])))
  CHECK(tensor_repr(Value::parameter(Tensor::from_values<float>({1.0f, 2.0f}).set_requires_grad(true))) ==
        "Parameter containing:\ntensor([1., 2.], requires_grad=True)");
  CHECK(tensor_repr(Value(Tensor::from_values<float>({1.0f, 2.0f})), {.precision = 1}) == "tensor([1., 2.])");
  CHECK_THROWS_AS(tensor_repr(Value(1.0)), ArgumentError);
}

TEST_CASE("The Value tree shows scalars as Python's repr, as `tensorfile inspect` does", "[print]") {
  const Value root(Dict{{"one", Value(1.0)},
                        {"small", Value(1e-5)},
                        {"inf", Value(INFINITY)},
                        {"nan", Value(NAN)},
                        {"z", Value(std::complex<double>(1.0, -2.0))},
                        {"s", Value(std::string("it's"))}});
  CHECK(to_string(root) ==
        "{\n  'one': 1.0\n  'small': 1e-05\n  'inf': inf\n  'nan': nan\n  'z': (1-2j)\n  's': \"it's\"\n}");
  for (const auto& [key, item] : root.as_dict()) CHECK(detail::scalar_text(item) == python_repr(item));
  const Value keyed(Dict{{Value::tuple({Value(1), Value("a")}), Value(Device::cpu())}, {Value(2.5), Value()}});
  CHECK(to_string(keyed) == "{\n  (1, 'a'): device(type='cpu')\n  2.5: None\n}");
}

// torch 1.13 prints complex32 (which torch.save refuses, so the interop corpus cannot hold it) through
// cfloat: repr(torch.tensor([1+2j, 3-0.5j], dtype=torch.chalf)).
TEST_CASE("complex32 prints through complex64, each part with its own formatter", "[print]") {
  const Tensor t = Tensor::from_values<ComplexHalf>({{Half(1.0f), Half(2.0f)}, {Half(3.0f), Half(-0.5f)}});
  CHECK(to_string(t) == "tensor([1.+2.0000j, 3.-0.5000j], dtype=torch.complex32)");
}

TEST_CASE("Huge edgeitems show everything (no overflow)", "[print]") {
  const Tensor ten = arange<std::int64_t>(10, {10});
  CHECK(to_string(ten, {.threshold = 5, .edgeitems = std::numeric_limits<std::int64_t>::max()}) ==
        "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");
  CHECK(to_string(ten, {.threshold = 5, .edgeitems = 5}) == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");
  CHECK(to_string(ten, {.threshold = 5, .edgeitems = 4}) == "tensor([0, 1, 2, 3,  ..., 6, 7, 8, 9])");
}
