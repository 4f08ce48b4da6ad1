// SPDX-License-Identifier: MIT
// Helpers shared by the commands of the tensorfile program: --map-location parsing and byte counts for people.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <tensorfile/formats/format.hpp>  // detect_format and format_name, which every command uses
#include <tensorfile/formats/torch/options.hpp>
#include <tensorfile/state_dict.hpp>

namespace tensorfile::cli {

/// A map_location from the command line: "cpu", "cuda:1", "meta", or tag remaps "cuda:1=cuda:0,cuda:2=cpu".
/// Throws UsageError on a malformed one.
[[nodiscard]] MapLocation parse_map_location(std::string_view text);

/// "512 B", "1.5 KiB", "12.0 MiB", "3.21 GiB".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

/// How load_state_dict lays out the weights at `path`, for the paths the commands read through it: safetensors
/// files, *.index.json files and Hugging Face model directories (no meta.json, one of the names
/// resolve_state_dict looks for); nullopt for torch files, tensordict trees and anything else, which keep
/// their own paths. Throws what resolve_state_dict throws for a broken index.
[[nodiscard]] std::optional<StateDictLayout> weights_layout(const std::filesystem::path& path);

/// A byte count given to `option`: digits, then optionally a unit, as the Hugging Face tools take
/// max_shard_size: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), any case.
/// Throws UsageError naming the option otherwise (zero included).
[[nodiscard]] std::uint64_t parse_size(std::string_view text, std::string_view option);

}  // namespace tensorfile::cli
