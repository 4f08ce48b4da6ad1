// SPDX-License-Identifier: MIT
/// @file
/// load_state_dict(): one entry point for a model's weights in any layout tensorfile reads (a torch file, a
/// safetensors file, a GGUF file, a tensordict tree, shards listed by a Hugging Face *.index.json, or the parts of a
/// llama.cpp split GGUF model). Above the formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode, DirectReads
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/options.hpp"

namespace tensorfile {

/// How the weights at a path are laid out, as load_state_dict() finds them.
struct StateDictLayout {
  FileFormat format = FileFormat::unknown;  ///< the file's format, or the first shard's; tensordict for a tree
  /// The *.index.json; for a llama.cpp split GGUF model its first part (`<prefix>-00001-of-0000N.gguf`, which holds
  /// the metadata); empty when not sharded.
  std::filesystem::path index{};
  std::vector<std::filesystem::path> files{};  ///< the file (or tree) read; with an index, every shard in the
                                               ///< order the index first names it
  /// With an index: every tensor name in the index's order with the number of its shard in `files` (a split GGUF
  /// model: each part's tensors in the order of its tensor infos, part after part).
  std::vector<std::pair<std::string, std::size_t>> weight_map{};
  std::optional<std::uint64_t> total_size{};  ///< the index's metadata.total_size, when it has one

