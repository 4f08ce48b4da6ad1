// SPDX-License-Identifier: MIT
// Example: map a raw file of float32 values as a tensor (torch.from_file), read it, write through it.
//
//   example_from_file PATH [DTYPE]    maps PATH whole and prints it
//   example_from_file --demo DIR      writes a file with a shared mapping, then maps it privately
#include <tensorfile/tensorfile.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "--demo") {
      const std::filesystem::path path = std::filesystem::path(argv[2]) / "squares.f32";
      {
        // shared = true creates the file, grows it to 10 floats, and every write reaches it.
        auto squares = tensorfile::from_file(
            path, {.mmap = tensorfile::MapMode::shared, .size = 10, .dtype = tensorfile::DType::Float32});
        auto values = squares.view<float>();
        for (std::int64_t i = 0; i < squares.numel(); ++i) values(i) = static_cast<float>(i * i);
      }
      // shared = false maps copy-on-write: changes stay in memory, the file keeps its bytes.
      const auto again = tensorfile::from_file(path).reshape({2, 5});
      std::cout << path.filename().string() << ": " << again << "\n";
      std::cout << "row 1, column 2 = " << again.view<const float>()(1, 2) << "\n";
      return 0;
    }
    if (argc == 2 || argc == 3) {
      const auto dtype = argc == 3 ? tensorfile::parse_dtype(argv[2]) : tensorfile::DType::Float32;
      std::cout << tensorfile::from_file(argv[1], {.dtype = dtype}) << "\n";
      return 0;
    }
    std::cerr << "usage: example_from_file PATH [DTYPE] | example_from_file --demo DIR\n";
    return 2;
  } catch (const tensorfile::Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
