// SPDX-License-Identifier: MIT
/// @file
/// save_safetensors_sharded(): named tensors as model-0000K-of-0000N.safetensors shards plus the
/// model.safetensors.index.json the Hugging Face tools write, each file written crash-safely.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/safetensors/save.hpp"

namespace tensorfile {

/// What save_safetensors_sharded() wrote.
struct SafetensorsShards {
  std::vector<std::filesystem::path> files{};  ///< the shards in order (one file: `<prefix>.safetensors`)
  std::filesystem::path index{};               ///< the index file; empty when everything fit in one file
  std::uint64_t total_size = 0;                ///< the index's metadata.total_size: the tensors' bytes
};

/// Saves named tensors to the directory `directory` (created if missing) the way the Hugging Face tools
/// shard a model: tensors in the given order fill shards of at most `.sharded.max_shard_size` tensor bytes (one
/// larger tensor gets a shard of its own), each with the reference layout (see save_safetensors), and
/// `<prefix>.safetensors.index.json` ({"metadata": {"total_size": bytes}, "weight_map": {name: file}}, keys
/// sorted, two-space indent, as transformers writes it). Everything in one shard is `<prefix>.safetensors`
/// with no index, as those tools write it. Every shard is written with `.safetensors` (`sort`, `pad_header`) and
/// its `metadata` as `__metadata__`; empty metadata writes {"format": "pt"}, as transformers does.
/// SaveOptions::format is ignored.
///
/// The save is one commit. Shard files are never written in place: the shards are named
/// `<prefix>-0000K-of-0000N.safetensors` when no file has those names, else the same names with a
/// generation, `<prefix>-0000K-of-0000N-g1.safetensors` (-g2, ... where those are taken too), so that the
/// files of the index being replaced stay as they are while it is live; the index's weight_map names the files
/// (the Hugging Face loaders follow it). Every file is written and synced under a hidden temporary name
/// (`.<name>.tmp-<16 hex digits>`), renamed to its name, the directory synced, and then the new index is
/// renamed over the old one: that rename is the commit. Only after it are the files of earlier saves of this
/// prefix removed: shards of any count or generation that the new index does not name, and a single
/// `<prefix>.safetensors`. A one-shard save into a directory holding an index commits by removing the index
/// after `<prefix>.safetensors` is in place (when that name is taken, through a one-shard index naming a file
/// of a free name, hard-linked to `<prefix>.safetensors` once the old files are gone). A crash at any point
/// leaves the old checkpoint or the new one loadable in full by load_state_dict, which reads an index before a
/// single file, and a load beside a save gets one of them whole (see load_state_dict).
///
/// Saves to one directory take turns: each holds an exclusive flock() on the directory while it runs, and
/// first removes the temporaries that killed saves of this prefix left (leftover_save_temporaries() in
/// state_dict.hpp lists them). A failure before the commit (disk full, EIO, a tensor refused) removes this
/// save's temporaries and leaves the directory's files as they were. Throws ArgumentError for duplicate names,
/// tensors that share memory, a zero `.sharded.max_shard_size` or a `.sharded.prefix` with '/', IoError for a directory
/// where the index or single file goes, and what save_safetensors throws.
TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const NamedTensors& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SaveOptions& options = {});

/// Saves every tensor of `tensors` (a state dict, a load_state_dict() result...) under its named_tensors()
/// path (see the vector overload).
TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const Value& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SaveOptions& options = {});

namespace detail {

/// For tests only (tests/safetensors/test_sharded_commit.cpp kills a save at each step): when set, called by
/// save_safetensors_sharded after each step of its commit with the step's name ("finished <file>", "renamed
/// <file>", "committed <index>", "linked <file>", "removed <file>"). Not an API: it may change any time.
inline void (*sharded_save_step_hook)(const std::string& step) = nullptr;

}  // namespace detail

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/posix/directory.hpp"
#include "tensorfile/detail/posix/file.hpp"
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

