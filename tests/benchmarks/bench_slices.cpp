// SPDX-License-Identifier: MIT
// bench_slices PATH WORLD DIM [REPEATS]: what one rank of a tensor-parallel group reads and how long it takes,
// against the full heap load of the same checkpoint in the same process; one JSON line.
//
// Each rank r of WORLD loads PATH with LoadOptions::slice splitting dimension DIM of every tensor that has it
// (tensor_split's shares; tensors without that dimension are read whole), heap, warm page cache (one full load runs
// first). Reported: the full load's median ms, each rank's median ms and two measures of what it read, each as a
// multiple of its share (the sliced tensors' bytes over WORLD plus the whole tensors' bytes): the bytes its read
// calls copied (/proc/self/io rchar, so every read of the load counts, the index included), and the file's 4 KiB
// pages those calls read from, counted once each (this program's own pread and preadv, which the library's calls
// bind to, mark them; one more, untimed, load per rank). Pages are what a local read really takes from the page cache
// or the disk: a call that copies 32 bytes of a page reads that page.
#include <sys/syscall.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tensorfile/tensorfile.hpp>

#include "bench_common.hpp"

namespace {

using namespace tensorfile;

/// The file pages the read calls took bytes from since the last reset, while counting is on.
struct PagesRead {
  static constexpr std::uint64_t page = 4096;
  std::atomic<bool> counting{false};
  std::vector<std::atomic<std::uint64_t>> bits = std::vector<std::atomic<std::uint64_t>>(std::size_t{1} << 16);

  void mark(std::uint64_t offset, std::uint64_t bytes) {
    if (!counting.load(std::memory_order_relaxed) || bytes == 0) return;
    for (std::uint64_t p = offset / page; p <= (offset + bytes - 1) / page; ++p) {
      if (p / 64 < bits.size()) bits[p / 64].fetch_or(std::uint64_t{1} << (p % 64), std::memory_order_relaxed);
    }
  }
  [[nodiscard]] std::uint64_t bytes() const {
    std::uint64_t pages = 0;
    for (const auto& word : bits) pages += static_cast<std::uint64_t>(__builtin_popcountll(word.load()));
    return pages * page;
  }
  void reset() {
    for (auto& word : bits) word.store(0);
  }
};

PagesRead pages_read;  // of files up to 16 GiB

}  // namespace

// The library's reads, marked, then done by the kernel as libc would.
extern "C" ssize_t pread(int fd, void* out, std::size_t count, off_t offset) {
  const auto got = static_cast<ssize_t>(::syscall(SYS_pread64, fd, out, count, offset));
  if (got > 0) pages_read.mark(static_cast<std::uint64_t>(offset), static_cast<std::uint64_t>(got));
  return got;
}

extern "C" ssize_t preadv(int fd, const iovec* parts, int count, off_t offset) {
  const auto got = static_cast<ssize_t>(::syscall(SYS_preadv, fd, parts, count, offset, 0));
  if (got > 0) pages_read.mark(static_cast<std::uint64_t>(offset), static_cast<std::uint64_t>(got));
  return got;
}

namespace {

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
    double worst_pages_ratio = 0;
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
      pages_read.reset();
      pages_read.counting = true;
      { const Value loaded = load(path, options); }
      pages_read.counting = false;
      const double pages_ratio = static_cast<double>(pages_read.bytes()) / share;
      worst_ms = std::max(worst_ms, part.median());
      worst_ratio = std::max(worst_ratio, ratio);
      worst_pages_ratio = std::max(worst_pages_ratio, pages_ratio);
      ranks += (rank != 0 ? "," : "") + std::string("{\"rank\":") + std::to_string(rank) +
               ",\"ms\":" + std::to_string(part.median()) + ",\"bytes_read\":" + std::to_string(read) +
               ",\"read_over_share\":" + std::to_string(ratio) +
               ",\"pages_read_over_share\":" + std::to_string(pages_ratio) + "}";
    }
    std::printf(
        "{\"path\":\"%s\",\"world\":%lld,\"dim\":%lld,\"split_bytes\":%llu,\"whole_bytes\":%llu,\"full_ms\":%.2f,"
        "\"full_bytes_read\":%llu,\"worst_rank_ms\":%.2f,\"full_over_worst_rank\":%.2f,\"worst_read_over_share\":%.3f,"
        "\"worst_pages_read_over_share\":%.3f,\"ranks\":[%s]}\n",
        path.string().c_str(), static_cast<long long>(world), static_cast<long long>(dim),
        static_cast<unsigned long long>(split_bytes), static_cast<unsigned long long>(whole_bytes), full.median(),
        static_cast<unsigned long long>(full_read), worst_ms, full.median() / worst_ms, worst_ratio, worst_pages_ratio,
        ranks.c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_slices: %s\n", error.what());
    return 1;
  }
  return 0;
}