  /// Whether an index lists the shards.
  [[nodiscard]] bool sharded() const noexcept { return !index.empty(); }
};

/// The layout's name as the `tensorfile` program prints it: format_name() of the format, and for an index
/// that name with "-sharded" appended ("safetensors-sharded", "torch-zip-sharded").
[[nodiscard]] inline std::string state_dict_format_name(const StateDictLayout& layout) {
  std::string name(format_name(layout.format));
  if (layout.sharded()) name += "-sharded";
  return name;
}

/// The files load_state_dict looks for in a directory (before its meta.json), in this order: safetensors before torch
/// files (as transformers prefers them), and in each the index before the single file. A single file beside an
/// index of its kind is a leftover of an earlier layout (transformers would read it; save_safetensors_sharded
/// removes it after its commit), read only when the index names it.
inline constexpr std::string_view state_dict_file_names[] = {"model.safetensors.index.json", "model.safetensors",
                                                             "pytorch_model.bin.index.json", "pytorch_model.bin"};

/// How the weights at `path` are laid out, read from the contents, never the name: a directory is taken through the
/// first of model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json and pytorch_model.bin it
/// holds (state_dict_file_names), else, with a meta.json, it is a tensordict tree; a file whose first bytes are a JSON
/// object is an index (its weight_map parsed, shard names checked to stay below its directory); any other file is a
/// single file of detect_format()'s format (unknown when it is none); a GGUF file that is a part of a llama.cpp split
/// model (split.count above 1) is that model, its parts the shards and the first part the index (every part's header
/// read and checked: see load_state_dict). Reads only the index and the first bytes of the
/// file or first shard. Throws FormatError for a broken index or a directory holding none of those, IoError when
/// unreadable.
[[nodiscard]] TENSORFILE_ENTRY StateDictLayout resolve_state_dict(const std::filesystem::path& path,
                                                                  std::uint64_t max_index_bytes = std::uint64_t{1}
                                                                                                  << 28);

namespace detail {
class FileHandle;  // detail/posix/file.hpp: a declaration takes one by reference

/// Loads one torch or safetensors file already open (named by the path in messages), by its format: load_state_dict
/// reads each with load_one_file, cuda::load_state_dict streams each to the device.
using LoadWeightsFile = std::function<Value(const FileHandle&, const std::filesystem::path&, FileFormat)>;

/// load_state_dict() with the torch and safetensors files (single, or the shards) read by `load_file(const
/// FileHandle&, const std::filesystem::path&, FileFormat) -> Value`; trees and .npz files load as usual.
TENSORFILE_ENTRY Value load_state_dict_with(const std::filesystem::path& path, const LoadOptions& options,
                                            const LoadWeightsFile& load_file);

}  // namespace detail

/// Loads a model's weights from `path`, whatever their layout (see resolve_state_dict): a torch file
/// (load_torch()), a safetensors file (load_safetensors()), a NumPy .npz file (load_npz()), a tensordict tree
/// (load_memmap(), as to_value() turns it into dicts), or the shards an index lists. Each file's loader gets
/// `options` (a tree: the one device map_location sends "cpu" to, and mapped copy_on_write unless `mmap` says
/// otherwise). With an index, every shard is opened once, below the index's directory (a name that leaves it, by
/// text or symbolic link, is a FormatError), read with up to `.threads` at once (0: min(4, cores); a callable
/// map_location is then called from that many threads), and each must be a dict of name -> Tensor; the result is
/// one ordered dict in the index's weight_map order. A name the index lists but its shard lacks, a name in two
/// shards, and (unless `.sharded.allow_unlisted`) a shard's tensor the index does not list are FormatErrors naming
/// the shard and the tensor; all of them are reported at once (in one error, or in `.sharded.mismatches`).
/// A llama.cpp split GGUF model (any part's path) loads as such shards, found by llama.cpp's names: a missing part, one
/// of another split.count or whose split.no is not its name's, a tensor in two parts and a split.tensors.count the
/// parts do not hold are FormatErrors naming the part; the dict's attributes are the first part's metadata without
/// split.* keys, and every part's __ggml_types__ (the first part's header is read even with `select_drops`). With
/// `select`, a shard holding no kept tensor has its data never read: with `select_drops` it is never opened;
/// without, a safetensors or GGUF shard's header alone gives its meta tensors, and a torch shard's tensors are left out
/// (their dtype and shape are known only by reading its pickle). An index longer than `limits.max_index_bytes` is a
/// LimitError; `into` is refused (ArgumentError). Throws what the format's loader throws, the first shard's error
/// when several fail.
///
/// Beside a save: the index (or a directory's choice of file) is read and held open, every shard it names opened,
/// and then the path is checked to name the same index (device, inode, size, times) and the directory to make the
/// same choice. A save_safetensors_sharded never changes a file a live index names, and commits by replacing the
/// index, so a load that passes the check read one checkpoint whole; one that fails it, or fails while the index
/// changed (a shard removed by the commit after the index was read), starts again on the new index, up to 100
/// times, then throws the last error. A single file is opened once, and so read whole.
[[nodiscard]] TENSORFILE_ENTRY Value load_state_dict(const std::filesystem::path& path,
                                                     const LoadOptions& options = {});

/// The hidden temporaries that crash-safe saves left in `directory` (not below it), sorted by name. They are
/// files named `.<name>.tmp-<16 hex digits>`, as save(), save_safetensors() and save_safetensors_sharded() name a
/// file while they write it; a killed save leaves one per file it was writing, as large as what it had written. A
/// save in progress has them too. The next save_safetensors_sharded() of that prefix to the directory removes
/// those of its names. Throws IoError when the directory cannot be read.
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::filesystem::path> leftover_save_temporaries(
    const std::filesystem::path& directory);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <exception>
#include <thread>
#include <unordered_map>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/directory.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/posix/parallel_reads.hpp"
#include "tensorfile/detail/text/json_reader.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/gguf/load.hpp"
#include "tensorfile/formats/numpy/npz.hpp"
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/safetensors/save_sharded.hpp"
#include "tensorfile/formats/tensordict/load_memmap.hpp"
#include "tensorfile/formats/tensordict/value_tree.hpp"
#include "tensorfile/formats/torch/load.hpp"

namespace tensorfile {

namespace detail {

/// Refuses a shard file name that could leave the index's directory by its text: empty, absolute, with a
/// ".." component or a NUL. (Symbolic links are caught when the shard is opened.)
inline void check_shard_name(const std::string& name, const std::filesystem::path& index, std::uint64_t at) {
  std::string_view rest = name;
  bool dotdot = false;
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    dotdot = dotdot || rest.substr(0, slash) == "..";
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  if (name.empty() || name.front() == '/' || dotdot || name.find('\0') != std::string::npos) {
    throw FormatError("shard \"" + name + "\" leaves the index's directory; expected a file name below it",
                      {.file = index, .offset = at});
  }
}

/// Parses the text of a *.index.json into `layout`: {"metadata": {"total_size": N, ...}, "weight_map":
/// {name: file, ...}, ...}; other members are skipped. A name given twice is an error (two shards claiming it).
inline void parse_state_dict_index(std::string_view text, const std::filesystem::path& index, StateDictLayout& layout) {
  JsonReader json(text, index);
  json.expect('{', "an object");
  bool has_map = false;
  std::unordered_map<std::string, std::size_t, KeyedStringHash> shard_numbers;
  std::unordered_map<std::string, std::size_t, KeyedStringHash> seen;
  std::string scratch;
  std::string value_scratch;
  if (!json.consume('}')) {
    while (true) {
      const std::string key(json.parse_string(scratch));
      json.expect(':', "':'");
      if (key == "weight_map") {
        has_map = true;
        json.expect('{', "an object of tensor name -> shard file");
        if (!json.consume('}')) {
          while (true) {
            const std::size_t at = json.position();
            std::string name(json.parse_string(scratch));
            json.expect(':', "':'");
            (void)json.peek();  // past the blanks: the file name's offset
            const std::size_t file_at = json.position();
            std::string file(json.parse_string(value_scratch));
            check_shard_name(file, index, file_at);
            // One shard per file however it is spelled ("a", "./a", ".//a"): each spelling was loaded and held.
            const std::filesystem::path normal = std::filesystem::path(file).lexically_normal();
            const auto [shard, added] = shard_numbers.emplace(normal.generic_string(), layout.files.size());
            if (added) layout.files.push_back(index.parent_path() / normal);
            if (const auto [it, fresh] = seen.emplace(name, shard->second); !fresh) {
              throw FormatError("tensor \"" + name + "\" is listed twice in weight_map; expected one shard per name",
                                {.file = index, .member = name, .offset = at});
            }
            layout.weight_map.emplace_back(std::move(name), shard->second);
            if (json.consume(',')) continue;
            json.expect('}', "',' or '}'");
            break;
          }
        }
      } else if (key == "metadata" && json.peek() == '{') {
        json.expect('{', "an object");
        if (!json.consume('}')) {
          while (true) {
            const std::string member(json.parse_string(scratch));
            json.expect(':', "':'");
            const std::size_t at = json.position();
            if (member == "total_size" && json.peek() != '"') {
              const JsonScalar number = json.scan_scalar();
              const std::string_view digits = text.substr(number.start, number.end - number.start);
              std::uint64_t total = 0;
              bool ok = number.kind == JsonScalar::Kind::integer && !digits.starts_with('-') && digits.size() <= 19;
              for (const char c : digits) total = total * 10 + static_cast<std::uint64_t>(c - '0');
              if (!ok) json.fail_at("metadata.total_size as a whole number of bytes", at);
              layout.total_size = total;
            } else {
              json.skip_value(1);
            }
            if (json.consume(',')) continue;
            json.expect('}', "',' or '}'");
            break;
          }
        }
      } else {
        json.skip_value(1);
      }
      if (json.consume(',')) continue;
      json.expect('}', "',' or '}'");
      break;
    }
  }
  json.finish();
  if (!has_map) {
    throw FormatError("the index has no \"weight_map\"; expected {\"weight_map\": {tensor name: shard file}}",
                      {.file = index, .offset = 0});
  }
}

/// Whether a file's first bytes look like JSON text (an object), which is how an index file is told.
inline bool looks_like_json_object(std::span<const std::byte> head) noexcept {
  std::size_t i = head.size() >= 3 && head[0] == std::byte{0xEF} && head[1] == std::byte{0xBB} ? 3 : 0;
  while (i < head.size() && (head[i] == std::byte{' '} || head[i] == std::byte{'\n'} || head[i] == std::byte{'\r'} ||
                             head[i] == std::byte{'\t'})) {
    ++i;
  }
  return i < head.size() && head[i] == std::byte{'{'};
}

/// The first bytes of an open file (up to format_sniff_bytes).
inline std::vector<std::byte> file_head(const FileHandle& file) {
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), format_sniff_bytes)));
  file.read_exact(0, head);
  return head;
}

