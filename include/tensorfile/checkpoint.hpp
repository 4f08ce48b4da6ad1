// SPDX-License-Identifier: MIT
/// @file
/// The front door: open() / load() / save() for every format tensorfile reads and writes, over any byte source
/// (formats/source.hpp); the per-format functions are the long form. Above the formats, as state_dict.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/shape.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/select.hpp"
#include "tensorfile/formats/slice.hpp"
#include "tensorfile/formats/source.hpp"

namespace tensorfile {

/// Where a tensor's bytes lie, for the formats that keep them in one place: the file (a shard's for a sharded
/// checkpoint, a leaf's data file in a tensordict tree on disk; the source's name for memory, a stream or a reader,
/// folder/name for a file of a FolderReader), the
/// zip member holding them (torch zip records, .npz members; empty otherwise) and the offset of the tensor's first
/// byte in the file. The bytes are the tensor's C-order elements, `nbytes` of them.
struct TensorLocation {
  std::filesystem::path file{};  ///< the file the bytes are in
  std::string member{};          ///< the zip member ("archive/data/0", "w.npy"); empty for other formats
  std::uint64_t offset = 0;      ///< the tensor's first byte, counted from the start of `file`
};

/// One tensor of an opened checkpoint, as its index describes it.
struct CheckpointEntry {
  std::string path{};                        ///< as named_tensors() spells it ("layers.0.weight", "optim/state/0/m")
  DType dtype = DType::UInt8;                ///< element type
  Shape shape{};                             ///< extents
  std::uint64_t nbytes = 0;                  ///< bytes of its elements
  std::optional<TensorLocation> location{};  ///< where its bytes lie in one place: see TensorLocation; else nullopt
  /// GGUF: the tensor's ggml type. For a block (quantized) type, `shape` counts elements while `dtype` is uint8 and
  /// `nbytes` the raw blocks' bytes: the tensor loads as uint8 of GgufTensorInfo::storage_shape() (the last extent
  /// the bytes of a row), dequantize() makes it float32, a buffer of another dtype or shape is an ArgumentError, and
  /// a slice of the last dimension must start and end on blocks (formats/gguf/load.hpp says why).
  std::optional<GgmlType> ggml_type{};
};

namespace detail {
struct CheckpointState;  // defined below, in the definitions block
}  // namespace detail

/// A checkpoint opened by open(): its index read (headers, the zip directory, the pickle with storages as
/// stand-ins, meta.json), no tensor data. Copies are cheap and share the one opened state (the file handle, the
/// mapping with `mmap`). Every member is const and may be called from several threads at once, reading the same
/// or different entries: reads are pread calls or views of the one mapping, and loads are independent (a
/// RangeReader source must allow concurrent reads, as RangeReader says). Borrows the Source's memory, reader or
/// folder: the caller keeps them alive as long as the handle (and memory, with `mmap`, as long as the tensors viewing
/// it); a stream is read whole by open() and not used after. Heap tensors are the caller's own bytes; views of a buffer
/// of the handle's (`mmap` over a stream or a reader read whole) are read-only and keep it alive. A file that shrinks
/// after open() is a FormatError at the next read (a tensor already viewing a mapped file still faults if its bytes
/// go); a file replaced by a rename keeps being read where pread reads it, and a tensor the format's loader
/// gives unlike its entry (the path opened again) is a FormatError.
class Checkpoint {
 public:
  /// Made by open(); not for direct use.
  TENSORFILE_ENTRY explicit Checkpoint(std::shared_ptr<const detail::CheckpointState> state);

  /// The format found from the content (a sharded checkpoint's: its shards'; tensordict for a tree).
  [[nodiscard]] TENSORFILE_ENTRY FileFormat format() const noexcept;
  /// Whether a Hugging Face *.index.json lists the tensors' shards, or they are in a llama.cpp split GGUF model's
  /// parts (the first part then the index, name()).
  [[nodiscard]] TENSORFILE_ENTRY bool sharded() const noexcept;
  /// The source's name, as messages give it (for a model folder: the file or index chosen in it).
  [[nodiscard]] TENSORFILE_ENTRY const std::string& name() const& noexcept;
  /// The options the handle reads with (those given to open()).
  [[nodiscard]] TENSORFILE_ENTRY const LoadOptions& options() const& noexcept;
  /// Every tensor in the order the format lists them (a sharded checkpoint: the index's weight_map order).
  [[nodiscard]] TENSORFILE_ENTRY const std::vector<CheckpointEntry>& entries() const& noexcept;
  /// The entry at `path`; null when there is none. Points into the handle's state: valid while a copy of the handle
  /// lives (as entries()'s references).
  [[nodiscard]] TENSORFILE_ENTRY const CheckpointEntry* find(std::string_view path) const;
  /// The loaded tree with every tensor a meta tensor (dtype and shape, no bytes), and every non-tensor value as the
  /// format's loader gives it: what load_all() returns, without the data.
  [[nodiscard]] TENSORFILE_ENTRY const Value& values() const& noexcept;
  /// The format's metadata: safetensors' `__metadata__` (a dict of str), an index's "metadata" object; None when the
  /// format or the file has none.
  [[nodiscard]] TENSORFILE_ENTRY const Value& metadata() const& noexcept;
  /// On a temporary handle (`open(p).metadata()`, `for (auto& e : open(p).entries())`), the five accessors above
  /// return copies, which outlive it: a reference into a handle that is gone would dangle.
  [[nodiscard]] TENSORFILE_ENTRY std::string name() &&;
  /// options() of a temporary handle: a copy.
  [[nodiscard]] TENSORFILE_ENTRY LoadOptions options() &&;
  /// entries() of a temporary handle: a copy.
  [[nodiscard]] TENSORFILE_ENTRY std::vector<CheckpointEntry> entries() &&;
  /// values() of a temporary handle: a copy sharing the tree's containers.
  [[nodiscard]] TENSORFILE_ENTRY Value values() &&;
  /// metadata() of a temporary handle: a copy sharing the tree's containers.
  [[nodiscard]] TENSORFILE_ENTRY Value metadata() &&;

  /// The tensor at `path`, on the heap, as a view of the handle's one mapping (`mmap`), or placed by map_location
  /// (a device, meta); the part of it the options' `slice` rule asks for, if any (as tensor(path, slice)). Where its
  /// entry has a location and the bytes are raw little-endian C-order elements, just that range is read (one read of
  /// the source, or a view of the mapping); a tensor sharing a torch storage then gets its own bytes. Otherwise the
  /// format's loader reads it with a select of that path. A path that entries() does not hold is an ArgumentError
  /// naming the source; a range past the source's end a FormatError naming the source, the path and the offset; the
  /// loader's errors otherwise.
  [[nodiscard]] TENSORFILE_ENTRY Tensor tensor(std::string_view path) const;
  /// The part `slice` of the tensor at `path` (what narrow(slice.dim, slice.begin, slice.end - slice.begin) keeps of
  /// the file's tensor; the options' `slice` rule is not asked). Where tensor(path) would read a range, only the
  /// slice's bytes are read: one range along dimension 0, else one run per row of the dimensions before `slice.dim`
  /// (a local file's runs less than a page apart read with their gaps, 256 KiB a call; a ranged reader's within a
  /// fifth of a run); with `mmap` it is a view of the mapping. Otherwise the tensor is read as tensor(path) reads it,
  /// and the slice is a view of it where it maps, a copy where it is on the heap. A slice outside the shape is an
  /// ArgumentError naming the path.
  [[nodiscard]] TENSORFILE_ENTRY Tensor tensor(std::string_view path, const TensorSlice& slice) const;
  /// Reads the tensor at `path` into `buffer` (as LoadOptions::into): a contiguous writable tensor of the entry's
  /// dtype and shape (of its slice, where the options' `slice` rule gives one). A host buffer is read into straight
  /// from the source where tensor() would read a range; otherwise the tensor is loaded and copied in. An unknown
  /// path or a mismatched buffer is an ArgumentError.
  TENSORFILE_ENTRY void read_into(std::string_view path, const Tensor& buffer) const;
  /// read_into() of the part `slice` (see tensor(path, slice)): `buffer` has the slice's shape.
  TENSORFILE_ENTRY void read_into(std::string_view path, const Tensor& buffer, const TensorSlice& slice) const;
  /// The format's loader with the handle's options and `select` (and the handle's `select_drops`): a Value shaped as
  /// the per-format function gives it. With a `slice` rule, each kept tensor the rule slices is read as tensor(path,
  /// slice) reads it and put in its place in the tree (a tensor inside a list, a tuple or an object cannot be
  /// sliced: an ArgumentError naming it).
  [[nodiscard]] TENSORFILE_ENTRY Value load(const TensorSelect& select) const;
  /// Everything, with the handle's options: what the format's loader gives. For both: an `into` path that entries()
  /// does not hold is an ArgumentError naming the source.
  [[nodiscard]] TENSORFILE_ENTRY Value load_all() const;

