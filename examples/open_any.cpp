// SPDX-License-Identifier: MIT
// Example: open any checkpoint (a torch file, safetensors, a sharded index or model folder, .npy, .npz, a tensordict
// tree), list its tensors, read one as floats, and save the whole as safetensors.
//   example_open_any [CHECKPOINT [OUT.safetensors]]
#include <tensorfile/tensorfile.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace tf = tensorfile;

int main(int argc, char** argv) {
  const std::filesystem::path in = argc > 1 ? argv[1] : "tests/data/torch/state_dict_linear_bn.pt";
  const std::filesystem::path out =
      argc > 2 ? std::filesystem::path(argv[2]) : std::filesystem::temp_directory_path() / "open_any.safetensors";
  try {
    const tf::Checkpoint checkpoint = tf::open(in);  // the format from the bytes; reads only the index
    std::printf("%s: %s, %zu tensors\n", in.c_str(), std::string(tf::format_name(checkpoint.format())).c_str(),
                checkpoint.entries().size());
    for (const tf::CheckpointEntry& entry : checkpoint.entries()) {
      std::string shape;
      for (const std::int64_t extent : entry.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(extent);
      std::printf("  %-28s %-8s [%s]\n", entry.path.c_str(), std::string(tf::dtype_name(entry.dtype)).c_str(),
                  shape.c_str());
    }
    for (const tf::CheckpointEntry& entry : checkpoint.entries()) {
      if (!tf::is_floating_point(entry.dtype) || entry.shape.empty()) continue;
      const std::vector<float> values = checkpoint.tensor(entry.path).to_vector<float>();  // just its bytes
      std::printf("%s[0] = %g (%zu values)\n", entry.path.c_str(), static_cast<double>(values.front()), values.size());
      break;
    }
    tf::save(checkpoint.load_all(), out);  // the format from the extension
    std::printf("saved %s: %s\n", out.c_str(), std::string(tf::format_name(tf::open(out).format())).c_str());
  } catch (const tf::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
