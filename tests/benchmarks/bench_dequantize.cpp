// SPDX-License-Identifier: MIT
// bench_dequantize [MiB]: GB/s of float32 output of dequantize() on one thread (so per core) for each block type it
// reads, with memcpy of the same output size measured in the same run; also quantize() to q8_0 and q4_0.
#include <tensorfile/formats/gguf/dequantize.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  using tensorfile::GgmlType;
  const std::size_t mib = argc > 1 ? static_cast<std::size_t>(std::atoll(argv[1])) : 64;
  const std::size_t floats = mib * 1024 * 1024 / 4 / 256 * 256;  // `mib` MiB of float32 output, whole super-blocks
  const int repeats = 7;
  const auto median_ms = [&](auto&& fn) {  // of `repeats` wall-clock timings
    std::vector<double> ms(repeats);
    for (double& one : ms) one = tensorfile_bench::time_ms(fn);
    return tensorfile_bench::median_of(ms);
  };

  std::vector<float> out(floats);
  std::vector<float> copy_source(floats, 1.0f);
  std::memset(out.data(), 1, out.size() * sizeof(float));  // faulted in once, outside the timings
  std::mt19937 rng(1);
  const double gb = static_cast<double>(floats * sizeof(float)) / 1e9;

  const double memcpy_ms = median_ms([&] { std::memcpy(out.data(), copy_source.data(), floats * sizeof(float)); });
  std::printf("%-6s %8.2f GB/s of float32 written (%zu MiB, median of %d)\n", "memcpy", gb / (memcpy_ms / 1e3), mib,
              repeats);
  for (const GgmlType type :
       {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
        GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16}) {
    const tensorfile::GgmlTypeInfo& info = tensorfile::ggml_type_info(type);
    std::vector<std::byte> blocks(floats / info.block_size * info.block_bytes);
    for (auto& b : blocks) b = static_cast<std::byte>(rng());
    // finite scales everywhere (random bits would hold NaNs and infinities in the f16 scale fields)
    if (type == GgmlType::Q4_0 || type == GgmlType::Q8_0) {
      for (std::size_t at = 0; at < blocks.size(); at += info.block_bytes) blocks[at + 1] = std::byte{0x3C};
    }
    const double ms = median_ms([&] { tensorfile::dequantize(type, blocks, out); });
    std::printf("%-6s %8.2f GB/s of float32 output per core (%.2f of memcpy)\n", std::string(info.name).c_str(),
                gb / (ms / 1e3), memcpy_ms / ms);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : copy_source) v = normal(rng);
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const tensorfile::GgmlTypeInfo& info = tensorfile::ggml_type_info(type);
    std::vector<std::byte> blocks(floats / 32 * info.block_bytes);
    const double ms = median_ms([&] { tensorfile::quantize(type, copy_source, blocks); });
    std::printf("quantize %-6s %6.2f GB/s of float32 input per core\n", std::string(info.name).c_str(),
                gb / (ms / 1e3));
  }
  return 0;
}
