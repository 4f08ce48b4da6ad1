// SPDX-License-Identifier: MIT
// Ring planning: where each file range lands on the device, and how reads fill the ring's slots.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

// What "the ring" is, in every ring_* header: a bounded set of pinned (page-locked) host buffers,
// the slots, reused in turn. Reader threads pread file ranges into free slots; the device engine
// copies each filled slot to device memory and frees it for the next read. Host memory stays at
// RingOptions::ring_bytes whatever the file size, and reads overlap copies. This file plans where
// each range lands; ring_scheduler.hpp runs the slots, ring_reader.hpp does the reads, and
// ring_load.hpp streams torch records and raw files through it.

namespace tensorfile::detail {

/// A byte range of a file to bring to a device (one storage record).
struct RingRange {
  std::uint64_t file_offset = 0;  ///< first byte in the file
  std::uint64_t size = 0;         ///< bytes
};

/// A run of the file copied as one: file [file_offset, +size) to [device_offset, +size) of allocation `target`.
struct RingSegment {
  std::uint64_t file_offset = 0;    ///< first byte in the file
  std::uint64_t size = 0;           ///< bytes (gaps between merged ranges included)
  std::size_t target = 0;           ///< index of the device allocation
  std::uint64_t device_offset = 0;  ///< byte offset inside it
};

/// Where every range goes: the segments to copy and the allocations they land in.
struct RingLayout {
  std::vector<RingSegment> segments;         ///< in file order
  std::vector<std::size_t> range_targets;    ///< per input range: its allocation
  std::vector<std::uint64_t> range_offsets;  ///< per input range: its byte offset in that allocation
  std::vector<std::uint64_t> target_bytes;   ///< size of each allocation
  std::uint64_t copied_bytes = 0;            ///< sum of segment sizes: what crosses to the device
};

/// New segments start at this device alignment (cudaMalloc's is at least 256).
inline constexpr std::uint64_t ring_segment_alignment = 256;
/// Ranges whose relative file offset is a multiple of this may share a segment (mirrored layout):
/// every dtype's element alignment holds, as torch's 64-byte aligned records keep it.
inline constexpr std::uint64_t ring_element_alignment = 64;
/// Ranges at most this far apart in the file share a segment (the gap bytes are copied too: zip
/// local headers between records are some 100 bytes).
inline constexpr std::uint64_t ring_merge_gap = 4096;

[[nodiscard]] constexpr std::uint64_t ring_align_up(std::uint64_t value, std::uint64_t alignment) noexcept {
  return (value + alignment - 1) / alignment * alignment;
}
[[nodiscard]] constexpr std::uint64_t ring_align_down(std::uint64_t value, std::uint64_t alignment) noexcept {
  return value / alignment * alignment;
}

/// Places `ranges` on the device. With `single_allocation`, everything goes to allocation 0:
/// ranges close together in the file (gap <= ring_merge_gap, relative offset a multiple of 64)
/// share a segment whose device layout mirrors the file, others start a new 256-aligned segment.
/// Otherwise each range is its own allocation. Empty ranges get offset 0 and no segment.
/// Precondition: file_offset + size does not overflow.
[[nodiscard]] inline RingLayout plan_ring_layout(std::span<const RingRange> ranges, bool single_allocation) {
  RingLayout layout;
  layout.range_targets.assign(ranges.size(), 0);
  layout.range_offsets.assign(ranges.size(), 0);
  if (!single_allocation) {
    layout.target_bytes.resize(ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      layout.range_targets[i] = i;
      layout.target_bytes[i] = ranges[i].size;
      if (ranges[i].size == 0) continue;
      layout.segments.push_back({ranges[i].file_offset, ranges[i].size, i, 0});
      layout.copied_bytes += ranges[i].size;
    }
    std::stable_sort(layout.segments.begin(), layout.segments.end(),
                     [](const RingSegment& a, const RingSegment& b) { return a.file_offset < b.file_offset; });
    return layout;
  }

  std::vector<std::size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ranges[a].file_offset < ranges[b].file_offset; });
  std::uint64_t device_end = 0;
  for (const std::size_t i : order) {
    const RingRange& range = ranges[i];
    if (range.size == 0) continue;
    const std::uint64_t range_end = range.file_offset + range.size;
    if (!layout.segments.empty()) {
      RingSegment& last = layout.segments.back();
      const std::uint64_t last_end = last.file_offset + last.size;
      const std::uint64_t relative = range.file_offset - last.file_offset;  // ranges are sorted: >= 0
      if (range.file_offset <= last_end + ring_merge_gap && relative % ring_element_alignment == 0) {
        layout.range_offsets[i] = last.device_offset + relative;
        last.size = std::max(last_end, range_end) - last.file_offset;
        device_end = std::max(device_end, last.device_offset + last.size);
        continue;
      }
    }
    const std::uint64_t start = ring_align_up(device_end, ring_segment_alignment);
    layout.segments.push_back({range.file_offset, range.size, 0, start});
    layout.range_offsets[i] = start;
    device_end = start + range.size;
  }
  for (const RingSegment& segment : layout.segments) layout.copied_bytes += segment.size;
  layout.target_bytes.push_back(device_end);
  return layout;
}

