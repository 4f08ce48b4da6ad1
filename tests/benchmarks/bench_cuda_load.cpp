// SPDX-License-Identifier: MIT
// CUDA load benchmark (a program, never a test): a torch file to cuda:0 by tensorfile's streamed
// load, by load's per-storage copies, and the floors: a parallel pread of the file and one
// cudaMemcpy from one pinned buffer. Prints one JSON line per run. Run by run_cuda_bench.sh.
//
// usage: bench_cuda_load FILE make --mib N        writes FILE with tensorfile's save (no torch needed): a
//                                                 transformer-like state dict, bf16 layers and fp32 norms
//        bench_cuda_load FILE MODE [--repeats N] [--cold] [--ring-mib N] [--slot-mib N] [--threads N]
//                        [--direct on|off|auto] [--cufile] [--separate]
//   MODE: stream       tensorfile::cuda::load_torch(FILE, {.map_location = "cuda:0", .cuda = ring options})
//         hook         tensorfile::load_torch(FILE, {.map_location = "cuda:0"}): one pageable cudaMemcpy per storage
//         pinned_copy  floor: the file's bytes in one pinned buffer (read untimed), one cudaMemcpy to the device
//         read_floor   floor: the file pread by --threads threads into a reused buffer, no device
//   --cold          evict the file from the page cache (posix_fadvise DONTNEED) before every repeat
//   --cufile        stream with cuFile only (LoadOptions::Cuda::require_cufile): where it cannot be used, one
//                   row says why ("io": "unavailable") instead of timing the ring under a cuFile label
// The timer stops with the loaded tensors alive (as run_cuda_bench.sh's torch.load does): freeing them
// is not part of a load. Each row's "io" says what moved the bytes: ring, cufile, pageable (hook), ...
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tensorfile/cuda.hpp>
#include <tensorfile/formats/torch/save.hpp>

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
  std::int64_t mib = 1024;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_cuda_load: %s\nusage: bench_cuda_load FILE make --mib N\n       bench_cuda_load FILE "
               "stream|hook|pinned_copy|read_floor [--repeats N] "
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
    else if (a == "--mib")
      args.mib = std::stoll(value());
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

/// `text` with the characters JSON cannot hold bare replaced.
std::string json_text(std::string text) {
  for (char& c : text) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  return text;
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

/// Writes a transformer-like state dict of about `mib` MiB to `path`: per layer q, k, v, o (h x h), up, gate
/// (m x h) and down (h x m) in bfloat16 and a float32 norm, each filled with its own byte.
void make_file(const std::string& path, std::int64_t mib) {
  using namespace tensorfile;
  const std::int64_t total = mib << 20;
  const std::int64_t h = mib >= 1024 ? 4096 : 1024;
  const std::int64_t m = h * 11 / 4;
  struct Weight {
    const char* name;
    std::int64_t rows;
    std::int64_t cols;  // 0: a 1-d float32 norm
  };
  const Weight layer[] = {{"attn.q", h, h}, {"attn.k", h, h},   {"attn.v", h, h},   {"attn.o", h, h},
                          {"mlp.up", m, h}, {"mlp.gate", m, h}, {"mlp.down", h, m}, {"norm", h, 0}};
  Dict sd;
  sd.ordered = true;
  std::int64_t done = 0;
  for (std::int64_t l = 0; done < total; ++l) {
    for (const Weight& w : layer) {
      const Tensor t =
          w.cols != 0 ? Tensor::zeros({w.rows, w.cols}, DType::BFloat16) : Tensor::zeros({w.rows}, DType::Float32);
      std::memset(t.storage().mutable_data(), static_cast<int>(0x3c + l % 7), t.nbytes());
      done += static_cast<std::int64_t>(t.nbytes());
      sd.set(Value("layers." + std::to_string(l) + "." + w.name + ".weight"), Value(t));
    }
  }
  save_torch(Value(std::move(sd)), path);
  std::printf("wrote %s: %.2f GiB\n", path.c_str(), static_cast<double>(file_size(path)) / (1 << 30));
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  if (args.mode == "make") {
    make_file(args.file, args.mib);
    return 0;
  }
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

  const tensorfile::LoadOptions options{.map_location = "cuda:0",
                                        .threads = args.threads,
                                        .direct_reads = args.direct == "on"    ? tensorfile::DirectReads::always
                                                        : args.direct == "off" ? tensorfile::DirectReads::never
                                                                               : tensorfile::DirectReads::automatic,
                                        .cuda = {.ring_bytes = args.ring_mib << 20,
                                                 .slot_bytes = args.slot_mib << 20,
                                                 .use_cufile = args.cufile,
                                                 .require_cufile = args.cufile,
                                                 .single_allocation = !args.separate}};
  const char* io = args.mode == "stream"        ? (args.cufile ? "cufile" : "ring")
                   : args.mode == "hook"        ? "pageable"
                   : args.mode == "pinned_copy" ? "pinned"
                                                : "read";

  tensorfile::Value loaded;  // alive until the timer has stopped; freed before the next repeat, untimed
  for (int repeat = 0; repeat < args.repeats; ++repeat) {
    loaded = tensorfile::Value();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (args.cold) evict(args.file);
    const auto start = std::chrono::steady_clock::now();
    std::size_t tensors = 0;
    if (args.mode == "stream") {
      try {
        loaded = tensorfile::cuda::load_torch(args.file, options);
      } catch (const tensorfile::DeviceError& e) {
        if (!args.cufile) throw;
        std::printf(
            "{\"file\": \"%s\", \"mode\": \"stream\", \"io\": \"unavailable\", \"cufile\": true, "
            "\"error\": \"%s\"}\n",
            args.file.c_str(), json_text(e.reason()).c_str());
        return 0;
      }
      tensors = loaded.is_dict() ? loaded.as_dict().size() : 1;
    } else if (args.mode == "hook") {
      loaded = tensorfile::load_torch(args.file, {.map_location = "cuda:0"});
      tensors = loaded.is_dict() ? loaded.as_dict().size() : 1;
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
        "{\"file\": \"%s\", \"mode\": \"%s\", \"io\": \"%s\", \"cache\": \"%s\", \"repeat\": %d, \"bytes\": %llu, "
        "\"tensors\": %zu, "
        "\"ms\": %.2f, \"gb_per_s\": %.3f, \"peak_rss_kb\": %ld, \"ring_mib\": %zu, \"slot_mib\": %zu, "
        "\"threads\": %zu, \"direct\": \"%s\", \"cufile\": %s, \"single_allocation\": %s}\n",
        args.file.c_str(), args.mode.c_str(), io, args.cold ? "cold" : "warm", repeat,
        static_cast<unsigned long long>(bytes), tensors, ms, static_cast<double>(bytes) / ms / 1e6, peak_rss_kb(),
        args.ring_mib, args.slot_mib, args.threads, args.direct.c_str(), args.cufile ? "true" : "false",
        args.separate ? "false" : "true");
    std::fflush(stdout);
  }
  if (pinned != nullptr) cudaFreeHost(pinned);
  if (device != nullptr) cudaFree(device);
  return 0;
}
