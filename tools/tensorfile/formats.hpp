// SPDX-License-Identifier: MIT
// Helpers shared by the commands of the tensorfile program: --map-location parsing, format names and byte counts
// for people.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tensorfile/checkpoint.hpp>
#include <tensorfile/formats/format.hpp>  // format_name, which every command uses
#include <tensorfile/formats/options.hpp>
#include <tensorfile/formats/select.hpp>
#include <tensorfile/state_dict.hpp>

namespace tensorfile::cli {

/// A map_location from the command line: "cpu", "cuda:1", "meta", or tag remaps "cuda:1=cuda:0,cuda:2=cpu".
/// Throws UsageError on a malformed one.
[[nodiscard]] MapLocation parse_map_location(std::string_view text);

/// --mmap MODE: "read-only", "copy-on-write" or "shared" (MapMode's names in kebab-case), or "off" (nullopt: heap
/// reads). Throws UsageError otherwise.
[[nodiscard]] std::optional<MapMode> parse_map_mode(std::string_view text);

/// --direct-reads WHEN: "automatic", "always" or "never". Throws UsageError otherwise.
[[nodiscard]] DirectReads parse_direct_reads(std::string_view text);
/// --huge-pages WHEN: "on" or "off" (unset: the library's default, TENSORFILE_HUGE_PAGES). Throws UsageError
/// otherwise.
[[nodiscard]] HugePages parse_huge_pages(std::string_view text);

/// "512 B", "1.5 KiB", "12.0 MiB", "3.21 GiB".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

/// A library message with each option named as the tool's user sets it: "(or .sharded.allow_unlisted = true)" becomes
/// "(or --allow-unlisted)".
[[nodiscard]] std::string with_flag_names(std::string message);

/// inspect --json's and bench's name of what `checkpoint` holds: "torch-zip", "safetensors-sharded", "npz", ...
[[nodiscard]] std::string format_label(const Checkpoint& checkpoint);

/// A byte count given to `option`: digits, then optionally a unit, as the Hugging Face tools take
/// max_shard_size: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), any case.
/// Throws UsageError naming the option otherwise (zero included).
[[nodiscard]] std::uint64_t parse_size(std::string_view text, std::string_view option);

/// convert --select: the tensor paths to keep (names or globs, as select_paths() takes them). Remembers which
/// patterns matched, so that one matching nothing (a typo) stops the conversion before anything is written.
class PathPatterns {
 public:
  explicit PathPatterns(std::vector<std::string> patterns);
  [[nodiscard]] bool empty() const noexcept { return state_->patterns.empty(); }
  /// The loaders' `select` (unset without patterns); may be called from several threads.
  [[nodiscard]] TensorSelect select() const;
  /// Throws UsageError naming every pattern that no tensor path of `in` matched.
  void require_all_matched(const std::filesystem::path& in) const;

 private:
  struct State {
    std::vector<std::string> patterns;
    std::vector<TensorSelect> matchers;  // one select_paths() per pattern
    std::mutex mutex;
    std::vector<bool> matched;
  };
  std::shared_ptr<State> state_;
};

}  // namespace tensorfile::cli
