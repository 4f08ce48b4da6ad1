// SPDX-License-Identifier: MIT
// The progress bar of tensorfile convert and scan.
#include "progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "formats.hpp"

namespace tensorfile::cli {

std::optional<std::uint64_t> bytes_written_by_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "wchar:") return value;
  }
  return std::nullopt;
}

std::string progress_line(std::string_view label, std::uint64_t done, std::optional<std::uint64_t> total,
                          double seconds, std::size_t width, std::string_view items) {
  const auto clock = [](double s) {
    const auto whole = static_cast<std::uint64_t>(s + 0.5);
    return whole >= 3600 ? fmt::format("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60)
                         : fmt::format("{}:{:02}", whole / 60, whole % 60);
  };
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  if (!total) return fmt::format("{}  {}", label, clock(seconds));
  done = std::min(done, *total);
  const double fraction = *total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(*total);
  const std::string left = rate > 0 && done < *total ? clock(static_cast<double>(*total - done) / rate) + " left"
                           : done >= *total          ? clock(seconds) + " total"
                                                     : "--:-- left";
  const auto rate_per_second = static_cast<std::uint64_t>(rate);
  const std::string tail = items.empty()
                               ? fmt::format("{:3.0f}%  {} / {}  {}/s  {}", fraction * 100.0, human_bytes(done),
                                             human_bytes(*total), human_bytes(rate_per_second), left)
                               : fmt::format("{:3.0f}%  {} / {} {}  {} {}/s  {}", fraction * 100.0, done, *total, items,
                                             rate_per_second, items, left);
  const std::size_t fixed = label.size() + tail.size() + 6;          // two gaps and the brackets
  if (width < fixed + 5) return fmt::format("{}  {}", label, tail);  // too narrow for a bar
  const std::size_t bar = std::min<std::size_t>(width - fixed, 40);
  const auto filled = static_cast<std::size_t>(fraction * static_cast<double>(bar));
  std::string cells(bar, ' ');
  std::fill_n(cells.begin(), filled, '=');
  if (filled < bar) cells[filled] = '>';
  return fmt::format("{}  [{}]  {}", label, cells, tail);
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

namespace {

std::chrono::milliseconds progress_delay() {
  if (const char* text = std::getenv("TENSORFILE_PROGRESS_DELAY_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && ms >= 0) return std::chrono::milliseconds(ms);
  }
  return std::chrono::seconds(1);
}

std::size_t terminal_width() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, std::uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), start_time_(std::chrono::steady_clock::now()), delay_(progress_delay()) {
  if (!enabled || !stderr_is_terminal()) return;
  start_bytes_ = bytes_written_by_process();
  thread_ = std::thread([this] { loop(); });
}

ProgressBar::ProgressBar(std::string label, std::uint64_t total, const std::atomic<std::uint64_t>& done,
                         std::string items, bool enabled)
    : label_(std::move(label)), total_(total), counted_(&done), items_(std::move(items)),
      start_time_(std::chrono::steady_clock::now()), delay_(progress_delay()) {
  if (!enabled || !stderr_is_terminal()) return;
  thread_ = std::thread([this] { loop(); });
}

ProgressBar::~ProgressBar() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressBar::finish() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (shown_ || std::chrono::steady_clock::now() - start_time_ >= delay_) draw(true);
}

void ProgressBar::loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
    if (std::chrono::steady_clock::now() - start_time_ >= delay_) draw(false);
  }
}

std::uint64_t ProgressBar::done() const {
  if (counted_ != nullptr) return counted_->load(std::memory_order_relaxed);
  if (!start_bytes_) return 0;
  const std::optional<std::uint64_t> now = bytes_written_by_process();
  const std::uint64_t others = *start_bytes_ + drawn_;  // the bar's own frames are writes too
  return now && *now > others ? *now - others : 0;
}

void ProgressBar::draw(bool final) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
  const std::uint64_t so_far = final ? total_ : done();
  const std::optional<std::uint64_t> total = start_bytes_ || counted_ ? std::optional(total_) : std::nullopt;
  const std::size_t width = terminal_width();
  std::string line = progress_line(label_, so_far, total, seconds, width > 1 ? width - 1 : width, items_);
  const std::size_t shown = line.size();
  if (shown < last_width_) line.append(last_width_ - shown, ' ');  // wipe the longer previous frame
  last_width_ = shown;
  shown_ = true;
  const std::string frame = fmt::format("\r{}{}", line, final ? "\n" : "");
  std::fwrite(frame.data(), 1, frame.size(), stderr);
  std::fflush(stderr);
  drawn_ += frame.size();
}

}  // namespace tensorfile::cli