/// "<prefix>-0000K-of-0000N.safetensors" (five digits or more, as Python's {:05d}), with "-g<generation>"
/// before the extension for a generation above 0.
inline std::string shard_file_name(const std::string& prefix, std::size_t k, std::size_t n,
                                   std::size_t generation = 0) {
  char numbers[96];
  if (generation == 0) {
    std::snprintf(numbers, sizeof numbers, "-%05zu-of-%05zu", k, n);
  } else {
    std::snprintf(numbers, sizeof numbers, "-%05zu-of-%05zu-g%zu", k, n, generation);
  }
  std::string name = prefix;
  name += numbers;
  name += ".safetensors";
  return name;
}

/// Whether `text` is at least `least` ASCII digits and nothing else.
inline bool all_digits(std::string_view text, std::size_t least) noexcept {
  return text.size() >= least && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Whether `name` is a shard name shard_file_name() gives `prefix`, of any number, count and generation.
inline bool is_shard_file_name(std::string_view name, std::string_view prefix) noexcept {
  constexpr std::string_view extension = ".safetensors";
  if (name.size() <= prefix.size() + extension.size() || !name.starts_with(prefix) || !name.ends_with(extension) ||
      name[prefix.size()] != '-') {
    return false;
  }
  std::string_view rest = name.substr(prefix.size() + 1, name.size() - prefix.size() - 1 - extension.size());
  const std::size_t of = rest.find("-of-");
  if (of == std::string_view::npos || !all_digits(rest.substr(0, of), 5)) return false;
  rest.remove_prefix(of + 4);
  const std::size_t generation = rest.find("-g");
  return all_digits(rest.substr(0, generation), 5) &&
         (generation == std::string_view::npos || all_digits(rest.substr(generation + 2), 1));
}

/// The name whose temporary `name` is, as AtomicFileSink names them (".<name>.tmp-<16 hex digits>"); empty when
/// `name` is no such temporary.
inline std::string_view temporary_target(std::string_view name) noexcept {
  constexpr std::string_view mark = ".tmp-";
  constexpr std::size_t digits = 16;
  if (name.size() < 2 + mark.size() + digits || name.front() != '.') return {};
  const std::string_view hex = name.substr(name.size() - digits);
  const bool is_hex =
      std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!is_hex || name.substr(name.size() - digits - mark.size(), mark.size()) != mark) return {};
  return name.substr(1, name.size() - 1 - mark.size() - digits);
}

/// The directory of one save, open and locked against other saves for the save's life (flock(): released when
/// the descriptor closes, also when the process is killed). Where the file system refuses the lock the save goes
/// on unlocked and leaves other saves' temporaries alone.
class SaveDirectory {
 public:
  explicit SaveDirectory(std::filesystem::path path) : path_(std::move(path)) {
    const char* name = path_.empty() ? "." : path_.c_str();
    dir_ = FileHandle::try_open_at(AT_FDCWD, name, O_RDONLY | O_DIRECTORY);
    if (!dir_.valid()) throw IoError("cannot open the directory", errno, {.file = path_});
    int result = 0;
    do {
      result = ::flock(dir_.fd(), LOCK_EX);
    } while (result != 0 && errno == EINTR);
    locked_ = result == 0;
  }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] bool locked() const noexcept { return locked_; }

  /// Whether `name` is taken (by anything: a file, a directory, a link). A name that cannot be checked (too long,
  /// EACCES) is an IoError: counting it as taken sent the search for free names on forever.
  [[nodiscard]] bool taken(const std::string& name) const {
    struct stat info {};
    if (::fstatat(dir_.fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) return true;
    if (errno == ENOENT) return false;
    throw IoError("cannot check the name " + name, errno, {.file = path_});
  }

  /// The directory's names (nothing when it cannot be read: what is left is removed by a later save).
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<DirectoryEntry> entries;
    (void)read_directory(dir_.fd(), entries);
    std::vector<std::string> out;
    out.reserve(entries.size());
    for (DirectoryEntry& entry : entries) {
      if (!entry.is_directory) out.push_back(std::move(entry.name));
    }
    return out;
  }

  /// Unlinks `name`; whether it went.
  bool remove(const std::string& name) const { return ::unlinkat(dir_.fd(), name.c_str(), 0) == 0; }

  /// Removes the temporary `name` unless a live writer holds its lock (AtomicFileSink locks each temporary while
  /// it writes it, save_safetensors() and save() too, which take no directory lock; a killed writer's lock is gone).
  bool remove_unused(const std::string& name) const {
    const int fd = ::openat(dir_.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    const bool removed = ::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlinkat(dir_.fd(), name.c_str(), 0) == 0;
    ::close(fd);
    return removed;
  }

  /// Makes the names' changes durable (best effort: every file is already synced).
  void sync() const { (void)::fsync(dir_.fd()); }

  [[nodiscard]] int fd() const noexcept { return dir_.fd(); }

 private:
  std::filesystem::path path_;
  FileHandle dir_;
  bool locked_ = false;
};

