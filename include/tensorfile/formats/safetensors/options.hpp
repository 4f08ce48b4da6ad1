// SPDX-License-Identifier: MIT
// Options of safetensors loading and saving.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/core/file_modes.hpp"  // MapMode, DirectReads
#include "tensorfile/formats/map_location.hpp"
#include "tensorfile/formats/select.hpp"

namespace tensorfile {

/// Options of load_safetensors(); the first two are load()'s, in the same forms:
/// `load_safetensors(path, {.map_location = "cuda:0", .mmap = MapMode::read_only})`.
struct SafetensorsLoadOptions {
  MapLocation map_location{};  ///< where tensors go; the saved tag of every tensor is "cpu" (see MapLocation)
  std::optional<MapMode>
      mmap{};  ///< set: tensors are views into one mapping of the file in this mode (path input) or of the caller's
               ///< buffer, read-only (span input): no data copied; unset: heap memory
  std::uint64_t max_header_bytes = 100'000'000;  ///< longest header accepted (the reference's limit)
  /// Set: asked with each tensor's name in the header; only the kept tensors' bytes are read (heap: one pread
  /// each; mmap: only they become views). The others become meta tensors of the same dtype and shape, or with
  /// `select_drops` are left out. The header is still validated whole. select_paths() makes one.
  TensorSelect select{};
  bool select_drops = false;     ///< with `select`: unselected tensors are left out of the dict (else: meta)
  std::size_t read_threads = 0;  ///< heap loads of a path: threads reading the data (0: min(4, cores))
  DirectReads direct_reads = DirectReads::automatic;  ///< heap loads of a path: whether around the page cache
};

/// Options of save_safetensors(); use designated initializers: `save_safetensors(t, path, {.metadata =
/// {{"format", "pt"}}})`.
struct SafetensorsSaveOptions {
  /// The `__metadata__` string map, written in this order (the reference writes a hash map's order); empty:
  /// none, or for a Value the `__metadata__` a safetensors load kept in its Dict::attributes.
  std::vector<std::pair<std::string, std::string>> metadata{};
  bool sync = true;        ///< fsync the new file and its directory before it replaces the old one (paths only)
  bool sort = true;        ///< the reference's order: by descending dtype alignment, then by name; false: as given
  bool pad_header = true;  ///< pad the header with spaces to a multiple of 8 bytes as the reference does;
                           ///< false: unpadded, as older writers did (the reference reads both)
};

}  // namespace tensorfile
