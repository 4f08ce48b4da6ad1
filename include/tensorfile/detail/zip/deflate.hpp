// SPDX-License-Identifier: MIT
// Raw DEFLATE (RFC 1951) encoder: LZ77 over hash chains, fixed Huffman blocks, stored blocks where those are smaller.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tensorfile/detail/zip/inflate.hpp"

namespace tensorfile::detail {

namespace deflate_impl {

// The length and distance alphabets (RFC 1951, 3.2.5), shared with the decoder.
using inflate_impl::distance_base;
using inflate_impl::distance_extra;
using inflate_impl::length_base;
using inflate_impl::length_extra;

inline constexpr std::size_t window = std::size_t{1} << 15;  // farthest distance DEFLATE can encode
inline constexpr std::size_t min_match = 3;
inline constexpr std::size_t max_match = 258;
inline constexpr unsigned hash_bits = 15;
inline constexpr unsigned max_chain = 48;                 // candidates tried per position: speed over ratio
inline constexpr std::size_t block_input = 0xFFFF - 258;  // input bytes per block: with a match run past its end,
                                                          // still one stored block
inline constexpr std::size_t max_stored = 0xFFFF;         // a stored block's LEN field

/// Appends bits least significant first, as DEFLATE packs them.
class BitWriter {
 public:
  explicit BitWriter(std::vector<std::byte>& out) : out_(out) {}
  /// Appends the low `count` bits of `bits` (count <= 32).
  void put(std::uint32_t bits, unsigned count) {
    buffer_ |= static_cast<std::uint64_t>(bits) << filled_;
    filled_ += count;
    while (filled_ >= 8) {
      out_.push_back(static_cast<std::byte>(buffer_ & 0xFF));
      buffer_ >>= 8;
      filled_ -= 8;
    }
  }
  /// Pads with zero bits to a byte boundary.
  void align() {
    if (filled_ > 0) put(0, 8 - filled_);
  }
  void bytes(std::span<const std::byte> data) { out_.insert(out_.end(), data.begin(), data.end()); }  // aligned only

 private:
  std::vector<std::byte>& out_;
  std::uint64_t buffer_ = 0;
  unsigned filled_ = 0;
};

/// A Huffman code as written: the code's bits reversed (the stream holds codes most significant bit first).
struct Code {
  std::uint16_t bits = 0;
  std::uint8_t length = 0;
};

[[nodiscard]] constexpr std::uint16_t reversed(std::uint32_t code, unsigned length) noexcept {
  std::uint32_t out = 0;
  for (unsigned i = 0; i < length; ++i) out |= ((code >> i) & 1u) << (length - 1 - i);
  return static_cast<std::uint16_t>(out);
}

/// The fixed literal/length code of RFC 1951, 3.2.6.
[[nodiscard]] inline const std::array<Code, 288>& fixed_literal_codes() {
  static const std::array<Code, 288> codes = [] {
    std::array<Code, 288> c{};
    for (std::uint32_t s = 0; s < 288; ++s) {
      if (s < 144)
        c[s] = {reversed(0x30 + s, 8), 8};
      else if (s < 256)
        c[s] = {reversed(0x190 + (s - 144), 9), 9};
      else if (s < 280)
        c[s] = {reversed(s - 256, 7), 7};
      else
        c[s] = {reversed(0xC0 + (s - 280), 8), 8};
    }
    return c;
  }();
  return codes;
}

/// One LZ77 token: a literal (distance 0) or a match of `length` bytes `distance` back.
struct Token {
  std::uint16_t length;  // the literal byte when distance is 0
  std::uint16_t distance;
};

/// Index into length_base / distance_base of the last base not above `value`.
template <std::size_t N>
[[nodiscard]] std::size_t base_index(const std::array<std::uint16_t, N>& bases, std::uint32_t value) {
  return static_cast<std::size_t>(std::upper_bound(bases.begin(), bases.end(), value) - bases.begin()) - 1;
}

/// Bits a token costs in a fixed-Huffman block.
[[nodiscard]] inline std::uint64_t fixed_cost(const Token& t) {
  if (t.distance == 0) return t.length < 144 ? 8 : 9;
  const std::size_t l = base_index(length_base, t.length);
  const std::size_t d = base_index(distance_base, t.distance);
  return (257 + l < 280 ? 7u : 8u) + length_extra[l] + 5u + distance_extra[d];
}

/// Writes one fixed-Huffman block of `tokens`.
inline void write_fixed_block(BitWriter& bits, std::span<const Token> tokens, bool last) {
  const std::array<Code, 288>& codes = fixed_literal_codes();
  bits.put(last ? 1u : 0u, 1);
  bits.put(1, 2);  // BTYPE 01: fixed Huffman
  for (const Token& t : tokens) {
    if (t.distance == 0) {
      bits.put(codes[t.length].bits, codes[t.length].length);
      continue;
    }
    const std::size_t l = base_index(length_base, t.length);
    bits.put(codes[257 + l].bits, codes[257 + l].length);
    bits.put(t.length - length_base[l], length_extra[l]);
    const std::size_t d = base_index(distance_base, t.distance);
    bits.put(reversed(static_cast<std::uint32_t>(d), 5), 5);
    bits.put(t.distance - distance_base[d], distance_extra[d]);
  }
  bits.put(codes[256].bits, codes[256].length);  // end of block
}

/// Writes `data` as stored blocks of at most 65535 bytes, the last one final when `last`.
inline void write_stored_blocks(BitWriter& bits, std::span<const std::byte> data, bool last) {
  do {
    const std::size_t n = std::min(data.size(), max_stored);
    bits.put(last && n == data.size() ? 1u : 0u, 1);
    bits.put(0, 2);  // BTYPE 00: stored
    bits.align();
    bits.put(static_cast<std::uint32_t>(n), 16);
    bits.put(static_cast<std::uint32_t>(~n & 0xFFFF), 16);
    bits.bytes(data.first(n));
    data = data.subspan(n);
  } while (!data.empty());
}

/// Greedy LZ77 over hash chains: every position enters the chain of its next three bytes, and a match
/// is the longest of up to max_chain candidates within the window.
class Matcher {
 public:
  explicit Matcher(std::span<const std::byte> input)
      : in_(input), head_(std::size_t{1} << hash_bits, none), prev_(window, none) {}

