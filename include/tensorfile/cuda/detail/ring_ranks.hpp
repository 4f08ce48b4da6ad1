// SPDX-License-Identifier: MIT
// Tensor-parallel loads to several devices: every rank's part of each tensor streamed through the ring to that rank's
// device (one ring, with its lanes, per device; the devices at once), one state dict per rank.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/cuda/detail/ring_load.hpp"
#include "tensorfile/cuda/detail/ring_plan.hpp"
#include "tensorfile/cuda/detail/ring_scheduler.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/detail/slice_reads.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"
#include "tensorfile/formats/gguf/header.hpp"
#include "tensorfile/formats/gguf/load.hpp"
#include "tensorfile/formats/safetensors/detail/header_parser.hpp"  // read_safetensors_head
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/slice.hpp"
#include "tensorfile/formats/torch/load.hpp"

namespace tensorfile::detail {

/// One tensor of a file as the rank loads see it.
struct RankTensor {
  std::string path;                     ///< as named_tensors() spells it
  DType dtype = DType::UInt8;           ///< element type
  Shape shape{};                        ///< the file's extents (a GGUF block tensor: its raw bytes', as it loads)
  std::optional<std::uint64_t> offset;  ///< its first byte in the file when its bytes lie there raw, in C order
  bool requires_grad = false;           ///< as saved
  const GgmlTypeInfo* block = nullptr;  ///< a GGUF block tensor's type: its slice rules see `elements`
  Shape elements{};                     ///< a GGUF block tensor's shape in elements
};

/// One rank's part of one tensor: the slice its plan gives (nullopt: the whole tensor) and the part's shape.
struct RankPart {
  std::size_t tensor = 0;              ///< index in the RankTensor list
  std::optional<TensorSlice> slice;    ///< the part kept
  Shape shape{};                       ///< the part's extents
  RowRuns runs{};                      ///< its bytes in the tensor's (read by the ring when the tensor has an offset)
  std::optional<std::size_t> range{};  ///< its range in the rank's group, when streamed
};

/// The devices of `spec` in rank order, checked against its plan and resolved by `resolve(Device) -> Device`: one per
/// rank, each a CUDA device ("cuda", "cuda:N"). A count other than plan.world, a string Device::parse refuses, or a
/// device that is not CUDA is an ArgumentError naming the rank and `path`; a device `resolve` cannot find the
/// DeviceError it throws, naming the rank.
template <class Resolve>
[[nodiscard]] std::vector<Device> rank_devices(const ParallelDevices& spec, Resolve&& resolve,
                                               const std::filesystem::path& path) {
  if (static_cast<std::int64_t>(spec.devices.size()) != spec.plan.world) {
    throw ArgumentError("ParallelDevices gives " + std::to_string(spec.devices.size()) + " devices for a world of " +
                            std::to_string(spec.plan.world) + "; expected one device per rank",
                        {.file = path});
  }
  std::vector<Device> out;
  out.reserve(spec.devices.size());
  for (std::size_t rank = 0; rank < spec.devices.size(); ++rank) {
    const std::string& text = spec.devices[rank];
    const std::string which = "the device of rank " + std::to_string(rank) + ", \"" + text + "\"";
    Device device;
    try {
      device = Device::parse(text);
    } catch (const ArgumentError& error) {
      throw ArgumentError(which + ", is no device (" + error.reason() + ")", {.file = path});
    }
    if (!device.is_cuda()) {
      throw ArgumentError(which + ", is not a CUDA device; expected \"cuda\" or \"cuda:N\"", {.file = path});
    }
    try {
      out.push_back(resolve(device));
    } catch (const DeviceError& error) {
      throw DeviceError(which + ": " + error.reason(), {.file = path});
    }
  }
  return out;
}

/// Plans `group` for rank parts: part k's runs (`runs[k]`, counted from the tensor's first byte at `offsets[k]` in
/// the file) land back to back in one allocation, each part from a 256-aligned offset, so that every part is its own
/// C-order bytes on the device and nothing else is copied there; group.ranges[k] becomes {the part's first byte in the
/// file, the part's bytes}, which group_storages() slices. Runs that touch in the file and on the device are one
/// segment; the segments are in file order, as plan_ring_batches() reads them (runs less than ring_merge_gap apart
/// share a read, each its own copy).
inline void plan_part_layout(RingGroup& group, std::span<const RowRuns> runs, std::span<const std::uint64_t> offsets) {
  RingLayout& layout = group.layout;
  layout = RingLayout{};
  group.ranges.assign(runs.size(), RingRange{});
  layout.range_targets.assign(runs.size(), 0);
  layout.range_offsets.assign(runs.size(), 0);
  std::uint64_t device_end = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const RowRuns& part = runs[k];
    if (part.rows == 0) continue;
    const std::uint64_t start = ring_align_up(device_end, ring_segment_alignment);
    group.ranges[k] = {offsets[k] + part.first, part.rows * part.run};
    layout.range_offsets[k] = start;
    for (std::uint64_t row = 0; row < part.rows; ++row) {
      const std::uint64_t file_at = offsets[k] + part.first + row * part.stride;
      const std::uint64_t device_at = start + row * part.run;
      if (!layout.segments.empty()) {
        RingSegment& last = layout.segments.back();
        if (last.file_offset + last.size == file_at && last.device_offset + last.size == device_at) {
          last.size += part.run;
          continue;
        }
      }
      layout.segments.push_back({file_at, part.run, 0, device_at});
    }
    device_end = start + part.rows * part.run;
  }
  std::stable_sort(layout.segments.begin(), layout.segments.end(),
                   [](const RingSegment& a, const RingSegment& b) { return a.file_offset < b.file_offset; });
  for (const RingSegment& segment : layout.segments) layout.copied_bytes += segment.size;
  layout.target_bytes.push_back(device_end);
}