 private:
  std::shared_ptr<const detail::CheckpointState> state_;
};

/// Opens the checkpoint `source` names, in any format tensorfile reads, told from the content and never the name
/// (detect_format's order, as torch.load: a zip, then a legacy pickle; a path through resolve_state_dict: a
/// directory's model files or its meta.json, an index). Reads only the index: the safetensors or .npy header, the
/// zip directory, a torch pickle with storages as stand-ins (a meta load), meta.json, an index and each shard's own
/// index. `options` are those of every later read (map_location, mmap, threads, the format's extras; `select` and
/// `into` apply to load_all() and load()).
///
/// Sources: a path reads with pread (or maps once with `mmap`); memory and a stream are read in place (a stream is
/// first read to its end into one heap buffer); a RangeReader is read by ranges for safetensors, .npy and GGUF (8
/// bytes, the header, then each tensor's range as it is asked for) and torch zip files (the end records, directory,
/// local headers and pickle, then each record as it is asked for; load() of every tensor reads one whole, into the
/// one buffer its tensors share), and whole into one heap buffer for legacy torch files and .npz archives (parsed
/// then as memory; a reader whose mapped() holds the bytes is parsed in place).
/// A FolderReader is read file by file through the readers it opens, as a path is: a single file as a reader, an
/// index and its shards (each opened by open(); mismatches reported as for a path), a model folder, a tensordict
/// tree (a leaf a read-only view of its reader's mapped() bytes where it has them, else a heap copy, and `mmap` set
/// then an ArgumentError; no entry locations; the undeclared-subdirectory check only where the folder lists). An index
/// in memory, a stream or a reader is an ArgumentError (its shards cannot be found). Throws FormatError for a source
/// that is no format tensorfile reads, or whose index is corrupt or truncated, naming the source and the byte
/// offset; the format's loader's errors otherwise.
[[nodiscard]] TENSORFILE_ENTRY Checkpoint open(const Source& source, const LoadOptions& options = {});

/// Loads everything `source` holds, in any format (see open()): the Value the format's loader gives (torch: the
/// pickled tree; safetensors, .npz, shards: an ordered name -> Tensor dict; .npy: one Tensor; a tensordict tree:
/// to_value()'s dicts). Goes straight to the format's loader where the source allows.
[[nodiscard]] TENSORFILE_ENTRY Value load(const Source& source, const LoadOptions& options = {});

/// Saves `value` to `destination` in the format `options.format` names, else the one its name ends in: .pt, .pth,
/// .bin: torch zip (save_torch); .safetensors (save_safetensors); .npy (one tensor: `value` a tensor, or a tree
/// holding exactly one); .npz; .gguf (save_gguf); a name ending in `.safetensors.index.json`: a sharded safetensors
/// checkpoint in its directory, its prefix the name before that suffix (save_safetensors_sharded,
/// `sharded.max_shard_size`); a path without an extension or ending in '/': a tensordict tree (to_tensordict then
/// save_memmap). With `options.format` safetensors, a destination that is a directory or ends in '/' is sharded into
/// it. Another extension, and the torch-legacy format, are ArgumentErrors listing the choices; so is an
/// `options.format` that another known extension contradicts (`model.safetensors` with torch_zip), and a single-file
/// format to a directory or a name ending in '/'. The savers write beside the destination and rename into place: a
/// failed save leaves the old file or tree as it was. Throws what the format's saver throws.
TENSORFILE_ENTRY void save(const Value& value, const std::filesystem::path& destination,
                           const SaveOptions& options = {});

/// Saves named tensors (see the Value overload): as an ordered dict of name -> tensor.
TENSORFILE_ENTRY void save(const NamedTensors& tensors, const std::filesystem::path& destination,
                           const SaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(checkpoint)
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/posix/parallel_reads.hpp"
#include "tensorfile/detail/posix/populate.hpp"
#include "tensorfile/detail/text/json_reader.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile/formats/detail/slice_reads.hpp"
#include "tensorfile/formats/gguf/header.hpp"
#include "tensorfile/formats/gguf/load.hpp"
#include "tensorfile/formats/gguf/save.hpp"
#include "tensorfile/formats/map_location.hpp"
#include "tensorfile/formats/numpy/npy.hpp"
#include "tensorfile/formats/numpy/npz.hpp"
#include "tensorfile/formats/safetensors/detail/header_parser.hpp"
#include "tensorfile/formats/safetensors/header.hpp"
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/safetensors/save.hpp"
#include "tensorfile/formats/safetensors/save_sharded.hpp"
#include "tensorfile/formats/tensordict/detail/keys.hpp"
#include "tensorfile/formats/tensordict/detail/meta_schema.hpp"
#include "tensorfile/formats/tensordict/load_memmap.hpp"
#include "tensorfile/formats/tensordict/save_memmap.hpp"
#include "tensorfile/formats/tensordict/value_tree.hpp"
#include "tensorfile/formats/torch/load.hpp"
#include "tensorfile/formats/torch/save.hpp"
#include "tensorfile/state_dict.hpp"

namespace tensorfile {

namespace detail {

/// What open() read, shared by every copy of the handle and never changed after open().
struct CheckpointState {
  FileFormat format = FileFormat::unknown;
  bool sharded = false;
  std::string name;
  LoadOptions options;
  Source source{std::filesystem::path()};
  std::filesystem::path path;  // path sources: the file, tree or index read (a folder's choice)
  std::vector<CheckpointEntry> entries;
  std::unordered_map<std::string, std::size_t, KeyedStringHash> by_path;  // the first entry of each path
  std::vector<Tensor> meta;             // per entry: its meta tensor (strides, requires_grad)
  std::vector<std::string> saved_tags;  // per entry: the device tag saved with it ("cpu" but in torch files)
  std::vector<std::uint8_t> direct;     // per entry: its location's bytes are the tensor's as is
  Value values;
  Value metadata;
  std::unique_ptr<SourceBytes> bytes;   // the opened source; null for trees and sharded checkpoints
  std::span<const std::byte> memory{};  // the whole source in memory, when the loaders take it as a span
  bool owns_memory = false;             // `memory` is a heap buffer of the handle's (a stream, a reader read whole)
  Storage held;                         // a sized reader read whole: the heap buffer `memory` spans
  Storage views;                        // with `mmap`: the one mapping (or the borrowed bytes) tensors view
  std::optional<NpyHeader> npy;         // .npy: its header (byte order, layout), for reads by range
  GgufSplit gguf_split{};               // GGUF: its split.* keys (a part of a llama.cpp split model when is_split())
  FolderReader* folder = nullptr;       // a folder source's folder: a tree is read through it
  std::shared_ptr<FolderReader> owned_folder;                  // a URL's folder, kept alive as long as the handle
  std::string relative;                                        // a folder source's tree: its directory in the folder
  std::vector<std::shared_ptr<RangeReader>> readers;           // a folder source's files read, before what reads them
  std::vector<std::shared_ptr<const CheckpointState>> shards;  // sharded: each shard opened
  std::vector<std::size_t> shard_of;                           // sharded: per entry, its shard
};

/// Called while an Error of a loader given the source as memory is in flight: the same error, naming the source
/// (memory input has no file name of its own), or the error itself when it names a file.
[[noreturn]] inline void rethrow_naming_source(const std::string& name) {
  try {
    throw;
  } catch (const IoError&) {
    throw;
  } catch (const Error& error) {
    if (!error.path().empty()) throw;
    ErrorLocation where{.file = name, .member = error.member(), .offset = error.offset()};
    switch (error.code()) {
      case ErrorCode::format: throw FormatError(error.reason(), std::move(where));
      case ErrorCode::unsupported: throw UnsupportedError(error.reason(), std::move(where));
      case ErrorCode::dtype: throw DTypeError(error.reason(), std::move(where));
      case ErrorCode::invalid_argument: throw ArgumentError(error.reason(), std::move(where));
      case ErrorCode::limit: throw LimitError(error.reason(), std::move(where));
      case ErrorCode::device: throw DeviceError(error.reason(), std::move(where));
      case ErrorCode::io: break;
    }
    throw;
  }
}

/// A select of the one path `path`.
[[nodiscard]] inline TensorSelect select_one(std::string_view path) {
  return [wanted = std::string(path)](std::string_view p) { return p == wanted; };
}

/// Adds the tensors of the meta tree `tree` as entries (no locations yet).
inline void add_entries(CheckpointState& state, const Value& tree) {
  for (auto& [path, tensor] : named_tensors(tree)) {
    state.by_path.emplace(path, state.entries.size());
    state.entries.push_back({path, tensor.dtype(), tensor.sizes(), tensor.nbytes(), std::nullopt});
    state.meta.push_back(tensor);
    state.saved_tags.emplace_back("cpu");
    state.direct.push_back(0);
  }
}

/// The ArgumentError of a path the checkpoint does not hold.
[[noreturn]] inline void refuse_unknown_path(const CheckpointState& state, std::string_view path) {
  std::string what = "the checkpoint holds no tensor \"" + std::string(path) + "\"; expected one of entries()'s " +
                     std::to_string(state.entries.size()) + " paths";
  if (!state.entries.empty()) what += " (the first: \"" + state.entries.front().path + "\")";
  throw ArgumentError(what, {.file = state.name});
}

/// The options a format's loader gets for a source that is not a path: a heap buffer of the handle's (a stream's, a
/// reader's read whole) is not the caller's, so views of it (which would not keep it alive) become copies.
[[nodiscard]] inline LoadOptions span_options(const CheckpointState& state, LoadOptions options) {
  if (state.owns_memory) options.mmap.reset();
  return options;
}

/// A .npy loaded with `options`, its one tensor (path "") kept, made meta or dropped as `select` says.
[[nodiscard]] inline Value load_npy_value(const CheckpointState& state, LoadOptions options) {
  if (options.select) {
    const bool kept = options.select("");
    const bool drops = std::exchange(options.select_drops, false);
    options.select = {};
    if (!kept && drops) return Value();
    if (!kept) options.map_location = "meta";
  }
  if (state.bytes == nullptr || state.memory.empty()) return Value(load_npy(state.path, options));
  return Value(load_npy(state.memory, span_options(state, std::move(options))));
}

inline Tensor read_direct(const CheckpointState& state, std::size_t i, const Storage* fetched = nullptr);
[[nodiscard]] inline bool reads_directly(const CheckpointState& state, std::size_t i);
[[nodiscard]] inline std::size_t entry_index(const CheckpointState& state, std::string_view path);
inline Storage range_storage(const CheckpointState& state, const CheckpointEntry& entry, std::size_t bytes);
inline void read_into_buffer(const CheckpointState& state, std::string_view path, const Tensor& buffer);

/// The source's reads by range, for a loader that reads a file it cannot map by ranges (a torch zip over a reader).
[[nodiscard]] inline std::function<void(std::uint64_t, std::span<std::byte>)> ranged_reads(
    const CheckpointState& state) {
  const SourceBytes* bytes = state.bytes.get();
  return [bytes](std::uint64_t offset, std::span<std::byte> out) { bytes->read_exact(offset, out); };
}

/// safetensors or .npy over a RangeReader: the tree of the meta load, each kept tensor read by its range.
[[nodiscard]] inline Value load_by_ranges(const CheckpointState& state, const LoadOptions& options) {
  const auto kept = [&](const std::string& path) {
    return options.into.contains(path) || !options.select || options.select(path);
  };
  // Over a RangeReader (remote storage), kept tensors whose bytes lie back to back are fetched by one read per run
  // (which a remote reader splits into concurrent parts) into one heap arena they share, rather than a request each.
  std::vector<Storage> fetched(state.entries.size());
  if (state.bytes != nullptr && state.bytes->reader() != nullptr && !state.views.defined() &&
      !state.options.map_location.all_meta() && state.format == FileFormat::safetensors) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < state.entries.size(); ++i) {
      const CheckpointEntry& entry = state.entries[i];
      if (kept(entry.path) && !options.into.contains(entry.path) && reads_directly(state, i) && entry.nbytes != 0) {
        order.push_back(i);
      }
    }
    const auto offset_of = [&](std::size_t i) { return state.entries[i].location->offset; };
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return offset_of(a) < offset_of(b); });
    constexpr std::uint64_t run_cap = std::uint64_t{512} << 20;  // one read's arena at the most
    static constexpr std::size_t populate_ahead_bytes = std::size_t{8} << 20;
    for (std::size_t first = 0; first < order.size();) {
      std::size_t last = first + 1;
      std::uint64_t end = offset_of(order[first]) + state.entries[order[first]].nbytes;
      while (last < order.size() && offset_of(order[last]) == end &&
             end + state.entries[order[last]].nbytes - offset_of(order[first]) <= run_cap) {
        end += state.entries[order[last]].nbytes;
        ++last;
      }
      if (last - first > 1) {
        const std::uint64_t begin = offset_of(order[first]);
        const auto bytes = static_cast<std::size_t>(end - begin);
        Storage arena = heap_storage(bytes, false, false, state.options.huge_pages);
        std::byte* data = arena.mutable_data();
        // A large arena is faulted in ahead of the reader by another thread: the reader's copies would otherwise
        // stop at each fresh page (the 1 GiB load over loopback HTTP: 0.87-1.04 s, 0.63-0.70 s with this).
        std::jthread populating;
        if (bytes >= populate_ahead_bytes) {
          populating = std::jthread([data, bytes](const std::stop_token& stop) {
            for (std::size_t at = 0; at < bytes && !stop.stop_requested(); at += populate_ahead_bytes) {
              populate_for_write(data + at, std::min(populate_ahead_bytes, bytes - at));
            }
          });
        }
        state.bytes->read_exact(begin, {data, bytes});
        for (std::size_t k = first; k < last; ++k) {
          fetched[order[k]] = arena.slice(static_cast<std::size_t>(offset_of(order[k]) - begin),
                                          static_cast<std::size_t>(state.entries[order[k]].nbytes));
        }
      }
      first = last;
    }
  }
  const auto tensor_of = [&](std::size_t i) -> Tensor {
    const std::string& path = state.entries[i].path;
    if (const auto buffer = options.into.find(path); buffer != options.into.end()) {
      read_into_buffer(state, path, buffer->second);
      return buffer->second;
    }
    return read_direct(state, i, fetched[i].defined() ? &fetched[i] : nullptr);
  };
  if (state.format == FileFormat::npy) {
    if (!kept("")) return options.select_drops ? Value() : Value(state.meta.front());
    if (options.into.contains("")) return Value(tensor_of(0));
    const NpyHeader& header = *state.npy;  // byte-swapped and laid out as load_npy does
    return Value(place_npy(
        header, options, state.views.defined(),
        [&] { return range_storage(state, state.entries.front(), static_cast<std::size_t>(header.data_bytes)); },
        state.name, {}));
  }
  Dict dict;
  dict.ordered = true;
  for (std::size_t i = 0; i < state.entries.size(); ++i) {
    const std::string& path = state.entries[i].path;
    if (kept(path)) {
      dict.set(path, tensor_of(i));
    } else if (!options.select_drops) {
      dict.set(path, state.meta[i]);
    }
  }
  if (state.values.is_dict()) dict.set_attributes(state.values.as_dict().attributes());
  return Value(std::move(dict));
}

