// SPDX-License-Identifier: MIT
// tensordict memmap benchmark: save_memmap and load_memmap of many small leaves against the bare syscalls.
//
// A program, never a test.
// usage: bench_memmap [--dir DIR] [--repeats N] [--leaves N,N...]
//   --dir DIR      where the trees are written (default: a temporary directory, removed at the end)
//   --repeats N    timed runs per figure, after one warm-up (default 7); the table shows the best and median
//   --leaves LIST  leaf counts (default 1000,10000)
// Leaves are float32[4], as in tensordict's measurements; "nested" puts 10 leaves in each sub-TensorDict.
// The page cache is warm (every tree is loaded once before timing). Each figure comes with its floor, the bare
// system calls on the same files measured in the same run: save_memmap against mkdir + create + pwrite + close,
// load_memmap against openat + fstat + mmap + close.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>

namespace fs = std::filesystem;
using namespace tensorfile;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stats {
  double best = 0;
  double median = 0;
};

template <class Fn>
Stats measure(int repeats, Fn&& fn) {
  fn();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) times.push_back(fn());
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2]};
}

TensorDict make_tree(int leaves, bool nested) {
  TensorDict td(Shape{4});
  const Tensor value = Tensor::from_values<float>({1, 2, 3, 4});
  for (int i = 0; i < leaves; ++i) {
    if (nested) {
      td.set({"g" + std::to_string(i / 10), "x" + std::to_string(i % 10)}, value.clone());
    } else {
      td.set("x" + std::to_string(i), value.clone());
    }
  }
  return td;
}

/// The data files of a tree, grouped by directory.
struct FileSet {
  std::vector<fs::path> dirs;
  std::vector<std::vector<std::string>> names;  // per dir
  std::vector<std::size_t> bytes;               // all files, same order
};

FileSet data_files(const fs::path& root) {
  FileSet set;
  std::vector<fs::path> dirs{root};
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_directory()) dirs.push_back(entry.path());
  }
  for (const auto& dir : dirs) {
    set.dirs.push_back(dir);
    set.names.emplace_back();
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".memmap") {
        set.names.back().push_back(entry.path().filename().string());
        set.bytes.push_back(static_cast<std::size_t>(entry.file_size()));
      }
    }
  }
  return set;
}