/// The tensors of the open torch zip file `file`: a meta load whose storage records become stand-ins (no data read),
/// each tensor with its record's offset where the record is stored raw and the tensor is C-order contiguous in it.
[[nodiscard]] inline std::vector<RankTensor> torch_rank_tensors(const FileHandle& file,
                                                                const std::filesystem::path& path,
                                                                const LoadOptions& options) {
  struct Record {
    std::uint64_t offset = 0;
    bool raw = false;
  };
  std::unordered_map<const void*, Record> records;
  LoadOptions scan = options;
  scan.mmap = MapMode::copy_on_write;
  scan.verify_crc = false;
  scan.select = {};
  scan.slice = {};
  scan.torch.storage_source = [&records](const StorageRecord& record) -> std::optional<Storage> {
    Storage stand_in = meta_storage(static_cast<std::size_t>(record.size));
    records.emplace(stand_in.owner(), Record{record.file_offset, record.raw});
    return stand_in;
  };
  const Value outline = load_torch_file(file, path, scan);
  std::vector<RankTensor> out;
  for (const auto& [name, tensor] : named_tensors(outline)) {
    RankTensor& entry = out.emplace_back();
    entry.path = name;
    entry.dtype = tensor.dtype();
    entry.shape = tensor.sizes();
    entry.requires_grad = tensor.requires_grad();
    const auto record = records.find(tensor.storage().owner());
    if (record == records.end() || !record->second.raw || !tensor.is_contiguous()) continue;
    entry.offset = record->second.offset + static_cast<std::uint64_t>(tensor.storage_offset()) * tensor.element_size();
  }
  return out;
}

/// The tensors of the open safetensors file `file` (its header validated), every one with its offset.
[[nodiscard]] inline std::vector<RankTensor> safetensors_rank_tensors(const FileHandle& file,
                                                                      const std::filesystem::path& path,
                                                                      const LoadOptions& options) {
  const std::uint64_t size = file.size();
  const std::vector<std::byte> head = read_safetensors_head(file, size, options.safetensors.max_header_bytes);
  const SafetensorsHeader header = parse_safetensors_header(head, size, path, options.safetensors.max_header_bytes);
  std::vector<RankTensor> out;
  out.reserve(header.tensors.size());
  for (const SafetensorsTensorInfo& info : header.tensors) {
    out.push_back({info.name, info.dtype, info.shape, header.data_offset + info.begin, false});
  }
  return out;
}

/// The tensors of a GGUF file's validated header, every one with its offset in the file; block tensors as their raw
/// bytes, their shapes in elements kept for the slice rules.
[[nodiscard]] inline std::vector<RankTensor> gguf_rank_tensors(const GgufHeader& header) {
  std::vector<RankTensor> out;
  out.reserve(header.tensors.size());
  for (const GgufTensorInfo& info : header.tensors) {
    const GgmlTypeInfo& type = ggml_type_info(info.type);
    RankTensor& tensor = out.emplace_back();
    tensor.path = info.name;
    tensor.dtype = type.dtype.value_or(DType::UInt8);
    tensor.shape = info.storage_shape();
    tensor.offset = header.data_offset + info.offset;
    if (type.is_quantized()) {
      tensor.block = &type;
      tensor.elements = info.shape();
    }
  }
  return out;
}