[[nodiscard]] inline Value load_opened_shards(const CheckpointState& state, const LoadOptions& options,
                                              bool single_load);
[[nodiscard]] inline Value load_with(const CheckpointState& state, const LoadOptions& options,
                                     bool single_load = false);

/// The format's loader over the handle's source, with `options`. `single_load`: the handle is load()'s alone, so a
/// torch file's buffer read whole from a reader becomes the storage its tensors share (as a stream's), not copied.
[[nodiscard]] inline Value load_format(const CheckpointState& state, const LoadOptions& options,
                                       bool single_load = false) {
  if (state.sharded && state.folder != nullptr) return load_opened_shards(state, options, single_load);
  if (state.sharded) return load_state_dict(state.path, options);
  const bool by_path = state.source.kind() == Source::Kind::path;
  switch (state.format) {
    case FileFormat::torch_zip:
    case FileFormat::torch_legacy:
      if (by_path) return load_torch(state.path, options);
      if (single_load && state.held.defined() && !options.mmap) return load_torch_owned(state.held, options);
      if (state.memory.empty()) return load_torch_ranged(ranged_reads(state), state.bytes->size(), state.name, options);
      return load_torch(state.memory, span_options(state, options));
    case FileFormat::safetensors:
      if (by_path) return load_safetensors(state.path, options);
      if (state.memory.empty() && state.bytes->reader() != nullptr) return load_by_ranges(state, options);
      return load_safetensors(state.memory, span_options(state, options));
    case FileFormat::npy:
      if (!by_path && state.memory.empty() && state.bytes->reader() != nullptr) return load_by_ranges(state, options);
      return load_npy_value(state, options);
    case FileFormat::npz:
      return by_path ? load_npz(state.path, options) : load_npz(state.memory, span_options(state, options));
    case FileFormat::gguf:
      if (by_path) return load_gguf(state.path, options);
      if (state.memory.empty() && state.bytes->reader() != nullptr) return load_by_ranges(state, options);
      return load_gguf(state.memory, span_options(state, options));
    case FileFormat::tensordict: {
      std::vector<LeftOut> left_out;
      if (state.folder != nullptr) {
        return to_value(td::load_memmap_folder(*state.folder, state.relative, options),
                        {.file = state.name, .left_out = &left_out});
      }
      return to_value(load_memmap(state.path, options), {.file = state.path, .left_out = &left_out});
    }
    case FileFormat::unknown: break;
  }
  throw FormatError("not a format tensorfile reads", {.file = state.name, .offset = 0});
}

/// Calls `work(k)` for every k in [0, count), from up to `threads` threads (0: default_read_threads()) taking the
/// next k as each finishes; then rethrows the error of the lowest k that threw, if any.
inline void for_each_on_threads(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& work) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  const auto run = [&] {
    for (std::size_t k = next++; k < count; k = next++) {
      try {
        work(k);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  const std::size_t helpers_wanted = std::min(threads != 0 ? threads : default_read_threads(), count);
  std::vector<std::thread> helpers;
  for (std::size_t i = 1; i < helpers_wanted; ++i) helpers.emplace_back(run);
  run();
  for (std::thread& helper : helpers) helper.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

/// A sharded checkpoint of a folder, as load_state_dict() loads one of a path: each shard holding a kept tensor
/// loaded by its handle (up to `threads` at once), the tensors merged in the index's order; the unkept tensors of
/// the other shards are meta stand-ins (unless `select_drops`) for safetensors shards and left out for torch ones.
/// The index and the shards were checked against each other by open().
[[nodiscard]] inline Value load_opened_shards(const CheckpointState& state, const LoadOptions& options,
                                              bool single_load) {
  const std::size_t count = state.shards.size();
  std::vector<std::uint8_t> wanted(count, options.select ? 0 : 1);
  for (std::size_t i = 0; i < state.entries.size(); ++i) {
    if (options.select && options.select(state.entries[i].path)) wanted[state.shard_of[i]] = 1;
  }
  std::vector<Value> loaded(count);
  for_each_on_threads(count, options.threads, [&](std::size_t k) {
    if (wanted[k] != 0) loaded[k] = load_with(*state.shards[k], options, single_load);
  });
  Dict merged;
  merged.ordered = true;
  for (std::size_t i = 0; i < state.entries.size(); ++i) {
    const std::string& path = state.entries[i].path;
    const Value& shard = loaded[state.shard_of[i]];
    const Value* tensor = shard.is_dict() ? shard.as_dict().find(std::string_view(path)) : nullptr;
    if (tensor != nullptr) {
      merged.set(path, *tensor);
    } else if (!options.select_drops && (state.shards[state.shard_of[i]]->format == FileFormat::safetensors ||
                                         state.shards[state.shard_of[i]]->format == FileFormat::gguf)) {
      merged.set(path, state.meta[i]);
    }
  }
  if (state.format == FileFormat::gguf) {  // a split model: its parts' attributes, from the headers open() read
    std::vector<Value> parts;
    parts.reserve(count);
    for (const auto& shard : state.shards) parts.push_back(shard->values);
    merged.set_attributes(gguf_split_attributes(parts));
  }
  return Value(std::move(merged));
}

/// Puts `buffer` in `tree` at `path` (a key of a flat dict, keys joined by '/' in a tensordict tree, "" the tensor
/// of a .npy), where the load left the entry's tensor or its meta stand-in.
inline void put_at(Value& tree, std::string_view path, const Tensor& buffer, const std::string& source) {
  if (path.empty() && (tree.is_tensor() || tree.is_none())) {
    tree = Value(buffer);
    return;
  }
  if (tree.is_dict()) {
    Dict& dict = tree.as_dict();
    if (dict.contains(path)) return dict.set(Value(path), Value(buffer));
    const std::size_t slash = path.find('/');
    if (slash != std::string_view::npos && dict.contains(path.substr(0, slash))) {
      Value inner = dict.get(path.substr(0, slash));  // a handle: it shares the nested dict
      return put_at(inner, path.substr(slash + 1), buffer, source);
    }
  }
  throw FormatError("the load holds nothing at \"" + std::string(path) + "\", which open() listed", {.file = source});
}

/// Whether the format's loader fills LoadOptions::into itself: torch files read their records straight into the
/// buffers (host ones by the heap load, device ones by the cuda:: ring); the handle fills them for the others.
[[nodiscard]] inline bool loader_fills_into(const CheckpointState& state) {
  return !state.sharded && (state.format == FileFormat::torch_zip || state.format == FileFormat::torch_legacy);
}

/// load_format() with `into` filled by the handle: each buffer read as read_into() reads it (one range where the
/// entry has a location), the tree holding the buffer at its path; the load itself leaves those tensors as meta
/// stand-ins unless `select_drops` would drop them.
[[nodiscard]] inline Value load_filling_into(const CheckpointState& state, const LoadOptions& options) {
  LoadOptions rest = options;
  rest.into.clear();
  const auto& into = options.into;
  const TensorSelect& select = options.select;
  if (options.select_drops) {
    if (select) rest.select = [&](std::string_view path) { return into.contains(path) || select(path); };
  } else {
    rest.select = [&](std::string_view path) { return !into.contains(path) && (!select || select(path)); };
  }
  Value result = load_format(state, rest);
  for (const auto& [path, buffer] : into) {
    if (!buffer.device().is_cpu()) {
      throw ArgumentError(
          "the buffer for \"" + path + "\" is on " + buffer.device().str() +
              "; expected a host buffer (device buffers are filled for torch files, by cuda::load_torch)",
          {.file = state.name});
    }
    read_into_buffer(state, path, buffer);
    put_at(result, path, buffer, state.name);
  }
  return result;
}

[[nodiscard]] inline Value load_slicing(const CheckpointState& state, const LoadOptions& options);

/// load_format(), its errors naming the source.
[[nodiscard]] inline Value load_with(const CheckpointState& state, const LoadOptions& options, bool single_load) {
  for (const auto& [path, buffer] : options.into) (void)entry_index(state, path);
  if (options.slice) return load_slicing(state, options);
  try {
    if (!options.into.empty() && !loader_fills_into(state)) return load_filling_into(state, options);
    return load_format(state, options, single_load);
  } catch (const Error&) {
    rethrow_naming_source(state.name);
  }
}

/// The tensor of entry `i` read from its location: a view of the mapping, or one read of the range (or the bytes
/// `fetched` already holds), then placed as map_location says.
inline Tensor read_direct(const CheckpointState& state, std::size_t i, const Storage* fetched) {
  const CheckpointEntry& entry = state.entries[i];
  const auto bytes = static_cast<std::size_t>(entry.nbytes);
  const auto read = [&] { return fetched != nullptr ? *fetched : range_storage(state, entry, bytes); };
  Storage storage = place_storage(state.options.map_location, bytes, state.saved_tags[i], read, [&] {
    return ErrorLocation{.file = state.name, .member = entry.path, .offset = entry.location->offset};
  });
  const Tensor& meta = state.meta[i];  // its sizes: the entry's shape, or a GGUF block tensor's raw bytes'
  return Tensor(std::move(storage), entry.dtype, meta.sizes(), meta.strides(), 0, meta.requires_grad());
}

/// The `bytes` at `entry`'s location: a view of the mapping, else one new heap storage read from the source. A
/// mapped file that has shrunk since open() is a FormatError here rather than a SIGBUS at the first touch.
inline Storage range_storage(const CheckpointState& state, const CheckpointEntry& entry, std::size_t bytes) {
  const std::uint64_t offset = entry.location->offset;
  if (!state.views.defined()) {
    Storage out = heap_storage(bytes, false, false, state.options.huge_pages);
    state.bytes->read_exact(offset, {out.mutable_data(), bytes});
    return out;
  }
  const FileHandle& file = state.bytes->file();
  const std::uint64_t size =
      file.valid() ? std::min<std::uint64_t>(file.size(), state.views.size_bytes()) : state.views.size_bytes();
  if (offset > size || bytes > size - offset) {
    throw FormatError("the source is truncated; expected " + std::to_string(bytes) + " bytes, got " +
                          std::to_string(offset > size ? 0 : size - offset),
                      {.file = state.name, .member = entry.path, .offset = offset});
  }
  return state.views.slice(static_cast<std::size_t>(offset), bytes);
}

/// Whether entry `i` is read by its range: a location whose bytes are the tensor's, a C-order tensor.
[[nodiscard]] inline bool reads_directly(const CheckpointState& state, std::size_t i) {
  return state.direct[i] != 0 && state.entries[i].location && state.meta[i].is_contiguous();
}

/// The index of entry `path`, or the ArgumentError naming the source.
[[nodiscard]] inline std::size_t entry_index(const CheckpointState& state, std::string_view path) {
  const auto it = state.by_path.find(std::string(path));
  if (it == state.by_path.end()) refuse_unknown_path(state, path);
  return it->second;
}

/// safetensors: the header read by ranges (8 bytes, then the header), the meta dict, and each tensor's location.
inline void open_safetensors(CheckpointState& state) {
  const SourceBytes& source = *state.bytes;
  const std::uint64_t max = state.options.safetensors.max_header_bytes;
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(source.size(), 8)));
  source.read_exact(0, head);
  const std::uint64_t n = safetensors_header_length(head, source.size(), state.name, max);
  // Grown as its bytes arrive: a reader whose size() overstates its bytes costs no memory it does not give.
  for (std::size_t have = head.size(); have < 8 + n;) {
    const auto next =
        static_cast<std::size_t>(std::min<std::uint64_t>(8 + n, std::max<std::size_t>(have * 2, 1 << 16)));
    head.resize(next);
    source.read_exact(have, std::span<std::byte>(head).subspan(have));
    have = next;
  }
  const SafetensorsHeader header = parse_safetensors_header(head, source.size(), state.name, max);
  state.values = build_safetensors_dict(
      header, [](std::string_view) { return false; }, false, [](std::size_t) { return Storage(); });
  add_entries(state, state.values);
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const SafetensorsTensorInfo& info = header.tensors[i];
    const std::size_t at = state.by_path.at(info.name);
    state.entries[at].location = TensorLocation{state.name, {}, header.data_offset + info.begin};
    state.direct[at] = 1;
  }
  if (header.metadata) {
    Dict metadata;
    for (const auto& [key, value] : *header.metadata) metadata.set(key, value);
    state.metadata = Value(std::move(metadata));
  }
}