/// The floor: per file openat (relative to its directory) + fstat + mmap + close; munmap afterwards, untimed.
double floor_ms(const FileSet& set, std::vector<std::pair<void*, std::size_t>>& maps) {
  std::vector<int> dir_fds;
  for (const auto& dir : set.dirs) dir_fds.push_back(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const auto start = Clock::now();
  for (std::size_t d = 0; d < set.dirs.size(); ++d) {
    for (const auto& name : set.names[d]) {
      const int fd = ::openat(dir_fds[d], name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
      struct stat info {};
      ::fstat(fd, &info);
      const auto size = static_cast<std::size_t>(info.st_size);
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ::close(fd);
      maps.emplace_back(p, size);
    }
  }
  const double elapsed = ms_since(start);
  for (const int fd : dir_fds) ::close(fd);
  return elapsed;
}

/// The save floor: per directory mkdir, per file openat(O_CREAT|O_EXCL) + pwrite + close, into `root`.
double save_floor_ms(const FileSet& set, const fs::path& source_root, const fs::path& root) {
  const float data[4] = {1, 2, 3, 4};
  int failures = 0;
  const auto start = Clock::now();
  for (std::size_t d = 0; d < set.dirs.size(); ++d) {  // parents come before their children
    const fs::path dir = d == 0 ? root : root / fs::relative(set.dirs[d], source_root);
    if (::mkdir(dir.c_str(), 0777) != 0) ++failures;
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (const auto& name : set.names[d]) {
      const int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (::pwrite(fd, data, sizeof data, 0) != static_cast<ssize_t>(sizeof data)) ++failures;
      ::close(fd);
    }
    ::close(dir_fd);
  }
  const double elapsed = ms_since(start);
  if (failures != 0) std::fprintf(stderr, "bench_memmap: the save floor failed %d times\n", failures);
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  int repeats = 7;
  std::vector<int> counts{1000, 10000};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--leaves" && i + 1 < argc) {
      counts.clear();
      std::string list = argv[++i];
      for (std::size_t pos = 0; pos <= list.size();) {
        const std::size_t comma = std::min(list.find(',', pos), list.size());
        counts.push_back(std::atoi(list.substr(pos, comma - pos).c_str()));
        pos = comma + 1;
      }
    } else {
      std::fprintf(stderr, "usage: bench_memmap [--dir DIR] [--repeats N] [--leaves N,N...]\n");
      return 2;
    }
  }
  const bool temporary = dir.empty();
  if (temporary) dir = fs::temp_directory_path() / ("tensorfile-bench-memmap-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  std::printf(
      "| leaves | layout | save_memmap ms (us/leaf) | save floor ms (us/leaf) | load_memmap ms (us/leaf) | "
      "release ms | meta load ms (us/leaf) | load floor ms (us/leaf) | load / floor |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const int leaves : counts) {
    for (const bool nested : {false, true}) {
      const TensorDict td = make_tree(leaves, nested);
      const fs::path prefix = dir / ((nested ? "nested_" : "flat_") + std::to_string(leaves));
      int serial = 0;
      const Stats save = measure(repeats, [&] {
        const fs::path target = prefix.string() + "_save" + std::to_string(serial++);
        const auto start = Clock::now();
        save_memmap(td, target, {.sync = false});  // no fsync: the figures compare with the syscall floor
        const double ms = ms_since(start);
        fs::remove_all(target);
        return ms;
      });
      save_memmap(td, prefix, {.sync = false});
      double release_best = 1e300;
      const Stats load = measure(repeats, [&] {
        const auto start = Clock::now();
        TensorDict loaded = load_memmap(prefix);
        const double ms = ms_since(start);
        const auto release_start = Clock::now();
        { TensorDict gone = std::move(loaded); }
        release_best = std::min(release_best, ms_since(release_start));
        return ms;
      });
      const Stats meta = measure(repeats, [&] {
        const auto start = Clock::now();
        TensorDict loaded = load_memmap(prefix, {.map_location = Device::meta()});
        return ms_since(start);
      });
      const FileSet files = data_files(prefix);
      const Stats floor = measure(repeats, [&] {
        std::vector<std::pair<void*, std::size_t>> maps;
        maps.reserve(files.bytes.size());
        const double ms = floor_ms(files, maps);
        for (const auto& [p, size] : maps) ::munmap(p, size);
        return ms;
      });
      const Stats write_floor = measure(repeats, [&] {
        const fs::path target = prefix.string() + "_floor" + std::to_string(serial++);
        const double ms = save_floor_ms(files, prefix, target);
        fs::remove_all(target);
        return ms;
      });
      const auto per_leaf = [&](double ms) { return ms * 1000.0 / leaves; };
      std::printf(
          "| %d | %s | %.2f / %.2f (%.2f) | %.2f / %.2f (%.2f) | %.2f / %.2f (%.2f) | %.2f | %.2f / %.2f (%.2f) | "
          "%.2f / %.2f (%.2f) | %.2f |\n",
          leaves, nested ? "nested (10/dir)" : "flat", save.best, save.median, per_leaf(save.best), write_floor.best,
          write_floor.median, per_leaf(write_floor.best), load.best, load.median, per_leaf(load.best), release_best,
          meta.best, meta.median, per_leaf(meta.best), floor.best, floor.median, per_leaf(floor.best),
          load.best / floor.best);
      std::fflush(stdout);
      fs::remove_all(prefix);
    }
  }
  std::printf(
      "\nms: best / median of %d runs after a warm-up; (us/leaf) from the best. save floor: mkdir per "
      "directory, openat(O_CREAT|O_EXCL) + pwrite + close per file. load floor: openat + fstat + mmap + close "
      "per file. release: munmap of every leaf when the loaded TensorDict dies (best run), not part of load.\n",
      repeats);
  if (temporary) fs::remove_all(dir);
  return 0;
}
