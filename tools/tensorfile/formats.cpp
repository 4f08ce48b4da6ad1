// SPDX-License-Identifier: MIT
// Helpers shared by the commands of the tensorfile program.
#include "formats.hpp"

#include <fmt/format.h>

#include <array>
#include <map>

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

}  // namespace tensorfile::cli
