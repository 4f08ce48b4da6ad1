// SPDX-License-Identifier: MIT
// The ring: reader threads fill pinned slots with pread, copies to the device overlap the reads.
#pragma once

#include <algorithm>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/cuda/detail/ring_plan.hpp"

namespace tensorfile::detail {

/// What the ring needs from a device: pinned host slots, one asynchronous queue per slot ("lane")
/// and a completion marker per lane. The CUDA engine uses cudaHostAlloc, streams and events; the
/// CPU tests use a fake. Calls on different lanes may come from different threads at once.
///
/// - `allocate_pinned(n)`: n bytes of page-locked host memory (page aligned); throws DeviceError
/// - `free_pinned(p)`: releases it; noexcept
/// - `open_lanes(n)`: makes lanes 0..n-1
/// - `copy_async(lane, device, host, n)`: queues a host to device copy on the lane
/// - `record(lane)`: marks the end of the lane's queued copies
/// - `ready(lane)`: whether the marked copies are done, without blocking; throws on a failed copy
/// - `wait(lane)`: blocks until they are done; throws on a failed copy
/// - `drain()`: waits for every lane, ignoring errors (before the slots are freed); noexcept
template <class E>
concept copy_engine = requires(E& engine, std::size_t n, std::size_t lane, std::byte* device, const std::byte* host,
                               std::byte* pinned) {
  { engine.allocate_pinned(n) } -> std::same_as<std::byte*>;
  { engine.free_pinned(pinned) }
  noexcept;
  engine.open_lanes(n);
  engine.copy_async(lane, device, host, n);
  engine.record(lane);
  { engine.ready(lane) } -> std::same_as<bool>;
  engine.wait(lane);
  { engine.drain() }
  noexcept;
};

/// What the ring reads from: positional reads, safe from several threads at once.
///
/// - `read(offset, out)`: fills `out` from `offset`, returning the bytes read: out.size(), or fewer
///   only at the end of the file; throws IoError
/// - `alignment()`: the file offset, length and buffer alignment reads need (1, or 4096 for O_DIRECT)
template <class R>
concept range_reader = requires(const R& reader, std::uint64_t offset, std::span<std::byte> out) {
  { reader.read(offset, out) } -> std::same_as<std::size_t>;
  { reader.alignment() } -> std::convertible_to<std::size_t>;
};

/// Progress of a streamed load: bytes on the device so far, and in all.
using RingProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Progress shared by the runs of one load (one run per device); reports from one thread only.
struct RingProgressState {
  RingProgress callback{};  ///< may be empty
  std::uint64_t done = 0;   ///< bytes reported so far
  std::uint64_t total = 0;  ///< bytes of the whole load
  /// Adds `bytes` and reports.
  void advance(std::uint64_t bytes) {
    done += bytes;
    if (callback) callback(done, total);
  }
};

/// Shape of a ring run.
struct RingConfig {
  std::size_t slots = 1;    ///< pinned slots (lanes)
  std::size_t threads = 1;  ///< reader threads
};

namespace ring_impl {

/// The pinned slots; waits for every lane before freeing them, also when a run fails.
template <copy_engine Engine>
class PinnedSlots {
 public:
  explicit PinnedSlots(Engine& engine) : engine_(engine) {}
  PinnedSlots(const PinnedSlots&) = delete;
  PinnedSlots& operator=(const PinnedSlots&) = delete;
  ~PinnedSlots() {
    engine_.drain();
    for (std::byte* slot : slots_) engine_.free_pinned(slot);
  }
  void allocate(std::size_t count, std::size_t bytes) {
    slots_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) slots_.push_back(engine_.allocate_pinned(bytes));
  }
  [[nodiscard]] std::byte* operator[](std::size_t i) const noexcept { return slots_[i]; }

 private:
  Engine& engine_;
  std::vector<std::byte*> slots_;
};

/// Scheduling state shared by the reader threads and the coordinating (calling) thread.
struct RingState {
  struct InFlight {
    std::size_t slot = 0;
    std::uint64_t bytes = 0;
  };
  std::mutex mutex;
  std::condition_variable slot_freed;   // readers wait for a slot
  std::condition_variable copy_queued;  // the coordinator waits for work or the end
  std::vector<std::size_t> free_slots;
  std::deque<InFlight> in_flight;  // slots whose copies are queued, in queue order
  std::size_t next_batch = 0;
  std::size_t active_readers = 0;
  std::exception_ptr error;
  bool stop = false;

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      if (!error) error = std::move(e);
      stop = true;
    }
    slot_freed.notify_all();
    copy_queued.notify_all();
  }
};

}  // namespace ring_impl

