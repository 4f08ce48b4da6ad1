// SPDX-License-Identifier: MIT
// Helpers shared by the commands of the tensorfile program: --map-location parsing and byte counts for people.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tensorfile/formats/format.hpp>  // detect_format and format_name, which every command uses
#include <tensorfile/formats/options.hpp>
#include <tensorfile/formats/select.hpp>
#include <tensorfile/state_dict.hpp>

namespace tensorfile::cli {

/// A map_location from the command line: "cpu", "cuda:1", "meta", or tag remaps "cuda:1=cuda:0,cuda:2=cpu".
/// Throws UsageError on a malformed one.
[[nodiscard]] MapLocation parse_map_location(std::string_view text);

/// "512 B", "1.5 KiB", "12.0 MiB", "3.21 GiB".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

/// A library message with each option named as the tool's user sets it: "(or .sharded.allow_unlisted = true)" becomes
/// "(or --allow-unlisted)".
[[nodiscard]] std::string with_flag_names(std::string message);

/// What a command's PATH holds, told from its contents (never its name): the one format dispatch of convert,
/// inspect and bench.
enum class SourceKind {
  torch,        ///< one torch file (zip or legacy), or a model directory's pytorch_model.bin
  safetensors,  ///< one safetensors file, or a model directory's model.safetensors
  sharded,      ///< the shards a *.index.json lists (safetensors or torch), given as the index or its directory
  npz,          ///< a NumPy .npz archive
  npy,          ///< a NumPy .npy file
  tensordict,   ///< a tensordict memmap tree (a directory with meta.json, or any other directory: load_memmap says
                ///< what is missing)
};

/// A resolved PATH: its kind, the format of what is read, and for safetensors files and shards their layout.
struct Source {
  SourceKind kind = SourceKind::torch;
  FileFormat format = FileFormat::unknown;  ///< of `file` (the first shard's when sharded)
  std::filesystem::path file{};             ///< what is read: PATH itself, or a model directory's single file
  /// What resolve_state_dict() found, for the sources resolved through it: safetensors files, shards, model directories
  std::optional<StateDictLayout> layout{};
  /// inspect --json's "format": "torch-zip", "safetensors-sharded", "npz", ...
  [[nodiscard]] std::string format_name() const;
};

/// Resolves `path`: torch and NumPy files by their magic, directories with meta.json as tensordict trees, other
/// directories and JSON files through resolve_state_dict(). An unknown file resolves as a torch file, so that
/// load_torch() says what it lacks. Throws what resolve_state_dict throws for a broken index.
[[nodiscard]] Source resolve_source(const std::filesystem::path& path);

/// resolve_source(path).layout: the layout of safetensors files, sharded checkpoints and model directories, nullopt
/// for the rest.
[[nodiscard]] std::optional<StateDictLayout> weights_layout(const std::filesystem::path& path);

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
