// SPDX-License-Identifier: MIT
/// @file
/// The one options vocabulary of every load and save: a common part every format reads, with each format's
/// extras nested under its name (`.torch`, `.safetensors`, `.npy`, `.sharded`, `.tensordict`, `.cuda`, `.gguf`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode, DirectReads
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/format.hpp"  // FileFormat
#include "tensorfile/formats/map_location.hpp"
#include "tensorfile/formats/select.hpp"
#include "tensorfile/formats/slice.hpp"

namespace tensorfile {

class FormatError;  // core/error.hpp: LoadOptions::Sharded holds a pointer to a vector of them
class TensorDict;   // formats/tensordict/tensordict.hpp: LoadOptions::Tensordict holds a pointer to one

/// One storage record of a zip torch file, as LoadOptions::Torch::storage_source sees it before it is read.
struct StorageRecord {
  std::string_view key;           ///< record name under data/ ("0", "1", ...)
  std::string_view member;        ///< the archive member holding it ("archive/data/0"), for messages
  std::string_view location;      ///< device tag saved in the file ("cpu", "cuda:0")
  DType dtype = DType::UInt8;     ///< element type of the storage
  std::uint64_t file_offset = 0;  ///< offset of the record's first byte in the file
  std::uint64_t size = 0;         ///< bytes in the record
  bool raw = false;               ///< stored uncompressed and little-endian: the file bytes are the storage as is
};

/// What a file may claim before a load refuses it (LimitError): each bounds what untrusted bytes make the
/// loader allocate or walk. The defaults accept everything torch, numpy, safetensors and tensordict write.
struct LoadLimits {
  std::size_t max_depth = 5000;          ///< most nesting of containers in a pickle (as SaveOptions::Torch's)
  std::size_t max_memo = 1u << 22;       ///< most pickle memo entries
  std::size_t max_container = 1u << 26;  ///< most items in one container
  /// Most values in the loaded tree, a container counted at each place it appears: a pickle that shares containers
  /// level upon level describes in a kilobyte a tree that select, printing or clone() would walk for ever.
  std::uint64_t max_tree_size = std::uint64_t{1} << 27;
  /// Most bytes of str values the pickle copies by reading the memo or DUP (a long str read back k times, 2 bytes a
  /// GET, is k copies: 120 KB of pickle asked for 1.9 GB).
  std::uint64_t max_copied_text = std::uint64_t{1} << 28;
  std::uint64_t max_total_bytes = std::uint64_t{1} << 46;      ///< most storage bytes one file may declare (64 TiB)
  std::uint64_t max_records = std::uint64_t{1} << 24;          ///< most members a zip archive may hold (torch, npz)
  std::uint64_t max_index_bytes = std::uint64_t{1} << 28;      ///< longest sharded *.index.json
  std::uint64_t max_meta_json_bytes = std::uint64_t{1} << 30;  ///< longest tensordict meta.json (or pickle sidecar)
  /// Most tensordict collections (directories) loaded, a directory counted each time a path reaches it: symbolic
  /// links to one sub-collection from two places double the tree at every level.
  std::uint64_t max_collections = 100'000;
};

/// Progress of a streamed CUDA load: bytes on the device so far, and in all.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Options of every load: load(), open(), load_torch(), load_safetensors(), load_npy(), load_npz(), load_memmap(),
/// load_state_dict() and the cuda:: loads take this one struct. Designated initializers, common fields first:
/// `load(path, {.map_location = "cuda:0", .mmap = MapMode::read_only, .select = select_paths({"encoder.*"})})`,
/// a format's extras by its name: `{.strict = false, .safetensors = {.max_header_bytes = 1 << 20}}`. A format ignores
/// the extras of the others; a common field a format cannot honour is an ArgumentError naming the field.
struct LoadOptions {
  /// Where tensors go, in any of torch.load's map_location forms (a device, a device string, a tag map, a callable;
  /// see MapLocation); unset: the saved tag (every format but torch saves "cpu"). "meta": dtypes and shapes only.
  /// Tensordict trees take a device only.
  MapLocation map_location{};
  /// Set: tensors are views into one mapping of each file in this mode (a memory source: read-only views of the
  /// caller's bytes), no data copied; unset: heap memory, except tensordict trees, which always map, then as
  /// tensordict does (files this process may write MapMode::shared, others copy_on_write).
  std::optional<MapMode> mmap{};
  /// Which tensors to read: asked with each tensor's path as named_tensors() names it ("layers.0.weight", a
  /// tensordict leaf "nested/deeper/c"); unset: all. The others come back as meta tensors (dtype and shape, no bytes)
  /// or, with `select_drops`, are left out. select_paths() makes one from names and glob patterns.
  TensorSelect select{};
  bool select_drops = false;  ///< with `select`: unselected tensors are left out of their dicts (else: meta)
  /// Which part of each kept tensor to read (TensorSlice; parallel_slices() makes one for a rank of a
  /// tensor-parallel group): asked with the tensor's path and the file's shape. A slice is read by its bytes alone
  /// where the format keeps the tensor's bytes in one place (one range along dimension 0, one run per row of the
  /// dimensions before it otherwise, runs less than a page apart in a file read with their gaps; a view with
  /// `mmap`), else the tensor is read whole and the slice copied.
  /// Applied by open() and load() (checkpoint.hpp) to tensors in dicts; the per-format loaders refuse it.
  SliceRule slice{};
  /// Tensors to load into buffers the caller owns, by path (as `select` names them): each of the file's dtype and
  /// shape, contiguous and writable, on the device the load puts that tensor. Read from the file straight into the
  /// buffer where the format keeps the tensor's bytes in one place, copied otherwise. A path the file does not hold,
  /// a mismatch, or a buffer on another device is an ArgumentError.
  std::map<std::string, Tensor, std::less<>> into{};
  /// Threads reading at once (heap loads: a file's data; sharded checkpoints: shards; a `slice` rule's parts: the
  /// tensors it slices; cuda:: loads: the ring's readers); 0: the format's choice (min(4, cores) on the host, 8 for
  /// the ring).
  std::size_t threads = 0;
  DirectReads direct_reads = DirectReads::automatic;  ///< whether heap loads of a path read around the page cache
  /// Whether heap loads advise their large blocks for transparent huge pages (see HugePages: off unless
  /// TENSORFILE_HUGE_PAGES=1; `on` wins on machines up for hours and loses on freshly booted ones).
  HugePages huge_pages = HugePages::from_environment;
  /// Torch pickles: an unknown global is an error (false: kept as an opaque Object record).
  bool strict = true;
  bool verify_crc =
      false;            ///< check the CRC-32 of every zip member read (torch and npz files; numpy checks, torch not)
  LoadLimits limits{};  ///< what a file may claim

