// SPDX-License-Identifier: MIT
// A tiny GGUF writer for the tests and the fuzz seeds: the bytes the spec lays out, written field by field, so a
// test can also write what no real writer would (hostile counts, types and offsets).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tensorfile_gguf_test {

/// Little-endian GGUF fields appended to a byte buffer.
struct GgufWriter {
  std::vector<std::byte> bytes;

  template <class T>
  GgufWriter& put(T value) {
    using Bits =
        std::conditional_t<sizeof(T) == 1, std::uint8_t,
                           std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                              std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
    const auto bits = std::bit_cast<Bits>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) bytes.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xFF));
    return *this;
  }
  GgufWriter& u8(std::uint8_t v) { return put(v); }
  GgufWriter& u32(std::uint32_t v) { return put(v); }
  GgufWriter& u64(std::uint64_t v) { return put(v); }
  GgufWriter& str(std::string_view s) {
    u64(s.size());
    for (const char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
  /// The start of a file: magic, version, counts.
  GgufWriter& start(std::uint64_t n_tensors, std::uint64_t n_kv, std::uint32_t version = 3) {
    u32(0x46554747);
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  /// A key and its value type (the value follows).
  GgufWriter& key(std::string_view name, std::uint32_t type) { return str(name).u32(type); }
  /// A tensor info.
  GgufWriter& tensor(std::string_view name, std::initializer_list<std::uint64_t> dims, std::uint32_t type,
                     std::uint64_t offset) {
    str(name);
    u32(static_cast<std::uint32_t>(dims.size()));
    for (const std::uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  /// Zero bytes up to a multiple of `alignment`.
  GgufWriter& pad(std::size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    return *this;
  }
  /// `n` bytes of `value`.
  GgufWriter& fill(std::size_t n, std::uint8_t value = 0) {
    bytes.insert(bytes.end(), n, static_cast<std::byte>(value));
    return *this;
  }
  [[nodiscard]] std::size_t size() const { return bytes.size(); }
};

/// The GGUF value type ids.
enum : std::uint32_t {
  t_u8 = 0,
  t_i8,
  t_u16,
  t_i16,
  t_u32,
  t_i32,
  t_f32,
  t_bool,
  t_string,
  t_array,
  t_u64,
  t_i64,
  t_f64,
};

}  // namespace tensorfile_gguf_test
