// SPDX-License-Identifier: MIT
// Driver of the NumPy interop test (check_with_numpy.py): loads .npy/.npz files with tensorfile and writes
// them back, so that NumPy can compare values (what tensorfile read) and bytes (what it writes).
#include <tensorfile/detail/zip/deflate.hpp>
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/numpy/npz.hpp>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// Usage: numpy_driver npy|npz|npzc heap|r|r+|c|meta IN OUT
// Loads IN in the given mode and saves the result to OUT (meta: prints the shape and dtype only; npzc:
// saved compressed, as np.savez_compressed). `numpy_driver deflate - IN OUT` writes IN's bytes as a raw
// DEFLATE stream (for zlib to check the encoder); `numpy_driver ndim - N OUT` saves a float32 array of one
// element, 2.5, with N dimensions of size 1 (a header past 64 KiB needs format version 2.0).
// Exit 0 on success, 2 with the error message on stdout when loading fails.
int main(int argc, char** argv) {
  if (argc != 5) {
    std::fputs("usage: numpy_driver npy|npz|npzc|deflate|ndim heap|r|r+|c|meta IN OUT\n", stderr);
    return 64;
  }
  const std::string kind = argv[1];
  if (kind == "ndim") {
    const tensorfile::Shape ones(static_cast<std::size_t>(std::stoul(argv[3])), 1);
    tensorfile::save_npy(tensorfile::Tensor::from_values<float>({2.5f}, ones), argv[4], {.sync = false});
    return 0;
  }
  if (kind == "deflate") {
    std::ifstream in(argv[3], std::ios::binary);
    const std::vector<char> input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::vector<std::byte> compressed = tensorfile::detail::deflate(std::as_bytes(std::span(input)));
    std::ofstream out(argv[4], std::ios::binary);
    out.write(reinterpret_cast<const char*>(compressed.data()), static_cast<std::streamsize>(compressed.size()));
    return out ? 0 : 1;
  }
  const std::string mode = argv[2];
  tensorfile::NpyLoadOptions options;
  if (mode == "r") options.mmap = tensorfile::MapMode::read_only;
  if (mode == "r+") options.mmap = tensorfile::MapMode::shared;
  if (mode == "c") options.mmap = tensorfile::MapMode::copy_on_write;
  if (mode == "meta") options.map_location = "meta";
  try {
    if (kind == "npy") {
      const tensorfile::Tensor t = tensorfile::load_npy(argv[3], options);
      if (options.mmap && t.storage().kind() != tensorfile::StorageKind::mmap) {
        std::puts("not a view of the mapping");
        return 1;
      }
      if (mode == "meta") {
        std::printf("%s", std::string(tensorfile::dtype_name(t.dtype())).c_str());
        for (const auto extent : t.sizes()) std::printf(" %lld", static_cast<long long>(extent));
        std::puts("");
        return 0;
      }
      tensorfile::save_npy(t, argv[4], {.sync = false});
    } else {
      const tensorfile::Value v = tensorfile::load_npz(argv[3], options);
      tensorfile::save_npz(v, argv[4], {.sync = false, .compress = kind == "npzc"});
    }
  } catch (const tensorfile::Error& error) {
    std::printf("%s\n", error.what());
    return 2;
  }
  return 0;
}
