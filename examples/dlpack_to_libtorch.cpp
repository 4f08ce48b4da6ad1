// SPDX-License-Identifier: MIT
// Example: load a torch.save checkpoint with tensorfile (mapped, no copy) and hand a weight to libtorch via DLPack.
//
//   example_dlpack_to_libtorch CHECKPOINT.pt [NAME]   NAME defaults to the checkpoint's first 2-d tensor
#include <ATen/DLConvertor.h>
#include <torch/types.h>

#include <tensorfile/interop/dlpack.hpp>
#include <tensorfile/tensorfile.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: example_dlpack_to_libtorch CHECKPOINT.pt [NAME]\n";
    return 2;
  }
  try {
    // Storages are views of one copy-on-write mapping of the file: nothing is read until it is touched.
    const auto checkpoint = tensorfile::load_torch(argv[1], {.mmap = tensorfile::MapMode::copy_on_write});
    tensorfile::Tensor weight;
    std::string name;
    for (const auto& [key, tensor] : tensorfile::named_tensors(checkpoint)) {
      if (argc == 3 ? key == argv[2] : tensor.dim() == 2) {
        name = key;
        weight = tensor;
        break;
      }
    }
    if (!weight.defined()) {
      std::cerr << argv[1] << ": no " << (argc == 3 ? "tensor named " + std::string(argv[2]) : "2-d tensor") << "\n";
      return 1;
    }
    std::cout << name << " (tensorfile): " << weight << "\n";

    // DLPack hands libtorch the mapped bytes; the mapping stays alive until libtorch lets go of the tensor.
    const torch::Tensor w = at::fromDLPack(tensorfile::to_dlpack(weight));
    std::cout << "same memory: " << std::boolalpha << (w.data_ptr() == weight.raw_data()) << "\n";
    std::cout << "torch::mm(w, w.t()):\n" << torch::mm(w, w.t()) << "\n";
    return 0;
  } catch (const tensorfile::Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  } catch (const c10::Error& error) {
    std::cerr << "libtorch: " << error.what_without_backtrace() << "\n";
    return 1;
  }
}
