// SPDX-License-Identifier: MIT
// A progress bar on stderr for long work: bytes written (or files done), rate and time left, drawn only on a
// terminal after a second.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace tensorfile::cli {

/// Bytes this process has handed to write(2) and pwrite(2) so far (Linux /proc/self/io "wchar"); nullopt
/// where that is not available. The library's writers write with these calls, so the growth of this count
/// during a save is the save's progress without any hook in the library.
[[nodiscard]] std::optional<std::uint64_t> bytes_written_by_process();

/// One frame of the bar, `width` columns at most: "label  [=====>    ]  45%  1.2 GiB / 2.7 GiB  350 MiB/s  0:04 left".
/// `items` names what is counted when it is not bytes: with "files", "45%  450 / 1000 files  900 files/s  0:01 left".
/// Without a total (progress unknown) it shows the label and the elapsed time only.
[[nodiscard]] std::string progress_line(std::string_view label, std::uint64_t done, std::optional<std::uint64_t> total,
                                        double seconds, std::size_t width, std::string_view items = {});

/// Draws a progress bar on stderr while long work runs: from a background thread every 100 ms, once the work
/// has taken longer than a second (TENSORFILE_PROGRESS_DELAY_MS overrides that, for tests), only when stderr is
/// a terminal and `enabled`.
class ProgressBar {
 public:
  /// A write: progress is bytes_written_by_process() growth against `total` bytes.
  ProgressBar(std::string label, std::uint64_t total, bool enabled);
  /// Work the caller counts (files scanned...): progress is `done` against `total` `items` ("files"). `done` is
  /// borrowed, read from the drawing thread, and must outlive the bar.
  ProgressBar(std::string label, std::uint64_t total, const std::atomic<std::uint64_t>& done, std::string items,
              bool enabled);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  /// Stops drawing; a bar already shown is left as is (finish() draws it complete).
  ~ProgressBar();

  /// Marks the work done: a bar already shown (or due) is drawn at 100% and ends its line.
  void finish();

 private:
  void loop();
  void draw(bool final);
  [[nodiscard]] std::uint64_t done() const;

  std::string label_;
  std::uint64_t total_;
  const std::atomic<std::uint64_t>* counted_ = nullptr;  // the caller's count; null: bytes written
  std::string items_;                                    // what counted_ counts ("files")
  std::optional<std::uint64_t> start_bytes_;
  std::chrono::steady_clock::time_point start_time_;
  std::chrono::milliseconds delay_;
  bool shown_ = false;
  std::size_t last_width_ = 0;
  std::uint64_t drawn_ = 0;  // bytes of frames written so far
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

/// Whether stderr is a terminal (progress bars are drawn only there).
[[nodiscard]] bool stderr_is_terminal();

}  // namespace tensorfile::cli
