// SPDX-License-Identifier: MIT
// Save benchmark (a program, never a test): tensorfile::save of a loaded checkpoint against the
// floor of writing the same number of bytes with plain write() from one buffer.
//
//   bench_save MODE IN.pt OUT_DIR [REPEATS]    MODE: save | convert | write_floor
// save: save_torch of the checkpoint loaded before timing; convert: the torch file to .safetensors, both timed
// (load with mmap, then save_safetensors), as `tensorfile convert` does; write_floor: the file's size in bytes
// written from one buffer. Prints one JSON line: min/median wall ms and peak RSS before and after (no fsync).
#include <fcntl.h>
#include <unistd.h>

#include <tensorfile/formats/torch/save.hpp>
#include <tensorfile/tensorfile.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: bench_save save|convert|write_floor IN.pt OUT_DIR [REPEATS]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::filesystem::path in = argv[2];
  const std::filesystem::path out =
      std::filesystem::path(argv[3]) / ("bench_" + mode + (mode == "convert" ? ".safetensors" : ".pt"));
  const int repeats = argc > 4 ? std::stoi(argv[4]) : 3;
  const auto file_bytes = std::filesystem::file_size(in);

  // The data to write is in memory before timing starts, for both modes.
  tensorfile::Value value;
  std::vector<std::byte> buffer;
  if (mode == "save") {
    value = tensorfile::load_torch(in);
  } else if (mode != "convert") {
    buffer.assign(file_bytes, std::byte{1});
  }
  const long rss_before = tensorfile_bench::peak_rss_kb();
  std::vector<double> wall;
  for (int i = 0; i < repeats; ++i) {
    std::filesystem::remove(out);
    wall.push_back(tensorfile_bench::time_ms([&] {
      if (mode == "save") {
        tensorfile::save_torch(value, out, {.sync = false});
      } else if (mode == "convert") {
        tensorfile::save(tensorfile::load(in, {.mmap = tensorfile::MapMode::copy_on_write}), out, {.sync = false});
      } else {
        tensorfile_bench::write_floor(buffer, out);
      }
    }));
  }
  std::sort(wall.begin(), wall.end());
  std::printf(
      "{\"mode\": \"%s\", \"file_bytes\": %llu, \"min_ms\": %.1f, \"median_ms\": %.1f, \"rss_before_kb\": %ld, "
      "\"peak_rss_kb\": %ld}\n",
      mode.c_str(), static_cast<unsigned long long>(file_bytes), wall.front(), wall[wall.size() / 2], rss_before,
      tensorfile_bench::peak_rss_kb());
  std::filesystem::remove(out);
  return 0;
}