/// Opens the shard `relative` below the directory `root` (descriptor `root_fd`), never leaving it: a
/// symbolic link out of it is a FormatError naming the index.
inline FileHandle open_shard(int root_fd, const std::filesystem::path& root, const std::string& relative, bool writable,
                             const std::filesystem::path& index) {
  const std::filesystem::path path = root / relative;
  std::error_code ec;
  const std::filesystem::path canonical_root = std::filesystem::canonical(root.empty() ? "." : root, ec);
  FileHandle file = open_beneath(root_fd, relative, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK,
                                 ec ? std::string() : canonical_root.native());
  if (!file.valid()) {
    const int error = errno;
    if (error == EXDEV) {
      throw FormatError("shard \"" + relative +
                            "\" leads out of the index's directory (a symbolic link); expected a "
                            "file below " +
                            (ec ? root.string() : canonical_root.string()),
                        {.file = index, .member = relative});
    }
    throw IoError("cannot open the shard", error, {.file = path});
  }
  struct stat info {};
  if (::fstat(file.fd(), &info) != 0) throw IoError("cannot stat", errno, {.file = path});
  if (!S_ISREG(info.st_mode)) throw ArgumentError("is not a regular file; expected a shard file", {.file = path});
  if (::fcntl(file.fd(), F_SETFL, ::fcntl(file.fd(), F_GETFL) & ~O_NONBLOCK) != 0) {
    throw IoError("cannot clear O_NONBLOCK", errno, {.file = path});
  }
  const int named = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);  // the same open file, under its path for messages
  if (named < 0) throw IoError("cannot duplicate the descriptor", errno, {.file = path});
  return FileHandle::adopt(named, path);
}

