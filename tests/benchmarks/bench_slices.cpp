// SPDX-License-Identifier: MIT
// bench_slices PATH WORLD DIM [REPEATS]: what one rank of a tensor-parallel group reads and how long it takes,
// against the full heap load of the same checkpoint in the same process; one JSON line.
//
// Each rank r of WORLD loads PATH with LoadOptions::slice splitting dimension DIM of every tensor that has it
// (tensor_split's shares; tensors without that dimension are read whole), heap, warm page cache (one full load runs
// first). Reported: the full load's median ms, each rank's median ms and the bytes it read (/proc/self/io rchar,
// so every read of the load counts, the index included) as a multiple of its share (the sliced tensors' bytes
// over WORLD plus the whole tensors' bytes).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tensorfile/tensorfile.hpp>

#include "bench_common.hpp"

namespace {

using namespace tensorfile;

/// The SliceRule splitting dimension `dim` of every tensor that has one, as tensor_split shares it.
SliceRule split_every(std::int64_t world, std::int64_t rank, std::int64_t dim) {
  return [=](std::string_view, const Shape& shape) -> std::optional<TensorSlice> {
    if (static_cast<std::int64_t>(shape.size()) <= dim) return std::nullopt;
    TensorSlice slice = split_extent(shape[static_cast<std::size_t>(dim)], world, rank, EvenSplit::tensor_split);
    slice.dim = dim;
    return slice;
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: bench_slices PATH WORLD DIM [REPEATS]\n");
    return 2;
  }
  const std::filesystem::path path = argv[1];
  const std::int64_t world = std::atoll(argv[2]);
  const std::int64_t dim = std::atoll(argv[3]);
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  try {
    const Checkpoint opened = open(path);
    std::uint64_t split_bytes = 0;
    std::uint64_t whole_bytes = 0;
    for (const CheckpointEntry& entry : opened.entries()) {
      (static_cast<std::int64_t>(entry.shape.size()) > dim ? split_bytes : whole_bytes) += entry.nbytes;
    }
    tensorfile_bench::Timings full;
    std::uint64_t full_read = 0;
    for (int i = 0; i <= repeats; ++i) {  // the first warms the page cache and is not counted
      Value loaded;
      const std::uint64_t before = tensorfile_bench::proc_io("rchar");
      if (i == 0) {
        loaded = load(path);
      } else {
        full.run([&] { loaded = load(path); });
      }
      full_read = tensorfile_bench::proc_io("rchar") - before;
    }
    std::string ranks;
    double worst_ms = 0;
    double worst_ratio = 0;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      const LoadOptions options{.slice = split_every(world, rank, dim)};
      tensorfile_bench::Timings part;
      std::uint64_t read = 0;
      for (int i = 0; i < repeats; ++i) {
        Value loaded;
        const std::uint64_t before = tensorfile_bench::proc_io("rchar");
        part.run([&] { loaded = load(path, options); });
        read = tensorfile_bench::proc_io("rchar") - before;
      }
      // This rank's share: its tensor_split part of every split extent is at most ceil(n / world) of n.
      const double share =
          static_cast<double>(split_bytes) / static_cast<double>(world) + static_cast<double>(whole_bytes);
      const double ratio = static_cast<double>(read) / share;
      worst_ms = std::max(worst_ms, part.median());
      worst_ratio = std::max(worst_ratio, ratio);
      ranks += (rank != 0 ? "," : "") + std::string("{\"rank\":") + std::to_string(rank) +
               ",\"ms\":" + std::to_string(part.median()) + ",\"bytes_read\":" + std::to_string(read) +
               ",\"read_over_share\":" + std::to_string(ratio) + "}";
    }
    std::printf(
        "{\"path\":\"%s\",\"world\":%lld,\"dim\":%lld,\"split_bytes\":%llu,\"whole_bytes\":%llu,\"full_ms\":%.2f,"
        "\"full_bytes_read\":%llu,\"worst_rank_ms\":%.2f,\"full_over_worst_rank\":%.2f,\"worst_read_over_share\":%.3f,"
        "\"ranks\":[%s]}\n",
        path.string().c_str(), static_cast<long long>(world), static_cast<long long>(dim),
        static_cast<unsigned long long>(split_bytes), static_cast<unsigned long long>(whole_bytes), full.median(),
        static_cast<unsigned long long>(full_read), worst_ms, full.median() / worst_ms, worst_ratio, ranks.c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_slices: %s\n", error.what());
    return 1;
  }
  return 0;
}
