// SPDX-License-Identifier: MIT
// Random bits for the names of temporary files and serialization ids, without <random> in every TU.
#pragma once

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tensorfile::detail {

/// 64 random bits from getrandom(); if the kernel cannot give them, a mix of the clock, a counter and the pid.
/// Callers need names that rarely collide (they create with O_EXCL and retry), not secrets.
inline std::uint64_t random_bits() noexcept {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof bits)) return bits;
  static std::atomic<std::uint64_t> counter{0};
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  const auto pid = static_cast<std::uint64_t>(static_cast<std::uint32_t>(::getpid()));
  return (now * std::uint64_t{0x9e3779b97f4a7c15}) ^ (counter.fetch_add(1) << 32) ^ pid;
}

}  // namespace tensorfile::detail