/// .npy: the header read by ranges, the meta tensor, and its location.
inline void open_npy(CheckpointState& state) {
  const SourceBytes& source = *state.bytes;
  const NpyHeader header =
      read_npy_header([&](std::uint64_t offset, std::span<std::byte> out) { source.read_exact(offset, out); },
                      source.size(), state.options.npy.max_header_bytes, state.name, {});
  state.values = Value(npy_tensor(header, meta_storage(static_cast<std::size_t>(header.data_bytes))));
  add_entries(state, state.values);
  state.entries.front().location = TensorLocation{state.name, {}, header.data_offset};
  state.direct.front() = header.swap_bytes ? 0 : 1;
  state.npy = header;
}

/// GGUF: the header read by ranges, the meta dict, and each tensor's location, ggml type and shape in elements.
inline void open_gguf(CheckpointState& state) {
  const SourceBytes& source = *state.bytes;
  const GgufHeader header =
      parse_gguf_header([&](std::uint64_t offset, std::span<std::byte> out) { source.read_exact(offset, out); },
                        source.size(), state.name, state.options.gguf);
  state.values = gguf_meta_dict(header);
  add_entries(state, state.values);
  for (const GgufTensorInfo& info : header.tensors) {
    const std::size_t at = state.by_path.at(info.name);
    CheckpointEntry& entry = state.entries[at];
    entry.shape = info.shape();
    entry.ggml_type = info.type;
    entry.location = TensorLocation{state.name, {}, header.data_offset + info.offset};
    state.direct[at] = 1;
  }
  state.metadata = header.metadata;
  state.gguf_split = gguf_split_of(header, state.name);
}

/// A torch file: the meta load, each storage record a meta stand-in whose owner finds its record again.
inline void open_torch(CheckpointState& state) {
  struct Record {
    std::string member;
    std::string location;
    std::uint64_t offset = 0;
    bool raw = false;
  };
  std::unordered_map<const void*, Record> records;
  LoadOptions meta = state.options;
  meta.map_location = "meta";
  meta.select = {};
  meta.slice = {};
  meta.into.clear();
  meta.torch.storage_source = [&](const StorageRecord& record) -> std::optional<Storage> {
    Storage stand_in = meta_storage(static_cast<std::size_t>(record.size));
    records.emplace(stand_in.owner(),
                    Record{std::string(record.member), std::string(record.location), record.file_offset, record.raw});
    return stand_in;
  };
  if (state.source.kind() == Source::Kind::path) {
    state.values = load_torch(state.path, meta);
  } else if (state.memory.empty()) {
    state.values = load_torch_ranged(ranged_reads(state), state.bytes->size(), state.name, meta);
  } else {
    state.values = load_torch(state.memory, meta);
  }
  add_entries(state, state.values);
  for (std::size_t i = 0; i < state.entries.size(); ++i) {
    const Tensor& tensor = state.meta[i];
    const auto record = records.find(tensor.storage().owner());
    if (record == records.end()) continue;  // a legacy file's storage
    state.saved_tags[i] = record->second.location;
    if (!record->second.raw || !tensor.is_contiguous()) continue;  // deflated: its bytes are not in one place
    state.entries[i].location = TensorLocation{
        state.name, record->second.member,
        record->second.offset + static_cast<std::uint64_t>(tensor.storage_offset()) * tensor.element_size()};
    state.direct[i] = 1;
  }
}

/// .npz: the meta load, then each stored member's .npy header for its location.
inline void open_npz(CheckpointState& state) {
  LoadOptions meta = state.options;
  meta.map_location = "meta";
  meta.select = {};
  meta.slice = {};
  meta.into.clear();
  state.values = state.source.kind() == Source::Kind::path ? load_npz(state.path, meta) : load_npz(state.memory, meta);
  add_entries(state, state.values);
  const SourceBytes& source = *state.bytes;
  const ZipReader zip = ZipReader::open_file(
      source.size(), state.name,
      [&](std::uint64_t offset, std::span<std::byte> out) { source.read_exact(offset, out); },
      npz_zip_limits(state.options));
  for (const ZipEntry& entry : zip.entries()) {
    if (entry.method != 0 || !entry.name.ends_with(".npy")) continue;
    const auto found = state.by_path.find(std::string(entry.name.substr(0, entry.name.size() - 4)));
    if (found == state.by_path.end()) continue;
    const std::string member(entry.name);
    const NpyHeader header = read_npy_header(
        [&](std::uint64_t offset, std::span<std::byte> out) { zip.read_stored_range(entry, offset, out); }, entry.size,
        state.options.npy.max_header_bytes, state.name, member);
    state.entries[found->second].location = TensorLocation{state.name, member, entry.data_offset + header.data_offset};
    state.direct[found->second] = header.swap_bytes ? 0 : 1;
  }
}

/// A tensordict tree: the meta load; a leaf's location is its data file where one lies at its key path (none in a
/// folder, where looking would cost a request per leaf).
inline void open_tree(CheckpointState& state) {
  LoadOptions meta = state.options;
  meta.map_location = "meta";
  meta.select = {};
  meta.slice = {};
  meta.into.clear();
  meta.tensordict.skipped = nullptr;  // filled by the loads, once each
  std::vector<LeftOut> left_out;
  if (state.folder != nullptr) {
    state.values = to_value(td::load_memmap_folder(*state.folder, state.relative, meta),
                            {.file = state.name, .left_out = &left_out});
    add_entries(state, state.values);
    return;
  }
  state.values = to_value(load_memmap(state.path, meta), {.file = state.path, .left_out = &left_out});
  add_entries(state, state.values);
  for (CheckpointEntry& entry : state.entries) {
    std::filesystem::path file = state.path;
    std::string_view rest = entry.path;
    while (true) {
      const std::size_t slash = rest.find('/');
      const std::string_view key = rest.substr(0, slash);
      if (slash == std::string_view::npos) {
        file /= td::encode_key(key) + ".memmap";
        break;
      }
      file /= td::encode_key(key);
      rest.remove_prefix(slash + 1);
    }
    std::error_code error;
    if (std::filesystem::is_regular_file(file, error) && std::filesystem::file_size(file, error) >= entry.nbytes &&
        !error) {
      entry.location = TensorLocation{file, {}, 0};
    }
  }
}