  /// Appends the tokens of input bytes [begin, end) to `tokens`; returns where the last token ends
  /// (a match may run past `end`).
  std::size_t tokens(std::size_t begin, std::size_t end, std::vector<Token>& tokens) {
    std::size_t pos = begin;
    while (pos < end) {
      std::size_t best_length = 0;
      std::size_t best_distance = 0;
      if (in_.size() - pos >= min_match) {
        const std::size_t limit = std::min(max_match, in_.size() - pos);
        std::uint32_t candidate = head_[hash(pos)];
        for (unsigned tries = 0; candidate != none && tries < max_chain; ++tries) {
          const std::size_t distance = pos - candidate;
          if (distance == 0 || distance > window) break;
          std::size_t length = 0;
          while (length < limit && in_[candidate + length] == in_[pos + length]) ++length;
          if (length > best_length) {
            best_length = length;
            best_distance = distance;
            if (length == limit) break;
          }
          const std::uint32_t next = prev_[candidate % window];
          if (next == none || next >= candidate) break;  // the slot was reused by a newer position
          candidate = next;
        }
      }
      if (best_length >= min_match) {
        tokens.push_back({static_cast<std::uint16_t>(best_length), static_cast<std::uint16_t>(best_distance)});
        for (std::size_t i = 0; i < best_length; ++i) insert(pos + i);
        pos += best_length;
      } else {
        tokens.push_back({static_cast<std::uint16_t>(in_[pos]), 0});
        insert(pos);
        ++pos;
      }
    }
    return pos;
  }

 private:
  static constexpr std::uint32_t none = 0xFFFFFFFFu;

  [[nodiscard]] std::size_t hash(std::size_t pos) const {
    const std::uint32_t v = static_cast<std::uint32_t>(in_[pos]) | static_cast<std::uint32_t>(in_[pos + 1]) << 8 |
                            static_cast<std::uint32_t>(in_[pos + 2]) << 16;
    return (v * 2654435761u) >> (32 - hash_bits);
  }
  void insert(std::size_t pos) {
    if (in_.size() - pos < min_match) return;
    const std::size_t h = hash(pos);
    prev_[pos % window] = head_[h];
    head_[h] = static_cast<std::uint32_t>(pos);
  }

  std::span<const std::byte> in_;
  std::vector<std::uint32_t> head_;  // newest position of each hash
  std::vector<std::uint32_t> prev_;  // the position before it with the same hash, by position mod window
};

}  // namespace deflate_impl

/// Compresses `input` as a raw DEFLATE stream (what zip method 8 holds; zlib's decompress(data, -15)).
/// Each block of input is written with the fixed Huffman code, or stored when that is smaller, so the
/// output is never much larger than the input (5 bytes per 64 KiB). Inputs of 4 GiB or more are refused
/// by the caller's limits (positions are 32-bit); throws ArgumentError for them.
[[nodiscard]] inline std::vector<std::byte> deflate(std::span<const std::byte> input) {
  using namespace deflate_impl;
  if (input.size() >= 0xFFFFFFFFu) throw ArgumentError("deflate input of 4 GiB or more is not supported");
  std::vector<std::byte> out;
  out.reserve(input.size() / 2 + 64);
  BitWriter bits(out);
  if (input.empty()) {
    write_fixed_block(bits, {}, true);
    bits.align();
    return out;
  }
  Matcher matcher(input);
  std::vector<Token> tokens;
  for (std::size_t begin = 0; begin < input.size();) {
    tokens.clear();
    const std::size_t end = matcher.tokens(begin, std::min(input.size(), begin + block_input), tokens);
    const bool last = end == input.size();
    std::uint64_t cost = 7;  // end of block
    for (const Token& t : tokens) cost += fixed_cost(t);
    const std::uint64_t stored_cost = (end - begin) * 8 + ((end - begin) / max_stored + 1) * 40;
    if (cost + 3 <= stored_cost) {
      write_fixed_block(bits, tokens, last);
    } else {
      write_stored_blocks(bits, input.subspan(begin, end - begin), last);
    }
    begin = end;
  }
  bits.align();
  return out;
}

}  // namespace tensorfile::detail