/// Loads one file already open, by its format; `format` unknown gets load_torch()'s refusal.
inline Value load_one_file(const FileHandle& file, const std::filesystem::path& path, FileFormat format,
                           const LoadOptions& options) {
  if (format == FileFormat::safetensors) return load_safetensors_file(file, path, options);
  if (format == FileFormat::gguf) return load_gguf_file(file, path, options);
  return load_torch_file(file, path, options);
}

/// A tensordict tree as a Value, the tree's device the one map_location sends "cpu" to (none for a callable).
inline Value load_tree(const std::filesystem::path& path, const LoadOptions& options) {
  LoadOptions tree_options = options;
  tree_options.mmap = options.mmap.value_or(MapMode::copy_on_write);
  tree_options.map_location = MapLocation();
  if (options.map_location.function() == nullptr) {
    const Device device = Device::parse(options.map_location.target_tag("cpu"));
    if (!device.is_cpu()) tree_options.map_location = device;
  }
  return to_value(load_memmap(path, tree_options), {.file = path});
}

/// Hands the disagreements a sharded load found to `out` when set, else throws them: the one, or one FormatError
/// naming the index that lists each.
inline void report_mismatches(const std::vector<FormatError>& found, const std::filesystem::path& index,
                              std::vector<FormatError>* out) {
  if (found.empty()) return;
  if (out != nullptr) {
    out->insert(out->end(), found.begin(), found.end());
    return;
  }
  if (found.size() == 1) throw found.front();
  std::string reason = "the index and its shards disagree on " + std::to_string(found.size()) +
                       " tensors; expected every listed tensor in its shard and no other:";
  constexpr std::string_view lead = "tensorfile: ";
  for (std::size_t i = 0; i < found.size(); ++i) {
    std::string_view each = found[i].what();
    if (each.starts_with(lead)) each.remove_prefix(lead.size());
    reason += " (" + std::to_string(i + 1) + ") ";
    reason += each;
  }
  throw FormatError(reason, {.file = index});
}