/// The "metadata" member of an index's text, as a Value (None when it has none); `index` names it in errors.
[[nodiscard]] inline Value index_metadata_of(const std::string& text, const std::filesystem::path& index) {
  JsonReader json(text, index);
  const Value document = td::parse_json_document(json);
  if (!document.is_dict()) return Value();
  const Value* metadata = document.as_dict().find(std::string_view("metadata"));
  return metadata != nullptr ? *metadata : Value();
}

/// The "metadata" member of the index at `index`, as a Value (None when it has none).
[[nodiscard]] inline Value index_metadata(const std::filesystem::path& index, std::uint64_t max_bytes) {
  const FileHandle file = FileHandle::open(index, OpenMode::read);
  const std::uint64_t size = file.size();
  if (size > max_bytes) {
    throw LimitError(
        "the index takes " + std::to_string(size) + " bytes; expected at most " + std::to_string(max_bytes),
        {.file = index});
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  file.read_exact(0, std::as_writable_bytes(std::span(text)));
  return index_metadata_of(text, index);
}

/// A sharded checkpoint whose shards `state.shards` are open (in `layout.files`' order; the layout's names are
/// those messages give): the entries in the index's order with their shards' locations.
inline void index_shards(CheckpointState& state, const StateDictLayout& layout) {
  Dict values;
  values.ordered = true;
  std::vector<FormatError> mismatches;
  std::vector<std::unordered_map<std::string, bool, KeyedStringHash>> listed(layout.files.size());
  for (const auto& [name, shard] : layout.weight_map) listed[shard].emplace(name, true);
  for (const auto& [name, shard] : layout.weight_map) {
    const CheckpointState& opened = *state.shards[shard];
    const auto found = opened.by_path.find(name);
    const CheckpointEntry* entry = found == opened.by_path.end() ? nullptr : &opened.entries[found->second];
    if (entry == nullptr) {
      mismatches.emplace_back("tensor \"" + name + "\" is listed in the index but missing from its shard",
                              ErrorLocation{.file = layout.files[shard], .member = name});
      continue;
    }
    state.by_path.emplace(name, state.entries.size());
    state.entries.push_back(*entry);
    state.shard_of.push_back(shard);
    const Tensor& meta = opened.meta[found->second];  // a GGUF block tensor's: its raw bytes' shape, not the entry's
    state.meta.push_back(meta);
    state.saved_tags.emplace_back("cpu");
    state.direct.push_back(0);
    values.set(name, meta);
  }
  if (!state.options.sharded.allow_unlisted) {
    for (std::size_t k = 0; k < state.shards.size(); ++k) {
      for (const CheckpointEntry& entry : state.shards[k]->entries) {
        if (listed[k].contains(entry.path)) continue;
        mismatches.emplace_back("the shard holds tensor \"" + entry.path +
                                    "\", which the index does not list; expected only the index's names (or "
                                    ".sharded.allow_unlisted = true)",
                                ErrorLocation{.file = layout.files[k], .member = entry.path});
      }
    }
  }
  report_mismatches(mismatches, layout.index, state.options.sharded.mismatches);
  state.values = Value(std::move(values));
}

/// Opens the format-specific index of a state whose source bytes (when any) are open.
inline void open_index(CheckpointState& state) {
  switch (state.format) {
    case FileFormat::safetensors: open_safetensors(state); break;
    case FileFormat::npy: open_npy(state); break;
    case FileFormat::torch_zip:
    case FileFormat::torch_legacy: open_torch(state); break;
    case FileFormat::npz: open_npz(state); break;
    case FileFormat::gguf: open_gguf(state); break;
    case FileFormat::tensordict: open_tree(state); break;
    case FileFormat::unknown:
      throw FormatError("not a format tensorfile reads; expected a torch, safetensors, .npy, .npz or GGUF file",
                        {.file = state.name, .offset = 0});
  }
}

/// open_index(), its errors naming the source.
inline void open_format(CheckpointState& state) {
  try {
    open_index(state);
  } catch (const Error&) {
    rethrow_naming_source(state.name);
  }
}

/// Read-only views of a heap buffer of the handle's, which they keep alive: tensors cut from it are not written
/// through to the next tensor() of the same path.
[[nodiscard]] inline Storage read_only_views(const Storage& held) {
  return Storage(
      BorrowedBackend(std::span<const std::byte>(held.data(), held.size_bytes()), std::make_shared<Storage>(held)));
}

/// With `mmap`: the one mapping (or borrowed bytes) that tensors read by range view.
inline void map_views(CheckpointState& state) {
  if (!state.options.mmap || state.bytes == nullptr) return;
  const SourceBytes& source = *state.bytes;
  if (source.file().valid()) {
    if (source.size() != 0) {
      state.views = Storage(MmapBackend(source.file(), static_cast<std::size_t>(source.size()), *state.options.mmap));
    }
  } else if (source.held().defined()) {
    state.views = read_only_views(source.held());
  } else if (state.held.defined()) {
    state.views = read_only_views(state.held);
  } else if (!state.memory.empty() || source.reader() == nullptr) {
    state.views = Storage(BorrowedBackend(state.memory));
  } else if (const auto mapped = source.mapped()) {
    state.views = Storage(BorrowedBackend(*mapped));
  }
}

/// The first bytes of an opened source, for detect_format.
[[nodiscard]] inline std::vector<std::byte> source_head(const SourceBytes& source) {
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(source.size(), format_sniff_bytes)));
  source.read_exact(0, head);
  return head;
}

/// open() of a state whose source is set.
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_state(std::shared_ptr<CheckpointState> state) {
  open_format(*state);
  map_views(*state);
  return state;
}

/// open() of the one file (or tree) `path` of format `format`, as a layout without an index resolved it.
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_single(const std::filesystem::path& path, FileFormat format,
                                                                  const LoadOptions& options) {
  auto state = std::make_shared<CheckpointState>();
  state->options = options;
  state->format = format;
  state->path = path;
  state->name = state->path.string();
  state->source = Source(state->path);
  if (format != FileFormat::tensordict) {
    state->bytes = std::make_unique<SourceBytes>(state->source, options.mmap == MapMode::shared);
  }
  return open_state(std::move(state));
}

/// open() of a path.
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_path(const std::filesystem::path& path,
                                                                const LoadOptions& options) {
  LayoutSource read;
  const StateDictLayout layout = resolve_layout(path, options.limits.max_index_bytes, read, options.gguf);
  if (!layout.sharded()) return open_single(layout.files.empty() ? path : layout.files.front(), layout.format, options);
  auto state = std::make_shared<CheckpointState>();
  state->options = options;
  state->format = layout.format;
  state->sharded = true;
  state->path = layout.index;
  state->name = layout.index.string();
  state->source = Source(layout.index);
  if (layout.format == FileFormat::gguf) {  // a split model's parts, each one file; the first's metadata
    for (const std::filesystem::path& file : layout.files) {
      state->shards.push_back(open_single(file, FileFormat::gguf, options));
    }
    state->metadata = gguf_model_metadata(state->shards.front()->metadata);
  } else {
    for (const std::filesystem::path& file : layout.files) state->shards.push_back(open_path(file, options));
    state->metadata = index_metadata(layout.index, options.limits.max_index_bytes);
  }
  index_shards(*state, layout);
  return state;
}

/// open() of memory, a stream or a reader, named `name` in messages. `whole_load`: the handle serves one load() of
/// every tensor, so a torch zip file over a reader is read whole (one buffer its tensors share) rather than by ranges
/// (its directory, local headers and pickle at open(), each record when asked for).
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_bytes(const Source& source, const LoadOptions& options,
                                                                 bool whole_load = false) {
  auto state = std::make_shared<CheckpointState>();
  state->options = options;
  state->source = source;
  state->name = source.name();
  state->bytes = std::make_unique<SourceBytes>(source, false);
  const SourceBytes& bytes = *state->bytes;
  state->memory = bytes.memory();
  state->owns_memory = bytes.held().defined();
  const std::vector<std::byte> head = source_head(bytes);
  state->format = detect_format(head);
  if (state->format == FileFormat::unknown && looks_like_json_object(head)) {
    throw ArgumentError(
        "a sharded checkpoint's index needs a path or a folder (its shards are files beside it); expected a path "
        "or Source::folder()",
        {.file = state->name});
  }
  const bool ranged =
      state->format == FileFormat::safetensors || state->format == FileFormat::npy || state->format == FileFormat::gguf;
  if (bytes.reader() != nullptr) {
    const std::optional<std::span<const std::byte>> mapped = bytes.mapped();
    if (options.mmap && !mapped) {
      throw ArgumentError("the reader cannot be mapped (mapped() is nullopt); expected .mmap unset for it",
                          {.file = state->name});
    }
    const bool zip_by_ranges = state->format == FileFormat::torch_zip && !whole_load;
    if (!ranged && state->format != FileFormat::unknown) {  // zip and pickle formats: parsed as memory but torch zip
      if (mapped) {
        state->memory = *mapped;
      } else if (!zip_by_ranges) {
        state->held = bytes.whole(options.huge_pages);  // a load() may give its tensors slices of it
        state->memory = {state->held.data(), state->held.size_bytes()};
        state->owns_memory = true;
        state->bytes = std::make_unique<SourceBytes>(Source::memory(state->memory, state->name), false);
      }
    }
  }
  return open_state(std::move(state));
}

/// A file of a folder, under the name folder/relative: the folder's reader with that name.
class FolderFile final : public RangeReader {
 public:
  FolderFile(std::unique_ptr<RangeReader> reader, std::string name)
      : reader_(std::move(reader)), name_(std::move(name)) {}
  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override { return reader_->read(offset, out); }
  [[nodiscard]] std::optional<std::uint64_t> size() const override { return reader_->size(); }
  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] std::optional<std::span<const std::byte>> mapped() const override { return reader_->mapped(); }

 private:
  std::unique_ptr<RangeReader> reader_;
  std::string name_;
};

/// The file `relative` of `folder` named folder/relative; null when the folder has none.
[[nodiscard]] inline std::shared_ptr<RangeReader> open_folder_file(FolderReader& folder, const std::string& relative) {
  std::unique_ptr<RangeReader> reader = folder.open(relative);
  if (!reader) return nullptr;
  return std::make_shared<FolderFile>(std::move(reader), folder.name() + "/" + relative);
}

