// SPDX-License-Identifier: MIT
// save_safetensors_sharded(): named tensors as model-0000K-of-0000N.safetensors shards plus the
// model.safetensors.index.json the Hugging Face tools write, each file written crash-safely.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/safetensors/save.hpp"

namespace tensorfile {

/// Options of save_safetensors_sharded(); use designated initializers:
/// `save_safetensors_sharded(tensors, "out", {.max_shard_size = 2'000'000'000})`.
struct SafetensorsShardedSaveOptions {
  std::uint64_t max_shard_size = 5'000'000'000;  ///< most tensor bytes per shard (huggingface_hub's default, 5 GB);
                                                 ///< a larger tensor gets a shard of its own
  /// Every shard's `__metadata__` (transformers writes {"format": "pt"}).
  std::vector<std::pair<std::string, std::string>> metadata{{"format", "pt"}};
  bool sync = true;              ///< fsync each file and the directory before it replaces the old one
  std::string prefix = "model";  ///< names: <prefix>-00001-of-00003.safetensors, <prefix>.safetensors.index.json
};

/// What save_safetensors_sharded() wrote.
struct SafetensorsShards {
  std::vector<std::filesystem::path> files{};  ///< the shards in order (one file: <prefix>.safetensors)
  std::filesystem::path index{};               ///< the index file; empty when everything fit in one file
  std::uint64_t total_size = 0;                ///< the index's metadata.total_size: the tensors' bytes
};

/// Saves named tensors to the directory `directory` (created if missing) the way the Hugging Face tools
/// shard a model: tensors in the given order fill shards of at most `.max_shard_size` tensor bytes (one
/// larger tensor gets a shard of its own), written as `<prefix>-00001-of-0000N.safetensors` (each with the
/// reference layout, see save_safetensors) and then `<prefix>.safetensors.index.json` ({"metadata":
/// {"total_size": bytes}, "weight_map": {name: file}}, keys sorted, two-space indent, as transformers writes
/// it). Everything in one shard is written as `<prefix>.safetensors` with no index, as those tools do.
/// All or nothing as far as POSIX allows: every file is written and synced beside its name first; a failure
/// then (disk full, EIO, a tensor refused) removes those temporaries and leaves the directory as it was.
/// Only when all are complete is the old index removed and the files renamed into place, the new index
/// last, so a crash among the renames leaves no index (refused by load_state_dict), never an index over
/// shards of another save. Files of an earlier save with another shard count are not removed. Throws ArgumentError for
/// duplicate names, tensors that share memory, a zero `.max_shard_size` or a prefix with '/', and what save_safetensors
/// throws.
TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const NamedTensors& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SafetensorsShardedSaveOptions& options = {});

/// Saves every tensor of `tensors` (a state dict, a load_state_dict() result...) under its named_tensors()
/// path (see the vector overload).
TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const Value& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SafetensorsShardedSaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/text/json_writer.hpp"

namespace tensorfile {

namespace detail {

/// Shard numbers for tensors of `sizes` bytes, as huggingface_hub's splitter assigns them: in order, a new
/// shard when the next tensor would take the current one past `max_bytes`, and a tensor larger than
/// `max_bytes` alone in a shard of its own, numbered when met (before the shard being filled).
inline std::vector<std::size_t> assign_shards(const std::vector<std::uint64_t>& sizes, std::uint64_t max_bytes,
                                              std::size_t& shard_count) {
  std::vector<std::size_t> shard_of(sizes.size());
  std::vector<std::size_t> current;  // tensors of the shard being filled
  std::uint64_t current_bytes = 0;
  shard_count = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > max_bytes) {
      shard_of[i] = shard_count++;
      continue;
    }
    if (current_bytes + sizes[i] > max_bytes) {
      for (const std::size_t j : current) shard_of[j] = shard_count;
      ++shard_count;
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += sizes[i];
  }
  if (!current.empty()) {
    for (const std::size_t j : current) shard_of[j] = shard_count;
    ++shard_count;
  }
  return shard_of;
}

/// The index text as transformers writes it: json.dumps(index, indent=2, sort_keys=True) and a newline.
inline std::string safetensors_index_json(std::uint64_t total_size,
                                          std::vector<std::pair<std::string, std::string>> weight_map) {
  std::sort(weight_map.begin(), weight_map.end());  // UTF-8 byte order is Python's code point order
  std::string out = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(total_size) + "\n  },\n";
  out += "  \"weight_map\": {";
  for (std::size_t i = 0; i < weight_map.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    append_json_string(out, weight_map[i].first, JsonCharset::ascii, OnInvalidUtf8::stop);
    out += ": ";
    append_json_string(out, weight_map[i].second, JsonCharset::ascii, OnInvalidUtf8::stop);
  }
  out += weight_map.empty() ? "}\n}\n" : "\n  }\n}\n";
  return out;
}

/// Refuses a directory where a file is to be renamed, before anything is written (a rename would fail
/// after earlier files of the same save had replaced theirs).
inline void refuse_directory_target(const std::filesystem::path& target) {
  std::error_code error;
  if (std::filesystem::is_directory(target, error)) {
    throw IoError("cannot replace a directory with a file", EISDIR, {.file = target});
  }
}

/// "<prefix>-0000K-of-0000N.safetensors" (five digits or more, as Python's {:05d}).
inline std::string shard_file_name(const std::string& prefix, std::size_t k, std::size_t n) {
  char numbers[64];
  std::snprintf(numbers, sizeof numbers, "-%05zu-of-%05zu", k, n);
  std::string name = prefix;
  name += numbers;
  name += ".safetensors";
  return name;
}

}  // namespace detail

TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const NamedTensors& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SafetensorsShardedSaveOptions& options) {
  if (options.max_shard_size == 0) throw ArgumentError("max_shard_size is 0; expected at least 1 byte");
  if (options.prefix.empty() || options.prefix.find('/') != std::string::npos || options.prefix == "." ||
      options.prefix == "..") {
    throw ArgumentError("file name prefix \"" + options.prefix + "\" is not a plain file name");
  }
  std::unordered_set<std::string_view> names;
  std::vector<std::uint64_t> sizes;
  sizes.reserve(tensors.size());
  SafetensorsShards written;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second) throw ArgumentError("tensor name \"" + name + "\" is given twice");
    if (!tensor.defined()) throw ArgumentError("tensor \"" + name + "\" is undefined; expected a tensor");
    sizes.push_back(tensor.nbytes());
    written.total_size += tensor.nbytes();
  }
  detail::refuse_shared_tensors(tensors);  // before any file is written
  std::size_t count = 0;
  const std::vector<std::size_t> shard_of = detail::assign_shards(sizes, options.max_shard_size, count);
  count = std::max<std::size_t>(count, 1);

  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw IoError("cannot create the directory", error.value(), {.file = directory});
  const SafetensorsSaveOptions shard_options{.metadata = options.metadata, .sync = options.sync};
  std::vector<std::pair<std::string, std::string>> weight_map;
  weight_map.reserve(tensors.size());
  // Every file is written and synced under a temporary name before any is renamed, so a failure while
  // writing (a full disk, EIO, a refused tensor in shard k) removes the temporaries and leaves whatever
  // was in the directory untouched.
  std::vector<std::unique_ptr<detail::AtomicFileSink>> files;  // the shards, then the index
  files.reserve(count + 1);
  for (std::size_t k = 0; k < count; ++k) {
    const std::string name =
        count == 1 ? options.prefix + ".safetensors" : detail::shard_file_name(options.prefix, k + 1, count);
    NamedTensors shard;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (shard_of[i] != k) continue;
      shard.push_back(tensors[i]);
      weight_map.emplace_back(tensors[i].first, name);
    }
    written.files.push_back(directory / name);
    detail::refuse_directory_target(written.files.back());
    files.push_back(std::make_unique<detail::AtomicFileSink>(written.files.back(), options.sync));
    detail::write_safetensors(shard, *files.back(), shard_options);
    files.back()->finish();
  }
  if (count > 1) {
    written.index = directory / (options.prefix + ".safetensors.index.json");
    detail::refuse_directory_target(written.index);
    const std::string index = detail::safetensors_index_json(written.total_size, std::move(weight_map));
    files.push_back(std::make_unique<detail::AtomicFileSink>(written.index, options.sync));
    files.back()->write(std::as_bytes(std::span(index)));
    files.back()->finish();
    // POSIX renames one file at a time. The old index goes first: should a rename fail or the machine
    // stop among the renames, the directory has no index (a load refuses it) rather than an old index
    // over a mix of old and new shards of the same names (a load would return mixed weights).
    if (::unlink(written.index.c_str()) != 0 && errno != ENOENT) {
      throw IoError("cannot remove the old index before replacing its shards", errno, {.file = written.index});
    }
  }
  for (const auto& file : files) file->commit();  // the index last
  return written;
}

TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const Value& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SafetensorsShardedSaveOptions& options) {
  return save_safetensors_sharded(named_tensors(tensors), directory, options);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS
