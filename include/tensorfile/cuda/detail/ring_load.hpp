// SPDX-License-Identifier: MIT
// Streamed loads to a device: torch records and raw files through the ring, for any device engine.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/cuda/detail/ring_plan.hpp"
#include "tensorfile/cuda/detail/ring_reader.hpp"
#include "tensorfile/cuda/detail/ring_scheduler.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/gguf/load.hpp"
#include "tensorfile/formats/safetensors/detail/header_parser.hpp"  // read_safetensors_head
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/torch/load.hpp"

namespace tensorfile::detail {

/// A copy_engine bound to one device that also allocates that device's memory:
/// - `E(device)`: an engine for a resolved device
/// - `E::resolve(device)`: the device with its ordinal ("cuda" becomes "cuda:N"); throws DeviceError
///   when it is missing
/// - `allocate_device(n)`: a Storage of n bytes on the device (data() is a device address)
template <class E>
concept device_copy_engine = copy_engine<E> && std::constructible_from<E, Device> &&
    requires(E& engine, std::size_t n, Device device) {
  { E::resolve(device) } -> std::same_as<Device>;
  { engine.allocate_device(n) } -> std::same_as<Storage>;
};

/// Ring settings (the cuda:: loads take them from LoadOptions::cuda and the common `threads` and `direct_reads`).
struct RingOptions {
  std::size_t ring_bytes = std::size_t{256} << 20;  ///< pinned host memory in all
  std::size_t slot_bytes = std::size_t{16} << 20;   ///< one slot (one read-and-copy unit)
  std::size_t threads = 8;                          ///< reader threads
  std::optional<bool> direct_io{};                  ///< O_DIRECT: on, off, or unset for automatic
  bool single_allocation = true;                    ///< one device allocation per file and device
  bool keep_ring = false;                           ///< leave the ring to the engine's cache for the next load
};

/// Ranges of one file bound for one device, and where they land.
struct RingGroup {
  Device device{};                ///< resolved device
  std::vector<RingRange> ranges;  ///< file ranges
  /// Per range, or empty for none: memory on `device` that the caller owns and the range is read into
  /// (LoadOptions::into), of the range's size; undefined: the range lands in memory the load allocates.
  std::vector<Storage> destinations;
  RingLayout layout;  ///< plan_group_layout(*this) (plan_ring_layout(ranges) when nothing has a destination)
};

/// Plans where `group`'s ranges land: plan_ring_layout of those without a destination, then each range
/// with one as a target of its own, that memory (nothing allocated for it).
inline void plan_group_layout(RingGroup& group, bool single_allocation) {
  const auto has_destination = [&](std::size_t i) {
    return i < group.destinations.size() && group.destinations[i].defined();
  };
  std::vector<RingRange> allocated;
  std::vector<std::size_t> allocated_index;  // position in `allocated` -> range
  for (std::size_t i = 0; i < group.ranges.size(); ++i) {
    if (has_destination(i)) continue;
    allocated.push_back(group.ranges[i]);
    allocated_index.push_back(i);
  }
  RingLayout planned = plan_ring_layout(allocated, single_allocation);
  RingLayout& layout = group.layout;
  layout.segments = std::move(planned.segments);
  layout.target_bytes = std::move(planned.target_bytes);
  layout.copied_bytes = planned.copied_bytes;
  layout.range_targets.assign(group.ranges.size(), 0);
  layout.range_offsets.assign(group.ranges.size(), 0);
  for (std::size_t k = 0; k < allocated_index.size(); ++k) {
    layout.range_targets[allocated_index[k]] = planned.range_targets[k];
    layout.range_offsets[allocated_index[k]] = planned.range_offsets[k];
  }
  if (allocated.size() == group.ranges.size()) return;
  for (std::size_t i = 0; i < group.ranges.size(); ++i) {
    if (!has_destination(i)) continue;
    const RingRange& range = group.ranges[i];
    layout.range_targets[i] = layout.target_bytes.size();
    layout.target_bytes.push_back(range.size);
    if (range.size == 0) continue;
    layout.segments.push_back({range.file_offset, range.size, layout.range_targets[i], 0});
    layout.copied_bytes += range.size;
  }
  std::stable_sort(layout.segments.begin(), layout.segments.end(),
                   [](const RingSegment& a, const RingSegment& b) { return a.file_offset < b.file_offset; });
}

/// Checks the ring options; throws ArgumentError.
inline void check_ring_options(const RingOptions& options) {
  if (options.ring_bytes == 0 || options.slot_bytes == 0) {
    throw ArgumentError("ring_bytes and slot_bytes must be positive; got " + std::to_string(options.ring_bytes) +
                        " and " + std::to_string(options.slot_bytes));
  }
}

/// A group's device allocations (RingLayout::target_bytes) and their base addresses (null when empty).
struct GroupAllocations {
  std::vector<Storage> storages;  ///< one per target
  std::vector<std::byte*> bases;  ///< their first bytes
};

/// Allocates `group`'s targets with `allocate(std::size_t bytes) -> Storage`, except those that are a
/// range's destination (the caller's memory, used as is).
template <class Allocate>
[[nodiscard]] GroupAllocations allocate_group(const RingGroup& group, Allocate&& allocate) {
  const std::vector<std::uint64_t>& targets = group.layout.target_bytes;
  std::vector<const Storage*> given(targets.size(), nullptr);
  for (std::size_t i = 0; i < group.destinations.size(); ++i) {
    if (group.destinations[i].defined()) given[group.layout.range_targets[i]] = &group.destinations[i];
  }
  GroupAllocations out;
  out.storages.reserve(targets.size());
  out.bases.reserve(targets.size());
  for (std::size_t target = 0; target < targets.size(); ++target) {
    const std::uint64_t bytes = targets[target];
    out.storages.push_back(given[target] != nullptr ? *given[target] : allocate(static_cast<std::size_t>(bytes)));
    out.bases.push_back(bytes == 0 ? nullptr : out.storages.back().mutable_data());
  }
  return out;
}

/// One Storage per range of `group`: its slice of the allocations, or a fresh empty one from
/// `allocate(0)` for an empty range. Slices of one allocation would give every empty range the same
/// (address, 0) identity, and save_torch() would take them for one storage viewed as several dtypes.
template <class Allocate>
[[nodiscard]] std::vector<Storage> group_storages(const RingGroup& group, const GroupAllocations& allocations,
                                                  Allocate&& allocate) {
  std::vector<Storage> out;
  out.reserve(group.ranges.size());
  for (std::size_t i = 0; i < group.ranges.size(); ++i) {
    if (group.ranges[i].size == 0) {
      out.push_back(allocate(std::size_t{0}));
      continue;
    }
    out.push_back(allocations.storages[group.layout.range_targets[i]].slice(
        static_cast<std::size_t>(group.layout.range_offsets[i]), static_cast<std::size_t>(group.ranges[i].size)));
  }
  return out;
}

/// Streams a planned group of the open `file` through the ring with `Engine`; returns one device
/// Storage per range (slices of one allocation, or one allocation each). Reports progress into `progress`.
template <device_copy_engine Engine>
[[nodiscard]] std::vector<Storage> ring_stream(const FileHandle& file, const RingGroup& group,
                                               const RingOptions& options, RingProgressState& progress) {
  check_ring_options(options);
  Engine engine(group.device);
  if constexpr (requires { engine.keep_ring(true); }) engine.keep_ring(options.keep_ring);
  const auto allocate = [&](std::size_t bytes) { return engine.allocate_device(bytes); };
  const GroupAllocations allocations = allocate_group(group, allocate);
  const std::vector<std::byte*>& bases = allocations.bases;
  if (!group.layout.segments.empty()) {
    std::size_t slot = std::min(options.slot_bytes, options.ring_bytes);
    std::optional<bool> direct = options.direct_io;
    if (slot < direct_io_alignment) direct = false;  // a slot too small for one aligned block
    const PosixRangeReader reader(file, direct);
    const std::size_t align = reader.alignment();
    slot = slot / align * align;
    const std::vector<RingBatch> batches = plan_ring_batches(group.layout.segments, slot, align);
    run_ring(std::span<const RingBatch>(batches), std::span<std::byte* const>(bases), engine, reader,
             RingConfig{.slots = std::max<std::size_t>(1, options.ring_bytes / slot), .threads = options.threads},
             progress, file.path());
  }
  return group_storages(group, allocations, allocate);
}

/// Streams the first `bytes` bytes of `path` to `device` (resolved) as one Storage, with
/// `stream(const RingGroup&, RingProgressState&) -> std::vector<Storage>`.
template <class Stream>
[[nodiscard]] Storage stream_read_file(std::uint64_t bytes, Device device, const RingProgress& callback,
                                       Stream&& stream) {
  RingGroup group;
  group.device = device;
  group.ranges.push_back({0, bytes});
  group.layout = plan_ring_layout(group.ranges, true);
  RingProgressState progress{callback, 0, group.layout.copied_bytes};
  Storage out = stream(static_cast<const RingGroup&>(group), progress).front();
  if (progress.total == 0 && callback) callback(0, 0);
  return out;
}

/// stream_read_file through the ring with `Engine`.
template <device_copy_engine Engine>
[[nodiscard]] Storage ring_read_file(const std::filesystem::path& path, std::uint64_t bytes, Device device,
                                     const RingOptions& options, const RingProgress& callback = {}) {
  const FileHandle file = FileHandle::open(path, OpenMode::read);
  return stream_read_file(bytes, device, callback, [&](const RingGroup& group, RingProgressState& progress) {
    return ring_stream<Engine>(file, group, options, progress);
  });
}

/// The device a CUDA-bound storage saved as `location` goes to, resolved by `resolve(Device) -> Device`;
/// nullopt when map_location sends it elsewhere, or names a tag the plain load reports. A missing device
/// is a DeviceError saying `what` went there, at `where`.
template <class Resolve>
[[nodiscard]] std::optional<Device> ring_target(const MapLocation& map_location, const std::string& location,
                                                Resolve&& resolve, const std::string& what,
                                                const ErrorLocation& where) {
  Device device;
  try {
    device = Device::parse(map_location.target_tag(location));
  } catch (const ArgumentError&) {
    return std::nullopt;  // the plain load reports the unknown tag as load_torch() does
  }
  if (device.kind != Device::Kind::CUDA) return std::nullopt;
  try {
    return resolve(device);
  } catch (const DeviceError& error) {
    throw DeviceError(what + ": " + error.reason(), where);
  }
}

/// Loads the open torch file `file` (named `path` in messages) with its zip storage records streamed
/// to their devices: pass 1 parses with meta placeholders and collects every record's (key, saved tag,
/// file range); records that map_location sends to a CUDA device and that are stored raw are grouped
/// by device (resolved by `resolve(Device) -> Device`) and handed to `stream(const FileHandle&, const
/// RingGroup&, RingProgressState&) -> std::vector<Storage>`; pass 2 parses again and takes those
/// storages as they are (the rest load as usual). A whole record that LoadOptions::into names a device
/// buffer for is read straight into that buffer (checked first: a mismatch is refused before any read);
/// pass 2 copies the other `into` tensors. The callable map_location form, meta, legacy files, and
/// options that set their own storage_source load the usual way, through Tensor::to.
template <class Resolve, class Stream>
[[nodiscard]] Value stream_load_torch(const FileHandle& file, const std::filesystem::path& path,
                                      const LoadOptions& options, const RingOptions& ring, const RingProgress& callback,
                                      Resolve&& resolve, Stream&& stream) {
  const auto plain = [&] {
    Value value = load_torch_file(file, path, options);
    if (callback) callback(0, 0);
    return value;
  };
  check_ring_options(ring);
  if (options.map_location.function() != nullptr || options.map_location.all_meta() || options.torch.storage_source) {
    return plain();
  }
  {
    std::byte magic[4] = {};
    if (file.size() < 4) return plain();  // load_torch() reports what is wrong
    file.read_exact(0, magic);
    if (std::memcmp(magic, "PK\x03\x04", 4) != 0) return plain();  // legacy and others: no zip records
  }

  struct Found {
    std::string key;
    std::string member;
    std::string location;
    RingRange range;
    bool raw = false;
    Storage placeholder;  // what pass 1's tensors over this record hold
  };
  std::vector<Found> found;
  LoadOptions scan = options;  // pass 1: headers and data.pkl only, storages become meta placeholders
  scan.mmap = MapMode::copy_on_write;
  scan.verify_crc = false;
  scan.into.clear();  // checked below against where the records go, then in pass 2
  scan.torch.storage_source = [&found](const StorageRecord& record) -> std::optional<Storage> {
    found.push_back({std::string(record.key),
                     std::string(record.member),
                     std::string(record.location),
                     {record.file_offset, record.size},
                     record.raw,
                     meta_storage(static_cast<std::size_t>(record.size))});
    return found.back().placeholder;
  };
  const Value outline = load_torch_file(file, path, scan);

  std::map<int, RingGroup> groups;
  std::map<int, std::vector<const Found*>> members;
  std::unordered_map<const void*, std::pair<int, std::size_t>> streamed;  // placeholder -> (device, range)
  for (const Found& record : found) {
    if (!record.raw) continue;
    const std::optional<Device> device =
        ring_target(options.map_location, record.location, resolve, "storage tagged \"" + record.location + "\"",
                    {.file = path, .member = record.member});
    if (!device) continue;
    RingGroup& group = groups[device->index];
    group.device = *device;
    streamed.emplace(record.placeholder.owner(), std::pair{device->index, group.ranges.size()});
    group.ranges.push_back(record.range);
    members[device->index].push_back(&record);
  }
  // `into` buffers of streamed records are checked now, before anything is read; a whole record is read
  // straight into its buffer (a record two paths share: the first path's, as fill_into does). The rest are
  // checked and copied in pass 2.
  const auto outlined = into_tensors(outline, options);
  for (const auto& [name, buffer] : options.into) {
    const auto it = outlined.find(name);
    if (it == outlined.end()) refuse_into(name, "the file holds no tensor at this path", path);
    const Tensor& t = it->second;
    const auto record = streamed.find(t.storage().owner());
    if (record == streamed.end()) continue;
    RingGroup& group = groups[record->second.first];
    if (std::string why = into_mismatch(t, group.device, buffer); !why.empty()) refuse_into(name, why, path);
    if (!whole_storage(t)) continue;
    group.destinations.resize(group.ranges.size());
    Storage& destination = group.destinations[record->second.second];
    if (!destination.defined()) destination = buffer_of(buffer);
  }
  RingProgressState progress{callback, 0, 0};
  for (auto& [ordinal, group] : groups) {
    plan_group_layout(group, ring.single_allocation);
    progress.total += group.layout.copied_bytes;
  }
  std::unordered_map<std::string, Storage, KeyedStringHash> placed;
  for (auto& [ordinal, group] : groups) {
    std::vector<Storage> storages = stream(file, static_cast<const RingGroup&>(group), progress);
    const auto& records = members[ordinal];
    for (std::size_t i = 0; i < records.size(); ++i) placed.emplace(records[i]->key, std::move(storages[i]));
  }
  if (progress.total == 0 && callback) callback(0, 0);

  LoadOptions final_options = options;  // pass 2: the streamed storages as they are, the rest as usual
  if (placed.size() == found.size()) {  // nothing left to read: map the file rather than read it
    final_options.mmap = MapMode::copy_on_write;
  }
  final_options.torch.storage_source = [&placed](const StorageRecord& record) -> std::optional<Storage> {
    const auto it = placed.find(std::string(record.key));
    if (it == placed.end()) return std::nullopt;
    return it->second;
  };
  return load_torch_file(file, path, final_options);
}

/// The frame of the streamed loads of flat files, whose tensors all carry the saved tag "cpu" (safetensors, GGUF):
/// when map_location sends "cpu" to a device, the ranges of the tensors `select` keeps in the header `read_header()`
/// gives (validated whole; `range_of(header, info)` within the file) are handed to `stream` as one group (see
/// stream_load_torch), and `build(header, storage_of)` makes the dict of the storages that come back. Other targets,
/// meta and the callable map_location form are `host()`'s load.
template <class Resolve, class Stream, class Host, class ReadHeader, class RangeOf, class Build>
[[nodiscard]] Value stream_flat_file(const FileHandle& file, const std::filesystem::path& path,
                                     const LoadOptions& options, const RingOptions& ring, const RingProgress& callback,
                                     Resolve&& resolve, Stream&& stream, Host&& host, ReadHeader&& read_header,
                                     RangeOf&& range_of, Build&& build) {
  std::optional<Device> device;
  if (options.map_location.function() == nullptr && !options.map_location.all_meta()) {
    device = ring_target(options.map_location, "cpu", resolve, "the tensors' device", {.file = path});
  }
  if (!device) {
    Value value = host();
    if (callback) callback(0, 0);
    return value;
  }
  const auto header = read_header();
  RingGroup group;
  group.device = *device;
  group.ranges.reserve(header.tensors.size());
  std::vector<std::size_t> streamed(header.tensors.size());  // tensor -> its range in the group (kept ones)
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    if (options.select && !options.select(header.tensors[i].name)) continue;
    streamed[i] = group.ranges.size();
    group.ranges.push_back(range_of(header, header.tensors[i]));
  }
  group.layout = plan_ring_layout(group.ranges, ring.single_allocation);
  RingProgressState progress{callback, 0, group.layout.copied_bytes};
  const std::vector<Storage> storages = stream(file, static_cast<const RingGroup&>(group), progress);
  if (progress.total == 0 && callback) callback(0, 0);
  return build(header, [&](std::size_t i) { return storages[streamed[i]]; });
}

