// SPDX-License-Identifier: MIT
// Example: convert tensors between dtypes (as torch's .to(dtype) does) and read values as the C++ type you want.
#include <tensorfile/tensorfile.hpp>

#include <cstdint>
#include <iostream>
#include <numeric>
#include <span>
#include <vector>

namespace {
template <class T>
void print_values(const char* what, const std::vector<T>& values) {
  std::cout << what << ":";
  for (const auto& v : values) std::cout << " " << +v;
  std::cout << "\n";
}
}  // namespace

int main(int argc, char** argv) {
  using tensorfile::DType;
  using tensorfile::Tensor;

  // Narrowing rounds to nearest even; float -> int truncates toward zero and wraps as torch does on x86.
  const auto x = Tensor::from_values<float>({1.0f, 1.00390625f, 1.01171875f, -2.75f, 65520.0f, 300.7f}, {2, 3});
  std::cout << "x: " << x << "\n";
  print_values("x.to(bfloat16) as float", x.to(DType::BFloat16).to_vector<float>());
  print_values("x.to(float16) as float", x.to(DType::Float16).to_vector<float>());
  print_values("x as int8", x.to_vector<std::int8_t>());
  print_values("x transposed, as double", x.transpose(0, 1).to_vector<double>());

  // The same dtype is the tensor itself: no copy.
  std::cout << "x.to(float32) shares x's storage: " << std::boolalpha
            << (x.to(DType::Float32).storage().data() == x.storage().data()) << "\n";

  // copy_into a span you own: converted, and the size is checked.
  std::vector<std::int64_t> out(6);
  x.copy_into(std::span(out));
  print_values("copy_into int64", out);
  std::vector<double> too_small(4);
  try {
    x.copy_into(std::span(too_small));
  } catch (const tensorfile::ArgumentError& error) {
    std::cout << "as expected: " << error.what() << " (code " << tensorfile::to_string(error.code()) << ")\n";
  }

  // A checkpoint: every tensor summed in double whatever its dtype, and its size in bfloat16.
  if (argc > 1) {
    const tensorfile::Value checkpoint = tensorfile::load_torch(argv[1]);
    for (const auto& [name, tensor] : tensorfile::named_tensors(checkpoint)) {
      const std::vector<double> values = tensor.to_vector<double>();
      const double sum = std::accumulate(values.begin(), values.end(), 0.0);
      std::cout << name << ": " << tensorfile::dtype_name(tensor.dtype()) << " " << tensor.numel() << " values, sum "
                << sum << ", " << tensor.nbytes() << " bytes, as bfloat16 " << tensor.to(DType::BFloat16).nbytes()
                << " bytes\n";
    }
  }
  return 0;
}
