// SPDX-License-Identifier: MIT
// The calling thread's current device: a guard that restores only what it changed, for any runtime (CUDA or a fake).
#pragma once

#include <concepts>
#include <cstddef>
#include <new>
#include <utility>

#include "tensorfile/cuda/detail/ring_scheduler.hpp"

namespace tensorfile::detail {

/// What a device guard needs from a runtime, all about the calling thread:
/// - `R::chosen()` noexcept: whether the thread has a device (a bound context); true when the runtime cannot tell
/// - `R::current_device()`: the thread's current device (the runtime's default when none is chosen); throws DeviceError
/// - `R::set_device(n)`: makes device n current (binds its context); throws DeviceError
/// - `R::unset()` noexcept: unbinds the thread's context, back to "none chosen"
template <class R>
concept thread_device_runtime = requires(int ordinal) {
  { R::chosen() }
  noexcept->std::same_as<bool>;
  { R::current_device() } -> std::same_as<int>;
  R::set_device(ordinal);
  { R::unset() }
  noexcept;
};

/// Makes `ordinal` the calling thread's current device and, on destruction, restores exactly what it
/// changed: the previous device when the thread had one, "none chosen" when it had none (setting the
/// runtime's default device back would create a context there, on GPU 0 while working on cuda:1).
/// Nothing is set or restored when `ordinal` is already current.
template <thread_device_runtime R>
class BasicDeviceGuard {
 public:
  /// Switches to `ordinal`; throws DeviceError.
  explicit BasicDeviceGuard(int ordinal) { enter(ordinal); }
  /// Switches to `ordinal` when it can; never throws (for destructors that free device memory).
  BasicDeviceGuard(int ordinal, std::nothrow_t) noexcept {
    try {
      enter(ordinal);
    } catch (...) {  // the runtime may be gone at process exit: work on whatever device is current
    }
  }
  BasicDeviceGuard(const BasicDeviceGuard&) = delete;
  BasicDeviceGuard& operator=(const BasicDeviceGuard&) = delete;
  ~BasicDeviceGuard() {
    if (!switched_) return;
    if (!had_device_) {
      R::unset();
      return;
    }
    try {
      R::set_device(previous_);
    } catch (...) {  // nothing better to do in a destructor
    }
  }

 private:
  void enter(int ordinal) {
    had_device_ = R::chosen();
    if (had_device_) {
      previous_ = R::current_device();
      if (previous_ == ordinal) return;
    }
    R::set_device(ordinal);
    switched_ = true;
  }

  int previous_ = 0;
  bool had_device_ = false;
  bool switched_ = false;
};

/// Calls `fn(i)` for every i in [0, count) on up to `threads` threads, the calling thread among them,
/// each with `ordinal` as its current device; the calling thread's device is restored afterwards (its
/// helpers end with the call). The first exception stops the others and is rethrown.
template <thread_device_runtime R, class Fn>
void parallel_for_on_device(int ordinal, std::size_t count, std::size_t threads, Fn&& fn) {
  const BasicDeviceGuard<R> caller(ordinal);
  parallel_for(count, threads, [&](std::size_t i) {
    R::set_device(ordinal);  // a helper thread's first item binds it; a no-op when already current
    fn(i);
  });
}

}  // namespace tensorfile::detail