/// Loads the open safetensors file `file` (named `path` in messages) with its tensors streamed to the CUDA device
/// map_location sends them to (stream_flat_file). Other targets, meta and the callable map_location form load as
/// load_safetensors does.
template <class Resolve, class Stream>
[[nodiscard]] Value stream_load_safetensors(const FileHandle& file, const std::filesystem::path& path,
                                            const LoadOptions& options, const RingOptions& ring,
                                            const RingProgress& callback, Resolve&& resolve, Stream&& stream) {
  check_ring_options(ring);
  refuse_into_buffers(options, "cuda::load_safetensors()", path);  // as load_safetensors(): it fills none
  const std::uint64_t max_header = options.safetensors.max_header_bytes;
  return stream_flat_file(
      file, path, options, ring, callback, resolve, stream, [&] { return load_safetensors_file(file, path, options); },
      [&] {
        const std::uint64_t size = file.size();
        return parse_safetensors_header(read_safetensors_head(file, size, max_header), size, path, max_header);
      },
      [](const SafetensorsHeader& header, const SafetensorsTensorInfo& info) {  // validated: no overflow
        return RingRange{header.data_offset + info.begin, info.end - info.begin};
      },
      [&](const SafetensorsHeader& header, const auto& storage_of) {
        return build_safetensors_dict(header, options.select, options.select_drops, storage_of);
      });
}