/// A part (`relative`, opened as `given`) of a llama.cpp split GGUF model in `folder`: the model, every part opened
/// from the folder beside it and checked as a path's parts are (state_dict.hpp's resolve_gguf_split).
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_folder_split(FolderReader& folder,
                                                                        const std::string& relative,
                                                                        std::shared_ptr<CheckpointState> given,
                                                                        const LoadOptions& options) {
  const std::vector<std::filesystem::path> shown = gguf_split_parts(given->name, given->gguf_split);
  const std::filesystem::path directory = std::filesystem::path(relative).parent_path();
  auto state = std::make_shared<CheckpointState>();
  state->options = options;
  state->format = FileFormat::gguf;
  state->sharded = true;
  state->folder = &folder;
  GgufSplitNames names(shown);
  StateDictLayout layout;
  for (std::size_t k = 0; k < shown.size(); ++k) {
    const std::string name = (directory / shown[k].filename()).generic_string();
    std::shared_ptr<CheckpointState> part;
    if (k == given->gguf_split.no) {
      part = given;
    } else {
      std::shared_ptr<RangeReader> reader = open_folder_file(folder, name);
      if (reader == nullptr) {
        throw FormatError("part " + std::to_string(k + 1) + " of the split model's " + std::to_string(shown.size()) +
                              " is missing; expected the file (named after " +
                              shown[given->gguf_split.no].filename().string() + ")",
                          {.file = shown[k]});
      }
      part = open_bytes(Source::reader(*reader), options);
      part->readers.push_back(std::move(reader));
    }
    if (part->format != FileFormat::gguf) {
      throw FormatError("not a GGUF file; expected a part of the split model", {.file = shown[k], .offset = 0});
    }
    check_gguf_split_part(part->gguf_split, static_cast<std::uint32_t>(k), shown);
    for (const CheckpointEntry& entry : part->entries) {
      names.add(k, entry.path);
      layout.weight_map.emplace_back(entry.path, k);
    }
    if (k == 0) state->source = Source::folder(folder, name);
    state->shards.push_back(std::move(part));
  }
  names.finish(state->shards.front()->gguf_split);
  state->name = shown.front().string();
  layout.index = shown.front();
  layout.files = shown;
  state->metadata = gguf_model_metadata(state->shards.front()->metadata);
  index_shards(*state, layout);
  return state;
}

/// open() of the file or directory `relative` of `folder`: a file is read by its reader (an index: its shards too,
/// from the same folder), a directory is taken as a model folder (the first of state_dict_file_names in it), else
/// the tensordict tree of its meta.json.
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_folder(FolderReader& folder, const std::string& relative,
                                                                  const LoadOptions& options, bool whole_load = false) {
  std::string file = relative;
  std::shared_ptr<RangeReader> reader = relative.empty() ? nullptr : open_folder_file(folder, relative);
  std::string directory = relative;
  while (directory.ends_with('/')) directory.pop_back();
  const std::string prefix = directory.empty() ? std::string() : directory + "/";
  for (std::size_t i = 0; reader == nullptr && i < std::size(state_dict_file_names); ++i) {
    file = prefix + std::string(state_dict_file_names[i]);
    reader = open_folder_file(folder, file);
  }
  const std::string shown = folder.name() + (relative.empty() ? "" : "/" + relative);
  if (reader == nullptr) {
    if (!folder.open(prefix + "meta.json")) {
      throw FormatError("the folder holds no " + std::string(relative.empty() ? "" : "such file, no ") +
                            "model file and no meta.json; expected a file, or a folder with one of "
                            "model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json, "
                            "pytorch_model.bin or a tensordict tree's meta.json",
                        {.file = shown});
    }
    auto state = std::make_shared<CheckpointState>();
    state->options = options;
    state->format = FileFormat::tensordict;
    state->folder = &folder;
    state->relative = directory;
    state->name = shown;
    state->source = Source::folder(folder, directory);
    return open_state(std::move(state));
  }
  std::vector<std::byte> head(format_sniff_bytes);  // without a size() the reader is not read whole for this
  std::size_t got = 0;
  while (got < head.size()) {
    const std::size_t n = reader->read(got, std::span(head).subspan(got));
    if (n == 0 || n > head.size() - got) break;  // the end, or a broken count open_bytes refuses
    got += n;
  }
  head.resize(got);
  if (!looks_like_json_object(head)) {
    std::shared_ptr<CheckpointState> state = open_bytes(Source::reader(*reader), options, whole_load);
    state->readers.push_back(std::move(reader));
    if (state->format == FileFormat::gguf && state->gguf_split.is_split()) {
      return open_folder_split(folder, file, std::move(state), options);
    }
    return state;
  }
  // An index: its weight_map's shards, named below the index's directory, opened from the folder.
  auto state = std::make_shared<CheckpointState>();
  state->options = options;
  state->sharded = true;
  state->folder = &folder;
  state->name = reader->name();
  state->source = Source::folder(folder, file);
  const std::string text = read_small_file(*reader, state->name, options.limits.max_index_bytes);
  StateDictLayout layout;
  layout.index = file;
  parse_state_dict_index(text, file, layout);
  for (std::filesystem::path& shard : layout.files) {
    const std::string name = shard.generic_string();
    std::shared_ptr<RangeReader> shard_reader = open_folder_file(folder, name);
    if (shard_reader == nullptr) {
      throw FormatError("the index lists shard \"" + name + "\", which the folder does not hold; expected the file",
                        {.file = state->name});
    }
    std::shared_ptr<CheckpointState> opened = open_bytes(Source::reader(*shard_reader), options, whole_load);
    opened->readers.push_back(std::move(shard_reader));
    if (opened->format != FileFormat::safetensors && opened->format != FileFormat::torch_zip &&
        opened->format != FileFormat::torch_legacy) {
      throw FormatError("not a safetensors or torch file; expected a shard", {.file = opened->name, .offset = 0});
    }
    shard = opened->name;
    state->shards.push_back(std::move(opened));
  }
  layout.index = state->name;
  state->format = state->shards.empty() ? FileFormat::safetensors : state->shards.front()->format;
  state->metadata = index_metadata_of(text, state->name);
  index_shards(*state, layout);
  return state;
}

/// open() of a URL through the opener <tensorfile/remote.hpp> registers; without one an ArgumentError.
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_url(const std::string& url, const LoadOptions& options,
                                                               bool whole_load = false) {
  const std::function<UrlFolder(const std::string&)>& opener = url_opener();
  if (!opener) {
    throw ArgumentError(
        "a URL needs the remote reader; expected #include <tensorfile/remote.hpp> and a link to "
        "tensorfile::remote",
        {.file = redacted_url(url)});
  }
  UrlFolder where = opener(url);
  std::shared_ptr<CheckpointState> state = open_folder(*where.folder, where.relative, options, whole_load);
  state->owned_folder = std::move(where.folder);
  return state;
}

/// The state open() makes of `source`: a path, a URL, a folder's file, memory, a stream or a reader (`whole_load`: as
/// open_bytes() says).
[[nodiscard]] inline std::shared_ptr<CheckpointState> open_source(const Source& source, const LoadOptions& options,
                                                                  bool whole_load = false) {
  switch (source.kind()) {
    case Source::Kind::path:
      if (is_url(source.name())) return open_url(source.name(), options, whole_load);
      return open_path(source.path(), options);
    case Source::Kind::folder: return open_folder(*source.folder(), source.relative(), options, whole_load);
    default: return open_bytes(source, options, whole_load);
  }
}

/// The tensor at `path`, whole (no slice rule asked).
inline Tensor whole_tensor(const CheckpointState& state, std::string_view path) {
  const std::size_t i = entry_index(state, path);
  if (state.sharded) return whole_tensor(*state.shards[state.shard_of[i]], path);
  if (reads_directly(state, i)) return read_direct(state, i);
  LoadOptions options = state.options;
  options.select = select_one(path);
  options.select_drops = true;
  options.slice = {};
  options.into.clear();
  const Value loaded = load_with(state, options);
  const CheckpointEntry& entry = state.entries[i];
  for (const auto& [name, tensor] : named_tensors(loaded)) {
    if (name == path && tensor.dtype() == entry.dtype && tensor.sizes() == state.meta[i].sizes()) return tensor;
  }
  throw FormatError("the source changed since open(): its loader no longer gives a " +
                        std::string(dtype_name(entry.dtype)) + " " + shape_string(entry.shape) + " tensor there",
                    {.file = state.name, .member = entry.path});
}

/// `slice` of entry `i`, its dimension made non-negative; one outside the entry's shape is an ArgumentError.
[[nodiscard]] inline TensorSlice checked_slice(const CheckpointState& state, std::size_t i, TensorSlice slice) {
  const Shape& shape = state.entries[i].shape;
  const auto rank = static_cast<std::int64_t>(shape.size());
  const std::int64_t dim = slice.dim < 0 ? slice.dim + rank : slice.dim;
  const std::int64_t extent = dim >= 0 && dim < rank ? shape[static_cast<std::size_t>(dim)] : 0;
  if (dim < 0 || dim >= rank || slice.begin < 0 || slice.begin > slice.end || slice.end > extent) {
    throw ArgumentError("the slice [" + std::to_string(slice.begin) + ", " + std::to_string(slice.end) +
                            ") of dimension " + std::to_string(slice.dim) + " does not fit \"" + state.entries[i].path +
                            "\", of shape " + shape_string(shape) +
                            "; expected a dimension it has and 0 <= begin <= end <= its extent",
                        {.file = state.name, .member = state.entries[i].path});
  }
  slice.dim = dim;
  return slice;
}

/// The shape `slice` (checked) leaves of `shape`.
[[nodiscard]] inline Shape sliced_shape(Shape shape, const TensorSlice& slice) {
  shape[static_cast<std::size_t>(slice.dim)] = slice.end - slice.begin;
  return shape;
}

/// Whether entry `i` is a GGUF block-typed (quantized) tensor: its loaded shape is its raw bytes', not `shape`.
[[nodiscard]] inline const GgmlTypeInfo* block_type_of(const CheckpointState& state, std::size_t i) {
  const std::optional<GgmlType>& type = state.entries[i].ggml_type;
  if (!type || !ggml_type_info(*type).is_quantized()) return nullptr;
  return &ggml_type_info(*type);
}

/// `slice` (checked, in the entry's shape) as a slice of the tensor entry `i` loads as: the same but for a GGUF
/// block tensor's last dimension, which is cut in bytes, and only on blocks (else an ArgumentError naming them).
[[nodiscard]] inline TensorSlice loaded_slice(const CheckpointState& state, std::size_t i, TensorSlice slice) {
  const GgmlTypeInfo* block = block_type_of(state, i);
  const CheckpointEntry& entry = state.entries[i];
  if (block == nullptr || static_cast<std::size_t>(slice.dim) + 1 != entry.shape.size()) return slice;
  const auto [begin, end] =
      ggml_block_byte_range(*block, slice.begin, slice.end, {.file = state.name, .member = entry.path});
  slice.begin = begin;
  slice.end = end;
  return slice;
}

