// SPDX-License-Identifier: MIT
// Example: find your way around a loaded checkpoint (contains, get with a default, paths of keys and indices,
// name -> Tensor iteration), and turn it into a TensorDict tree and back without losing its int keys.
#include <tensorfile/tensorfile.hpp>

#include <filesystem>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  namespace tf = tensorfile;
  if (argc != 2) {
    std::cerr << "usage: example_value_navigation OPTIMIZER_CHECKPOINT.pt\n";
    return 2;
  }
  const tf::Value ckpt = tf::load_torch(argv[1]);  // an optimizer's state_dict: {"state": {0: ..., 1: ...}, ...}

  // Lookups: contains/get on a dict, at_path through dicts (str or int keys) and lists (indices).
  std::cout << "has param_groups: " << ckpt.contains("param_groups") << "\n";
  std::cout << "lr: " << ckpt.at_path({"param_groups", 0, "lr"}) << "\n";
  std::cout << "betas: " << ckpt.at_path({"param_groups", 0, "betas"}) << "\n";
  std::cout << "momentum (absent, default 0.0): " << ckpt["param_groups"][0].get("momentum", tf::Value(0.0)) << "\n";
  if (const tf::Value* step = ckpt.find_path({"state", 0, "step"})) std::cout << "state[0]['step']: " << *step << "\n";

  // Every tensor with its path, as name -> Tensor: no casts.
  for (const auto& [name, tensor] : tf::named_tensors(ckpt)) {
    std::cout << name << ": " << tf::dtype_name(tensor.dtype()) << " " << tf::printed(tensor, {.precision = 2}) << "\n";
  }

  // A TensorDict tree and back: int keys, tuples and lists are recorded, so the round trip is exact; what a
  // tree cannot hold (here: the betas tuple inside JSON data becomes a list) is listed, never silent.
  std::vector<tf::LeftOut> changes;
  const tf::TensorDict td = tf::to_tensordict(ckpt, {.file = argv[1], .left_out = &changes});
  for (const tf::LeftOut& change : changes) std::cout << "changed " << change.path << ": " << change.what << "\n";
  const std::filesystem::path tree = std::filesystem::temp_directory_path() / "tensorfile_example_tree";
  tf::save_memmap(td, tree);
  const tf::Value back = tf::to_value(tf::load_memmap(tree));
  std::filesystem::remove_all(tree);
  std::cout << "state keys after the round trip are ints: " << back["state"].contains(0) << "\n";
  std::cout << "betas after the round trip: " << back.at_path({"param_groups", 0, "betas"}) << "\n";
  return 0;
}
