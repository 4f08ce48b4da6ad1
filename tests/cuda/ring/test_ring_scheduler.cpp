// SPDX-License-Identifier: MIT
// Tests of <tensorfile/cuda/detail/ring_scheduler.hpp> with the fake copy engine: ordering, bounded
// memory, chunking, tiny records, failing reads and copies, progress.
#include <tensorfile/cuda/detail/ring_plan.hpp>
#include <tensorfile/cuda/detail/ring_scheduler.hpp>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cuda/ring/fake_copy_engine.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
using namespace tensorfile::detail;
using tensorfile_test::FakeCopyEngine;
using tensorfile_test::FakeEngineConfig;
using tensorfile_test::FakeReader;
using tensorfile_test::FakeTracker;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed = 1) {
  std::vector<std::byte> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return out;
}

/// A ring run over `ranges` of an in-memory file, with everything the tests look at afterwards.
struct Run {
  std::vector<std::byte> file;
  std::vector<RingRange> ranges;
  RingLayout layout;
  std::vector<RingBatch> batches;
  std::vector<std::vector<std::byte>> device;  // the "device" allocations
  std::shared_ptr<FakeTracker> tracker = std::make_shared<FakeTracker>();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> progress;
  std::size_t ring_bytes = 0;

  Run(std::vector<std::byte> bytes, std::vector<RingRange> wanted, std::size_t slot_bytes, std::size_t align = 1,
      bool single = true)
      : file(std::move(bytes)), ranges(std::move(wanted)) {
    layout = plan_ring_layout(ranges, single);
    batches = plan_ring_batches(layout.segments, slot_bytes, align);
    for (auto size : layout.target_bytes) device.emplace_back(size, std::byte{0xCD});
  }

  /// Runs the ring; the reader is made here so each run sees its own failure knob.
  void go(RingConfig config, FakeEngineConfig engine_config = {}, std::uint64_t fail_read_at = UINT64_MAX,
          std::size_t align = 1, RingProgress extra = {}) {
    FakeEngineConfig quiet = engine_config;
    FakeCopyEngine engine(quiet, tracker);
    FakeReader reader(file, tracker, align);
    reader.fail_at = fail_read_at;
    std::vector<std::byte*> bases;
    for (auto& d : device) bases.push_back(d.data());
    RingProgressState state{[&](std::uint64_t done, std::uint64_t total) {
                              progress.emplace_back(done, total);
                              if (extra) extra(done, total);
                            },
                            0, layout.copied_bytes};
    std::size_t slot = 0;
    for (const auto& batch : batches) slot = std::max(slot, batch.slot_used);
    ring_bytes = slot * std::clamp<std::size_t>(config.slots, 1, std::max<std::size_t>(1, batches.size()));
    run_ring(std::span<const RingBatch>(batches), std::span<std::byte* const>(bases), engine, reader, config, state,
             "fake.bin");
  }

  void check_data() const {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].size == 0) continue;
      const auto& target = device[layout.range_targets[i]];
      if (std::memcmp(target.data() + layout.range_offsets[i], file.data() + ranges[i].file_offset, ranges[i].size) !=
          0) {
        FAIL("range " << i << " differs on the device");
      }
    }
  }

  void check_clean() const {
    std::lock_guard lock(tracker->mutex);
    INFO((tracker->violation_notes.empty() ? std::string() : tracker->violation_notes.front()));
    CHECK(tracker->violations == 0);
    CHECK(tracker->live_pinned == 0);                                           // every slot freed
    for (const auto& [lane, pending] : tracker->lanes) CHECK(pending.empty());  // every lane drained
  }

  void check_progress() const {
    REQUIRE_FALSE(progress.empty());
    std::uint64_t last = 0;
    for (const auto& [done, total] : progress) {
      CHECK(total == layout.copied_bytes);
      CHECK(done >= last);
      CHECK(done <= total);
      last = done;
    }
    CHECK(progress.back().first == layout.copied_bytes);
    CHECK(progress.size() == batches.size());
  }
};

