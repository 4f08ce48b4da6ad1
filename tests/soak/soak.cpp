// SPDX-License-Identifier: MIT
// The soak driver (tests/soak/run.sh): repeats issue 20's experiments for a time budget and prints one table.
//
//   tensorfile_soak --seconds N [--dir SCRATCH] [--only NAME[,NAME...]]
//
// Experiments (the budget is shared equally): pt_threads and pt_processes (4 writers and 4 readers saving and
// loading one .pt; a load must see one version whole), memmap_threads (save_memmap and load_memmap over one
// prefix), disk_full (save and save_memmap on a small tmpfs: an IoError, the old file or tree intact, no
// temporaries; mounted in a user namespace, SKIPPED where that is not allowed), truncate_heap (heap-mode loads
// of a file over 64 MiB truncated meanwhile: an error or a success, never a signal) and leaks (load and save
// loops; fds, mappings and RSS before and after). Each runs in a child process, so a crash is counted, not
// fatal. Exit status 1 when any experiment had an unexpected failure, 2 on a wrong command line.
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool address_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool address_sanitizer = true;
#else
constexpr bool address_sanitizer = false;
#endif
#else
constexpr bool address_sanitizer = false;
#endif

/// Open file descriptors, mappings and resident bytes of this process.
struct Usage {
  long fds = 0;
  long maps = 0;
  std::uint64_t rss = 0;
};

Usage usage_now() {
  Usage u;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++u.fds;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) ++u.maps;
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0;
  std::uint64_t resident = 0;
  statm >> size >> resident;
  u.rss = resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return u;
}

/// One row of the table, in memory shared with the child that runs the experiment (and its children).
struct Row {
  std::atomic<std::uint64_t> iterations{0};
  std::atomic<std::uint64_t> saves{0};
  std::atomic<std::uint64_t> loads{0};
  std::atomic<std::uint64_t> expected{0};    // errors the experiment provokes (disk full, a truncated file)
  std::atomic<std::uint64_t> unexpected{0};  // anything else: exceptions, mixed versions, signals, leaks
  std::atomic<std::uint64_t> mixed{0};       // loads that saw parts of two versions (counted as unexpected too)
  std::atomic<bool> noted{false};
  char note[512] = {};     // the first unexpected failure, or what the experiment saw
  char skipped[512] = {};  // why the experiment did not run
  bool measured = false;
  Usage before{};
  Usage after{};

  void set_note(std::string_view text) {
    const std::size_t n = std::min(text.size(), sizeof note - 1);
    std::memcpy(note, text.data(), n);
    note[n] = '\0';
  }
  /// Counts an unexpected failure, keeping the first one's words.
  void fail(std::string_view what) {
    ++unexpected;
    if (!noted.exchange(true)) set_note(what);
  }
  void skip(std::string_view why) {
    const std::size_t n = std::min(why.size(), sizeof skipped - 1);
    std::memcpy(skipped, why.data(), n);
    skipped[n] = '\0';
  }
};

Row* shared_row() {
  void* memory = ::mmap(nullptr, sizeof(Row), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    std::perror("tensorfile_soak: mmap");
    std::exit(2);
  }
  return new (memory) Row();
}

std::string signal_text(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return fmt::format("exit status {}", WEXITSTATUS(status));
}

// ---- what is saved: a version number and two tensors filled with it --------------------------------

std::int64_t version_of(int writer, std::uint64_t count) {
  return (static_cast<std::int64_t>(writer + 1) << 32) | static_cast<std::int64_t>(count & 0xffffffffu);
}

tensorfile::Tensor filled(std::int64_t numel, std::int64_t value) {
  tensorfile::Tensor t = tensorfile::Tensor::zeros({numel}, tensorfile::DType::Int64);
  std::fill_n(t.data<std::int64_t>(), numel, value);
  return t;
}

tensorfile::Value checkpoint(std::int64_t version) {
  tensorfile::Dict dict;
  dict.set("version", version);
  dict.set("a", filled(16384, version));
  dict.set("b", filled(1024, version));
  return tensorfile::Value(std::move(dict));
}

tensorfile::TensorDict tree(std::int64_t version) {
  return tensorfile::TensorDict{{"a", filled(16384, version)},
                                {"nested", tensorfile::TensorDict{{"b", filled(1024, version)}}}};
}

bool all_equal(const tensorfile::Tensor& t, std::int64_t value) {
  const std::int64_t* p = t.data<const std::int64_t>();
  return std::all_of(p, p + t.numel(), [&](std::int64_t x) { return x == value; });
}