/// Tells the test hook that `step` is done.
inline void sharded_save_step(std::string_view what, const std::string& name) {
  if (sharded_save_step_hook != nullptr) sharded_save_step_hook(std::string(what) + " " + name);
}

/// Removes the temporaries that killed saves of `prefix` left in `dir` (those of its index, its single file and
/// its shards): no other sharded save writes while `dir` is locked, and a single-file save's live temporary is
/// locked by its writer.
inline void remove_leftover_temporaries(const SaveDirectory& dir, const std::string& prefix) {
  if (!dir.locked()) return;
  const std::string index = prefix + ".safetensors.index.json";
  const std::string single = prefix + ".safetensors";
  for (const std::string& name : dir.names()) {
    const std::string_view target = temporary_target(name);
    if (target == index || target == single || is_shard_file_name(target, prefix)) (void)dir.remove_unused(name);
  }
}

/// After a commit: removes what earlier saves of `prefix` left, the shards the new files `keep` do not name
/// and (unless kept) the single `<prefix>.safetensors`. Best effort: a file left over is never loaded (an
/// index comes before a single file, and names its shards), and the next save removes it.
inline void remove_earlier_files(const SaveDirectory& dir, const std::string& prefix,
                                 const std::vector<std::string>& keep, bool sync) {
  const std::string single = prefix + ".safetensors";
  bool removed = false;
  for (const std::string& name : dir.names()) {
    if (!(name == single || is_shard_file_name(name, prefix))) continue;
    if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
    if (dir.remove(name)) {
      removed = true;
      sharded_save_step("removed", name);
    }
  }
  if (removed && sync) dir.sync();
}

