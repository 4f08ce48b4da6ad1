// SPDX-License-Identifier: MIT
// bench_convert [MiB]: contiguous dtype conversion (f32 <-> bf16, f16, f64) against memcpy measured in the same run.
#include <tensorfile/core/tensor.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench_common.hpp"

namespace {

// Median wall milliseconds of `repeats` calls.
template <class Fn>
double median_ms(int repeats, Fn&& fn) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) ms.push_back(tensorfile_bench::time_ms(fn));
  return tensorfile_bench::median_of(ms);
}

}  // namespace

int main(int argc, char** argv) {
  using tensorfile::DType;
  const std::size_t mib = argc > 1 ? static_cast<std::size_t>(std::atoll(argv[1])) : 256;
  const std::size_t floats = mib * 1024 * 1024 / 4;  // `mib` MiB of float32 on the float32 side of every pair
  const int repeats = 5;

  std::vector<float> source(floats);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (auto& v : source) v = normal(rng);
  const tensorfile::Tensor f32 = tensorfile::Tensor::from_values(std::span<const float>(source));
  const tensorfile::Tensor others[] = {f32.to(DType::BFloat16), f32.to(DType::Float16), f32.to(DType::Float64)};
  std::vector<std::byte> out(floats * 8);  // the largest destination, faulted in once
  std::memset(out.data(), 1, out.size());

  // The floor: memcpy of the 256 MiB float32 buffer into the destination, read + written bytes per second.
  const std::size_t f32_bytes = floats * 4;
  const double memcpy_ms = median_ms(repeats, [&] { std::memcpy(out.data(), f32.raw_data(), f32_bytes); });
  const double memcpy_gbs = 2.0 * static_cast<double>(f32_bytes) / memcpy_ms / 1e6;
  std::printf("{\"what\": \"memcpy\", \"bytes\": %zu, \"ms\": %.1f, \"gb_per_s\": %.2f}\n", f32_bytes, memcpy_ms,
              memcpy_gbs);

  double worst = 1e9;
  for (const auto& other : others) {
    for (const bool widen : {false, true}) {
      const tensorfile::Tensor& from = widen ? other : f32;
      const DType to = widen ? DType::Float32 : other.dtype();
      const std::size_t in_bytes = from.nbytes();
      const std::size_t out_bytes = static_cast<std::size_t>(from.numel()) * tensorfile::element_size(to);
      const double ms = median_ms(repeats, [&] {
        tensorfile::convert_elements(from.dtype(), from.raw_data(), 1, to, out.data(), from.numel());
      });
      const double to_ms = median_ms(3, [&] { (void)from.to(to); });  // allocates and faults in a new storage
      const double gbs = static_cast<double>(in_bytes + out_bytes) / ms / 1e6;
      worst = std::min(worst, gbs / memcpy_gbs);
      std::printf(
          "{\"what\": \"%s->%s\", \"read\": %zu, \"written\": %zu, \"ms\": %.1f, \"gb_per_s\": %.2f, "
          "\"of_memcpy_bandwidth\": %.2f, \"tensor_to_ms\": %.1f}\n",
          std::string(tensorfile::dtype_name(from.dtype())).c_str(), std::string(tensorfile::dtype_name(to)).c_str(),
          in_bytes, out_bytes, ms, gbs, gbs / memcpy_gbs, to_ms);
    }
  }
  std::printf("{\"what\": \"worst\", \"of_memcpy_bandwidth\": %.2f, \"target\": 0.5}\n", worst);
  return worst >= 0.5 ? 0 : 1;
}
