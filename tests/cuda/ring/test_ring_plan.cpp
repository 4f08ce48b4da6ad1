// SPDX-License-Identifier: MIT
// Tests of <tensorfile/cuda/detail/ring_plan.hpp>: device layout of file ranges and slot batches.
#include <tensorfile/cuda/detail/ring_plan.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile::detail;

namespace {

/// Runs a plan on the CPU: reads from `file` into one slot per batch, copies into `targets`;
/// checks every structural promise of plan_ring_batches on the way.
void execute(const std::vector<std::byte>& file, const std::vector<RingBatch>& batches, std::size_t slot_bytes,
             std::size_t align, std::vector<std::vector<std::byte>>& targets, std::vector<std::vector<int>>& writes) {
  std::vector<std::byte> slot(slot_bytes);
  for (const RingBatch& batch : batches) {
    REQUIRE(batch.slot_used <= slot_bytes);
    REQUIRE_FALSE(batch.reads.empty());
    std::fill(slot.begin(), slot.end(), std::byte{0xEE});
    std::size_t end = 0;
    for (const RingRead& read : batch.reads) {
      CHECK(read.file_offset % align == 0);
      CHECK(read.slot_offset % align == 0);
      CHECK(read.length % align == 0);
      CHECK(read.required <= read.length);
      CHECK(read.slot_offset >= end);  // reads do not overlap in the slot
      end = read.slot_offset + read.length;
      CHECK(end <= batch.slot_used);
      REQUIRE(read.file_offset + read.required <= file.size());
      const std::size_t n = std::min<std::size_t>(read.length, file.size() - read.file_offset);
      std::memcpy(slot.data() + read.slot_offset, file.data() + read.file_offset, n);
    }
    std::uint64_t bytes = 0;
    for (const RingCopy& copy : batch.copies) {
      REQUIRE(copy.slot_offset + copy.length <= batch.slot_used);
      REQUIRE(copy.device_offset + copy.length <= targets[copy.target].size());
      std::memcpy(targets[copy.target].data() + copy.device_offset, slot.data() + copy.slot_offset, copy.length);
      for (std::size_t i = 0; i < copy.length; ++i) ++writes[copy.target][copy.device_offset + i];
      bytes += copy.length;
    }
    CHECK(bytes == batch.bytes);
  }
}

std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + (i >> 8) * 7) & 0xFF);
  return out;
}

/// Plans and executes `ranges` of `file`; checks that each range's device bytes equal its file bytes
/// and that every segment byte is written exactly once.
void check_round_trip(const std::vector<std::byte>& file, const std::vector<RingRange>& ranges, bool single,
                      std::size_t slot_bytes, std::size_t align) {
  const RingLayout layout = plan_ring_layout(ranges, single);
  const auto batches = plan_ring_batches(layout.segments, slot_bytes, align);
  std::vector<std::vector<std::byte>> targets;
  std::vector<std::vector<int>> writes;
  for (auto bytes : layout.target_bytes) {
    targets.emplace_back(bytes, std::byte{0xCD});
    writes.emplace_back(bytes, 0);
  }
  execute(file, batches, slot_bytes, align, targets, writes);
  std::uint64_t total = 0;
  for (const auto& batch : batches) total += batch.bytes;
  CHECK(total == layout.copied_bytes);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    INFO("range " << i << " at " << ranges[i].file_offset << " +" << ranges[i].size);
    const auto& target = targets[layout.range_targets[i]];
    REQUIRE(layout.range_offsets[i] + ranges[i].size <= target.size());
    if (ranges[i].size == 0) continue;
    CHECK(std::memcmp(target.data() + layout.range_offsets[i], file.data() + ranges[i].file_offset, ranges[i].size) ==
          0);
  }
  for (const RingSegment& segment : layout.segments) {
    for (std::uint64_t i = 0; i < segment.size; ++i) {
      if (writes[segment.target][segment.device_offset + i] != 1) {
        FAIL("segment byte written " << writes[segment.target][segment.device_offset + i] << " times");
      }
    }
  }
}

}  // namespace