/// Whether a loaded checkpoint holds one version whole.
bool whole(const tensorfile::Value& v) {
  const tensorfile::Dict& dict = v.as_dict();
  const auto item = [&](std::string_view key) { return dict.find(key); };
  const std::int64_t version = item("version")->as_int();
  return all_equal(item("a")->as_tensor(), version) && all_equal(item("b")->as_tensor(), version);
}

bool whole(const tensorfile::TensorDict& td) {
  const std::int64_t version = td["a"].as_tensor().data<const std::int64_t>()[0];
  return all_equal(td["a"].as_tensor(), version) && all_equal(td.get({"nested", "b"}).as_tensor(), version);
}

/// Runs `step` until `deadline`, counting a tensorfile::Error or other exception as unexpected.
void loop_until(Clock::time_point deadline, Row& row, const std::function<void()>& step) {
  while (Clock::now() < deadline) {
    try {
      step();
    } catch (const std::exception& error) {
      row.fail(error.what());
    }
  }
}

// ---- the experiments ----------------------------------------------------------------------------------

struct Context {
  fs::path dir;  // a scratch folder of the experiment's own
  Clock::time_point deadline;
  double seconds = 0;
};

void reader_step(const fs::path& path, std::uint64_t i, Row& row) {
  tensorfile::LoadOptions options;
  if (i % 2 == 1) options.mmap = tensorfile::MapMode::read_only;
  const tensorfile::Value v = tensorfile::load_torch(path, options);
  ++row.loads;
  if (!whole(v)) {
    ++row.mixed;
    row.fail("a load saw two versions mixed");
  }
}

/// Runs `writers` threads of `save(writer, n)` and 4 threads of `load(n)` until the deadline, measuring the
/// process before and after.
void race_threads(const Context& c, Row& row, int writers, const std::function<void(int, std::uint64_t)>& save,
                  const std::function<void(std::uint64_t)>& load) {
  row.before = usage_now();
  std::vector<std::thread> threads;
  for (int k = 0; k < writers + 4; ++k) {
    threads.emplace_back([&, k] {
      std::uint64_t n = 0;
      loop_until(c.deadline, row, [&] {
        if (k < writers) {
          save(k, ++n);
          ++row.saves;
        } else {
          load(n++);
        }
      });
    });
  }
  for (auto& t : threads) t.join();
  row.iterations = row.saves + row.loads;
  row.after = usage_now();
  row.measured = true;
}

void pt_threads(const Context& c, Row& row) {
  const fs::path path = c.dir / "one.pt";
  tensorfile::save_torch(checkpoint(version_of(0, 0)), path);
  race_threads(
      c, row, 4, [&](int w, std::uint64_t n) { tensorfile::save_torch(checkpoint(version_of(w, n)), path); },
      [&](std::uint64_t n) { reader_step(path, n, row); });
}

void pt_processes(const Context& c, Row& row) {
  const fs::path path = c.dir / "one.pt";
  tensorfile::save_torch(checkpoint(version_of(0, 0)), path);
  std::vector<pid_t> children;
  for (int k = 0; k < 8; ++k) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::uint64_t n = 0;
      loop_until(c.deadline, row, [&] {
        if (k < 4) {
          tensorfile::save_torch(checkpoint(version_of(k, ++n)), path);
          ++row.saves;
        } else {
          reader_step(path, n++, row);
        }
      });
      std::_Exit(0);
    }
    if (pid > 0) children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (status != 0) row.fail("a writer or reader process: " + signal_text(status));
  }
  row.iterations = row.saves + row.loads;
}

void memmap_threads(const Context& c, Row& row) {
  const fs::path prefix = c.dir / "tree";
  tensorfile::save_memmap(tree(version_of(0, 0)), prefix);
  race_threads(
      c, row, 2, [&](int w, std::uint64_t n) { tensorfile::save_memmap(tree(version_of(w, n)), prefix); },
      [&](std::uint64_t) {
        const tensorfile::TensorDict td = tensorfile::load_memmap(prefix, {.mmap = tensorfile::MapMode::read_only});
        ++row.loads;
        if (!whole(td)) {
          ++row.mixed;
          row.fail("a load saw two versions mixed");
        }
      });
}

