// SPDX-License-Identifier: MIT
// Tests of <tensorfile/cuda/detail/device_guard.hpp> on a fake runtime that tracks each thread's current
// device: guards restore only what they changed, and parallel work on a device leaves the caller's alone.
#include <tensorfile/core/error.hpp>
#include <tensorfile/cuda/detail/device_guard.hpp>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
using namespace tensorfile::detail;

namespace {

/// Two fake GPUs; per thread, the chosen device (none at first, as in a fresh thread) and every
/// device whose context the thread bound, in order (binding device 0's context uses memory on GPU 0).
struct FakeThreadDevice {
  static inline thread_local std::optional<int> current;
  static inline thread_local std::vector<int> bound;
  static constexpr int devices = 2;

  static bool chosen() noexcept { return current.has_value(); }
  static int current_device() { return current.value_or(0); }  // the runtime's default, as cudaGetDevice says
  static void set_device(int ordinal) {
    if (ordinal < 0 || ordinal >= devices) throw DeviceError("cudaSetDevice failed: fake invalid device ordinal");
    if (current != ordinal) bound.push_back(ordinal);
    current = ordinal;
  }
  static void unset() noexcept { current.reset(); }
};
static_assert(thread_device_runtime<FakeThreadDevice>);

/// Runs `fn` on a fresh thread (nothing chosen there yet).
template <class Fn>
void on_fresh_thread(Fn fn) {
  std::jthread thread([&] {
    FakeThreadDevice::current.reset();
    FakeThreadDevice::bound.clear();
    fn();
  });
}

}  // namespace

TEST_CASE("BasicDeviceGuard restores only what it changed", "[ring][device_guard]") {
  SECTION("a thread that never chose a device is left with none, and no context on device 0") {
    on_fresh_thread([] {
      {
        const BasicDeviceGuard<FakeThreadDevice> guard(1);
        CHECK(FakeThreadDevice::current == 1);
      }
      CHECK_FALSE(FakeThreadDevice::chosen());
      CHECK(FakeThreadDevice::bound == std::vector<int>{1});
    });
  }
  SECTION("a thread on device 0 gets device 0 back") {
    on_fresh_thread([] {
      FakeThreadDevice::set_device(0);
      {
        const BasicDeviceGuard<FakeThreadDevice> guard(1);
        CHECK(FakeThreadDevice::current == 1);
      }
      CHECK(FakeThreadDevice::current == 0);
    });
  }
  SECTION("already current: nothing set, nothing restored") {
    on_fresh_thread([] {
      FakeThreadDevice::set_device(1);
      FakeThreadDevice::bound.clear();
      {
        const BasicDeviceGuard<FakeThreadDevice> guard(1);
        CHECK(FakeThreadDevice::current == 1);
      }
      CHECK(FakeThreadDevice::current == 1);
      CHECK(FakeThreadDevice::bound.empty());
    });
  }
  SECTION("a missing device throws; the nothrow form leaves the thread as it was") {
    on_fresh_thread([] {
      FakeThreadDevice::set_device(1);
      CHECK_THROWS_WITH(BasicDeviceGuard<FakeThreadDevice>(5),
                        "tensorfile: cudaSetDevice failed: fake invalid device ordinal");
      CHECK(FakeThreadDevice::current == 1);
      { const BasicDeviceGuard<FakeThreadDevice> guard(5, std::nothrow); }
      CHECK(FakeThreadDevice::current == 1);
    });
  }
}

TEST_CASE("parallel_for_on_device runs every item on the device and restores the caller's", "[ring][device_guard]") {
  for (const std::optional<int> caller : {std::optional<int>(), std::optional<int>(0), std::optional<int>(1)}) {
    INFO("caller's device " << (caller ? std::to_string(*caller) : std::string("none")));
    on_fresh_thread([&] {
      if (caller) FakeThreadDevice::set_device(*caller);
      const std::thread::id caller_thread = std::this_thread::get_id();
      std::atomic<int> wrong_device{0};
      std::atomic<int> helper_touched_device0{0};
      std::atomic<int> items{0};
      parallel_for_on_device<FakeThreadDevice>(1, 200, 4, [&](std::size_t) {
        if (FakeThreadDevice::current != 1) ++wrong_device;
        if (std::this_thread::get_id() != caller_thread) {
          for (const int bound : FakeThreadDevice::bound) helper_touched_device0 += bound == 0 ? 1 : 0;
        }
        ++items;
      });
      CHECK(items == 200);
      CHECK(wrong_device == 0);
      CHECK(helper_touched_device0 == 0);
      CHECK(FakeThreadDevice::current == caller);
      const std::vector<int> caller_bound = caller == 0 ? std::vector<int>{0, 1, 0} : std::vector<int>{1};
      CHECK(FakeThreadDevice::bound == caller_bound);  // never device 0 unless the caller chose it
    });
  }
  SECTION("an item's exception is rethrown with the caller's device restored") {
    on_fresh_thread([] {
      FakeThreadDevice::set_device(0);
      CHECK_THROWS_WITH(parallel_for_on_device<FakeThreadDevice>(1, 50, 3,
                                                                 [](std::size_t i) {
                                                                   if (i == 7) throw IoError("cannot read", 5, {});
                                                                 }),
                        "tensorfile: cannot read: Input/output error");
      CHECK(FakeThreadDevice::current == 0);
    });
  }
}
