// SPDX-License-Identifier: MIT
// A CPU stand-in for the CUDA copy engine and a fault-injecting reader, for the ring's tests.
#pragma once

#include <tensorfile/core/error.hpp>
#include <tensorfile/core/heap_backend.hpp>
#include <tensorfile/core/storage.hpp>
#include <tensorfile/core/tensor.hpp>
#include <tensorfile/cuda/detail/ring_scheduler.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace tensorfile_test {

/// Host memory that claims to be on cuda:N: what the fake engine allocates as "device" memory.
class FakeDeviceBackend {
 public:
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "fake_cuda"; }
  FakeDeviceBackend(std::size_t size, tensorfile::Device device)
      : memory_(size == 0 ? nullptr : new std::byte[size]), size_(size), device_(device) {
    if (size != 0) std::memset(memory_.get(), 0xCD, size);  // garbage, as fresh device memory
  }
  [[nodiscard]] std::byte* data() const noexcept { return memory_.get(); }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }
  [[nodiscard]] tensorfile::Device device() const noexcept { return device_; }
  [[nodiscard]] bool writable() const noexcept { return true; }

 private:
  std::unique_ptr<std::byte[]> memory_;
  std::size_t size_;
  tensorfile::Device device_;
};

/// What went wrong or how far things went, shared by a FakeCopyEngine and a FakeReader so that
/// the reader can tell when a slot is overwritten while a copy out of it is still pending.
struct FakeTracker {
  std::mutex mutex;
  struct Pending {
    std::byte* device;
    const std::byte* host;
    std::size_t bytes;
  };
  std::map<std::size_t, std::vector<Pending>> lanes;  // queued, not yet completed copies
  std::map<std::size_t, std::size_t> recorded;        // lane -> copies covered by its marker
  std::map<const std::byte*, std::size_t> pinned;     // live pinned buffers
  std::size_t live_pinned = 0;
  std::size_t peak_pinned = 0;
  std::size_t copies = 0;
  std::size_t completed = 0;
  std::size_t reads = 0;
  std::uint64_t device_bytes = 0;  // allocated by allocate_device, in all
  std::uint64_t copied_bytes = 0;  // queued by copy_async, in all
  std::size_t violations = 0;      // reuse of a slot before its copies completed, etc.
  std::vector<std::string> violation_notes;

  void violation(std::string note) {
    ++violations;
    if (violation_notes.size() < 10) violation_notes.push_back(std::move(note));
  }
  /// Whether [p, p+n) overlaps a pending copy's source. Caller holds the mutex.
  bool overlaps_pending(const std::byte* p, std::size_t n) const {
    for (const auto& [lane, pending] : lanes) {
      for (const Pending& copy : pending) {
        if (p < copy.host + copy.bytes && copy.host < p + n) return true;
      }
    }
    return false;
  }
};

/// Fault injection and timing knobs of the fake engine.
struct FakeEngineConfig {
  std::size_t devices = 2;                ///< fake CUDA devices (resolve() refuses higher ordinals)
  std::size_t fail_copy_at = SIZE_MAX;    ///< copy_async number (0-based) that throws
  std::size_t fail_wait_at = SIZE_MAX;    ///< completion number (0-based) that reports a failed copy
  std::size_t fail_pinned_at = SIZE_MAX;  ///< allocate_pinned number that throws
  bool slow = true;                       ///< ready() says "not yet" now and then, wait() yields
  /// Engines made from a Device take that device's tracker (device_tracker()) rather than default_tracker():
  /// engines of several devices at once (cuda::load_ranks) keep their lanes apart, and each device's count is its own.
  bool tracker_per_device = false;
};

/// The fake copy engine: copies are queued and only performed when the lane completes (ready()
/// says so, or wait()), so a slot refilled too early would corrupt the data, and the reader notices.
class FakeCopyEngine {
 public:
  /// Process-wide settings the device_copy_engine constructor (from a Device) picks up.
  static FakeEngineConfig& defaults() {
    static FakeEngineConfig config;
    return config;
  }
  static std::shared_ptr<FakeTracker>& default_tracker() {
    static std::shared_ptr<FakeTracker> tracker = std::make_shared<FakeTracker>();
    return tracker;
  }

  /// The tracker of fake device `ordinal` (tracker_per_device), made on first use; reset_device_trackers() drops them.
  static std::shared_ptr<FakeTracker> device_tracker(int ordinal) {
    const std::lock_guard lock(device_trackers_mutex());
    std::shared_ptr<FakeTracker>& tracker = device_trackers()[ordinal];
    if (!tracker) tracker = std::make_shared<FakeTracker>();
    return tracker;
  }
  static void reset_device_trackers() {
    const std::lock_guard lock(device_trackers_mutex());
    device_trackers().clear();
  }

