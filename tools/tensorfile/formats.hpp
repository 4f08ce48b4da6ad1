// SPDX-License-Identifier: MIT
// Helpers shared by the commands of the tensorfile program: --map-location parsing and byte counts for people.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <tensorfile/formats/format.hpp>  // detect_format and format_name, which every command uses
#include <tensorfile/formats/torch/options.hpp>

namespace tensorfile::cli {

/// A map_location from the command line: "cpu", "cuda:1", "meta", or tag remaps "cuda:1=cuda:0,cuda:2=cpu".
/// Throws UsageError on a malformed one.
[[nodiscard]] MapLocation parse_map_location(std::string_view text);

/// "512 B", "1.5 KiB", "12.0 MiB", "3.21 GiB".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

}  // namespace tensorfile::cli
