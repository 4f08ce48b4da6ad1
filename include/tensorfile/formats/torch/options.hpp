// SPDX-License-Identifier: MIT
// Options of torch-file loading: map_location in all of torch's forms, mmap, strictness, limits.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode, DirectReads
#include "tensorfile/formats/map_location.hpp"
#include "tensorfile/formats/select.hpp"

namespace tensorfile {

/// One storage record of a zip torch file, as LoadOptions::storage_source sees it before it is read.
struct StorageRecord {
  std::string_view key;           ///< record name under data/ ("0", "1", ...)
  std::string_view member;        ///< the archive member holding it ("archive/data/0"), for messages
  std::string_view location;      ///< device tag saved in the file ("cpu", "cuda:0")
  DType dtype = DType::UInt8;     ///< element type of the storage
  std::uint64_t file_offset = 0;  ///< offset of the record's first byte in the file
  std::uint64_t size = 0;         ///< bytes in the record
  bool raw = false;               ///< stored uncompressed and little-endian: the file bytes are the storage as is
};

/// Options of load(); use designated initializers: `load(path, {.map_location = "cpu", .mmap =
/// MapMode::copy_on_write})`.
struct LoadOptions {
  MapLocation map_location{};  ///< where storages go (see MapLocation)
  std::optional<MapMode>
      mmap{};  ///< set: storages are views into one mapping of the file in this mode (path input) or of the caller's
               ///< buffer, read-only (span input): no data copied; unset: heap storages
  bool strict = true;                    ///< unknown globals are an error; false: kept as opaque Object records
  bool verify_crc = false;               ///< check every zip record's CRC-32 (torch does not)
  std::size_t max_depth = 5000;          ///< most nesting of containers (as SaveOptions::max_depth)
  std::size_t max_memo = 1u << 22;       ///< most pickle memo entries
  std::size_t max_container = 1u << 26;  ///< most items in one container
  /// Most values in the loaded tree, a container counted at each place it appears: a pickle that shares containers
  /// level upon level describes in a kilobyte a tree that select, printing or clone() would walk for ever.
  std::uint64_t max_tree_size = std::uint64_t{1} << 27;
  /// Most bytes of str values the pickle copies by reading the memo or DUP (a long str read back k times, 2 bytes a
  /// GET, is k copies: 120 KB of pickle asked for 1.9 GB).
  std::uint64_t max_copied_text = std::uint64_t{1} << 28;
  std::uint64_t max_total_bytes = std::uint64_t{1} << 46;  ///< most storage bytes one file may declare (64 TiB)
  /// Advanced (<tensorfile/cuda.hpp> streams records with it): asked once per storage record of a zip
  /// file before it is read; a Storage it returns (of the record's size) is used as is, map_location
  /// not applied; nullopt reads and places the record as usual. Not called for legacy files.
  std::function<std::optional<Storage>(const StorageRecord&)> storage_source{};
  std::uint64_t max_records = std::uint64_t{1} << 24;  ///< most records a zip archive may hold (as SaveOptions')
  /// Which tensors to read: asked with each tensor's path as named_tensors() names it ("layers.0.weight",
  /// "optim/state/0/exp_avg"); unset: all. The others come back as meta tensors (dtype and shape, no
  /// bytes). In zip files the records of unselected tensors are not read (those stored uncompressed,
  /// little-endian and bound for the host: all that torch.save writes); a legacy file is one stream read
  /// whole, so there it saves the copies only. A storage that a selected tensor shares is read whole.
  /// select_paths() makes one from names and glob patterns.
  TensorSelect select{};
  bool select_drops = false;  ///< with `select`: unselected tensors are left out of their dicts (elsewhere: meta)
  /// Threads reading the records of a heap load of a zip file together (a legacy file: its bytes), and the
  /// local headers of a file of many records, those beside the thread running the pickle (1 for one thing
  /// at a time); 0: min(4, cores).
  std::size_t read_threads = 0;
  DirectReads direct_reads = DirectReads::automatic;  ///< whether heap loads of a path read around the page cache
  /// Tensors to load into buffers the caller owns, by path (as `select` names them): each a tensor of the file's
  /// dtype and shape, contiguous and writable, on the device the load puts that tensor (CPU: from_buffer over the
  /// caller's memory, a shared mapping...; CUDA: with map_location sending it there, <tensorfile/cuda.hpp>). The
  /// values are written there: read from the file straight into the buffer where the file's tensor is a whole
  /// stored record (every tensor of a torch.save state dict, in heap loads of zip files, and in cuda::load's
  /// streamed records), copied otherwise. The result then holds a tensor over the buffer at that path (for a view
  /// of a larger storage: its own copy). A path the file does not hold, a mismatch, or a buffer on another device
  /// than its tensor's is an ArgumentError. Paths named here are read even when `select` leaves them out.
  std::map<std::string, Tensor, std::less<>> into{};
};

}  // namespace tensorfile