/// One read into a slot: file [file_offset, +length) to slot bytes [slot_offset, +length). The
/// first `required` bytes must arrive; the rest may lie past the end of the file (aligned reads).
struct RingRead {
  std::uint64_t file_offset = 0;  ///< where the read starts (aligned for direct I/O)
  std::size_t slot_offset = 0;    ///< where it lands in the slot (aligned for direct I/O)
  std::size_t length = 0;         ///< bytes asked for
  std::size_t required = 0;       ///< bytes that must be read (less than length only at the tail)
};

/// One copy out of a slot: slot bytes [slot_offset, +length) to [device_offset, +length) of `target`.
struct RingCopy {
  std::size_t slot_offset = 0;      ///< source in the slot
  std::size_t target = 0;           ///< device allocation
  std::uint64_t device_offset = 0;  ///< destination offset in it
  std::size_t length = 0;           ///< bytes
};

/// A slot's worth of work: its reads, then the copies out of it.
struct RingBatch {
  std::vector<RingRead> reads;   ///< in slot order
  std::vector<RingCopy> copies;  ///< issued after every read of the batch is done
  std::size_t slot_used = 0;     ///< slot bytes the reads fill
  std::uint64_t bytes = 0;       ///< bytes copied to the device (progress)
};

/// Cuts `segments` (in file order) into slot-sized batches. Reads start and end on multiples of
/// `io_alignment` (1 for buffered reads, 4096 for O_DIRECT) in the file and in the slot; a
/// segment larger than a slot spans batches; small segments share one; a segment that starts
/// close after the previous read (within ring_merge_gap) extends that read instead of adding one,
/// so many tiny records cost one read per slot. Preconditions: io_alignment is a power of two,
/// slot_bytes a non-zero multiple of it.
[[nodiscard]] inline std::vector<RingBatch> plan_ring_batches(std::span<const RingSegment> segments,
                                                              std::size_t slot_bytes, std::size_t io_alignment) {
  std::vector<RingBatch> batches;
  RingBatch current;
  std::size_t used = 0;
  const auto flush = [&] {
    if (current.reads.empty()) return;
    current.slot_used = used;
    batches.push_back(std::move(current));
    current = RingBatch{};
    used = 0;
  };
  const std::uint64_t align = io_alignment;
  for (const RingSegment& segment : segments) {
    std::uint64_t pos = segment.file_offset;
    const std::uint64_t end = segment.file_offset + segment.size;
    std::uint64_t device = segment.device_offset;
    while (pos < end) {
      std::uint64_t piece_end = 0;
      std::size_t slot_at = 0;
      bool placed = false;
      if (!current.reads.empty()) {  // extend the last read when this piece follows it closely
        RingRead& last = current.reads.back();
        const std::uint64_t last_end = last.file_offset + last.length;
        const bool close = pos >= last.file_offset && pos <= last_end + ring_merge_gap;
        if (close &&
            pos - last.file_offset >= slot_bytes - last.slot_offset) {  // the slot is full up to pos: next slot
          flush();
          continue;
        }
        if (close) {
          const std::uint64_t slot_end_in_file = last.file_offset + (slot_bytes - last.slot_offset);  // aligned
          piece_end = std::min(end, slot_end_in_file);
          const std::uint64_t read_end = std::max(last_end, ring_align_up(piece_end, align));
          last.length = static_cast<std::size_t>(read_end - last.file_offset);
          last.required = std::max(last.required, static_cast<std::size_t>(piece_end - last.file_offset));
          slot_at = last.slot_offset + static_cast<std::size_t>(pos - last.file_offset);
          used = last.slot_offset + last.length;
          placed = true;
        }
      }
      if (!placed) {
        const std::size_t room = slot_bytes - used;
        if (room < io_alignment) {
          flush();
          continue;
        }
        const std::uint64_t start = ring_align_down(pos, align);
        piece_end = std::min(end, start + room);
        const std::uint64_t read_end = ring_align_up(piece_end, align);
        current.reads.push_back(
            {start, used, static_cast<std::size_t>(read_end - start), static_cast<std::size_t>(piece_end - start)});
        slot_at = used + static_cast<std::size_t>(pos - start);
        used += static_cast<std::size_t>(read_end - start);
      }
      const auto length = static_cast<std::size_t>(piece_end - pos);
      current.copies.push_back({slot_at, segment.target, device, length});
      current.bytes += length;
      device += length;
      pos = piece_end;
    }
  }
  flush();
  return batches;
}

}  // namespace tensorfile::detail