std::vector<char> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Mounts a `size` tmpfs at `at` in a mount namespace of this process's own (a user namespace unless root).
/// Returns why not, or "" when mounted.
std::string mount_private_tmpfs(const fs::path& at, std::string_view size) {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  // Root needs a mount namespace only; a container's root without CAP_SYS_ADMIN may still make a user one.
  const bool as_root = uid == 0 && ::unshare(CLONE_NEWNS) == 0;
  if (!as_root && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    return fmt::format("unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: {}", std::strerror(errno));
  }
  if (!as_root) {
    const auto put = [](const char* file, const std::string& text) {
      std::ofstream out(file);
      out << text;
      out.flush();
      return static_cast<bool>(out);
    };
    if (!put("/proc/self/setgroups", "deny") || !put("/proc/self/uid_map", fmt::format("0 {} 1", uid)) ||
        !put("/proc/self/gid_map", fmt::format("0 {} 1", gid))) {
      return "cannot write the user namespace's uid_map/gid_map";
    }
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return fmt::format("cannot make the mounts private: {}", std::strerror(errno));
  }
  const std::string options = fmt::format("size={}", size);
  if (::mount("tmpfs", at.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    return fmt::format("mount -t tmpfs failed: {}", std::strerror(errno));
  }
  return "";
}

void disk_full(const Context& c, Row& row) {
  const fs::path mount_point = c.dir / "tmpfs";
  fs::create_directories(mount_point);
  if (const std::string why = mount_private_tmpfs(mount_point, "4m"); !why.empty()) {
    row.skip("no tmpfs: " + why);
    return;
  }
  const fs::path pt = mount_point / "ckpt.pt";
  const fs::path prefix = mount_point / "tree";
  tensorfile::save_torch(checkpoint(1), pt);
  tensorfile::save_memmap(tree(1), prefix);
  std::vector<char> old_pt = file_bytes(pt);
  const std::vector<char> old_leaf = file_bytes(prefix / "a.memmap");
  tensorfile::Dict big_dict;
  big_dict.set("big", filled(std::int64_t{1} << 20, 2));  // 8 MiB: more than the tmpfs holds
  const tensorfile::Value big(std::move(big_dict));
  const tensorfile::TensorDict big_tree{{"a", filled(std::int64_t{1} << 20, 2)}};
  const auto expect_io_error = [&](const std::function<void()>& save, std::string_view what) {
    try {
      save();
      row.fail(fmt::format("{} on a full disk succeeded", what));
    } catch (const tensorfile::IoError&) {
      ++row.expected;
    } catch (const std::exception& error) {
      row.fail(fmt::format("{} on a full disk: not an IoError: {}", what, error.what()));
    }
  };
  const auto only_names = [&](std::initializer_list<std::string_view> names) {
    for (const auto& entry : fs::directory_iterator(mount_point)) {
      const std::string name = entry.path().filename().string();
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        row.fail("a temporary was left behind: " + name);
        fs::remove_all(entry.path());
      }
    }
  };
  row.before = usage_now();
  while (Clock::now() < c.deadline) {
    expect_io_error([&] { tensorfile::save_torch(big, pt); }, "save");
    expect_io_error([&] { tensorfile::save_memmap(big_tree, prefix); }, "save_memmap");
    only_names({"ckpt.pt", "tree"});
    if (file_bytes(pt) != old_pt) row.fail("the old .pt changed");
    if (file_bytes(prefix / "a.memmap") != old_leaf) row.fail("the old tree changed");
    try {
      if (!whole(tensorfile::load_torch(pt))) row.fail("the old .pt does not load whole");
      if (!whole(tensorfile::load_memmap(prefix))) row.fail("the old tree does not load whole");
      row.loads += 2;
      tensorfile::save_torch(checkpoint(1), pt);  // what fits still saves (its serialization id is new)
      ++row.saves;
      old_pt = file_bytes(pt);
    } catch (const std::exception& error) {
      row.fail(error.what());
    }
    ++row.iterations;
  }
  row.after = usage_now();
  row.measured = true;
}

