// SPDX-License-Identifier: MIT
// bench_load MODE FILE [REPEATS]: times tensorfile::load (heap, mmap, meta) against the pread floor; one JSON line.
//
// Each configuration belongs in its own process so that peak_rss_kb (ru_maxrss) is its own.
// Timed: load() alone (the floors: open, fstat, one destination, pread all: pread_floor into operator new's
// memory, populate_floor into a MAP_POPULATE mapping, huge_floor into a huge-page advised mapping populated
// with MADV_POPULATE_WRITE, huge2_floor the same read by two threads). Not timed:
// destroying the previous result, and the checksum that keeps the result alive: one byte per
// tensor for heap (already resident), the data pointers for mmap (so that no page is faulted in
// and RSS shows what the load itself maps), numel for meta.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <tensorfile/tensorfile.hpp>

#include "bench_common.hpp"

namespace {

using tensorfile_bench::Timings;

struct Result {
  std::size_t tensors = 0;
  std::uint64_t checksum = 0;
};

enum class Mode { heap, mmap, meta, select };

// Walks the tensors in place (named_tensors would copy every tensor into a list, and the peak RSS reported is
// meant to be the load's).
Result checksum_of(const tensorfile::Value& value, Mode mode) {
  Result r;
  auto visit = [&](const std::string&, const tensorfile::Tensor& tensor) {
    ++r.tensors;
    if (mode == Mode::meta || mode == Mode::select || tensor.numel() == 0) {
      r.checksum += static_cast<std::uint64_t>(tensor.numel());
    } else if (mode == Mode::mmap) {
      r.checksum += reinterpret_cast<std::uintptr_t>(tensor.raw_data());
    } else {
      r.checksum += std::to_integer<std::uint64_t>(*tensor.raw_data());
    }
  };
  tensorfile::detail::walk_tensors(value, "", visit);
  return r;
}

int bench_tensorfile(Mode mode, const std::string& mode_name, const std::string& path, int repeats) {
  tensorfile::LoadOptions options;
  if (mode == Mode::mmap) options.mmap = tensorfile::MapMode::copy_on_write;
  if (mode == Mode::meta) options.map_location = "meta";
  // TENSORFILE_BENCH_READ_THREADS: LoadOptions.read_threads (unset: the library's default).
  if (const char* threads = std::getenv("TENSORFILE_BENCH_READ_THREADS")) options.read_threads = std::stoul(threads);
  // TENSORFILE_BENCH_DIRECT_READS=always|never: LoadOptions.direct_reads (unset: automatic).
  if (const char* direct = std::getenv("TENSORFILE_BENCH_DIRECT_READS")) {
    const std::string_view how(direct);
    options.direct_reads = how == "always"  ? tensorfile::DirectReads::always
                           : how == "never" ? tensorfile::DirectReads::never
                                            : tensorfile::DirectReads::automatic;
  }
  Timings t;
  Result r;
  long anon = -1;
  long file = -1;
  std::uint64_t bytes_read = 0;
  for (int i = 0; i < repeats; ++i) {
    std::optional<tensorfile::Value> value;
    // select: the first tensor the walk meets, one of all; bytes_read is rchar's growth over the load.
    if (mode == Mode::select)
      options.select = [first = true](std::string_view) mutable { return std::exchange(first, false); };
    const std::uint64_t rchar_before = tensorfile_bench::proc_io("rchar");
    t.run([&] { value = tensorfile::load(path, options); });
    bytes_read = tensorfile_bench::proc_io("rchar") - rchar_before;
    r = checksum_of(*value, mode);
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("tensorfile", mode_name, path, std::filesystem::file_size(path), r.tensors, t, anon,
                               file, r.checksum, "\"bytes_read\": " + std::to_string(bytes_read) + ", ");
  return 0;
}

// Where a floor reads the file to: operator new's memory (faulted 4 KiB at a time during the read), an
// anonymous mapping with MAP_POPULATE, or one advised MADV_HUGEPAGE and populated with MADV_POPULATE_WRITE.
enum class FloorMemory { plain, populate, huge };

// Owns the floor's destination, whichever way it was made.
class FloorBuffer {
 public:
  FloorBuffer(std::size_t size, FloorMemory memory) : size_(size), memory_(memory) {
    if (size == 0) return;
    if (memory == FloorMemory::plain) {
      data_ = static_cast<std::byte*>(::operator new (size, std::align_val_t{64}));
      return;
    }
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (memory == FloorMemory::populate ? MAP_POPULATE : 0);
    void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (address == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    data_ = static_cast<std::byte*>(address);
    if (memory == FloorMemory::huge) {
      ::madvise(data_, size, MADV_HUGEPAGE);
      if (::madvise(data_, size, 23 /* MADV_POPULATE_WRITE */) != 0) std::perror("MADV_POPULATE_WRITE");
    }
  }
  FloorBuffer(const FloorBuffer&) = delete;
  FloorBuffer& operator=(const FloorBuffer&) = delete;
  ~FloorBuffer() {
    if (data_ == nullptr) return;
    if (memory_ == FloorMemory::plain) {
      ::operator delete (data_, std::align_val_t{64});
    } else {
      ::munmap(data_, size_);
    }
  }
  [[nodiscard]] std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_;
  FloorMemory memory_;
};

void pread_all(int fd, std::byte* out, std::uint64_t begin, std::uint64_t end) {
  while (begin < end) {
    const ssize_t got = ::pread(fd, out + begin, end - begin, static_cast<off_t>(begin));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      std::perror("pread");
      std::exit(1);
    }
    begin += static_cast<std::uint64_t>(got);
  }
}

// The floor: open, fstat, make the destination, pread the whole file (with `threads` threads, each a
// contiguous share). Timed from open to the last byte read.
int bench_floor(const std::string& mode_name, FloorMemory memory, unsigned threads, const std::string& path,
                int repeats) {
  Timings t;
  std::uint64_t checksum = 0;
  std::uint64_t size = 0;
  long anon = -1;
  long file = -1;
  for (int i = 0; i < repeats; ++i) {
    std::optional<FloorBuffer> buffer;
    t.run([&] {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::perror(path.c_str());
        std::exit(1);
      }
      struct stat info {};
      ::fstat(fd, &info);
      size = static_cast<std::uint64_t>(info.st_size);
      buffer.emplace(static_cast<std::size_t>(size), memory);
      std::vector<std::thread> pool;
      const std::uint64_t share = (size / threads + 4095) / 4096 * 4096;
      for (unsigned k = 1; k < threads; ++k) {
        pool.emplace_back(
            [&, k] { pread_all(fd, buffer->data(), std::min(size, k * share), std::min(size, (k + 1) * share)); });
      }
      pread_all(fd, buffer->data(), 0, std::min(size, share));
      for (auto& thread : pool) thread.join();
      ::close(fd);
    });
    checksum += size ? std::to_integer<std::uint64_t>(buffer->data()[size - 1]) : 0;
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("floor", mode_name, path, size, 0, t, anon, file, checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tensorfile_bench::mark_start();
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr,
                 "usage: %s heap|mmap|meta|select|pread_floor|populate_floor|huge_floor|huge2_floor FILE [REPEATS=5]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const int repeats = argc == 4 ? std::atoi(argv[3]) : 5;
  if (repeats < 1) {
    std::fprintf(stderr, "REPEATS must be at least 1\n");
    return 2;
  }
  try {
    if (mode == "heap") return bench_tensorfile(Mode::heap, mode, path, repeats);
    if (mode == "mmap") return bench_tensorfile(Mode::mmap, mode, path, repeats);
    if (mode == "meta") return bench_tensorfile(Mode::meta, mode, path, repeats);
    if (mode == "select") return bench_tensorfile(Mode::select, mode, path, repeats);
    if (mode == "pread_floor") return bench_floor(mode, FloorMemory::plain, 1, path, repeats);
    if (mode == "populate_floor") return bench_floor(mode, FloorMemory::populate, 1, path, repeats);
    if (mode == "huge_floor") return bench_floor(mode, FloorMemory::huge, 1, path, repeats);
    if (mode == "huge2_floor") return bench_floor(mode, FloorMemory::huge, 2, path, repeats);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  std::fprintf(
      stderr,
      "unknown MODE %s; expected heap, mmap, meta or a floor (pread_floor, populate_floor, huge_floor, huge2_floor)\n",
      mode.c_str());
  return 2;
}
