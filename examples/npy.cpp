// SPDX-License-Identifier: MIT
// Example: write a matrix as .npy and a pair of arrays as .npz, read them back (copied and mapped), as NumPy would.
//   example_npy DIR   then in Python: np.load("DIR/m.npy"), np.load("DIR/pair.npz")["bias"]
#include <tensorfile/tensorfile.hpp>

#include <cstdio>
#include <filesystem>
#include <vector>

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : std::filesystem::temp_directory_path();
  try {
    std::vector<float> values(12);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) / 2;
    const auto matrix = tensorfile::Tensor::from_values(std::span<const float>(values), {3, 4});

    tensorfile::save_npy(matrix, dir / "m.npy");  // byte for byte what np.save writes
    tensorfile::save_npz({{"weight", matrix}, {"bias", tensorfile::Tensor::from_values({1.0, 2.0, 3.0})}},
                         dir / "pair.npz");

    const tensorfile::Tensor heap = tensorfile::load_npy(dir / "m.npy");  // copied into memory
    const tensorfile::Tensor view =                                       // no copy: np.load(mmap_mode="r")
        tensorfile::load_npy(dir / "m.npy", {.mmap = tensorfile::MapMode::read_only});
    std::printf("m.npy: %s [%lld, %lld], m[2][3] = %g, mapped and copied equal: %s\n",
                std::string(tensorfile::dtype_name(heap.dtype())).c_str(), static_cast<long long>(heap.size(0)),
                static_cast<long long>(heap.size(1)), static_cast<double>(view.data<const float>()[11]),
                heap.equal(view) ? "yes" : "no");

    const tensorfile::Value arrays = tensorfile::load_npz(dir / "pair.npz", {.mmap = tensorfile::MapMode::read_only});
    for (const auto& [name, tensor] : tensorfile::named_tensors(arrays)) {
      std::printf("pair.npz: %s %s, %lld elements\n", name.c_str(),
                  std::string(tensorfile::dtype_name(tensor.dtype())).c_str(), static_cast<long long>(tensor.numel()));
    }
  } catch (const tensorfile::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