void truncate_heap(const Context& c, Row& row) {
  // On /dev/shm where there is one: rewriting 66 MiB an iteration on a disk measures the disk, not the race.
  const bool shm = ::access("/dev/shm", W_OK) == 0;
  const fs::path path =
      shm ? fs::path("/dev/shm") / fmt::format("tensorfile-soak-{}.pt", ::getpid()) : c.dir / "big.pt";
  tensorfile::Dict dict;
  dict.set("version", std::int64_t{7});
  dict.set("a", filled(16384, 7));
  dict.set("b", filled(1024, 7));
  dict.set("big", tensorfile::Tensor::zeros({std::int64_t{66} << 20}, tensorfile::DType::UInt8));  // over 64 MiB
  const std::vector<std::byte> bytes = tensorfile::save_torch_to_bytes(tensorfile::Value(std::move(dict)));
  const auto rewrite = [&] {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  rewrite();
  std::int64_t load_us = std::numeric_limits<std::int64_t>::max();  // the fastest of three: the truncation lands in it
  for (int i = 0; i < 3; ++i) {
    const auto started = Clock::now();
    (void)tensorfile::load_torch(path);
    load_us = std::min<std::int64_t>(
        load_us, std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count() + 1);
  }
  std::mt19937_64 random(20);
  std::uint64_t crashes = 0;
  while (Clock::now() < c.deadline || row.iterations < 3) {  // a few even when the setup ate the budget
    rewrite();
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        const tensorfile::Value v = tensorfile::load_torch(path);  // heap mode: owned memory, so never a signal
        std::_Exit(whole(v) ? 0 : 4);
      } catch (const tensorfile::Error&) {
        std::_Exit(3);
      } catch (...) {
        std::_Exit(5);
      }
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(random() % static_cast<std::uint64_t>(load_us + load_us / 4)));
    ::truncate(path.c_str(), static_cast<off_t>(random() % bytes.size()));
    int status = 0;
    ::waitpid(pid, &status, 0);
    ++row.iterations;
    ++row.loads;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
      ++row.expected;
      continue;
    }
    if (WIFSIGNALED(status)) ++crashes;
    row.fail(WIFEXITED(status) && WEXITSTATUS(status) == 4   ? "a load of a truncated file gave wrong values"
             : WIFEXITED(status) && WEXITSTATUS(status) == 5 ? "a load threw something not a tensorfile::Error"
                                                             : "a heap-mode load was " + signal_text(status));
  }
  if (shm) fs::remove(path);
  if (crashes != 0) {
    row.set_note(fmt::format("{} of {} heap-mode loads killed by a signal (first: {})", crashes, row.iterations.load(),
                             row.note));
  } else if (!row.noted) {
    row.set_note(
        fmt::format("a load takes {:.1f} ms; truncated at a random moment in it", static_cast<double>(load_us) / 1e3));
  }
}