/// Reads every shard (each opened once, at most options.threads at a time) with `load_file(const
/// FileHandle&, const std::filesystem::path&, FileFormat) -> Value` and merges them in index order.
template <class LoadFile>
Value load_shards(const StateDictLayout& layout, const LoadOptions& options, LoadFile& load_file) {
  const std::filesystem::path root = layout.index.parent_path();
  const FileHandle root_dir =
      FileHandle::try_open_at(AT_FDCWD, root.empty() ? "." : root.c_str(), O_RDONLY | O_DIRECTORY);
  if (!root_dir.valid()) throw IoError("cannot open the directory", errno, {.file = root.empty() ? "." : root});
  const std::size_t count = layout.files.size();
  std::vector<bool> wanted(count, !options.select);  // holds a selected tensor: read; else header or nothing
  for (const auto& [name, shard] : layout.weight_map) {
    if (!wanted[shard] && options.select(name)) wanted[shard] = true;
  }
  std::vector<Value> loaded(count);
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t k = next++; k < count; k = next++) {
      try {
        // Nothing of it kept: never opened (but a split GGUF model's first part, whose header holds the metadata).
        if (!wanted[k] && options.select_drops && !(layout.format == FileFormat::gguf && k == 0)) continue;
        const std::string relative =
            root.empty() ? layout.files[k].string() : layout.files[k].lexically_relative(root).string();
        const FileHandle file =
            open_shard(root_dir.fd(), root, relative, options.mmap == MapMode::shared, layout.index);
        const FileFormat format = detect_format(file_head(file));
        if (layout.format == FileFormat::gguf ? format != FileFormat::gguf
                                              : format != FileFormat::safetensors && format != FileFormat::torch_zip &&
                                                    format != FileFormat::torch_legacy) {
          throw FormatError(layout.format == FileFormat::gguf ? "not a GGUF file; expected a part of the split model"
                                                              : "not a safetensors or torch file; expected a shard",
                            {.file = layout.files[k], .offset = 0});
        }
        if (wanted[k]) {
          loaded[k] = load_file(file, layout.files[k], format);
        } else if (format == FileFormat::safetensors || format == FileFormat::gguf) {  // the header's meta tensors
          LoadOptions header_only = options;
          header_only.map_location = "meta";
          loaded[k] = format == FileFormat::gguf ? load_gguf_file(file, layout.files[k], header_only)
                                                 : load_safetensors_file(file, layout.files[k], header_only);
        }
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  const std::size_t threads_at_once = options.threads != 0 ? options.threads : default_read_threads();
  const std::size_t helpers = std::min(threads_at_once, count) - (count == 0 ? 0 : 1);
  std::vector<std::thread> threads;
  threads.reserve(helpers);
  for (std::size_t i = 0; i < helpers; ++i) threads.emplace_back(work);
  work();
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }

  struct Listing {
    std::size_t shard;
    bool reported;  // found in another shard: not reported again as missing from its own
  };
  std::unordered_map<std::string_view, Listing, KeyedStringHash> listed;  // name -> shard
  listed.reserve(layout.weight_map.size());
  for (const auto& [name, shard] : layout.weight_map) listed.emplace(name, Listing{shard, false});
  std::vector<FormatError> mismatches;
  std::vector<const Dict*> dicts(count);
  for (std::size_t k = 0; k < count; ++k) {
    const Value& shard = loaded[k];
    if (!wanted[k] && shard.is_none()) continue;  // not opened, or a torch shard left out
    if (!shard.is_dict()) {
      throw FormatError(
          "the shard holds a " + std::string(Value::kind_name(shard.kind())) + "; expected a dict of name -> tensor",
          {.file = layout.files[k]});
    }
    dicts[k] = &shard.as_dict();
    for (const auto& [key, value] : *dicts[k]) {
      if (!key.is_string() || !value.is_tensor()) {
        throw FormatError("the shard holds an entry that is not str -> Tensor; expected a dict of name -> tensor",
                          {.file = layout.files[k], .member = key.is_string() ? key.as_string() : std::string()});
      }
      const auto it = listed.find(key.as_string());
      if (it == listed.end()) {
        if (options.sharded.allow_unlisted) continue;
        mismatches.emplace_back("the shard holds tensor \"" + key.as_string() +
                                    "\", which the index does not list; expected only the index's names (or "
                                    ".sharded.allow_unlisted = true)",
                                ErrorLocation{.file = layout.files[k], .member = key.as_string()});
      } else if (it->second.shard != k) {
        mismatches.emplace_back("tensor \"" + key.as_string() + "\" is in two shards: the index lists it in " +
                                    layout.files[it->second.shard].filename().string() + ", and it is also in this one",
                                ErrorLocation{.file = layout.files[k], .member = key.as_string()});
        it->second.reported = true;
      }
    }
  }
  Dict merged;
  merged.ordered = true;
  for (const auto& [name, shard] : layout.weight_map) {
    if (dicts[shard] == nullptr) continue;  // a shard with nothing selected, not read
    const Value* tensor = dicts[shard]->find(std::string_view(name));
    if (tensor == nullptr && options.select_drops && !options.select(name)) continue;  // dropped by its loader
    if (tensor == nullptr) {
      if (!listed.find(std::string_view(name))->second.reported) {
        mismatches.emplace_back("tensor \"" + name + "\" is listed in the index but missing from its shard",
                                ErrorLocation{.file = layout.files[shard], .member = name});
      }
      continue;
    }
    merged.set(name, *tensor);
  }
  report_mismatches(mismatches, layout.index, options.sharded.mismatches);
  if (layout.format == FileFormat::gguf) merged.set_attributes(gguf_split_attributes(loaded));
  return Value(std::move(merged));
}

/// The header of the GGUF file open as `file` (named `path`), parsed with `limits`.
[[nodiscard]] inline GgufHeader gguf_file_header(const FileHandle& file, const std::filesystem::path& path,
                                                 const LoadOptions::Gguf& limits) {
  return parse_gguf_header([&](std::uint64_t offset, std::span<std::byte> out) { file.read_exact(offset, out); },
                           file.size(), path, limits);
}

/// A GGUF file (open as `file`) that is one part of a llama.cpp split model makes `layout` that model: the first part
/// its index, every part a shard (found by the name, each opened and its header checked: split.no and split.count
/// against its name, the tensor count, no name in two parts). A file without split keys, or with split.count 1, stays
/// a single file, and so does one whose header does not parse (its loader, or verify(), then says why). Throws
/// FormatError naming the part at fault (a missing part too).
inline void resolve_gguf_split(const FileHandle& file, const std::filesystem::path& path,
                               const LoadOptions::Gguf& limits, StateDictLayout& layout) {
  std::optional<GgufHeader> given;
  try {
    given = gguf_file_header(file, path, limits);
  } catch (const Error&) {
    return;  // a damaged file stays a single file: its loader (or verify()) reports what is wrong with it
  }
  const GgufSplit split = gguf_split_of(*given, path);
  if (!split.is_split()) return;
  std::vector<std::filesystem::path> parts = gguf_split_parts(path, split);
  GgufSplitNames names(parts);
  GgufSplit first;
  std::vector<std::pair<std::string, std::size_t>> weight_map;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const FileHandle part = FileHandle::try_open_at(AT_FDCWD, parts[k].c_str(), O_RDONLY);
    if (!part.valid()) {
      const int error = errno;
      if (error == ENOENT) {
        throw FormatError("part " + std::to_string(k + 1) + " of the split model's " + std::to_string(parts.size()) +
                              " is missing; expected the file (named after " + path.filename().string() + ")",
                          {.file = parts[k]});
      }
      throw IoError("cannot open the part of the split model", error, {.file = parts[k]});
    }
    const GgufHeader header = gguf_file_header(part, parts[k], limits);
    const GgufSplit keys = gguf_split_of(header, parts[k]);
    check_gguf_split_part(keys, static_cast<std::uint32_t>(k), parts);
    if (k == 0) first = keys;
    for (const GgufTensorInfo& info : header.tensors) {
      names.add(k, info.name);
      weight_map.emplace_back(info.name, k);
    }
  }
  names.finish(first);
  layout.index = parts.front();
  layout.files = std::move(parts);
  layout.weight_map = std::move(weight_map);
}