/// Streams `batches` to the device allocations `targets` (base pointers) through `config.slots`
/// pinned slots: `config.threads` reader threads each take a free slot and the next batch, read
/// it with `reader`, queue its copies on the slot's lane and hand the slot to the calling
/// thread, which waits for the copies, frees the slot and reports progress. Pinned memory is
/// `slots` times the largest batch's slot_used, whatever the total size. The first error (an
/// IoError from a read, a FormatError for a file that ends early, a DeviceError from a copy, or
/// an exception from `progress`) stops the run: the threads finish their current batch, every
/// lane is drained, the slots are freed and the error is rethrown. On return every copy is done.
template <copy_engine Engine, range_reader Reader>
void run_ring(std::span<const RingBatch> batches, std::span<std::byte* const> targets, Engine& engine,
              const Reader& reader, RingConfig config, RingProgressState& progress,
              const std::filesystem::path& path_for_errors = {}) {
  if (batches.empty()) return;
  std::size_t slot_bytes = 0;
  for (const RingBatch& batch : batches) slot_bytes = std::max(slot_bytes, batch.slot_used);
  const std::size_t slots = std::clamp<std::size_t>(config.slots, 1, batches.size());
  const std::size_t threads = std::clamp<std::size_t>(config.threads, 1, batches.size());

  ring_impl::PinnedSlots<Engine> pinned(engine);  // declared before the threads: freed after they are joined
  pinned.allocate(slots, slot_bytes);
  engine.open_lanes(slots);

  ring_impl::RingState state;
  state.free_slots.resize(slots);
  for (std::size_t i = 0; i < slots; ++i) state.free_slots[i] = slots - 1 - i;  // slot 0 first
  state.active_readers = threads;

  const auto read_batches = [&] {
    for (;;) {
      std::size_t index = 0;
      std::size_t slot = 0;
      bool last = false;
      {
        std::unique_lock lock(state.mutex);
        state.slot_freed.wait(
            lock, [&] { return state.stop || state.next_batch == batches.size() || !state.free_slots.empty(); });
        if (state.stop || state.next_batch == batches.size()) break;
        index = state.next_batch++;
        last = state.next_batch == batches.size();
        slot = state.free_slots.back();
        state.free_slots.pop_back();
      }
      if (last) state.slot_freed.notify_all();  // readers waiting for a slot have nothing left to do: let them go
      try {
        const RingBatch& batch = batches[index];
        std::byte* buffer = pinned[slot];
        for (const RingRead& read : batch.reads) {
          const std::size_t got = reader.read(read.file_offset, {buffer + read.slot_offset, read.length});
          if (got < read.required) {
            throw FormatError("file ends early; expected " + std::to_string(read.file_offset + read.required) +
                                  " bytes, got " + std::to_string(read.file_offset + got),
                              {.file = path_for_errors, .offset = read.file_offset + got});
          }
        }
        for (const RingCopy& copy : batch.copies) {
          engine.copy_async(slot, targets[copy.target] + copy.device_offset, buffer + copy.slot_offset, copy.length);
        }
        engine.record(slot);
        {
          std::lock_guard lock(state.mutex);
          state.in_flight.push_back({slot, batch.bytes});
        }
        state.copy_queued.notify_one();
      } catch (...) {
        state.fail(std::current_exception());  // the slot stays taken: its lane may hold copies; drain() waits for them
        break;
      }
    }
    {
      std::lock_guard lock(state.mutex);
      --state.active_readers;
    }
    state.copy_queued.notify_all();
  };

  {
    std::vector<std::jthread> readers;
    try {
      readers.reserve(threads);
      for (std::size_t i = 0; i < threads; ++i) readers.emplace_back(read_batches);
    } catch (...) {
      {
        std::lock_guard lock(state.mutex);
        state.active_readers -= threads - readers.size();
      }
      state.fail(std::current_exception());
    }

    try {
      std::vector<ring_impl::RingState::InFlight> queued;
      for (;;) {
        {
          std::unique_lock lock(state.mutex);
          state.copy_queued.wait(lock,
                                 [&] { return state.stop || !state.in_flight.empty() || state.active_readers == 0; });
          if (state.stop || state.in_flight.empty()) break;  // stopped, or every reader done and every copy reaped
          queued.assign(state.in_flight.begin(), state.in_flight.end());
        }
        // Reap a lane that is already done when there is one (lanes may finish out of order), else
        // wait for the oldest.
        auto done =
            std::find_if(queued.begin(), queued.end(), [&](const auto& item) { return engine.ready(item.slot); });
        if (done == queued.end()) {
          done = queued.begin();
          engine.wait(done->slot);
        }
        const auto finished = *done;
        {
          std::lock_guard lock(state.mutex);
          state.in_flight.erase(std::find_if(state.in_flight.begin(), state.in_flight.end(),
                                             [&](const auto& item) { return item.slot == finished.slot; }));
          state.free_slots.push_back(finished.slot);
        }
        state.slot_freed.notify_one();
        progress.advance(finished.bytes);
      }
    } catch (...) {
      state.fail(std::current_exception());
    }
  }  // readers joined here; then `pinned` drains every lane and frees the slots

  if (state.error) std::rethrow_exception(state.error);
}

/// Calls `fn(i)` for every i in [0, count) on up to `threads` threads (the calling thread too).
/// The first exception stops the others after their current item and is rethrown.
template <class Fn>
void parallel_for(std::size_t count, std::size_t threads, Fn&& fn) {
  if (count == 0) return;
  std::mutex mutex;
  std::size_t next = 0;
  std::exception_ptr error;
  const auto work = [&] {
    for (;;) {
      std::size_t i = 0;
      {
        std::lock_guard lock(mutex);
        if (error || next == count) return;
        i = next++;
      }
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        return;
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    const std::size_t extra = std::clamp<std::size_t>(threads, 1, count) - 1;
    try {
      helpers.reserve(extra);
      for (std::size_t i = 0; i < extra; ++i) helpers.emplace_back(work);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!error) error = std::current_exception();
    }
    work();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tensorfile::detail
