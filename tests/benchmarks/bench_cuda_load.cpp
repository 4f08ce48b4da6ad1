// SPDX-License-Identifier: MIT
// CUDA load benchmark (a program, never a test): a torch file to cuda:0 by tensorfile's streamed
// load, by load's per-storage copies, and the floors: a parallel pread of the file and one
// cudaMemcpy from one pinned buffer. Prints one JSON line per run. Run by run_cuda_bench.sh.
//
// usage: bench_cuda_load FILE MODE [--repeats N] [--cold] [--ring-mib N] [--slot-mib N] [--threads N]
//                        [--direct on|off|auto] [--cufile] [--separate]
//   MODE: stream       tensorfile::cuda::load(FILE, {.map_location = "cuda:0"}, ring options)
//         hook         tensorfile::load(FILE, {.map_location = "cuda:0"}): one pageable cudaMemcpy per storage
//         pinned_copy  floor: the file's bytes in one pinned buffer (read untimed), one cudaMemcpy to the device
//         read_floor   floor: the file pread by --threads threads into a reused buffer, no device
//   --cold          evict the file from the page cache (posix_fadvise DONTNEED) before every repeat
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tensorfile/cuda.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
  std::string file;
  std::string mode;
  int repeats = 3;
  bool cold = false;
  std::size_t ring_mib = 256;
  std::size_t slot_mib = 16;
  std::size_t threads = 8;
  std::string direct = "auto";
  bool cufile = false;
  bool separate = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_cuda_load: %s\nusage: bench_cuda_load FILE stream|hook|pinned_copy|read_floor [--repeats N] "
               "[--cold] [--ring-mib N] [--slot-mib N] [--threads N] [--direct on|off|auto] [--cufile] [--separate]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 3) usage("missing FILE or MODE");
  Args args;
  args.file = argv[1];
  args.mode = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--repeats")
      args.repeats = std::stoi(value());
    else if (a == "--cold")
      args.cold = true;
    else if (a == "--ring-mib")
      args.ring_mib = std::stoul(value());
    else if (a == "--slot-mib")
      args.slot_mib = std::stoul(value());
    else if (a == "--threads")
      args.threads = std::stoul(value());
    else if (a == "--direct")
      args.direct = value();
    else if (a == "--cufile")
      args.cufile = true;
    else if (a == "--separate")
      args.separate = true;
    else
      usage(("unknown argument " + a).c_str());
  }
  return args;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda_load: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

long peak_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

std::uint64_t file_size(const std::string& path) {
  return static_cast<std::uint64_t>(std::filesystem::file_size(path));
}

/// Drops the file's clean pages from the page cache (what a cold start sees).
void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

/// Reads the whole file with `threads` threads in 16 MiB pieces into per-thread buffers.
void read_floor(const std::string& path, std::size_t threads) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const std::uint64_t size = file_size(path);
  const std::uint64_t piece = std::uint64_t{16} << 20;
  std::atomic<std::uint64_t> next{0};
  std::vector<std::jthread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      std::vector<char> buffer(piece);
      for (std::uint64_t at = next.fetch_add(piece); at < size; at = next.fetch_add(piece)) {
        if (::pread(fd, buffer.data(), std::min(piece, size - at), static_cast<off_t>(at)) < 0) std::abort();
      }
    });
  }
  workers.clear();
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const std::uint64_t bytes = file_size(args.file);
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context creation");  // not timed: every mode needs a context

  void* pinned = nullptr;
  void* device = nullptr;
  if (args.mode == "pinned_copy") {
    check(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    check(cudaMalloc(&device, bytes), "cudaMalloc");
    const int fd = ::open(args.file.c_str(), O_RDONLY);
    for (std::uint64_t at = 0; at < bytes;) {
      const ssize_t got = ::pread(fd, static_cast<char*>(pinned) + at, std::min<std::uint64_t>(bytes - at, 1u << 30),
                                  static_cast<off_t>(at));
      if (got <= 0) std::abort();
      at += static_cast<std::uint64_t>(got);
    }
    ::close(fd);
  }

  const tensorfile::cuda::CudaLoadOptions options{.ring_bytes = args.ring_mib << 20,
                                                  .threads = args.threads,
                                                  .direct_io = args.direct == "on"    ? std::optional<bool>(true)
                                                               : args.direct == "off" ? std::optional<bool>(false)
                                                                                      : std::nullopt,
                                                  .use_cufile = args.cufile,
                                                  .slot_bytes = args.slot_mib << 20,
                                                  .single_allocation = !args.separate};

  for (int repeat = 0; repeat < args.repeats; ++repeat) {
    if (args.cold) evict(args.file);
    const auto start = std::chrono::steady_clock::now();
    std::size_t tensors = 0;
    if (args.mode == "stream") {
      const tensorfile::Value v = tensorfile::cuda::load(args.file, {.map_location = "cuda:0"}, options);
      tensors = v.is_dict() ? v.as_dict().size() : 1;
    } else if (args.mode == "hook") {
      const tensorfile::Value v = tensorfile::load(args.file, {.map_location = "cuda:0"});
      tensors = v.is_dict() ? v.as_dict().size() : 1;
    } else if (args.mode == "pinned_copy") {
      check(cudaMemcpy(device, pinned, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    } else if (args.mode == "read_floor") {
      read_floor(args.file, args.threads);
    } else {
      usage(("unknown mode " + args.mode).c_str());
    }
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "{\"file\": \"%s\", \"mode\": \"%s\", \"cache\": \"%s\", \"repeat\": %d, \"bytes\": %llu, \"tensors\": %zu, "
        "\"ms\": %.2f, \"gb_per_s\": %.3f, \"peak_rss_kb\": %ld, \"ring_mib\": %zu, \"slot_mib\": %zu, "
        "\"threads\": %zu, \"direct\": \"%s\", \"cufile\": %s, \"single_allocation\": %s}\n",
        args.file.c_str(), args.mode.c_str(), args.cold ? "cold" : "warm", repeat,
        static_cast<unsigned long long>(bytes), tensors, ms, static_cast<double>(bytes) / ms / 1e6, peak_rss_kb(),
        args.ring_mib, args.slot_mib, args.threads, args.direct.c_str(), args.cufile ? "true" : "false",
        args.separate ? "false" : "true");
    std::fflush(stdout);
  }
  if (pinned != nullptr) cudaFreeHost(pinned);
  if (device != nullptr) cudaFree(device);
  return 0;
}
