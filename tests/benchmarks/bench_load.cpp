// SPDX-License-Identifier: MIT
// bench_load MODE FILE [REPEATS]: times tensorfile::load (heap, mmap, meta) against the pread floor; one JSON line.
//
// Each configuration belongs in its own process so that peak_rss_kb (ru_maxrss) is its own.
// Timed: load() alone (pread_floor: open, fstat, one 64-byte aligned buffer, pread all). Not timed:
// destroying the previous result, and the checksum that keeps the result alive: one byte per
// tensor for heap (already resident), the data pointers for mmap (so that no page is faulted in
// and RSS shows what the load itself maps), numel for meta.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include <tensorfile/tensorfile.hpp>

#include "bench_common.hpp"

namespace {

using tensorfile_bench::Timings;

struct Result {
  std::size_t tensors = 0;
  std::uint64_t checksum = 0;
};

enum class Mode { heap, mmap, meta };

Result checksum_of(const tensorfile::Value& value, Mode mode) {
  Result r;
  for (const auto& [name, tensor] : tensorfile::named_tensors(value)) {
    ++r.tensors;
    if (mode == Mode::meta || tensor.numel() == 0) {
      r.checksum += static_cast<std::uint64_t>(tensor.numel());
    } else if (mode == Mode::mmap) {
      r.checksum += reinterpret_cast<std::uintptr_t>(tensor.raw_data());
    } else {
      r.checksum += std::to_integer<std::uint64_t>(*tensor.raw_data());
    }
  }
  return r;
}

int bench_tensorfile(Mode mode, const std::string& mode_name, const std::string& path, int repeats) {
  tensorfile::LoadOptions options;
  if (mode == Mode::mmap) options.mmap = tensorfile::MapMode::copy_on_write;
  if (mode == Mode::meta) options.map_location = "meta";
  Timings t;
  Result r;
  long anon = -1;
  long file = -1;
  for (int i = 0; i < repeats; ++i) {
    std::optional<tensorfile::Value> value;
    t.run([&] { value = tensorfile::load(path, options); });
    r = checksum_of(*value, mode);
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("tensorfile", mode_name, path, std::filesystem::file_size(path), r.tensors, t, anon,
                               file, r.checksum);
  return 0;
}

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { ::operator delete (p, std::align_val_t{64}); }
};

int bench_pread_floor(const std::string& path, int repeats) {
  Timings t;
  std::uint64_t checksum = 0;
  std::uint64_t size = 0;
  long anon = -1;
  long file = -1;
  for (int i = 0; i < repeats; ++i) {
    std::unique_ptr<std::byte, AlignedFree> buffer;
    t.run([&] {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::perror(path.c_str());
        std::exit(1);
      }
      struct stat info {};
      ::fstat(fd, &info);
      size = static_cast<std::uint64_t>(info.st_size);
      buffer.reset(static_cast<std::byte*>(::operator new (size, std::align_val_t{64})));
      std::uint64_t done = 0;
      while (done < size) {
        const ssize_t got = ::pread(fd, buffer.get() + done, size - done, static_cast<off_t>(done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          std::perror("pread");
          std::exit(1);
        }
        done += static_cast<std::uint64_t>(got);
      }
      ::close(fd);
    });
    checksum += size ? std::to_integer<std::uint64_t>(buffer.get()[size - 1]) : 0;
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("floor", "pread_floor", path, size, 0, t, anon, file, checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tensorfile_bench::start_rss_kb() = tensorfile_bench::peak_rss_kb();
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s heap|mmap|meta|pread_floor FILE [REPEATS=5]\n", argv[0]);
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
    if (mode == "pread_floor") return bench_pread_floor(path, repeats);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  std::fprintf(stderr, "unknown MODE %s; expected heap, mmap, meta or pread_floor\n", mode.c_str());
  return 2;
}