/// Writes one file of a save and syncs it under its temporary name (AtomicFileSink::finish), for a later rename.
inline std::unique_ptr<AtomicFileSink> finished_file(const std::filesystem::path& target, bool sync,
                                                     const std::function<void(ByteSink&)>& write) {
  auto file = std::make_unique<AtomicFileSink>(target, sync);
  write(*file);
  file->finish();
  sharded_save_step("finished", target.filename().string());
  return file;
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_safetensors_save_sharded)
namespace tensorfile {

TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const NamedTensors& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SaveOptions& options) {
  if (options.sharded.max_shard_size == 0) throw ArgumentError("max_shard_size is 0; expected at least 1 byte");
  if (options.sharded.prefix.empty() || options.sharded.prefix.find('/') != std::string::npos ||
      options.sharded.prefix == "." || options.sharded.prefix == "..") {
    throw ArgumentError("file name prefix \"" + options.sharded.prefix + "\" is not a plain file name");
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
  const std::vector<std::size_t> shard_of = detail::assign_shards(sizes, options.sharded.max_shard_size, count);
  count = std::max<std::size_t>(count, 1);

  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw IoError("cannot create the directory", error.value(), {.file = directory});
  const detail::SaveDirectory dir(directory);  // locked until the save returns
  detail::remove_leftover_temporaries(dir, options.sharded.prefix);
  const std::string index_name = options.sharded.prefix + ".safetensors.index.json";
  const std::string single_name = options.sharded.prefix + ".safetensors";
  const bool has_index = dir.taken(index_name);
  detail::refuse_directory_target(directory / index_name);

  // The new files' names: none may be a file the live index names, and none is any file there now (so an
  // earlier save's leftovers are never written over either); a generation above 0 when the plain names are taken.
  std::vector<std::string> file_names(count);
  const bool plain_single = count == 1 && !(has_index && dir.taken(single_name));
  if (plain_single) {
    detail::refuse_directory_target(directory / single_name);
    file_names[0] = single_name;  // no index: replaces the single file; else: not read until the index goes
  } else {
    // Saves alternate between two generations; a thousand taken means something else holds the names.
    constexpr std::size_t max_generations = 1000;
    for (std::size_t generation = 0;; ++generation) {
      if (generation == max_generations) {
        throw ArgumentError("every shard name of " + std::to_string(max_generations) +
                                " generations is taken in the directory; expected a folder a sharded save can write",
                            {.file = directory});
      }
      bool free = true;
      for (std::size_t k = 0; k < count && free; ++k) {
        file_names[k] = detail::shard_file_name(options.sharded.prefix, k + 1, count, generation);
        free = !dir.taken(file_names[k]);
      }
      if (free) break;
    }
  }

  // Every file is written and synced under a temporary name before any is renamed, so a failure while
  // writing (a full disk, EIO, a refused tensor in shard k) removes the temporaries and leaves whatever
  // was in the directory untouched.
  SaveOptions shard_options = options;
  if (shard_options.safetensors.metadata.empty()) shard_options.safetensors.metadata = {{"format", "pt"}};
  std::vector<std::pair<std::string, std::string>> weight_map;
  weight_map.reserve(tensors.size());
  std::vector<std::unique_ptr<detail::AtomicFileSink>> files;  // the shards, then the index
  files.reserve(count + 1);
  for (std::size_t k = 0; k < count; ++k) {
    NamedTensors shard;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (shard_of[i] != k) continue;
      shard.push_back(tensors[i]);
      weight_map.emplace_back(tensors[i].first, file_names[k]);
    }
    written.files.push_back(directory / file_names[k]);
    files.push_back(detail::finished_file(written.files.back(), options.sync, [&](detail::ByteSink& sink) {
      detail::write_safetensors(shard, sink, shard_options);
    }));
  }
  if (!plain_single) {
    written.index = directory / index_name;
    const std::string index = detail::safetensors_index_json(written.total_size, std::move(weight_map));
    files.push_back(detail::finished_file(
        written.index, options.sync, [&](detail::ByteSink& sink) { sink.write(std::as_bytes(std::span(index))); }));
  }
  // The shards' renames change no name the live index reads (theirs were free); the index's rename is the
  // commit (or, for one shard beside an index, the index's removal below).
  for (std::size_t k = 0; k < files.size(); ++k) {
    files[k]->commit();
    detail::sharded_save_step(k < count ? "renamed" : "committed", k < count ? file_names[k] : index_name);
  }
  if (plain_single && has_index) {
    if (!dir.remove(index_name) && errno != ENOENT) {
      throw IoError("cannot remove the old index after writing the single file", errno,
                    {.file = directory / index_name});
    }
    if (options.sync) dir.sync();
    detail::sharded_save_step("removed", index_name);
  }
  detail::remove_earlier_files(dir, options.sharded.prefix, file_names, options.sync);
  if (count == 1 && !plain_single) {
    // One shard committed under a free name beside the index naming it, the old files gone: it becomes the
    // single file by a second name, then the index and the shard's own name go. A file system that refuses
    // hard links (or an index that cannot be removed) keeps the one-shard index, a checkpoint as good.
    if (::linkat(dir.fd(), file_names[0].c_str(), dir.fd(), single_name.c_str(), 0) == 0) {
      if (options.sync) dir.sync();
      detail::sharded_save_step("linked", single_name);
      if (!dir.remove(index_name)) return written;
      if (options.sync) dir.sync();
      detail::sharded_save_step("removed", index_name);
      (void)dir.remove(file_names[0]);
      detail::sharded_save_step("removed", file_names[0]);
      written.files = {directory / single_name};
      written.index.clear();
    }
  }
  return written;
}

TENSORFILE_ENTRY SafetensorsShards save_safetensors_sharded(const Value& tensors,
                                                            const std::filesystem::path& directory,
                                                            const SaveOptions& options) {
  return save_safetensors_sharded(named_tensors(tensors), directory, options);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_safetensors_save_sharded)