void leaks(const Context& c, Row& row) {
  const fs::path pt = c.dir / "leak.pt";
  const fs::path prefix = c.dir / "leak_tree";
  const fs::path corrupt = c.dir / "corrupt.pt";
  tensorfile::save_torch(checkpoint(3), pt);
  tensorfile::save_memmap(tree(3), prefix);
  {
    std::vector<char> bytes = file_bytes(pt);
    bytes.resize(bytes.size() / 2);
    std::ofstream(corrupt, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const auto expect_error = [&](const std::function<void()>& load) {
    try {
      load();
      row.fail("a load of a bad file succeeded");
    } catch (const tensorfile::Error&) {
      ++row.expected;
    }
  };
  const auto round = [&] {
    if (!whole(tensorfile::load_torch(pt))) row.fail("heap load not whole");
    if (!whole(tensorfile::load_torch(pt, {.mmap = tensorfile::MapMode::copy_on_write})))
      row.fail("mmap load not whole");
    (void)tensorfile::load_torch(pt,
                                 {.map_location = tensorfile::Device::meta(), .mmap = tensorfile::MapMode::read_only});
    if (!whole(tensorfile::load_memmap(prefix))) row.fail("load_memmap not whole");
    (void)tensorfile::load_memmap(prefix, {.map_location = tensorfile::Device::meta()});
    row.loads += 5;
    tensorfile::save_torch(checkpoint(3), pt);
    tensorfile::save_memmap(tree(3), prefix);
    row.saves += 2;
    expect_error([&] { (void)tensorfile::load_torch(corrupt); });
    expect_error([&] { (void)tensorfile::load_torch(c.dir / "missing.pt"); });
    expect_error([&] { (void)tensorfile::load_memmap(c.dir / "missing_tree"); });
    ++row.iterations;
  };
  for (int i = 0; i < 20; ++i) round();  // warm up: allocator arenas, caches
  row.before = usage_now();
  loop_until(c.deadline, row, round);
  row.after = usage_now();
  row.measured = true;
  if (row.after.fds > row.before.fds)
    row.fail(fmt::format("file descriptors grew by {}", row.after.fds - row.before.fds));
  if (address_sanitizer) {
    if (!row.noted) row.set_note("ASan build: only fds judged (its quarantine and shadow grow RSS and mappings)");
    return;
  }
  if (row.after.maps > row.before.maps + 4) {
    row.fail(fmt::format("mappings grew by {}", row.after.maps - row.before.maps));
  }
  constexpr std::uint64_t rss_slack = std::uint64_t{32} << 20;
  if (row.after.rss > row.before.rss + rss_slack) {
    row.fail(fmt::format("RSS grew by {} MiB", (row.after.rss - row.before.rss) >> 20));
  }
}

struct Experiment {
  std::string_view name;
  void (*run)(const Context&, Row&);
};

constexpr Experiment experiments[] = {
    {"pt_threads", pt_threads}, {"pt_processes", pt_processes},   {"memmap_threads", memmap_threads},
    {"disk_full", disk_full},   {"truncate_heap", truncate_heap}, {"leaks", leaks},
};

std::string mib(std::uint64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); }

void print_table(const std::vector<std::pair<std::string_view, Row*>>& rows, double seconds) {
  fmt::print("\ntensorfile soak: {:.0f} s in all\n", seconds);
  fmt::print("{:<15} {:>10} {:>8} {:>8} {:>9} {:>10} {:>6} {:>9} {:>9} {:>13}  {}\n", "experiment", "iterations",
             "saves", "loads", "expected", "unexpected", "mixed", "fds", "maps", "RSS MiB", "note");
  for (const auto& [name, row] : rows) {
    if (row->skipped[0] != '\0') {
      fmt::print("{:<15} SKIPPED: {}\n", name, row->skipped);
      continue;
    }
    const bool measured = row->measured;  // a copy: clang 14 cannot capture a structured binding
    const auto pair = [measured](auto before, auto after) {
      return measured ? fmt::format("{}/{}", before, after) : std::string("-");
    };
    fmt::print("{:<15} {:>10} {:>8} {:>8} {:>9} {:>10} {:>6} {:>9} {:>9} {:>13}  {}\n", name, row->iterations.load(),
               row->saves.load(), row->loads.load(), row->expected.load(), row->unexpected.load(), row->mixed.load(),
               pair(row->before.fds, row->after.fds), pair(row->before.maps, row->after.maps),
               pair(mib(row->before.rss), mib(row->after.rss)), row->note);
  }
}

int usage(const char* why) {
  std::fprintf(stderr, "tensorfile_soak: %s\nusage: tensorfile_soak --seconds N [--dir SCRATCH] [--only NAME,...]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = -1;
  fs::path scratch;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view option = argv[i];
    if (option == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (option == "--dir") {
      scratch = argv[i + 1];
    } else if (option == "--only") {
      only = std::string(",") + argv[i + 1] + ",";
    } else {
      return usage("unknown option");
    }
  }
  if (argc % 2 == 0 || seconds <= 0) return usage("--seconds N (N > 0) is required");
  bool own_scratch = false;
  if (scratch.empty()) {
    std::string pattern = (fs::temp_directory_path() / "tensorfile-soak-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return usage("cannot make a scratch folder");
    scratch = pattern;
    own_scratch = true;
  }
  std::vector<const Experiment*> chosen;
  for (const Experiment& e : experiments) {
    if (only.empty() || only.find(fmt::format(",{},", e.name)) != std::string::npos) chosen.push_back(&e);
  }
  if (chosen.empty()) return usage("--only names no experiment");
  const double share = std::max(1.0, seconds / static_cast<double>(chosen.size()));

  std::vector<std::pair<std::string_view, Row*>> rows;
  bool failed = false;
  for (const Experiment* e : chosen) {
    Row* row = shared_row();
    rows.emplace_back(e->name, row);
    const fs::path dir = scratch / std::string(e->name);
    fs::create_directories(dir);
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const auto deadline =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(share));
      try {
        e->run({dir, deadline, share}, *row);
      } catch (const std::exception& error) {
        row->fail(std::string("setup: ") + error.what());
      }
      std::_Exit(0);
    }
    // A hung experiment is killed after four times its share (and a minute of grace).
    const auto limit =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(4 * share + 60));
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > limit) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        row->fail("hung: killed after " + fmt::format("{:.0f} s", 4 * share + 60));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (status != 0 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && row->unexpected != 0)) {
      row->fail("the experiment process was " + signal_text(status));
    }
    fmt::print("{}: {}\n", e->name, row->skipped[0] != '\0' ? "SKIPPED" : row->unexpected != 0 ? "FAILED" : "passed");
    failed = failed || row->unexpected != 0;
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  print_table(rows, seconds);
  if (own_scratch) {
    std::error_code ignored;
    fs::remove_all(scratch, ignored);
  }
  fmt::print("{}\n", failed ? "soak: FAILED (unexpected failures above)" : "soak: no unexpected failure");
  return failed ? 1 : 0;
}