/// torch-like records: 64-byte aligned, a local header's gap between, sizes spread over decades.
std::vector<RingRange> torch_like_records(std::size_t count, std::uint64_t max_size, unsigned seed,
                                          std::uint64_t* file_size) {
  std::mt19937_64 random(seed);
  std::vector<RingRange> out;
  std::uint64_t at = 64;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t size = 1 + random() % max_size;
    out.push_back({at, size});
    at = ring_align_up(at + size + 40, 64);
  }
  *file_size = at + 1000;
  return out;
}

}  // namespace

TEST_CASE("run_ring delivers every byte, whatever the slots and threads", "[ring][scheduler]") {
  std::uint64_t size = 0;
  const auto records = torch_like_records(300, 50'000, 7, &size);
  for (const std::size_t slots : {1u, 2u, 3u, 16u}) {
    for (const std::size_t threads : {1u, 2u, 4u, 9u}) {
      for (const std::size_t align : {1u, 4096u}) {
        INFO("slots " << slots << ", threads " << threads << ", align " << align);
        Run run(random_bytes(size, 3), records, 64 * 1024, align);
        REQUIRE(run.batches.size() > 20);
        run.go({.slots = slots, .threads = threads}, {}, UINT64_MAX, align);
        run.check_data();
        run.check_clean();
        run.check_progress();
      }
    }
  }
}

TEST_CASE("run_ring never holds more pinned memory than the ring", "[ring][scheduler]") {
  // A 48 MiB "file" through a 1 MiB ring: host memory stays at the ring size.
  const std::size_t file_size = std::size_t{48} << 20;
  Run run(random_bytes(file_size, 5), {{0, file_size}}, 256 * 1024);
  run.go({.slots = 4, .threads = 4});
  run.check_data();
  run.check_clean();
  CHECK(run.ring_bytes == std::size_t{1} << 20);
  CHECK(run.tracker->peak_pinned <= run.ring_bytes);
  CHECK(run.batches.size() == 192);
}

TEST_CASE("run_ring sizes the slots to the work when the file is small", "[ring][scheduler]") {
  Run run(random_bytes(1000), {{10, 500}}, 16 << 20);
  run.go({.slots = 16, .threads = 8});
  run.check_data();
  run.check_clean();
  CHECK(run.tracker->peak_pinned == 500);  // one slot, of the batch's size
}

TEST_CASE("run_ring chunks records larger than a slot", "[ring][scheduler]") {
  const std::size_t file_size = 3'000'000;
  Run run(random_bytes(file_size, 9), {{64, 2'000'000}, {2'000'128, 999'000}}, 100'000);
  run.go({.slots = 3, .threads = 3});
  run.check_data();
  run.check_clean();
  run.check_progress();
  CHECK(run.batches.size() == 30);
}

TEST_CASE("run_ring moves many tiny records with few reads", "[ring][scheduler]") {
  std::vector<RingRange> ranges;
  std::uint64_t at = 0;
  for (int i = 0; i < 20'000; ++i) {
    ranges.push_back({at, static_cast<std::uint64_t>(1 + i % 13)});
    at += 1 + static_cast<std::uint64_t>(i % 13) + 8;  // legacy-like: 8 bytes between records
  }
  for (const bool single : {true, false}) {
    INFO("single allocation " << single);
    Run run(random_bytes(at + 8, 11), ranges, 32 * 1024, 1, single);
    run.go({.slots = 4, .threads = 3});
    run.check_data();
    run.check_clean();
    run.check_progress();
    CHECK(run.tracker->reads == run.batches.size());  // one read per slot, not per record
  }
}

TEST_CASE("run_ring propagates a failing read without deadlock or leak", "[ring][scheduler]") {
  std::uint64_t size = 0;
  const auto records = torch_like_records(200, 40'000, 13, &size);
  for (const std::size_t threads : {1u, 4u}) {
    for (const double where : {0.0, 0.5, 0.99}) {
      INFO("threads " << threads << ", failing at " << where);
      Run run(random_bytes(size), records, 32 * 1024);
      const auto fail_at = static_cast<std::uint64_t>(where * static_cast<double>(size - 2000)) + 1000;
      try {
        run.go({.slots = 3, .threads = threads}, {}, fail_at);
        FAIL("expected an IoError");
      } catch (const IoError& e) {
        CHECK(e.error_number() == EIO);
        CHECK(e.path() == "fake.bin");
        CHECK(e.offset() == fail_at);
        CHECK(std::string(e.what()) ==
              "tensorfile: fake.bin: cannot read: Input/output error (at byte " + std::to_string(fail_at) + ")");
      }
      run.check_clean();
      for (std::size_t i = 1; i < run.progress.size(); ++i) CHECK(run.progress[i].first >= run.progress[i - 1].first);
    }
  }
}

TEST_CASE("run_ring reports a file that ends early", "[ring][scheduler]") {
  Run run(random_bytes(5000), {{0, 5000}}, 1024);
  run.file.resize(3000);  // the file shrank after planning
  try {
    run.go({.slots = 2, .threads = 1});  // one reader: the first short batch is the one reported
    FAIL("expected a FormatError");
  } catch (const FormatError& e) {
    CHECK(std::string(e.what()) ==
          "tensorfile: fake.bin: file ends early; expected 3072 bytes, got 3000 (at byte 3000)");
  }
  run.check_clean();
}

TEST_CASE("run_ring propagates a failing copy without deadlock or leak", "[ring][scheduler]") {
  std::uint64_t size = 0;
  const auto records = torch_like_records(200, 40'000, 17, &size);
  SECTION("queueing a copy fails") {
    for (const std::size_t at : {std::size_t{0}, std::size_t{7}, std::size_t{100}}) {
      Run run(random_bytes(size), records, 32 * 1024);
      CHECK_THROWS_MATCHES(run.go({.slots = 4, .threads = 4}, {.fail_copy_at = at}), DeviceError,
                           Catch::Matchers::Predicate<DeviceError>([](const DeviceError& e) {
                             return std::string(e.what()) == "tensorfile: cudaMemcpyAsync failed: fake copy failure";
                           }));
      run.check_clean();
    }
  }
  SECTION("a queued copy fails later (event)") {
    for (const std::size_t at : {std::size_t{0}, std::size_t{5}, std::size_t{40}}) {
      Run run(random_bytes(size), records, 32 * 1024);
      CHECK_THROWS_AS(run.go({.slots = 4, .threads = 4}, {.fail_wait_at = at}), DeviceError);
      run.check_clean();
      CHECK(run.progress.size() == at);  // progress stops at the failed copy
    }
  }
  SECTION("pinned memory cannot be allocated") {
    Run run(random_bytes(size), records, 32 * 1024);
    CHECK_THROWS_AS(run.go({.slots = 4, .threads = 4}, {.fail_pinned_at = 2}), DeviceError);
    run.check_clean();
    CHECK(run.progress.empty());
  }
  SECTION("the progress callback throws") {
    Run run(random_bytes(size), records, 32 * 1024);
    int calls = 0;
    CHECK_THROWS_AS(run.go({.slots = 4, .threads = 4}, {}, UINT64_MAX, 1,
                           [&](std::uint64_t, std::uint64_t) {
                             if (++calls == 3) throw std::runtime_error("cancelled");
                           }),
                    std::runtime_error);
    run.check_clean();
  }
}

TEST_CASE("run_ring with nothing to do does nothing", "[ring][scheduler]") {
  Run run(random_bytes(10), {{0, 0}}, 1024);
  CHECK(run.batches.empty());
  run.go({.slots = 4, .threads = 4});
  CHECK(run.tracker->peak_pinned == 0);
  CHECK(run.progress.empty());
}

TEST_CASE("parallel_for visits every index once and propagates the first error", "[ring][scheduler]") {
  std::vector<std::atomic<int>> seen(1000);
  parallel_for(seen.size(), 8, [&](std::size_t i) { seen[i].fetch_add(1); });
  for (const auto& count : seen) CHECK(count.load() == 1);
  std::atomic<int> done{0};
  CHECK_THROWS_WITH(parallel_for(1000, 4,
                                 [&](std::size_t i) {
                                   if (i == 10) throw IoError("cannot read", EIO);
                                   done.fetch_add(1);
                                 }),
                    "tensorfile: cannot read: Input/output error");
  CHECK(done.load() < 1000);
  parallel_for(0, 4, [](std::size_t) { FAIL("called for an empty range"); });
}