TEST_CASE("plan_ring_layout mirrors torch's 64-byte aligned records in one segment", "[ring][plan]") {
  // data/0 at 64, data/1 at 64 + 4096 + 128 (a local header between), data/2 right after
  const std::vector<RingRange> ranges = {{64, 4096}, {64 + 4096 + 128, 1000}, {64 + 4096 + 128 + 1024 + 64, 8}};
  const RingLayout layout = plan_ring_layout(ranges, true);
  REQUIRE(layout.segments.size() == 1);
  CHECK(layout.segments[0].file_offset == 64);
  CHECK(layout.segments[0].device_offset == 0);
  CHECK(layout.range_offsets == std::vector<std::uint64_t>{0, 4096 + 128, 4096 + 128 + 1024 + 64});
  CHECK(layout.target_bytes == std::vector<std::uint64_t>{4096 + 128 + 1024 + 64 + 8});
  CHECK(layout.copied_bytes == layout.target_bytes[0]);
  for (auto offset : layout.range_offsets) CHECK(offset % 64 == 0);
}

TEST_CASE("plan_ring_layout starts a new aligned segment for far or misaligned ranges", "[ring][plan]") {
  SECTION("a gap larger than ring_merge_gap") {
    const std::vector<RingRange> ranges = {{0, 100}, {100 + ring_merge_gap + 64 - 36, 10}};
    const RingLayout layout = plan_ring_layout(ranges, true);
    REQUIRE(layout.segments.size() == 2);
    CHECK(layout.range_offsets[1] == 256);
    CHECK(layout.target_bytes[0] == 266);
    CHECK(layout.copied_bytes == 110);
  }
  SECTION("a relative offset that is not a multiple of 64 (legacy format: 8-byte counts between)") {
    const std::vector<RingRange> ranges = {{8, 40}, {56, 40}, {104, 40}};
    const RingLayout layout = plan_ring_layout(ranges, true);
    CHECK(layout.segments.size() == 3);
    CHECK(layout.range_offsets == std::vector<std::uint64_t>{0, 256, 512});
  }
  SECTION("unsorted input, empty and repeated ranges") {
    const std::vector<RingRange> ranges = {{4096, 64}, {0, 0}, {0, 128}, {4096, 64}, {128, 64}};
    const RingLayout layout = plan_ring_layout(ranges, true);
    REQUIRE(layout.segments.size() == 1);
    CHECK(layout.range_offsets == std::vector<std::uint64_t>{4096, 0, 0, 4096, 128});
    CHECK(layout.target_bytes[0] == 4096 + 64);
  }
}

TEST_CASE("plan_ring_layout gives each range its own allocation when asked", "[ring][plan]") {
  const std::vector<RingRange> ranges = {{300, 10}, {0, 20}, {50, 0}};
  const RingLayout layout = plan_ring_layout(ranges, false);
  CHECK(layout.target_bytes == std::vector<std::uint64_t>{10, 20, 0});
  CHECK(layout.range_targets == std::vector<std::size_t>{0, 1, 2});
  CHECK(layout.range_offsets == std::vector<std::uint64_t>{0, 0, 0});
  REQUIRE(layout.segments.size() == 2);
  CHECK(layout.segments[0].file_offset == 0);  // file order
  CHECK(layout.segments[0].target == 1);
  CHECK(layout.copied_bytes == 30);
}

