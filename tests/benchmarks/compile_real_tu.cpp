// SPDX-License-Identifier: MIT
// "The real TU" of compile_time.sh: what a program that reads checkpoints includes and calls, written as a user
// would. Four loaders (torch through the front door and load_torch, safetensors, NumPy, a tensordict tree),
// named_tensors, to_vector and printing. Only compiled (-c), never linked or run.
#include <tensorfile/tensorfile.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace tf = tensorfile;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "tests/data";

  const tf::Checkpoint checkpoint = tf::open(dir + "/torch/state_dict_linear_bn.pt");
  for (const tf::CheckpointEntry& entry : checkpoint.entries()) {
    std::printf("%s %s\n", entry.path.c_str(), tf::dtype_name(entry.dtype).data());
  }
  const tf::Value any = tf::load(dir + "/torch/state_dict_linear_bn.pt");
  const tf::Value sd = tf::load_torch(dir + "/torch/state_dict_linear_bn.pt", {.mmap = tf::MapMode::read_only});
  const tf::Value st = tf::load_safetensors(dir + "/safetensors/f.safetensors");
  const tf::Tensor npy = tf::load_npy(dir + "/numpy/f4_c.npy");
  const tf::Value npz = tf::load_npz(dir + "/numpy/stored.npz");
  const tf::TensorDict td = tf::load_memmap(dir + "/tensordict/s01_basic");

  double sum = 0;
  for (const tf::Value* tree : {&any, &sd, &st, &npz}) {
    for (const auto& [path, tensor] : tf::named_tensors(*tree)) {
      for (const float x : tensor.to_vector<float>()) sum += x;
      std::cout << path << "\n" << tensor << "\n";
    }
  }
  const std::vector<double> values = npy.to_vector<double>();
  std::cout << npy << "\n" << td.get({"a"}).as_tensor() << "\n" << sum + values.at(0) << "\n";
}
