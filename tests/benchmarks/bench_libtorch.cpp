// SPDX-License-Identifier: MIT
// bench_libtorch FILE [REPEATS]: times libtorch's torch::pickle_load of a torch.save file; one JSON line.
//
// FILE must hold a plain dict (pickle_load has no OrderedDict). Timed: reading the file into a
// std::vector<char> plus torch::pickle_load(data), as a C++ user of libtorch 1.13 must do;
// parse_* fields time pickle_load alone. Run one configuration per process (ru_maxrss).
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  tensorfile_bench::mark_start();
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s FILE [REPEATS=5]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc == 3 ? std::atoi(argv[2]) : 5;
  tensorfile_bench::Timings total;
  tensorfile_bench::Timings parse;
  std::size_t tensors = 0;
  std::uint64_t checksum = 0;
  std::uint64_t size = 0;
  long anon = -1;
  long file = -1;
  try {
    for (int i = 0; i < repeats; ++i) {
      std::optional<c10::IValue> value;
      double parse_ms = 0;
      total.run([&] {
        std::ifstream in(path, std::ios::binary);
        in.seekg(0, std::ios::end);
        size = static_cast<std::uint64_t>(in.tellg());
        in.seekg(0);
        std::vector<char> data(size);
        in.read(data.data(), static_cast<std::streamsize>(size));
        parse_ms = tensorfile_bench::time_ms([&] { value = torch::pickle_load(data); });
      });
      parse.ms.push_back(parse_ms);
      tensors = 0;
      checksum = 0;
      for (const auto& item : value->toGenericDict()) {
        const at::Tensor tensor = item.value().toTensor();
        ++tensors;
        if (tensor.numel() > 0) checksum += *static_cast<const unsigned char*>(tensor.data_ptr());
      }
      anon = tensorfile_bench::proc_status_kb("RssAnon");
      file = tensorfile_bench::proc_status_kb("RssFile");
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  char extra[128];
  std::snprintf(extra, sizeof extra, "\"parse_min_ms\": %.3f, \"parse_median_ms\": %.3f, ", parse.min(),
                parse.median());
  tensorfile_bench::print_json("libtorch", "pickle_load", path, size, tensors, total, anon, file, checksum, extra);
  return 0;
}