TEST_CASE("plan_ring_batches chunks a record larger than a slot", "[ring][plan]") {
  const std::vector<RingSegment> segments = {{100, 10'000, 0, 0}};
  SECTION("buffered") {
    const auto batches = plan_ring_batches(segments, 1024, 1);
    REQUIRE(batches.size() == 10);  // 9 full slots and a 784-byte tail
    for (std::size_t i = 0; i < 9; ++i) {
      CHECK(batches[i].reads.size() == 1);
      CHECK(batches[i].reads[0].file_offset == 100 + i * 1024);
      CHECK(batches[i].copies[0].device_offset == i * 1024);
      CHECK(batches[i].bytes == 1024);
    }
    CHECK(batches[9].bytes == 10'000 - 9 * 1024);
  }
  SECTION("direct I/O: reads widen to 4096-byte blocks") {
    const auto batches = plan_ring_batches(segments, 8192, 4096);
    REQUIRE(batches.size() == 2);
    CHECK(batches[0].reads[0].file_offset == 0);
    CHECK(batches[0].reads[0].length == 8192);
    CHECK(batches[0].copies[0].slot_offset == 100);
    CHECK(batches[0].bytes == 8192 - 100);
    CHECK(batches[1].reads[0].file_offset == 8192);
    CHECK(batches[1].reads[0].length == 4096);
    CHECK(batches[1].reads[0].required == 10'100 - 8192);
  }
  const auto file = pattern(20'000);
  check_round_trip(file, {{100, 10'000}}, true, 1024, 1);
  check_round_trip(file, {{100, 10'000}}, true, 8192, 4096);
}

TEST_CASE("plan_ring_batches packs many tiny records into few reads", "[ring][plan]") {
  std::vector<RingRange> ranges;
  std::uint64_t at = 0;
  for (int i = 0; i < 10'000; ++i) {
    const std::uint64_t size = 1 + static_cast<std::uint64_t>(i % 97);
    ranges.push_back({at, size});
    at += size + static_cast<std::uint64_t>(i % 5) * 3;  // small gaps, odd alignment
  }
  const auto file = pattern(at + 100);
  SECTION("one allocation: misaligned records become separate segments, still one read per slot") {
    const RingLayout layout = plan_ring_layout(ranges, true);
    const auto batches = plan_ring_batches(layout.segments, 1 << 16, 1);
    for (const auto& batch : batches) CHECK(batch.reads.size() == 1);
    CHECK(batches.size() <= at / (1 << 16) + 2);
  }
  SECTION("one allocation per record") {
    const RingLayout layout = plan_ring_layout(ranges, false);
    const auto batches = plan_ring_batches(layout.segments, 1 << 16, 4096);
    for (const auto& batch : batches) CHECK(batch.reads.size() == 1);
  }
  check_round_trip(file, ranges, true, 1 << 16, 1);
  check_round_trip(file, ranges, false, 1 << 16, 4096);
  check_round_trip(file, ranges, true, 4096, 4096);
}

TEST_CASE("plan_ring_batches round-trips random layouts", "[ring][plan]") {
  std::mt19937_64 random(20241121);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t file_size = 1 + random() % 300'000;
    const auto file = pattern(file_size);
    std::vector<RingRange> ranges(1 + random() % 40);
    for (auto& range : ranges) {
      range.file_offset = random() % file_size;
      range.size = random() % 3 == 0 ? random() % 64 : random() % (file_size - range.file_offset + 1);
      if (random() % 2) range.file_offset = range.file_offset / 64 * 64;
      range.size = std::min<std::uint64_t>(range.size, file_size - range.file_offset);
    }
    const std::size_t align = random() % 2 ? 1 : 4096;
    const std::size_t slot = align * (1 + random() % 16) * (align == 1 ? 997 : 1);
    const bool single = random() % 3 != 0;
    INFO("trial " << trial << ", slot " << slot << ", align " << align << ", single " << single);
    check_round_trip(file, ranges, single, slot, align);
  }
}

namespace ring_odr_test {
std::size_t segments_from_second_unit();
}  // namespace ring_odr_test

TEST_CASE("The ring headers link from two translation units", "[ring][odr]") {
  CHECK(ring_odr_test::segments_from_second_unit() == 1);
}
