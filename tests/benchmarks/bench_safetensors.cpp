// SPDX-License-Identifier: MIT
// Safetensors benchmark (a program, never a test), each figure against a floor measured in the same run:
//   header      read_safetensors_header (the header parse alone)
//   mmap        load_safetensors(.mmap = read_only): (mmap - header) / tensors is the per-tensor overhead
//   read_floor  open, fstat, one 64-byte aligned buffer, pread the whole file (bench_load's pread floor)
//   heap        load_safetensors to the heap, against read_floor
//   write_floor write() of the file's bytes from one buffer into a new file (bench_save's floor)
//   convert     a torch file of the same tensors -> .safetensors: load_torch(mmap) + save_safetensors, against
//   write_floor shards_seq / shards_par  load_state_dict of a 4-shard directory (heap) with 1 thread / 4 threads
//
//   bench_safetensors DIR [MIB=1024] [TENSORS=2000] [REPEATS=5]
// Makes its files in DIR (kept when present with the same sizes), prints one JSON line per figure and a table.
// Page cache warm (every file is read once first); nothing is fsync'd (as bench_save).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <tensorfile/tensorfile.hpp>

#include "bench_common.hpp"

namespace tf = tensorfile;
using tensorfile_bench::Timings;

namespace {

std::vector<std::pair<std::string, tf::Tensor>> make_tensors(std::uint64_t bytes, std::size_t count) {
  const auto per = static_cast<std::int64_t>(bytes / count / 4);  // float32 elements per tensor
  std::vector<std::pair<std::string, tf::Tensor>> out;
  for (std::size_t i = 0; i < count; ++i) {
    tf::Tensor t = tf::Tensor::zeros({per}, tf::DType::Float32);
    auto* data = t.data<float>();
    for (std::int64_t k = 0; k < per; k += 1024) data[k] = static_cast<float>(i + static_cast<std::size_t>(k));
    out.emplace_back("layers." + std::to_string(i) + ".weight", t);
  }
  return out;
}

void warm(const std::filesystem::path& path) {
  std::vector<char> buffer(1 << 20);
  const int fd = ::open(path.c_str(), O_RDONLY);
  while (fd >= 0 && ::read(fd, buffer.data(), buffer.size()) > 0) {
  }
  if (fd >= 0) ::close(fd);
}

std::uint64_t read_floor(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info {};
  ::fstat(fd, &info);
  const auto size = static_cast<std::size_t>(info.st_size);
  std::unique_ptr<std::byte, decltype(&std::free)> buffer(
      static_cast<std::byte*>(std::aligned_alloc(64, (size + 63) / 64 * 64)), &std::free);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, buffer.get() + done, size - done, static_cast<off_t>(done));
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  return std::to_integer<std::uint64_t>(buffer.get()[size / 2]);
}

std::uint64_t touch(const tf::Value& v) {
  std::uint64_t sum = 0;
  for (const auto& [name, t] : tf::named_tensors(v)) sum += reinterpret_cast<std::uintptr_t>(t.raw_data()) & 0xFF;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_safetensors DIR [MIB=1024] [TENSORS=2000] [REPEATS=5]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const std::uint64_t bytes = (argc > 2 ? std::stoull(argv[2]) : 1024) << 20;
  const std::size_t count = argc > 3 ? std::stoul(argv[3]) : 2000;
  const int repeats = argc > 4 ? std::stoi(argv[4]) : 5;
  std::filesystem::create_directories(dir);
  const auto st = dir / "bench.safetensors";
  const auto pt = dir / "bench.pt";
  const auto shards = dir / "shards";
  {
    const auto tensors = make_tensors(bytes, count);
    tf::save_safetensors(tensors, st, {.sync = false});
    tf::save_torch(tf::make_state_dict(tensors), pt, {.sync = false});
    std::filesystem::remove_all(shards);
    (void)tf::save_safetensors_sharded(tensors, shards,
                                       {.sync = false, .sharded = {.max_shard_size = bytes / 4 + (bytes / count)}});
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) warm(entry.path());
  }
  const std::uint64_t file_bytes = std::filesystem::file_size(st);
  std::vector<std::byte> floor_buffer(file_bytes, std::byte{1});
  std::uint64_t sink = 0;

  Timings header, mmap, heap, rfloor, wfloor, convert, seq, par;
  for (int i = 0; i < repeats; ++i) {
    header.run([&] { sink += tf::read_safetensors_header(st).tensors.size(); });
    mmap.run([&] { sink += touch(tf::load_safetensors(st, {.mmap = tf::MapMode::read_only})); });
    rfloor.run([&] { sink += read_floor(st); });
    {
      tf::Value v;
      heap.run([&] { v = tf::load_safetensors(st); });
      sink += touch(v);
    }
    wfloor.run([&] { tensorfile_bench::write_floor(floor_buffer, dir / "floor.bin"); });
    convert.run([&] {
      const tf::Value v = tf::load_torch(pt, {.mmap = tf::MapMode::copy_on_write});
      tf::save_safetensors(v, dir / "converted.safetensors", {.sync = false});
    });
    {
      tf::Value v;
      seq.run([&] { v = tf::load_state_dict(shards, {.threads = 1}); });
      sink += touch(v);
    }
    {
      tf::Value v;
      par.run([&] { v = tf::load_state_dict(shards, {.threads = 4}); });
      sink += touch(v);
    }
  }
  const auto line = [&](const char* mode, const Timings& t) {
    tensorfile_bench::print_json("tensorfile", mode, st.string(), file_bytes, count, t, -1, -1, sink);
  };
  line("header", header);
  line("mmap", mmap);
  line("read_floor", rfloor);
  line("heap", heap);
  line("write_floor", wfloor);
  line("convert", convert);
  line("shards_seq", seq);
  line("shards_par", par);
  const double per_tensor_us = (mmap.min() - header.min()) * 1000.0 / static_cast<double>(count);
  std::printf("\n| figure (%llu MiB, %zu tensors; min of %d, wall ms) | measured | floor | result | target |\n",
              static_cast<unsigned long long>(bytes >> 20), count, repeats);
  std::printf("|---|---|---|---|---|\n");
  std::printf("| mmap load vs header parse | %.2f | %.2f | %.2f us/tensor over the parse | <= 1 us |\n", mmap.min(),
              header.min(), per_tensor_us);
  std::printf("| heap load vs pread floor | %.1f | %.1f | %.2fx | <= 1.2x |\n", heap.min(), rfloor.min(),
              heap.min() / rfloor.min());
  std::printf("| torch file -> safetensors vs write floor | %.1f | %.1f | %.2fx | <= 1.3x |\n", convert.min(),
              wfloor.min(), convert.min() / wfloor.min());
  std::printf("| 4 shards, 4 threads vs 1 thread (heap) | %.1f | %.1f | %.2fx faster | > 1x |\n", par.min(), seq.min(),
              seq.min() / par.min());
  std::filesystem::remove(dir / "floor.bin");
  std::filesystem::remove(dir / "converted.safetensors");
  return 0;
}