  explicit FakeCopyEngine(tensorfile::Device device)
      : FakeCopyEngine(defaults(),
                       defaults().tracker_per_device ? device_tracker(resolve(device).index) : default_tracker(),
                       device) {}
  FakeCopyEngine(FakeEngineConfig config, std::shared_ptr<FakeTracker> tracker,
                 tensorfile::Device device = tensorfile::Device::cuda(0))
      : config_(config), tracker_(std::move(tracker)), device_(device) {}
  FakeCopyEngine(const FakeCopyEngine&) = delete;
  FakeCopyEngine& operator=(const FakeCopyEngine&) = delete;
  ~FakeCopyEngine() { drain(); }

  static tensorfile::Device resolve(tensorfile::Device device) {
    const int ordinal = device.index < 0 ? 0 : device.index;
    if (static_cast<std::size_t>(ordinal) >= defaults().devices) {
      throw tensorfile::DeviceError("device " + device.str() + " does not exist; expected an index below " +
                                    std::to_string(defaults().devices) + " (the fake CUDA devices)");
    }
    return tensorfile::Device::cuda(ordinal);
  }

  tensorfile::Storage allocate_device(std::size_t bytes) {
    {
      std::lock_guard lock(tracker_->mutex);
      tracker_->device_bytes += bytes;
    }
    return tensorfile::Storage(FakeDeviceBackend(bytes, device_));
  }

  std::byte* allocate_pinned(std::size_t bytes) {
    std::lock_guard lock(tracker_->mutex);
    if (pinned_allocations_++ == config_.fail_pinned_at) {
      throw tensorfile::DeviceError("cudaHostAlloc failed: fake out of pinned memory");
    }
    auto* memory = static_cast<std::byte*>(::operator new (bytes, std::align_val_t{4096}));
    std::memset(memory, 0xAB, bytes);
    tracker_->pinned[memory] = bytes;
    tracker_->live_pinned += bytes;
    tracker_->peak_pinned = std::max(tracker_->peak_pinned, tracker_->live_pinned);
    return memory;
  }
  void free_pinned(std::byte* memory) noexcept {
    std::lock_guard lock(tracker_->mutex);
    const auto it = tracker_->pinned.find(memory);
    if (it == tracker_->pinned.end()) {
      tracker_->violation("free_pinned of an unknown pointer");
      return;
    }
    if (tracker_->overlaps_pending(memory, it->second)) tracker_->violation("pinned buffer freed with copies pending");
    tracker_->live_pinned -= it->second;
    tracker_->pinned.erase(it);
    ::operator delete (memory, std::align_val_t{4096});
  }

  void open_lanes(std::size_t count) {
    std::lock_guard lock(tracker_->mutex);
    lanes_ = count;
  }

  void copy_async(std::size_t lane, std::byte* device, const std::byte* host, std::size_t bytes) {
    std::lock_guard lock(tracker_->mutex);
    if (lane >= lanes_) tracker_->violation("copy on a lane that was never opened");
    if (tracker_->copies++ == config_.fail_copy_at) {
      throw tensorfile::DeviceError("cudaMemcpyAsync failed: fake copy failure");
    }
    bool in_pinned = false;
    for (const auto& [base, size] : tracker_->pinned)
      in_pinned = in_pinned || (host >= base && host + bytes <= base + size);
    if (!in_pinned) tracker_->violation("copy source outside the pinned slots");
    tracker_->lanes[lane].push_back({device, host, bytes});
    tracker_->copied_bytes += bytes;
  }
  void record(std::size_t lane) {
    std::lock_guard lock(tracker_->mutex);
    tracker_->recorded[lane] = tracker_->lanes[lane].size();
  }
  bool ready(std::size_t lane) {
    {
      std::lock_guard lock(tracker_->mutex);
      if (config_.slow && (queries_++ % 3) != 0) return false;  // "still copying"
    }
    complete(lane);
    return true;
  }
  void wait(std::size_t lane) {
    if (config_.slow) std::this_thread::yield();
    complete(lane);
  }
  void drain() noexcept {
    std::lock_guard lock(tracker_->mutex);
    for (auto& [lane, pending] : tracker_->lanes) {
      for (const auto& copy : pending) std::memcpy(copy.device, copy.host, copy.bytes);
      tracker_->completed += pending.size();
      pending.clear();
    }
  }

