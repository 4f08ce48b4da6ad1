// SPDX-License-Identifier: MIT
// A keyed hash for keys a file chooses: SipHash-1-3 under a random key of this process.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#if defined(__linux__)
#include <sys/auxv.h>
#endif

#include "tensorfile/detail/posix/random_bits.hpp"

namespace tensorfile::detail {

/// SipHash-1-3 (one compression round per word, three finalization rounds; the variant Python hashes str and
/// bytes with) of `bytes` under the 128-bit key `k0`, `k1`.
[[nodiscard]] inline std::uint64_t siphash13(std::uint64_t k0, std::uint64_t k1,
                                             std::span<const std::byte> bytes) noexcept {
  std::uint64_t v0 = k0 ^ 0x736f6d6570736575ull;
  std::uint64_t v1 = k1 ^ 0x646f72616e646f6dull;
  std::uint64_t v2 = k0 ^ 0x6c7967656e657261ull;
  std::uint64_t v3 = k1 ^ 0x7465646279746573ull;
  const auto round = [&] {
    v0 += v1;
    v1 = std::rotl(v1, 13) ^ v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16) ^ v2;
    v0 += v3;
    v3 = std::rotl(v3, 21) ^ v0;
    v2 += v1;
    v1 = std::rotl(v1, 17) ^ v2;
    v2 = std::rotl(v2, 32);
  };
  const auto absorb = [&](std::uint64_t word) {
    v3 ^= word;
    round();
    v0 ^= word;
  };
  const std::size_t whole = bytes.size() / 8 * 8;
  for (std::size_t at = 0; at < whole; at += 8) {
    std::uint64_t word = 0;
    for (std::size_t i = 0; i < 8; ++i) word |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[at + i])} << (8 * i);
    absorb(word);
  }
  std::uint64_t last = std::uint64_t{bytes.size()} << 56;  // the length's low byte, then the tail's bytes
  for (std::size_t i = whole; i < bytes.size(); ++i) {
    last |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[i])} << (8 * (i - whole));
  }
  absorb(last);
  v2 ^= 0xff;
  round();
  round();
  round();
  return v0 ^ v1 ^ v2 ^ v3;
}

/// This process's hash key: random, so that a file cannot pick dict keys that collide in its index (n keys of one
/// hash make a dict cost n^2 to build: a 1 MB pickle of 100,000 such int keys took 22 s with a fixed hash). One key
/// for every module of the process, so that a Dict built in one shared library is searched by another, whatever
/// their symbol visibility: on Linux it is derived from the 16 random bytes the kernel gives each process
/// (AT_RANDOM, through SipHash, so the key tells nothing of them); elsewhere drawn once per module (getrandom()).
[[nodiscard]] inline const std::array<std::uint64_t, 2>& process_hash_key() noexcept {
  static const std::array<std::uint64_t, 2> key = [] {
    std::array<std::uint64_t, 2> random{};
#if defined(__linux__)
    if (const auto at_random = getauxval(AT_RANDOM); at_random != 0) {
      std::memcpy(random.data(), reinterpret_cast<const void*>(at_random), sizeof random);
      constexpr std::string_view purpose = "tensorfile: dict keys";
      const auto bytes = std::as_bytes(std::span(purpose.data(), purpose.size()));
      return std::array<std::uint64_t, 2>{siphash13(random[0], random[1], bytes),
                                          siphash13(random[1], random[0], bytes)};
    }
#endif
    // getrandom(), else the clock, a counter and the pid: still unknown to a file.
    random[0] = random_bits();
    random[1] = random_bits() ^ reinterpret_cast<std::uintptr_t>(&random) * 0x9e3779b97f4a7c15ull;
    return random;
  }();
  return key;
}

/// SipHash-1-3 of `bytes` under process_hash_key().
[[nodiscard]] inline std::uint64_t keyed_hash(std::span<const std::byte> bytes) noexcept {
  const auto& key = process_hash_key();
  return siphash13(key[0], key[1], bytes);
}
[[nodiscard]] inline std::uint64_t keyed_hash(std::string_view text) noexcept {
  return keyed_hash(std::as_bytes(std::span(text.data(), text.size())));
}
/// Of an integer's eight little-endian bytes.
[[nodiscard]] inline std::uint64_t keyed_hash(std::uint64_t value) noexcept {
  std::array<std::byte, 8> bytes{};
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>(value >> (8 * i));
  return keyed_hash(std::span<const std::byte>(bytes));
}

/// The hash of unordered containers of names a file gives (std::hash is the same in every process, so a file can
/// be made of names that share a bucket).
struct KeyedStringHash {
  [[nodiscard]] std::size_t operator()(std::string_view text) const noexcept {
    return static_cast<std::size_t>(keyed_hash(text));
  }
};

}  // namespace tensorfile::detail
