// SPDX-License-Identifier: MIT
// scan() of one checkpoint, repeated on a warm page cache: time per scan and the bytes of pickle it read (the
// tensor data must not be read). Prints one JSON line. usage: bench_scan FILE [REPEATS=20]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <tensorfile/scan.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_scan FILE [REPEATS]\n");
    return 2;
  }
  const std::filesystem::path path = argv[1];
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  tensorfile::ScanReport report = tensorfile::scan(path);  // warms the cache for the pickle pages
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) ms.push_back(tensorfile_bench::time_ms([&] { report = tensorfile::scan(path); }));
  std::sort(ms.begin(), ms.end());
  std::printf(
      "{\"mode\": \"scan\", \"file_bytes\": %llu, \"pickle_bytes_read\": %llu, \"globals\": %zu, \"safe\": %s, "
      "\"min_ms\": %.4f, \"median_ms\": %.4f}\n",
      static_cast<unsigned long long>(std::filesystem::file_size(path)),
      static_cast<unsigned long long>(report.bytes_read), report.globals.size(), report.safe() ? "true" : "false",
      ms.front(), ms[ms.size() / 2]);
  return report.safe() ? 0 : 1;
}
