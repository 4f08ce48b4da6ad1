// SPDX-License-Identifier: MIT
// bench_npy MODE FILE [REPEATS]: times tensorfile::load_npy (heap, mmap, meta) on one .npy file; one JSON line
// as bench_load prints. `bench_npy make FILE MIB` writes a float32 .npy of MIB MiB with save_npy (untimed).
// run_npy_bench.sh compares heap loads with bench_load's pread floor in the same run.
#include <tensorfile/formats/numpy/npy.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "bench_common.hpp"

namespace {

int make(const std::string& path, long mib) {
  const auto count = static_cast<std::int64_t>(mib) * (1 << 20) / 4;
  tensorfile::Tensor t = tensorfile::Tensor::zeros({count}, tensorfile::DType::Float32);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < count; ++i) p[i] = static_cast<float>(i % 1000);
  tensorfile::save_npy(t, path, {.sync = false});
  return 0;
}

int bench(const std::string& mode, const std::string& path, int repeats) {
  tensorfile::LoadOptions options;
  if (mode == "mmap") options.mmap = tensorfile::MapMode::read_only;
  if (mode == "meta") options.map_location = "meta";
  tensorfile_bench::Timings t;
  std::uint64_t checksum = 0;
  long anon = -1;
  long file = -1;
  for (int i = 0; i < repeats; ++i) {
    std::optional<tensorfile::Tensor> loaded;
    t.run([&] { loaded = tensorfile::load_npy(path, options); });
    if (mode != "meta" && loaded->nbytes() != 0)
      checksum += std::to_integer<std::uint64_t>(loaded->raw_data()[loaded->nbytes() - 1]);
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("tensorfile_npy", mode, path, std::filesystem::file_size(path), 1, t, anon, file,
                               checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tensorfile_bench::mark_start();
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s heap|mmap|meta FILE [REPEATS=5]  |  %s make FILE MIB\n", argv[0], argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "make") return make(argv[2], argc == 4 ? std::atol(argv[3]) : 1);
    const int repeats = argc == 4 ? std::atoi(argv[3]) : 5;
    if (repeats < 1) return 2;
    if (mode == "heap" || mode == "mmap" || mode == "meta") return bench(mode, argv[2], repeats);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  std::fprintf(stderr, "unknown MODE %s\n", mode.c_str());
  return 2;
}
