// SPDX-License-Identifier: MIT
// Driver of the NumPy interop test (check_with_numpy.py): loads .npy/.npz files with tensorfile and writes
// them back, so that NumPy can compare values (what tensorfile read) and bytes (what it writes).
#include <tensorfile/detail/zip/deflate.hpp>
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/numpy/npz.hpp>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

// A command: npy|npz|npzc heap|r|r+|c|meta IN OUT
// Loads IN in the given mode and saves the result to OUT (meta: prints the shape and dtype only; npzc:
// saved compressed, as np.savez_compressed). `deflate - IN OUT` writes IN's bytes as a raw DEFLATE stream (for
// zlib to check the encoder); `ndim - N OUT` saves a float32 array of one element, 2.5, with N dimensions of
// size 1 (a header past 64 KiB needs format version 2.0).
// Status 0 on success, 2 with the error message as output when loading fails.
namespace {

int run(const std::string& kind, const std::string& mode, const std::string& in_path, const std::string& out_path,
        std::string& output) {
  if (kind == "ndim") {
    const tensorfile::Shape ones(static_cast<std::size_t>(std::stoul(in_path)), 1);
    tensorfile::save_npy(tensorfile::Tensor::from_values<float>({2.5f}, ones), out_path, {.sync = false});
    return 0;
  }
  if (kind == "deflate") {
    std::ifstream in(in_path, std::ios::binary);
    const std::vector<char> input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::vector<std::byte> compressed = tensorfile::detail::deflate(std::as_bytes(std::span(input)));
    std::ofstream out(out_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(compressed.data()), static_cast<std::streamsize>(compressed.size()));
    return out ? 0 : 1;
  }
  tensorfile::LoadOptions options;
  if (mode == "r") options.mmap = tensorfile::MapMode::read_only;
  if (mode == "r+") options.mmap = tensorfile::MapMode::shared;
  if (mode == "c") options.mmap = tensorfile::MapMode::copy_on_write;
  if (mode == "meta") options.map_location = "meta";
  try {
    if (kind == "npy") {
      const tensorfile::Tensor t = tensorfile::load_npy(in_path, options);
      if (options.mmap && t.storage().kind() != tensorfile::StorageKind::mmap) {
        output = "not a view of the mapping\n";
        return 1;
      }
      if (mode == "meta") {
        output = std::string(tensorfile::dtype_name(t.dtype()));
        for (const auto extent : t.sizes()) output += " " + std::to_string(extent);
        output += "\n";
        return 0;
      }
      tensorfile::save_npy(t, out_path, {.sync = false});
    } else {
      const tensorfile::Value v = tensorfile::load_npz(in_path, options);
      tensorfile::save_npz(v, out_path, {.sync = false, .npz = {.compress = kind == "npzc"}});
    }
  } catch (const tensorfile::Error& error) {
    output = std::string(error.what()) + "\n";
    return 2;
  }
  return 0;
}

}  // namespace

// Usage: `numpy_driver KIND MODE IN OUT` runs one command: its output on stdout, its status as the exit status.
// `numpy_driver serve` runs one command per line of stdin (the four words separated by tabs) and answers each with
// a line "STATUS BYTES" and then the output's bytes: one process for the test's thousands of commands, which
// under a sanitizer would otherwise spend most of their time starting up.
int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "serve") {
    std::string line;
    while (std::getline(std::cin, line)) {
      std::vector<std::string> words;
      std::istringstream fields(line);
      for (std::string word; std::getline(fields, word, '\t');) words.push_back(word);
      std::string output;
      const int status = words.size() == 4 ? run(words[0], words[1], words[2], words[3], output) : 64;
      std::cout << status << ' ' << output.size() << '\n' << output << std::flush;
    }
    return 0;
  }
  if (argc != 5) {
    std::fputs("usage: numpy_driver npy|npz|npzc|deflate|ndim heap|r|r+|c|meta IN OUT, or numpy_driver serve\n",
               stderr);
    return 64;
  }
  std::string output;
  const int status = run(argv[1], argv[2], argv[3], argv[4], output);
  std::fputs(output.c_str(), stdout);
  return status;
}