 private:
  static std::map<int, std::shared_ptr<FakeTracker>>& device_trackers() {
    static std::map<int, std::shared_ptr<FakeTracker>> trackers;
    return trackers;
  }
  static std::mutex& device_trackers_mutex() {
    static std::mutex mutex;
    return mutex;
  }

  void complete(std::size_t lane) {
    std::lock_guard lock(tracker_->mutex);
    auto& pending = tracker_->lanes[lane];
    if (tracker_->recorded[lane] != pending.size()) tracker_->violation("completion of a lane with unrecorded copies");
    if (completions_++ == config_.fail_wait_at) {
      pending.clear();  // a failed copy leaves nothing to do
      throw tensorfile::DeviceError("cudaEventSynchronize failed: fake asynchronous copy failure");
    }
    for (const auto& copy : pending) std::memcpy(copy.device, copy.host, copy.bytes);
    tracker_->completed += pending.size();
    pending.clear();
  }

  FakeEngineConfig config_;
  std::shared_ptr<FakeTracker> tracker_;
  tensorfile::Device device_;
  std::size_t lanes_ = 0;
  std::size_t pinned_allocations_ = 0;
  std::size_t queries_ = 0;
  std::size_t completions_ = 0;
};

static_assert(tensorfile::detail::copy_engine<FakeCopyEngine>);

/// An in-memory "file" read in parallel, with an injectable EIO and checks of direct-I/O alignment
/// and of slot reuse (reading into a buffer that a pending copy still reads from).
class FakeReader {
 public:
  FakeReader(std::vector<std::byte> bytes, std::shared_ptr<FakeTracker> tracker, std::size_t alignment = 1)
      : bytes_(std::move(bytes)), tracker_(std::move(tracker)), alignment_(alignment) {}

  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
  std::uint64_t fail_at = UINT64_MAX;  ///< a read covering this offset fails with EIO

  [[nodiscard]] std::size_t read(std::uint64_t offset, std::span<std::byte> out) const {
    {
      std::lock_guard lock(tracker_->mutex);
      ++tracker_->reads;
      if (tracker_->overlaps_pending(out.data(), out.size()))
        tracker_->violation("read into a slot with copies pending");
      if (offset % alignment_ != 0 || out.size() % alignment_ != 0 ||
          reinterpret_cast<std::uintptr_t>(out.data()) % alignment_ != 0) {
        tracker_->violation("unaligned read at " + std::to_string(offset));
      }
    }
    if (fail_at >= offset && fail_at < offset + out.size()) {
      throw tensorfile::IoError("cannot read", EIO, {.file = "fake.bin", .offset = fail_at});
    }
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min<std::size_t>(out.size(), bytes_.size() - static_cast<std::size_t>(offset));
    std::memcpy(out.data(), bytes_.data() + offset, n);
    return n;
  }

 private:
  std::vector<std::byte> bytes_;
  std::shared_ptr<FakeTracker> tracker_;
  std::size_t alignment_;
};

static_assert(tensorfile::detail::range_reader<FakeReader>);

/// Tensor::to between the host and the fake devices (the tests install it as the device copy hook,
/// so load's map_location and the comparisons work as they do with CUDA).
inline tensorfile::Tensor fake_device_copy(const tensorfile::Tensor& source, tensorfile::Device target) {
  using namespace tensorfile;
  const Storage& from = source.storage();
  Storage to = target.is_cpu() ? heap_storage(from.size_bytes(), false)
                               : Storage(FakeDeviceBackend(from.size_bytes(), FakeCopyEngine::resolve(target)));
  if (from.size_bytes() != 0) std::memcpy(to.mutable_data(), from.data(), from.size_bytes());
  return {std::move(to),    source.dtype(),          source.sizes(),
          source.strides(), source.storage_offset(), source.requires_grad()};
}

/// DeviceCopyHook::write for the fake devices: `source`'s values, in C order, into the contiguous `target`.
inline void fake_device_write(const tensorfile::Tensor& source, const tensorfile::Tensor& target) {
  const tensorfile::Tensor host =
      source.device().is_cpu() ? source : fake_device_copy(source, tensorfile::Device::cpu());
  host.copy_into(target.storage().mutable_data() +
                 static_cast<std::size_t>(target.storage_offset()) * target.element_size());
}

/// Installs fake_device_copy and fake_device_write as the device hooks (once, before main).
inline const bool fake_device_copy_installed =
    (tensorfile::detail::device_copy_hook().copy = &fake_device_copy,
     tensorfile::detail::device_copy_hook().write = &fake_device_write, true);

}  // namespace tensorfile_test
