// SPDX-License-Identifier: MIT
// Example: print tensors exactly as torch's repr does, and change precision, summarization, line width
// and scientific notation per call, as torch.set_printoptions does for the whole program.
#include <tensorfile/tensorfile.hpp>

#include <cmath>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  using tensorfile::Tensor;
  std::vector<float> ramp(2000);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = std::sin(0.01f * static_cast<float>(i)) * 50.0f;
  const Tensor wave = Tensor::from_values(std::span<const float>(ramp));
  const Tensor grid = wave.narrow(0, 0, 24).reshape({4, 6});

  std::cout << "default options (torch's: precision 4, threshold 1000, edgeitems 3, linewidth 80):\n" << grid << "\n\n";
  std::cout << "{.precision = 2}:\n" << tensorfile::to_string(grid, {.precision = 2}) << "\n\n";
  std::cout << "{.sci_mode = true}:\n" << tensorfile::printed(grid, {.sci_mode = true}) << "\n\n";
  std::cout << "{.linewidth = 40}:\n" << tensorfile::printed(grid.transpose(0, 1), {.linewidth = 40}) << "\n\n";
  std::cout << "2000 values are summarized, edgeitems at each end:\n" << wave << "\n";
  std::cout << "{.edgeitems = 1}: " << tensorfile::printed(wave, {.edgeitems = 1}) << "\n";
  std::cout << "{.threshold = INFINITY} prints all " << wave.numel() << " values; its last line:\n";
  const std::string all = tensorfile::to_string(wave, {.threshold = INFINITY});
  std::cout << all.substr(all.rfind('\n') + 1) << "\n";

  // A file's tensors; Parameters print as torch prints them ("Parameter containing:").
  if (argc > 1) {
    const tensorfile::Value root = tensorfile::load_torch(argv[1]);
    for (const auto& [path, tensor] : tensorfile::named_tensors(root)) {
      std::cout << "\n" << path << ":\n" << tensorfile::to_string(tensor, {.precision = 3, .threshold = 50}) << "\n";
    }
  }
  return 0;
}