/// Loads the open GGUF file `file` (named `path` in messages) with its tensors streamed to the CUDA device
/// map_location sends them to (stream_flat_file), the header validated with the limits of `options.gguf` and the dict
/// built as load_gguf builds it (block-typed tensors as their raw uint8 blocks, the metadata and ggml types in the
/// attributes). Other targets, meta and the callable form load as load_gguf does; `into` and a slice rule are
/// refused as load_gguf refuses them.
template <class Resolve, class Stream>
[[nodiscard]] Value stream_load_gguf(const FileHandle& file, const std::filesystem::path& path,
                                     const LoadOptions& options, const RingOptions& ring, const RingProgress& callback,
                                     Resolve&& resolve, Stream&& stream) {
  check_ring_options(ring);
  refuse_into_buffers(options, "cuda::load_gguf()", path);
  refuse_slice_rule(options, "cuda::load_gguf()", path);
  return stream_flat_file(
      file, path, options, ring, callback, resolve, stream, [&] { return load_gguf_file(file, path, options); },
      [&] { return read_gguf_file_header(file, path, options.gguf); },
      [](const GgufHeader& header, const GgufTensorInfo& info) {  // validated: within the file
        return RingRange{header.data_offset + info.offset, info.bytes};
      },
      [&](const GgufHeader& header, const auto& storage_of) {
        return gguf_dict(header, options.select, options.select_drops, storage_of);
      });
}