/// Reads the bytes of `slice` (checked, of the loaded shape) of entry `i`, which reads directly, into `out` (the
/// slice's C-order elements): one range when the slice is whole rows of dimension 0 or more, else a run per row before
/// `slice.dim`, several runs and their gaps per read where run_reading_for() says so (a local file's gaps shorter than
/// a page).
inline void read_slice_bytes(const CheckpointState& state, std::size_t i, const TensorSlice& slice,
                             std::span<std::byte> out) {
  const CheckpointEntry& entry = state.entries[i];
  const RowRuns runs = row_runs(state.meta[i].sizes(), element_size(entry.dtype), static_cast<std::size_t>(slice.dim),
                                slice.begin, slice.end);
  if (runs.rows == 0) return;
  if (state.views.defined()) {
    const Storage view = range_storage(state, entry, static_cast<std::size_t>(entry.nbytes));
    return read_row_runs(
        runs, {},
        [&](std::uint64_t from, std::span<std::byte> into) {
          std::memcpy(into.data(), view.data() + from, into.size());
        },
        out);
  }
  const RunReading how = run_reading_for(runs, state.bytes->file().valid(), state.bytes->reader() != nullptr);
  read_row_runs(
      runs, how,
      [&](std::uint64_t from, std::span<std::byte> into) {
        state.bytes->read_exact(entry.location->offset + from, into);
      },
      out);
}

/// Checkpoint::tensor(path, slice).
inline Tensor read_sliced(const CheckpointState& state, std::string_view path, const TensorSlice& asked) {
  const std::size_t i = entry_index(state, path);
  const TensorSlice checked = checked_slice(state, i, asked);
  if (state.sharded) return read_sliced(*state.shards[state.shard_of[i]], path, checked);
  const CheckpointEntry& entry = state.entries[i];
  const TensorSlice slice = loaded_slice(state, i, checked);
  if (!reads_directly(state, i) || state.views.defined()) {  // a view of what maps, a copy of what does not
    const Tensor whole = whole_tensor(state, path);
    Tensor part = whole.narrow(slice.dim, slice.begin, slice.end - slice.begin);
    return whole.storage().kind() == StorageKind::heap ? part.contiguous() : part;
  }
  Shape shape = sliced_shape(state.meta[i].sizes(), slice);
  std::size_t bytes = element_size(entry.dtype);
  for (const std::int64_t extent : shape) bytes *= static_cast<std::size_t>(extent);
  Storage storage = place_storage(
      state.options.map_location, bytes, state.saved_tags[i],
      [&] {
        Storage out = heap_storage(bytes, false, false, state.options.huge_pages);
        read_slice_bytes(state, i, slice, {out.mutable_data(), bytes});
        return out;
      },
      [&] { return ErrorLocation{.file = state.name, .member = entry.path, .offset = entry.location->offset}; });
  Shape strides = contiguous_strides(shape);
  return Tensor(std::move(storage), entry.dtype, std::move(shape), std::move(strides), 0,
                state.meta[i].requires_grad());
}

/// The slice the options' rule gives entry `path`, if any.
[[nodiscard]] inline std::optional<TensorSlice> rule_slice(const CheckpointState& state, std::string_view path) {
  if (!state.options.slice) return std::nullopt;
  const CheckpointEntry& entry = state.entries[entry_index(state, path)];
  return state.options.slice(entry.path, entry.shape);
}

/// Checkpoint::tensor().
inline Tensor read_tensor(const CheckpointState& state, std::string_view path) {
  if (const std::optional<TensorSlice> slice = rule_slice(state, path)) return read_sliced(state, path, *slice);
  return whole_tensor(state, path);
}

/// The ArgumentError of a buffer for `path` that `why`.
[[noreturn]] inline void refuse_buffer(const CheckpointState& state, std::string_view path, const std::string& why) {
  throw ArgumentError("the buffer for \"" + std::string(path) + "\" " + why, {.file = state.name});
}

/// Checks that `buffer` can take a `dtype` tensor of `shape`: defined, of that dtype and shape, contiguous, writable.
inline void check_buffer(const CheckpointState& state, std::string_view path, const Tensor& buffer, DType dtype,
                         const Shape& shape) {
  if (!buffer.defined()) refuse_buffer(state, path, "is undefined; expected a tensor");
  if (buffer.dtype() != dtype || buffer.sizes() != shape) {
    refuse_buffer(state, path,
                  "is " + std::string(dtype_name(buffer.dtype())) + " " + shape_string(buffer.sizes()) + "; expected " +
                      std::string(dtype_name(dtype)) + " " + shape_string(shape));
  }
  if (!buffer.is_contiguous() || !buffer.is_writable()) refuse_buffer(state, path, "is not contiguous and writable");
}

/// check_buffer() for entry `i` as it loads (of `shape`): a GGUF block tensor takes only a uint8 buffer of its raw
/// bytes, and another one is refused as such.
inline void check_entry_buffer(const CheckpointState& state, std::size_t i, std::string_view path, const Tensor& buffer,
                               const Shape& shape) {
  const GgmlTypeInfo* block = block_type_of(state, i);
  if (block != nullptr && buffer.defined() && (buffer.dtype() != DType::UInt8 || buffer.sizes() != shape)) {
    refuse_buffer(state, path,
                  "is " + std::string(dtype_name(buffer.dtype())) + " " + shape_string(buffer.sizes()) +
                      ", but the tensor holds " + std::string(block->name) + " blocks, whose raw bytes load as uint8 " +
                      shape_string(shape) + "; expected a uint8 buffer of that shape (dequantize() gives float32)");
  }
  check_buffer(state, path, buffer, state.entries[i].dtype, shape);
}

/// Whether entry `i` goes to the host (map_location sends its saved tag there).
[[nodiscard]] inline bool goes_to_host(const CheckpointState& state, std::size_t i) {
  return state.options.map_location.function() == nullptr &&
         Device::parse(state.options.map_location.target_tag(state.saved_tags[i])).is_cpu();
}

/// Checkpoint::read_into(path, buffer, slice).
inline void read_sliced_into(const CheckpointState& state, std::string_view path, const Tensor& buffer,
                             const TensorSlice& asked) {
  const std::size_t i = entry_index(state, path);
  const TensorSlice slice = checked_slice(state, i, asked);
  if (state.sharded) return read_sliced_into(*state.shards[state.shard_of[i]], path, buffer, slice);
  const TensorSlice loaded = loaded_slice(state, i, slice);
  check_entry_buffer(state, i, path, buffer, sliced_shape(state.meta[i].sizes(), loaded));
  if (!buffer.device().is_cpu()) {
    refuse_buffer(state, path, "is on " + buffer.device().str() + "; expected a host buffer for a slice");
  }
  if (goes_to_host(state, i) && reads_directly(state, i)) {
    return read_slice_bytes(state, i, loaded, {buffer.mutable_raw_data(), buffer.nbytes()});
  }
  const Tensor part = read_sliced(state, path, slice);
  if (!part.device().is_cpu()) refuse_buffer(state, path, "is on the host; expected it on " + part.device().str());
  part.copy_into(std::span<std::byte>(buffer.mutable_raw_data(), buffer.nbytes()));
}

/// Checkpoint::read_into().
inline void read_into_buffer(const CheckpointState& state, std::string_view path, const Tensor& buffer) {
  if (const std::optional<TensorSlice> slice = rule_slice(state, path)) {
    return read_sliced_into(state, path, buffer, *slice);
  }
  const std::size_t i = entry_index(state, path);
  if (state.sharded) return read_into_buffer(*state.shards[state.shard_of[i]], path, buffer);
  const CheckpointEntry& entry = state.entries[i];
  check_entry_buffer(state, i, path, buffer, state.meta[i].sizes());
  if (buffer.device().is_cpu()) {
    if (goes_to_host(state, i) && reads_directly(state, i)) {
      const std::span<std::byte> out(buffer.mutable_raw_data(), static_cast<std::size_t>(entry.nbytes));
      if (state.views.defined()) {
        const Storage range = range_storage(state, entry, out.size());
        if (!out.empty()) std::memcpy(out.data(), range.data(), out.size());
      } else {
        state.bytes->read_exact(entry.location->offset, out);
      }
      return;
    }
    const Tensor loaded = whole_tensor(state, path);
    if (!loaded.device().is_cpu())
      refuse_buffer(state, path, "is on the host; expected it on " + loaded.device().str());
    loaded.copy_into(std::span<std::byte>(buffer.mutable_raw_data(), static_cast<std::size_t>(entry.nbytes)));
    return;
  }
  LoadOptions options = state.options;  // a device buffer: the loader's `into`
  options.select = select_one(path);
  options.select_drops = true;
  options.slice = {};
  options.into = {{std::string(path), buffer}};
  (void)load_with(state, options);
}

/// Leaves out of `tree`'s dicts the tensors whose path (below `path`) `keep` refuses.
inline void drop_unkept(Value& tree, const std::string& path, const TensorSelect& keep) {
  if (!tree.is_dict()) return;
  Dict& dict = tree.as_dict();
  std::vector<Value> gone;
  for (const auto& [key, value] : dict) {
    const std::string child = child_path(path, key_text(key));
    if (value.is_tensor() && !keep(child)) gone.push_back(key);
    if (value.is_dict()) {
      Value inner = value;  // a handle: it shares the nested dict
      drop_unkept(inner, child, keep);
    }
  }
  for (const Value& key : gone) dict.erase(key);
}

