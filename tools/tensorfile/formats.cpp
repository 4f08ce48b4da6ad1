// SPDX-License-Identifier: MIT
// Helpers shared by the commands of the tensorfile program.
#include "formats.hpp"

#include <fmt/format.h>

#include <tensorfile/core/text.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>

#include "args.hpp"

namespace tensorfile::cli {

MapLocation parse_map_location(std::string_view text) {
  try {
    if (text.find('=') == std::string_view::npos) return MapLocation(Device::parse(text));
    std::map<std::string, std::string> tags;
    while (!text.empty()) {
      const std::size_t comma = text.find(',');
      const std::string_view pair = text.substr(0, comma);
      const std::size_t equals = pair.find('=');
      if (equals == std::string_view::npos || equals == 0 || equals + 1 == pair.size()) {
        throw UsageError(fmt::format("--map-location: '{}' is not FROM=TO", pair));
      }
      (void)Device::parse(pair.substr(equals + 1));  // the target must be a device
      tags.emplace(pair.substr(0, equals), pair.substr(equals + 1));
      text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    }
    return MapLocation(std::move(tags));
  } catch (const ArgumentError& error) {
    throw UsageError("--map-location: " + error.reason());
  }
}

std::optional<MapMode> parse_map_mode(std::string_view text) {
  if (text == "read-only") return MapMode::read_only;
  if (text == "copy-on-write") return MapMode::copy_on_write;
  if (text == "shared") return MapMode::shared;
  if (text == "off") return std::nullopt;
  throw UsageError(fmt::format("--mmap takes read-only, copy-on-write, shared or off, got '{}'", text));
}

DirectReads parse_direct_reads(std::string_view text) {
  if (text == "automatic") return DirectReads::automatic;
  if (text == "always") return DirectReads::always;
  if (text == "never") return DirectReads::never;
  throw UsageError(fmt::format("--direct-reads takes automatic, always or never, got '{}'", text));
}

HugePages parse_huge_pages(std::string_view text) {
  if (text == "on") return HugePages::on;
  if (text == "off") return HugePages::off;
  throw UsageError(fmt::format("--huge-pages takes on or off, got '{}'", text));
}

std::string with_flag_names(std::string message) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 1> flags{
      {{".sharded.allow_unlisted = true", "--allow-unlisted"}}};
  for (const auto& [option, flag] : flags) {
    if (const std::size_t at = message.find(option); at != std::string::npos) message.replace(at, option.size(), flag);
  }
  return message;
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  constexpr std::array<std::string_view, 5> units{"KiB", "MiB", "GiB", "TiB", "PiB"};
  auto value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  return value < 10 ? fmt::format("{:.2f} {}", value, units[unit]) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string format_label(const Checkpoint& checkpoint) {
  return state_dict_format_name(
      {.format = checkpoint.format(), .index = checkpoint.sharded() ? checkpoint.name() : ""});
}

std::uint64_t parse_size(std::string_view text, std::string_view option) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string unit(text.substr(digits));
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  static const std::map<std::string, std::uint64_t> units{{"", 1},
                                                          {"B", 1},
                                                          {"KB", 1000},
                                                          {"MB", 1000'000},
                                                          {"GB", 1000'000'000},
                                                          {"TB", 1000'000'000'000},
                                                          {"KIB", 1u << 10},
                                                          {"MIB", 1u << 20},
                                                          {"GIB", 1u << 30},
                                                          {"TIB", std::uint64_t{1} << 40}};
  const auto found = units.find(unit);
  std::uint64_t value = 0;
  bool ok = digits > 0 && digits <= 15 && found != units.end();
  for (std::size_t i = 0; ok && i < digits; ++i) value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  if (ok && value > std::numeric_limits<std::uint64_t>::max() / found->second) ok = false;
  if (!ok || value == 0) {
    throw UsageError(fmt::format("--{} takes a size such as 5GB, 500MB, 2GiB or 1000000, got '{}'", option, text));
  }
  return value * found->second;
}

PathPatterns::PathPatterns(std::vector<std::string> patterns) : state_(std::make_shared<State>()) {
  for (std::string& pattern : patterns) {
    if (pattern.empty()) throw UsageError("--select: an empty pattern matches no tensor path");
    state_->matchers.push_back(select_paths({pattern}));
    state_->patterns.push_back(std::move(pattern));
  }
  state_->matched.assign(state_->patterns.size(), false);
}

TensorSelect PathPatterns::select() const {
  if (empty()) return {};
  return [state = state_](std::string_view path) {
    bool keep = false;
    for (std::size_t i = 0; i < state->matchers.size(); ++i) {
      if (!state->matchers[i](path)) continue;
      keep = true;
      const std::lock_guard lock(state->mutex);
      state->matched[i] = true;
    }
    return keep;
  };
}

void PathPatterns::require_all_matched(const std::filesystem::path& in) const {
  std::string unmatched;
  const std::lock_guard lock(state_->mutex);
  for (std::size_t i = 0; i < state_->patterns.size(); ++i) {
    if (!state_->matched[i]) unmatched += (unmatched.empty() ? "'" : ", '") + state_->patterns[i] + "'";
  }
  if (!unmatched.empty()) {
    throw UsageError(fmt::format("--select: no tensor path of {} matches {}; nothing was written",
                                 escape_controls(in.string()), escape_controls(unmatched)));
  }
}

}  // namespace tensorfile::cli
