// SPDX-License-Identifier: MIT
// Format detection and shared helpers of the tensorfile program.
#include "formats.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <fstream>
#include <map>
#include <span>
#include <system_error>

#include <tensorfile/backends/mmap.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/detail/zip/reader.hpp>

#include "args.hpp"

namespace tensorfile::cli {

InputFormat detect_format(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return InputFormat::tensordict;
  std::ifstream in(path, std::ios::binary);
  std::array<char, 512> head{};  // the tar magic sits at byte 257
  in.read(head.data(), head.size());
  const auto bytes = std::as_bytes(std::span(head.data(), static_cast<std::size_t>(in.gcount())));
  switch (detail::sniff_torch_format(bytes)) {
    case TorchFormat::zip: return InputFormat::torch_zip;
    case TorchFormat::legacy: return InputFormat::torch_legacy;
    default: return InputFormat::other;
  }
}

std::string_view format_name(InputFormat format) noexcept {
  switch (format) {
    case InputFormat::torch_zip: return "torch-zip";
    case InputFormat::torch_legacy: return "torch-legacy";
    case InputFormat::tensordict: return "tensordict";
    case InputFormat::other: break;
  }
  return "unknown";
}

ZipFacts read_zip_facts(const std::filesystem::path& path) {
  const Storage mapping = mmap_storage(path, MapMode::read_only);
  const auto zip = detail::ZipReader::open({mapping.data(), mapping.size_bytes()}, path);
  ZipFacts facts;
  facts.prefix = zip.prefix();
  facts.records = zip.entries().size();
  const auto text_of = [&](std::string_view name) {
    const detail::ZipEntry* entry = zip.find(name);
    if (entry == nullptr || entry->size > 64) return std::string();
    const std::vector<std::byte> raw = zip.read(*entry);
    std::string text(reinterpret_cast<const char*>(raw.data()), raw.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    return text;
  };
  facts.version = text_of(".data/version");
  if (facts.version.empty()) facts.version = text_of("version");
  facts.byteorder = text_of("byteorder");
  return facts;
}

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