/// Loads every rank of `spec` from the open torch zip, safetensors or GGUF file `file` (named `path` in messages), rank
/// r's part of each tensor on spec.devices[r] (resolved by `resolve(Device) -> Device`): one state dict per rank, path
/// -> the part (t.tensor_split or t.chunk of the plan; replicated tensors whole on every device), in the file's order.
/// The parts whose bytes lie raw in the file are grouped per rank (each part's runs, as formats/detail/slice_reads.hpp
/// plans a slice's bytes, back to back in one allocation per device: plan_part_layout) and streamed with
/// `stream(const FileHandle&, const RingGroup&, RingProgressState&) -> std::vector<Storage>`, every device's group at
/// once on threads of its own (its ring, its lanes); each rank's bytes are read once, a replicated tensor once per
/// device. A GGUF block tensor's rules see its shape in elements, and a slice of its last dimension must keep whole
/// blocks (else an ArgumentError naming it); each rank's dict has the file's attributes (metadata, ggml types). The
/// others (deflated or big-endian records, views with strides of their own) are read once on the host and
/// each rank's part copied to its device with Tensor::to. `options`: select (the tensors kept; select_drops as the
/// loaders': a dropped tensor is a meta stand-in of the file's shape), the ring's settings, the safetensors header
/// bound; `slice`, `map_location` and `into` must be unset (ArgumentError). `callback` gets (done, total) for the bytes
/// of every device, one call at a time.
template <class Resolve, class Stream>
[[nodiscard]] std::vector<Value> stream_load_ranks(const FileHandle& file, const std::filesystem::path& path,
                                                   const ParallelDevices& spec, const LoadOptions& options,
                                                   const RingOptions& ring, const RingProgress& callback,
                                                   Resolve&& resolve, Stream&& stream) {
  check_ring_options(ring);
  if (options.slice) {
    throw ArgumentError("LoadOptions::slice is set; cuda::load_ranks() takes each rank's slices from its plan",
                        {.file = path});
  }
  if (options.map_location.function() != nullptr || options.map_location.single_device("cuda::load_ranks()")) {
    throw ArgumentError(
        "LoadOptions::map_location is set; cuda::load_ranks() sends each rank to its device in "
        "ParallelDevices::devices",
        {.file = path});
  }
  refuse_into_buffers(options, "cuda::load_ranks()", path);
  const auto naming_file = [&](auto&& fn) {  // the plan's ArgumentErrors name no file: this one
    try {
      return fn();
    } catch (const ArgumentError& error) {
      if (!error.path().empty()) throw;
      throw ArgumentError(error.reason(), {.file = path, .member = error.member(), .offset = error.offset()});
    }
  };
  std::vector<SliceRule> rules;  // per rank; a bad plan is refused here
  for (std::int64_t rank = 0; rank < std::max<std::int64_t>(spec.plan.world, 1); ++rank) {
    ParallelPlan plan = spec.plan;
    plan.rank = rank;
    rules.push_back(naming_file([&] { return parallel_slices(std::move(plan)); }));
  }
  const std::vector<Device> devices = rank_devices(spec, resolve, path);

  std::byte magic[format_sniff_bytes] = {};
  const auto got = static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), sizeof magic));
  file.read_exact(0, std::span<std::byte>(magic, got));
  const FileFormat format = detect_format(std::span<const std::byte>(magic, got));
  std::vector<RankTensor> tensors;
  Value attributes;  // a GGUF file's metadata and ggml types, on every rank's dict
  if (format == FileFormat::torch_zip) {
    tensors = torch_rank_tensors(file, path, options);
  } else if (format == FileFormat::safetensors) {
    tensors = safetensors_rank_tensors(file, path, options);
  } else if (format == FileFormat::gguf) {
    const GgufHeader header = read_gguf_file_header(file, path, options.gguf);
    tensors = gguf_rank_tensors(header);
    attributes = gguf_meta_dict(header).as_dict().attributes();
  } else {
    throw ArgumentError("the file is " + std::string(format_name(format)) +
                            " data; cuda::load_ranks() expects a torch zip, safetensors or GGUF file",
                        {.file = path});
  }

  const std::size_t world = devices.size();
  std::vector<std::vector<RankPart>> parts(world);
  std::vector<RingGroup> groups(world);
  std::unordered_set<std::string, KeyedStringHash> on_host;  // kept tensors without raw bytes in the file
  for (std::size_t r = 0; r < world; ++r) {
    std::vector<RowRuns> runs;
    std::vector<std::uint64_t> offsets;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const RankTensor& tensor = tensors[i];
      if (options.select && !options.select(tensor.path)) {
        if (!options.select_drops) parts[r].push_back({i, std::nullopt, tensor.shape, {}, std::nullopt});
        continue;
      }
      RankPart part{i,
                    naming_file([&] { return rules[r](tensor.path, tensor.block ? tensor.elements : tensor.shape); }),
                    tensor.shape,
                    {},
                    std::nullopt};
      if (part.slice && tensor.block && static_cast<std::size_t>(part.slice->dim) + 1 == tensor.shape.size()) {
        std::tie(part.slice->begin, part.slice->end) = ggml_block_byte_range(
            *tensor.block, part.slice->begin, part.slice->end, {.file = path, .member = tensor.path});
      }
      const TensorSlice whole{0, 0, tensor.shape.empty() ? 1 : tensor.shape[0]};
      const TensorSlice& cut = part.slice ? *part.slice : whole;
      if (part.slice) part.shape[static_cast<std::size_t>(cut.dim)] = cut.end - cut.begin;
      if (tensor.offset) {
        if (tensor.shape.empty()) {
          part.runs = {0, element_size(tensor.dtype), element_size(tensor.dtype), 1};  // a 0-d tensor: one element
        } else {
          part.runs =
              row_runs(tensor.shape, element_size(tensor.dtype), static_cast<std::size_t>(cut.dim), cut.begin, cut.end);
        }
        part.range = runs.size();
        runs.push_back(part.runs);
        offsets.push_back(*tensor.offset);
      } else {
        on_host.insert(tensor.path);
      }
      parts[r].push_back(std::move(part));
    }
    groups[r].device = devices[r];
    plan_part_layout(groups[r], runs, offsets);
  }

  // Progress of every device's ring, summed and reported one call at a time.
  std::mutex progress_mutex;
  std::uint64_t total = 0;
  std::uint64_t done = 0;
  for (const RingGroup& group : groups) total += group.layout.copied_bytes;
  std::vector<RingProgressState> progress(world);
  for (std::size_t r = 0; r < world; ++r) {
    progress[r].total = groups[r].layout.copied_bytes;
    if (!callback) continue;
    progress[r].callback = [&, last = std::uint64_t{0}](std::uint64_t rank_done, std::uint64_t) mutable {
      const std::lock_guard lock(progress_mutex);
      done += rank_done - last;
      last = rank_done;
      callback(done, total);
    };
  }
  std::vector<std::vector<Storage>> storages(world);
  parallel_for(world, world, [&](std::size_t r) {
    storages[r] = stream(file, static_cast<const RingGroup&>(groups[r]), progress[r]);
  });
  if (total == 0 && callback) callback(0, 0);

  std::unordered_map<std::string, Tensor, KeyedStringHash> host;  // the tensors read on the host, whole
  if (!on_host.empty()) {
    LoadOptions whole = options;
    whole.map_location = "cpu";
    whole.select = [&on_host](std::string_view name) { return on_host.count(std::string(name)) != 0; };
    whole.select_drops = true;
    for (const auto& [name, tensor] : named_tensors(load_torch_file(file, path, whole))) host.emplace(name, tensor);
  }

  std::vector<Value> out;
  out.reserve(world);
  for (std::size_t r = 0; r < world; ++r) {
    Dict dict;
    dict.ordered = true;
    if (!attributes.is_none()) dict.set_attributes(attributes);
    for (const RankPart& part : parts[r]) {
      const RankTensor& tensor = tensors[part.tensor];
      if (part.range) {
        dict.set(tensor.path, Tensor(storages[r][*part.range], tensor.dtype, part.shape, contiguous_strides(part.shape),
                                     0, tensor.requires_grad));
        continue;
      }
      const auto found = host.find(tensor.path);
      if (found == host.end()) {  // dropped by select (select_drops unset): a meta stand-in of the file's shape
        std::size_t bytes = element_size(tensor.dtype);
        for (const std::int64_t extent : part.shape) bytes *= static_cast<std::size_t>(extent);
        dict.set(tensor.path, Tensor(meta_storage(bytes), tensor.dtype, part.shape));
        continue;
      }
      const Tensor& whole = found->second;
      if (whole.device().is_meta()) {  // saved on meta: no bytes anywhere, as torch loads it
        dict.set(
            tensor.path,
            part.slice ? whole.narrow(part.slice->dim, part.slice->begin, part.slice->end - part.slice->begin) : whole);
        continue;
      }
      const Tensor cut =
          part.slice ? whole.narrow(part.slice->dim, part.slice->begin, part.slice->end - part.slice->begin) : whole;
      dict.set(tensor.path, cut.contiguous().to(devices[r]));
    }
    out.emplace_back(std::move(dict));
  }
  return out;
}

/// stream_load_ranks of `path` through the ring with `Engine` (every device's group on its own engine).
template <device_copy_engine Engine>
[[nodiscard]] std::vector<Value> ring_load_ranks(const std::filesystem::path& path, const ParallelDevices& spec,
                                                 const LoadOptions& options, const RingOptions& ring,
                                                 const RingProgress& callback = {}) {
  return stream_load_ranks(open_for_stream(path, options.mmap), path, spec, options, ring, callback, Engine::resolve,
                           ring_streamer<Engine>(ring));
}

}  // namespace tensorfile::detail