  /// torch.save files (zip and legacy).
  struct Torch {
    /// Advanced (<tensorfile/cuda.hpp> streams records with it): asked once per storage record of a zip file
    /// before it is read; a Storage it returns (of the record's size) is used as is, map_location not applied;
    /// nullopt reads and places the record as usual. Not called for legacy files.
    std::function<std::optional<Storage>(const StorageRecord&)> storage_source{};
  } torch{};  ///< what only torch.save files need
  /// .safetensors files.
  struct Safetensors {
    std::uint64_t max_header_bytes = 100'000'000;  ///< longest header accepted (the reference's limit)
  } safetensors{};                                 ///< what only .safetensors files need
  /// .npy files and the members of .npz files.
  struct Npy {
    std::uint64_t max_header_bytes = 1 << 20;  ///< longest header accepted (NumPy 1.24 writes < 1 KiB for 32 dims)
  } npy{};                                     ///< what only .npy files need
  /// Checkpoints in several files listed by a Hugging Face *.index.json.
  struct Sharded {
    /// A tensor in a shard that the index does not list: false: FormatError; true: left out (the index decides).
    bool allow_unlisted = false;
    /// Set: every disagreement between the index and its shards is appended here as the FormatError it is, and
    /// the load returns the tensors that agree; unset: the load throws them (one error listing all when several).
    std::vector<FormatError>* mismatches = nullptr;
  } sharded{};  ///< what only sharded checkpoints need
  /// tensordict memmap trees.
  struct Tensordict {
    bool non_blocking = false;     ///< let device copies complete asynchronously (CUDA only)
    TensorDict* out = nullptr;     ///< fill this TensorDict (as tensordict's out=); the result is a copy of it
    bool skip_missing = false;     ///< drop leaves and declared sub-collections whose files are missing
    bool skip_undeclared = false;  ///< ignore subdirectories that meta.json does not declare
    std::vector<std::filesystem::path>* skipped = nullptr;  ///< when set, receives the path of everything skipped
    /// Map data files that have more than one hard link MAP_SHARED too; off: an unset `mmap` maps them
    /// copy_on_write, MapMode::shared refuses them, as another name of the file may lie outside the tree.
    bool allow_shared_hard_links = false;
  } tensordict{};  ///< what only tensordict trees need
  /// The cuda:: loads (<tensorfile/cuda.hpp>): the ring of pinned host memory that streams files to a device.
  struct Cuda {
    std::size_t ring_bytes = std::size_t{256} << 20;  ///< pinned host memory of the ring in all
    std::size_t slot_bytes = std::size_t{16} << 20;   ///< one slot of the ring, the unit of reads and copies
    bool use_cufile = false;        ///< read straight to device memory with cuFile (GPUDirect Storage) when it loads
    bool require_cufile = false;    ///< with use_cufile: a DeviceError naming why cuFile cannot be used, no fallback
    bool single_allocation = true;  ///< one device allocation per file and device that the storages slice
    bool keep_ring = false;         ///< keep the ring for the next load to the device (until cuda::release_ring())
    Progress progress{};            ///< called as bytes reach the device, one call at a time
  } cuda{};                         ///< what only the cuda:: loads need
  /// GGUF files (llama.cpp's): what a header may make the reader build, beyond the file's own size (each count is
  /// also checked against the bytes left before anything is reserved for it). Past one: LimitError naming the field.
  struct Gguf {
    std::size_t max_depth = 8;                                ///< most nesting of arrays (an array of arrays is 2)
    std::uint64_t max_string_bytes = std::uint64_t{1} << 30;  ///< longest string (ggml's own limit)
    std::uint64_t max_values = std::uint64_t{1} << 24;        ///< most metadata values in all, array elements counted
    std::uint64_t max_tensors = std::uint64_t{1} << 32;       ///< most tensor infos in one file
    std::uint64_t max_keys = std::uint64_t{1} << 32;          ///< most metadata key-value pairs in one file
  } gguf{};                                                   ///< what only GGUF files need
};

/// Which of tensordict's JSON backends save_memmap imitates when it writes meta.json.
enum class MetaJsonStyle : std::uint8_t {
  stdlib,  ///< Python's json module: ", " and ": " separators, `\uXXXX` escapes for non-ASCII, NaN/Infinity tokens
  orjson,  ///< orjson: compact separators, raw UTF-8, NaN and infinities written as null
};

/// Options of every save: save(), save_torch(), save_safetensors(), save_safetensors_sharded(), save_npy(),
/// save_npz() and save_memmap() take this one struct: `save(value, "model.safetensors", {.safetensors =
/// {.metadata = {{"format", "pt"}}}})`. A format ignores the extras of the others.
struct SaveOptions {
  /// The format to write; unset: save() takes it from the destination's extension (.pt .pth .bin: torch zip;
  /// .safetensors; .npy; .npz; a path without an extension, or ending in '/', is a tensordict tree), and an
  /// extension it does not know is an ArgumentError. The per-format save functions ignore it.
  std::optional<FileFormat> format{};
  /// fsync every file and directory before it replaces the old one (paths only); on by default, so that a finished
  /// save survives power loss.
  bool sync = true;