/// Loads one open torch, safetensors or GGUF file (load_state_dict's single file or one of its shards or split
/// parts) with stream_load_torch, stream_load_safetensors or stream_load_gguf; any other format gets load_torch()'s
/// refusal.
template <class Resolve, class Stream>
[[nodiscard]] Value stream_load_weights(const FileHandle& file, const std::filesystem::path& path, FileFormat format,
                                        const LoadOptions& options, const RingOptions& ring,
                                        const RingProgress& callback, Resolve&& resolve, Stream&& stream) {
  if (format == FileFormat::safetensors) {
    return stream_load_safetensors(file, path, options, ring, callback, resolve, stream);
  }
  if (format == FileFormat::gguf) return stream_load_gguf(file, path, options, ring, callback, resolve, stream);
  return stream_load_torch(file, path, options, ring, callback, resolve, stream);
}

/// The stream step of the loads through the ring with `Engine`: a planned group of an open file to its device.
template <device_copy_engine Engine>
[[nodiscard]] auto ring_streamer(const RingOptions& ring) {
  return [&ring](const FileHandle& file, const RingGroup& group, RingProgressState& progress) {
    return ring_stream<Engine>(file, group, ring, progress);
  };
}

/// Opens `path` for a streamed load, read-write when the rest of the file is mapped `shared`.
[[nodiscard]] inline FileHandle open_for_stream(const std::filesystem::path& path, std::optional<MapMode> mmap) {
  return FileHandle::open(path, mmap == MapMode::shared ? OpenMode::read_write : OpenMode::read);
}