/// What resolve_layout read, held for layout_changed: the file chosen stays open, so that its inode cannot be
/// reused by another file before the check.
struct LayoutSource {
  bool directory = false;        // the path is a directory: the check makes its choice of file again
  std::filesystem::path chosen;  // the index or single file read; empty: none
  FileHandle handle;             // `chosen`, open; invalid when opening it failed
  struct stat info {};           // its fstat
};

/// The first of state_dict_file_names that `directory` holds as a regular file; empty when none.
inline std::filesystem::path choose_state_dict_file(const std::filesystem::path& directory) {
  std::error_code ec;
  for (const std::string_view name : state_dict_file_names) {
    if (std::filesystem::is_regular_file(directory / name, ec)) return directory / name;
  }
  return {};
}

/// Whether `path` leads elsewhere than when `source` was read: the directory chooses another file, or the file
/// chosen was replaced (another inode, or the same one changed: size, modification or change time).
inline bool layout_changed(const std::filesystem::path& path, const LayoutSource& source) {
  const std::filesystem::path now = source.directory ? choose_state_dict_file(path) : path;
  if (now != source.chosen) return true;
  if (now.empty() || !source.handle.valid()) return false;  // the same choice, which failed the same way
  struct stat info {};
  const struct stat& then = source.info;
  return ::stat(now.c_str(), &info) != 0 || info.st_dev != then.st_dev || info.st_ino != then.st_ino ||
         info.st_size != then.st_size || info.st_mtim.tv_sec != then.st_mtim.tv_sec ||
         info.st_mtim.tv_nsec != then.st_mtim.tv_nsec || info.st_ctim.tv_sec != then.st_ctim.tv_sec ||
         info.st_ctim.tv_nsec != then.st_ctim.tv_nsec;
}