  /// torch.save files.
  struct Torch {
    /// Record data alignment in bytes: 64 as torch, or more (4096 for direct I/O); a power of two.
    std::uint64_t alignment = 64;
    std::string prefix{};  ///< archive folder name; empty: the file stem for paths, "archive" for streams
    // The limits below match LoadLimits' fields and defaults: a value past one is refused (ArgumentError, nothing
    // written) because a load with the same setting would refuse the file.
    std::size_t max_depth = 5000;                        ///< most nesting of containers
    std::uint64_t max_records = std::uint64_t{1} << 24;  ///< most archive records: one per storage, plus 6
    std::size_t max_memo = 1u << 22;                     ///< most pickle memo entries
    std::size_t max_container = 1u << 26;                ///< most items in one container
  } torch{};                                             ///< what only torch.save files need
  /// .safetensors files, single or sharded.
  struct Safetensors {
    /// The `__metadata__` string map, written in this order; empty: none, or for a Value the `__metadata__` a
    /// safetensors load kept in its Dict::attributes. (Sharded: every shard's; empty writes {"format": "pt"}, as
    /// transformers.)
    std::vector<std::pair<std::string, std::string>> metadata{};
    bool sort = true;        ///< the reference's order: by descending dtype alignment, then by name; false: as given
    bool pad_header = true;  ///< pad the header with spaces to a multiple of 8 bytes, as the reference does
  } safetensors{};           ///< what only .safetensors files need
  /// .npz files.
  struct Npz {
    bool compress = false;  ///< DEFLATE every member, as np.savez_compressed does
  } npz{};                  ///< what only .npz files need
  /// Sharded safetensors checkpoints (save_safetensors_sharded).
  struct Sharded {
    std::uint64_t max_shard_size = 5'000'000'000;  ///< most tensor bytes per shard (huggingface_hub's 5 GB)
    std::string prefix = "model";  ///< `<prefix>-00001-of-00003.safetensors`, `<prefix>.safetensors.index.json`
  } sharded{};                     ///< what only sharded checkpoints need
  /// tensordict memmap trees (save_memmap).
  struct Tensordict {
    MetaJsonStyle json = MetaJsonStyle::stdlib;  ///< meta.json text
    bool overwrite = true;    ///< replace an existing tree at the prefix; false: ArgumentError when one is there
    bool encode_keys = true;  ///< %XX-encode file names (tensordict >= 0.13); false: raw keys, unsafe ones refused
  } tensordict{};             ///< what only tensordict trees need
  /// GGUF files (save_gguf).
  struct Gguf {
    std::uint64_t alignment = 32;  ///< of the data section and each tensor (a power of two; not 32: general.alignment)
    Value metadata{};              ///< key -> value (a dict); None: none, or for a Value a GGUF load's __metadata__
    Value metadata_types{};        ///< key -> stored type ("uint32", "array[string]"); None: a GGUF load's, or inferred
    /// "q8_0" or "q4_0": float tensors of 2 or more dimensions whose last extent is a multiple of 32 are quantized to
    /// it with ggml's reference rounding (others are written as they are); empty: none.
    std::string quantize{};
    /// Set (or `split_max_size`): the model is written as llama.cpp's split files (as its gguf-split
    /// --split-max-tensors), each of at most this many tensors; 0: no such bound.
    std::uint64_t split_max_tensors = 0;
    /// Set (or `split_max_tensors`): split files of at most this many bytes of tensor data each (gguf-split's
    /// --split-max-size; a tensor larger alone gets a file of its own); 0: no such bound.
    std::uint64_t split_max_size = 0;
  } gguf{};  ///< what only GGUF files need
};

}  // namespace tensorfile