/// stream_load_torch of `path` through the ring with `Engine`.
template <device_copy_engine Engine>
[[nodiscard]] Value ring_load_torch(const std::filesystem::path& path, const LoadOptions& options,
                                    const RingOptions& ring, const RingProgress& callback = {}) {
  return stream_load_torch(open_for_stream(path, options.mmap), path, options, ring, callback, Engine::resolve,
                           ring_streamer<Engine>(ring));
}

/// stream_load_safetensors of `path` through the ring with `Engine`.
template <device_copy_engine Engine>
[[nodiscard]] Value ring_load_safetensors(const std::filesystem::path& path, const LoadOptions& options,
                                          const RingOptions& ring, const RingProgress& callback = {}) {
  return stream_load_safetensors(open_for_stream(path, options.mmap), path, options, ring, callback, Engine::resolve,
                                 ring_streamer<Engine>(ring));
}

/// stream_load_gguf of `path` through the ring with `Engine`.
template <device_copy_engine Engine>
[[nodiscard]] Value ring_load_gguf(const std::filesystem::path& path, const LoadOptions& options,
                                   const RingOptions& ring, const RingProgress& callback = {}) {
  return stream_load_gguf(open_for_stream(path, options.mmap), path, options, ring, callback, Engine::resolve,
                          ring_streamer<Engine>(ring));
}

}  // namespace tensorfile::detail
