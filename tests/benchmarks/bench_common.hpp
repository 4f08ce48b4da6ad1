// SPDX-License-Identifier: MIT
// Timing, peak-RSS and JSON-line helpers shared by the load benchmarks (programs, never tests).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tensorfile_bench {

/// CPU time (user + system) of this process so far, milliseconds.
inline double process_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

/// Wall-clock milliseconds of one call of `fn`; adds its CPU milliseconds to `*cpu_ms` when given
/// (on a busy machine CPU time is the steadier figure; wall time is the one the targets name).
template <class Fn>
double time_ms(Fn&& fn, std::vector<double>* cpu_ms = nullptr) {
  const double cpu_start = process_cpu_ms();
  const auto start = std::chrono::steady_clock::now();
  fn();
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (cpu_ms != nullptr) cpu_ms->push_back(process_cpu_ms() - cpu_start);
  return wall;
}

/// The write floor of the save benchmarks: `buffer` written to a new file `out` with plain write() calls
/// (at most 1 GiB each), no fsync.
inline void write_floor(const std::vector<std::byte>& buffer, const std::filesystem::path& out) {
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::size_t done = 0;
  while (fd >= 0 && done < buffer.size()) {
    const ssize_t put = ::write(fd, buffer.data() + done, std::min<std::size_t>(buffer.size() - done, 1u << 30));
    if (put <= 0) break;
    done += static_cast<std::size_t>(put);
  }
  if (fd >= 0) ::close(fd);
}

/// Peak resident set of this process so far, KiB (Linux reports ru_maxrss in KiB).
inline long peak_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

/// A "VmXxx:"/"RssXxx:" line of /proc/self/status in KiB, -1 when absent.
inline long proc_status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

/// Timings of one configuration: the first repeat (a fresh process's allocator), min and median.
/// Median of `values`, 0 when empty.
/// A counter of /proc/self/io ("rchar": bytes this process has read), 0 when unreadable.
inline std::uint64_t proc_io(const std::string& field) {
  std::ifstream io("/proc/self/io");
  std::string name;
  std::uint64_t value = 0;
  while (io >> name >> value) {
    if (name == field + ":") return value;
  }
  return 0;
}

inline double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// Timings of one configuration: wall and CPU milliseconds per repeat. The first repeat runs on a
/// fresh process's allocator (every page newly faulted in), as a program that loads a model once.
struct Timings {
  std::vector<double> ms;      ///< wall clock
  std::vector<double> cpu_ms;  ///< user + system CPU
  /// Times one repeat of `fn`.
  template <class Fn>
  void run(Fn&& fn) {
    ms.push_back(time_ms(fn, &cpu_ms));
  }
  [[nodiscard]] double first() const { return ms.empty() ? 0 : ms.front(); }
  [[nodiscard]] double min() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
  [[nodiscard]] double median() const { return median_of(ms); }
  /// Median of the repeats after the first: a warm allocator (freed pages reused), as in a loop.
  [[nodiscard]] double warm_median() const {
    return ms.size() < 2 ? 0 : median_of(std::vector<double>(ms.begin() + 1, ms.end()));
  }
  [[nodiscard]] double cpu_min() const { return cpu_ms.empty() ? 0 : *std::min_element(cpu_ms.begin(), cpu_ms.end()); }
  [[nodiscard]] double cpu_median() const { return median_of(cpu_ms); }
};

/// Peak RSS when the program started its work (libraries loaded, the measuring code run once), KiB; set by
/// mark_start().
inline long& start_rss_kb() {
  static long kb = -1;
  return kb;
}

/// Sets start_rss_kb(), after running the measuring code once: reading /proc through iostreams faults in about
/// 1 MB of the C++ library's code and locale data, which is the benchmark's memory, not the load's.
inline void mark_start() {
  (void)proc_status_kb("RssAnon");
  (void)proc_io("rchar");
  start_rss_kb() = peak_rss_kb();
}

/// Prints one JSON line; `extra` is a preformatted `"key": value, ` list or empty.
inline void print_json(const char* tool, const std::string& mode, const std::string& file, std::uint64_t file_bytes,
                       std::size_t tensors, const Timings& t, long rss_anon_kb, long rss_file_kb,
                       std::uint64_t checksum, const std::string& extra = "") {
  std::printf(
      "{\"tool\": \"%s\", \"mode\": \"%s\", \"file\": \"%s\", \"file_bytes\": %llu, \"tensors\": %zu, "
      "\"repeats\": %zu, \"first_ms\": %.3f, \"min_ms\": %.3f, \"median_ms\": %.3f, \"cpu_min_ms\": %.3f, "
      "\"cpu_median_ms\": %.3f, \"warm_median_ms\": %.3f, %s\"start_rss_kb\": %ld, \"peak_rss_kb\": %ld, "
      "\"rss_anon_kb\": %ld, \"rss_file_kb\": %ld, \"checksum\": %llu}\n",
      tool, mode.c_str(), file.c_str(), static_cast<unsigned long long>(file_bytes), tensors, t.ms.size(), t.first(),
      t.min(), t.median(), t.cpu_min(), t.cpu_median(), t.warm_median(), extra.c_str(), start_rss_kb(), peak_rss_kb(),
      rss_anon_kb, rss_file_kb, static_cast<unsigned long long>(checksum));
}

}  // namespace tensorfile_bench