/// resolve_state_dict(), keeping in `source` what it read for layout_changed.
inline StateDictLayout resolve_layout(const std::filesystem::path& path, std::uint64_t max_index_bytes,
                                      LayoutSource& source, const LoadOptions::Gguf& gguf = {}) {
  StateDictLayout layout;
  std::error_code ec;
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path, ec)) {
    source.directory = true;
    // The model files first: a model directory may hold a meta.json of its own (tensorfile read such a folder as a
    // tensordict tree, whose meta.json it was not); a tensordict tree holds none of those names.
    file = choose_state_dict_file(path);
    if (file.empty() && std::filesystem::exists(path / "meta.json", ec)) {
      layout.format = FileFormat::tensordict;
      layout.files.push_back(path);
      return layout;
    }
    if (file.empty()) {
      throw FormatError(
          "the directory holds no meta.json, model.safetensors(.index.json) or pytorch_model.bin(.index.json); "
          "expected a tensordict tree or a Hugging Face model directory",
          {.file = path});
    }
  }
  source.chosen = file;
  source.handle = FileHandle::open(file, OpenMode::read);
  if (::fstat(source.handle.fd(), &source.info) != 0) throw IoError("cannot stat", errno, {.file = file});
  const std::vector<std::byte> head = file_head(source.handle);
  layout.format = detect_format(head);
  if (layout.format == FileFormat::unknown && looks_like_json_object(head)) {
    const std::uint64_t size = source.handle.size();
    if (size > max_index_bytes) {
      throw LimitError(
          "the index takes " + std::to_string(size) + " bytes; expected at most " + std::to_string(max_index_bytes),
          {.file = file});
    }
    std::string text(static_cast<std::size_t>(size), '\0');
    source.handle.read_exact(0, std::as_writable_bytes(std::span(text)));
    layout.index = file;
    parse_state_dict_index(text, file, layout);
    if (!layout.files.empty()) layout.format = detect_format(layout.files.front());
    return layout;
  }
  layout.files.push_back(file);
  if (layout.format == FileFormat::gguf) resolve_gguf_split(source.handle, file, gguf, layout);
  return layout;
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(state_dict)
namespace tensorfile {

TENSORFILE_ENTRY StateDictLayout resolve_state_dict(const std::filesystem::path& path, std::uint64_t max_index_bytes) {
  detail::LayoutSource source;
  return detail::resolve_layout(path, max_index_bytes, source);
}

namespace detail {

/// A layout without an index: its one file (or tree) loaded.
inline Value load_unsharded(const StateDictLayout& layout, const LoadOptions& options,
                            const LoadWeightsFile& load_file) {
  if (layout.format == FileFormat::tensordict) return load_tree(layout.files.front(), options);
  if (layout.format == FileFormat::npz) {
    return load_npz(layout.files.front(), options);
  }
  const bool shared = options.mmap == MapMode::shared;
  const FileHandle file = FileHandle::open(layout.files.front(), shared ? OpenMode::read_write : OpenMode::read);
  return load_file(file, layout.files.front(), layout.format);
}

TENSORFILE_ENTRY Value load_state_dict_with(const std::filesystem::path& path, const LoadOptions& options,
                                            const LoadWeightsFile& load_file) {
  constexpr int max_attempts = 100;  // loads started again because a save replaced the index meanwhile
  detail::refuse_into_buffers(options, "load_state_dict()", path);
  detail::refuse_slice_rule(options, "load_state_dict()", path);
  std::vector<FormatError>* const mismatches = options.sharded.mismatches;
  const std::size_t reported_before = mismatches != nullptr ? mismatches->size() : 0;
  for (int attempt = 1;; ++attempt) {
    const bool last_attempt = attempt == max_attempts;
    LayoutSource source;
    try {
      const StateDictLayout layout = resolve_layout(path, options.limits.max_index_bytes, source, options.gguf);
      if (!layout.sharded()) return load_unsharded(layout, options, load_file);  // one file, opened once
      Value merged = load_shards(layout, options, load_file);
      if (last_attempt || !layout_changed(path, source)) return merged;
    } catch (const Error&) {
      if (last_attempt || !layout_changed(path, source)) throw;
    }
    if (mismatches != nullptr) {
      mismatches->erase(mismatches->begin() + static_cast<std::ptrdiff_t>(reported_before), mismatches->end());
    }
  }
}

}  // namespace detail

TENSORFILE_ENTRY Value load_state_dict(const std::filesystem::path& path, const LoadOptions& options) {
  return detail::load_state_dict_with(
      path, options, [&](const detail::FileHandle& file, const std::filesystem::path& name, FileFormat format) {
        return detail::load_one_file(file, name, format, options);
      });
}

TENSORFILE_ENTRY std::vector<std::filesystem::path> leftover_save_temporaries(const std::filesystem::path& directory) {
  const detail::FileHandle dir =
      detail::FileHandle::try_open_at(AT_FDCWD, directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (!dir.valid()) throw IoError("cannot open the directory", errno, {.file = directory});
  std::vector<detail::DirectoryEntry> entries;
  if (const int error = detail::read_directory(dir.fd(), entries); error != 0) {
    throw IoError("cannot read the directory", error, {.file = directory});
  }
  std::vector<std::string> names;
  for (detail::DirectoryEntry& entry : entries) {
    if (!entry.is_directory && !detail::temporary_target(entry.name).empty()) names.push_back(std::move(entry.name));
  }
  std::sort(names.begin(), names.end());
  std::vector<std::filesystem::path> paths;
  paths.reserve(names.size());
  for (const std::string& name : names) paths.push_back(directory / name);
  return paths;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(state_dict)