/// load_with() for options with a `slice` rule: the tensors it slices read as read_sliced() (or into their buffers)
/// and put where the rest of the load left their meta stand-ins.
[[nodiscard]] inline Value load_slicing(const CheckpointState& state, const LoadOptions& options) {
  const auto kept = [&](std::string_view path) {
    return options.into.contains(path) || !options.select || options.select(path);
  };
  std::vector<std::pair<std::size_t, TensorSlice>> sliced;
  std::unordered_map<std::string, bool, KeyedStringHash> is_sliced;
  for (std::size_t i = 0; i < state.entries.size(); ++i) {
    const CheckpointEntry& entry = state.entries[i];
    if (!kept(entry.path) || is_sliced.contains(entry.path)) continue;
    if (const std::optional<TensorSlice> slice = options.slice(entry.path, entry.shape)) {
      sliced.emplace_back(i, checked_slice(state, i, *slice));
      is_sliced.emplace(entry.path, true);
    }
  }
  LoadOptions rest = options;
  rest.slice = {};
  rest.select_drops = false;
  rest.select = [&](std::string_view path) { return !is_sliced.contains(std::string(path)) && kept(path); };
  for (const auto& [name, flag] : is_sliced) rest.into.erase(name);
  Value result = load_with(state, rest);
  if (state.sharded) {  // the index's order, with the stand-ins of the shards whose kept tensors are all sliced
    std::vector<std::uint8_t> holds_slice(state.shards.size(), 0);
    for (const auto& [i, slice] : sliced) holds_slice[state.shard_of[i]] = 1;
    Dict ordered;
    ordered.ordered = true;
    for (std::size_t i = 0; i < state.entries.size(); ++i) {
      const std::string& path = state.entries[i].path;
      const Value* tensor = result.as_dict().find(std::string_view(path));
      if (tensor != nullptr) {
        ordered.set(path, *tensor);
      } else if (is_sliced.contains(path) || holds_slice[state.shard_of[i]] != 0) {
        ordered.set(path, state.meta[i]);
      }
    }
    ordered.set_attributes(result.as_dict().attributes());  // a split GGUF model's metadata and ggml types
    result = Value(std::move(ordered));
  }
  std::vector<Tensor> parts(sliced.size());  // read by several threads, as the rest of the load was
  for_each_on_threads(sliced.size(), options.threads, [&](std::size_t k) {
    const auto& [i, slice] = sliced[k];
    const std::string& path = state.entries[i].path;
    if (const auto buffer = options.into.find(path); buffer != options.into.end()) {
      read_sliced_into(state, path, buffer->second, slice);
      parts[k] = buffer->second;
    } else {
      parts[k] = read_sliced(state, path, slice);
    }
  });
  for (std::size_t k = 0; k < sliced.size(); ++k) {
    const std::string& path = state.entries[sliced[k].first].path;
    const Tensor& part = parts[k];
    try {
      put_at(result, path, part, state.name);
    } catch (const FormatError&) {
      throw ArgumentError("cannot put the slice of \"" + path +
                              "\" in the loaded tree; expected sliced tensors in dicts, not in a list, tuple or object",
                          {.file = state.name, .member = path});
    }
  }
  if (options.select_drops) drop_unkept(result, "", kept);
  return result;
}

}  // namespace detail

TENSORFILE_ENTRY Checkpoint::Checkpoint(std::shared_ptr<const detail::CheckpointState> state)
    : state_(std::move(state)) {}
TENSORFILE_ENTRY FileFormat Checkpoint::format() const noexcept { return state_->format; }
TENSORFILE_ENTRY bool Checkpoint::sharded() const noexcept { return state_->sharded; }
TENSORFILE_ENTRY const std::string& Checkpoint::name() const& noexcept { return state_->name; }
TENSORFILE_ENTRY const LoadOptions& Checkpoint::options() const& noexcept { return state_->options; }
TENSORFILE_ENTRY const std::vector<CheckpointEntry>& Checkpoint::entries() const& noexcept { return state_->entries; }
TENSORFILE_ENTRY const Value& Checkpoint::values() const& noexcept { return state_->values; }
TENSORFILE_ENTRY const Value& Checkpoint::metadata() const& noexcept { return state_->metadata; }
TENSORFILE_ENTRY std::string Checkpoint::name() && { return state_->name; }
TENSORFILE_ENTRY LoadOptions Checkpoint::options() && { return state_->options; }
TENSORFILE_ENTRY std::vector<CheckpointEntry> Checkpoint::entries() && { return state_->entries; }
TENSORFILE_ENTRY Value Checkpoint::values() && { return state_->values; }
TENSORFILE_ENTRY Value Checkpoint::metadata() && { return state_->metadata; }

TENSORFILE_ENTRY const CheckpointEntry* Checkpoint::find(std::string_view path) const {
  const auto it = state_->by_path.find(std::string(path));
  return it == state_->by_path.end() ? nullptr : &state_->entries[it->second];
}

TENSORFILE_ENTRY Tensor Checkpoint::tensor(std::string_view path) const { return detail::read_tensor(*state_, path); }

TENSORFILE_ENTRY Tensor Checkpoint::tensor(std::string_view path, const TensorSlice& slice) const {
  return detail::read_sliced(*state_, path, slice);
}

TENSORFILE_ENTRY void Checkpoint::read_into(std::string_view path, const Tensor& buffer) const {
  detail::read_into_buffer(*state_, path, buffer);
}

TENSORFILE_ENTRY void Checkpoint::read_into(std::string_view path, const Tensor& buffer,
                                            const TensorSlice& slice) const {
  detail::read_sliced_into(*state_, path, buffer, slice);
}

TENSORFILE_ENTRY Value Checkpoint::load(const TensorSelect& select) const {
  LoadOptions options = state_->options;
  options.select = select;
  return detail::load_with(*state_, options);
}

TENSORFILE_ENTRY Value Checkpoint::load_all() const { return detail::load_with(*state_, state_->options); }

TENSORFILE_ENTRY Checkpoint open(const Source& source, const LoadOptions& options) {
  return Checkpoint(detail::open_source(source, options));
}

TENSORFILE_ENTRY Value load(const Source& source, const LoadOptions& options) {
  if (source.kind() == Source::Kind::path && !options.slice && !is_url(source.name())) {
    const std::filesystem::path& path = source.path();
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
      switch (detect_format(path)) {
        case FileFormat::torch_zip:
        case FileFormat::torch_legacy: return load_torch(path, options);
        case FileFormat::safetensors:
          if (options.into.empty()) return load_safetensors(path, options);
          break;  // the handle fills `into`, which that loader does not
        case FileFormat::npz:
          if (options.into.empty()) return load_npz(path, options);
          break;
        case FileFormat::gguf:  // through load_state_dict: a part of a split model loads the whole model
          if (options.into.empty()) return load_state_dict(path, options);
          break;
        default: break;  // .npy (select) and indexes: through open()
      }
    }
  }
  // The handle lives for this one load: what it read whole may become the tensors' storage. A load of some tensors
  // reads a torch zip file by ranges, the rest never read.
  const std::shared_ptr<detail::CheckpointState> state =
      detail::open_source(source, options, !options.select && !options.slice);
  return detail::load_with(*state, options, true);
}

namespace detail {

/// What save() writes for `destination` and `options`, and for a sharded save the prefix.
struct SaveTarget {
  FileFormat format = FileFormat::unknown;
  bool sharded = false;
  std::filesystem::path directory{};  // sharded: where the shards go
  std::string prefix{};               // sharded: the files' prefix
};

/// The format a destination's name says: its extension, or a sharded index's suffix; unknown for another name.
[[nodiscard]] inline SaveTarget named_target(const std::filesystem::path& destination) {
  const std::string name = destination.filename().string();
  constexpr std::string_view index_suffix = ".safetensors.index.json";
  if (name.size() > index_suffix.size() && name.ends_with(index_suffix)) {
    return {FileFormat::safetensors, true, destination.parent_path(),
            name.substr(0, name.size() - index_suffix.size())};
  }
  const std::string extension = destination.extension().string();
  if (extension == ".pt" || extension == ".pth" || extension == ".bin") return {FileFormat::torch_zip};
  if (extension == ".safetensors") return {FileFormat::safetensors};
  if (extension == ".npy") return {FileFormat::npy};
  if (extension == ".npz") return {FileFormat::npz};
  if (extension == ".gguf") return {FileFormat::gguf};
  return {};
}

[[nodiscard]] inline SaveTarget save_target(const std::filesystem::path& destination, const SaveOptions& options) {
  const SaveTarget named = named_target(destination);
  if (options.format && named.format != FileFormat::unknown && *options.format != named.format) {
    throw ArgumentError("SaveOptions::format is " + std::string(format_name(*options.format)) + ", but the name \"" +
                            destination.filename().string() + "\" says " + std::string(format_name(named.format)) +
                            "; expected the two to agree, or a name without a known extension",
                        {.file = destination});
  }
  const bool ends_in_slash = !destination.empty() && destination.native().back() == '/';
  std::error_code error;
  const bool directory = ends_in_slash || std::filesystem::is_directory(destination, error);
  SaveTarget target = named;
  if (options.format == FileFormat::safetensors && directory && !named.sharded) {
    target = {FileFormat::safetensors, true, destination, options.sharded.prefix};
  } else if (options.format && named.format == FileFormat::unknown) {
    target = {*options.format};
  } else if (named.format == FileFormat::unknown) {
    if (!destination.extension().empty() && !ends_in_slash) {
      throw ArgumentError("save() does not know the extension \"" + destination.extension().string() +
                              "\"; expected .pt, .pth or .bin (torch zip), .safetensors, .safetensors.index.json "
                              "(sharded), .npy, .npz, .gguf, no extension or a trailing '/' (a tensordict tree), or "
                              "SaveOptions::format",
                          {.file = destination});
    }
    target = {FileFormat::tensordict};
  }
  if (directory && !target.sharded && target.format != FileFormat::tensordict) {
    throw ArgumentError("is a directory; expected a file name for a " + std::string(format_name(target.format)) +
                            " file (or SaveOptions::format safetensors, which shards into a directory)",
                        {.file = destination});
  }
  return target;
}

}  // namespace detail

TENSORFILE_ENTRY void save(const Value& value, const std::filesystem::path& destination, const SaveOptions& options) {
  const detail::SaveTarget target = detail::save_target(destination, options);
  switch (target.format) {
    case FileFormat::torch_zip: return save_torch(value, destination, options);
    case FileFormat::safetensors:
      if (target.sharded) {
        SaveOptions sharded = options;
        sharded.sharded.prefix = target.prefix;
        (void)save_safetensors_sharded(value, target.directory.empty() ? "." : target.directory, sharded);
        return;
      }
      return save_safetensors(value, destination, options);
    case FileFormat::npy: {
      if (value.is_tensor()) return save_npy(value.as_tensor(), destination, options);
      const NamedTensors tensors = named_tensors(value);
      if (tensors.size() != 1) {
        throw ArgumentError(
            "a .npy holds one tensor; expected a tensor, got a tree of " + std::to_string(tensors.size()) + " tensors",
            {.file = destination});
      }
      return save_npy(tensors.front().second, destination, options);
    }
    case FileFormat::npz: return save_npz(value, destination, options);
    case FileFormat::tensordict: return save_memmap(to_tensordict(value, {.file = destination}), destination, options);
    case FileFormat::gguf: return save_gguf(value, destination, options);
    case FileFormat::torch_legacy:
    case FileFormat::unknown: break;
  }
  throw ArgumentError("save() does not write " + std::string(format_name(target.format)) +
                          " files; expected SaveOptions::format torch_zip, safetensors, npy, npz, gguf or tensordict",
                      {.file = destination});
}

TENSORFILE_ENTRY void save(const NamedTensors& tensors, const std::filesystem::path& destination,
                           const SaveOptions& options) {
  Dict dict;
  dict.ordered = true;
  for (const auto& [name, tensor] : tensors) dict.set(name, tensor);
  save(Value(std::move(dict)), destination, options);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(checkpoint)
