// SPDX-License-Identifier: MIT
// Raw DEFLATE (RFC 1951) decoder for untrusted input: bounded output, table-driven Huffman decoding.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorfile/core/error.hpp"

namespace tensorfile::detail {

namespace inflate_impl {

// A decoding table entry packs four fields into 32 bits:
//   bits 0-7   number of input bits the entry consumes
//   bits 8-11  number of extra bits that follow the code (lengths and distances)
//   bits 12-15 the kind of entry
//   bits 16-31 a literal byte, a length or distance base, or the offset of a second-level table
// A code longer than the root width resolves in two steps: the root entry links to a subtable
// indexed by the code's remaining bits. The zero entry is `kind_invalid`.

/// What a decoding table entry stands for.
enum EntryKind : std::uint32_t {
  kind_invalid = 0,  ///< no code maps here (or an unused symbol such as lengths 286/287)
  kind_symbol = 1,   ///< a literal byte, or a code-length symbol
  kind_base = 2,     ///< a length or distance base plus extra bits
  kind_end = 3,      ///< end of block
  kind_link = 4,     ///< link to a second-level table; the extra field holds its index width
};

/// Packs one table entry.
[[nodiscard]] constexpr std::uint32_t make_entry(std::uint32_t kind, std::uint32_t bits, std::uint32_t extra,
                                                 std::uint32_t value) noexcept {
  return bits | (extra << 8) | (kind << 12) | (value << 16);
}

/// The entry's bit count.
[[nodiscard]] constexpr std::uint32_t entry_bits(std::uint32_t e) noexcept { return e & 0xFFu; }
/// The entry's extra-bit count.
[[nodiscard]] constexpr std::uint32_t entry_extra(std::uint32_t e) noexcept { return (e >> 8) & 0xFu; }
/// The entry's kind.
[[nodiscard]] constexpr std::uint32_t entry_kind(std::uint32_t e) noexcept { return (e >> 12) & 0xFu; }
/// The entry's value.
[[nodiscard]] constexpr std::uint32_t entry_value(std::uint32_t e) noexcept { return e >> 16; }

/// Which alphabet a table decodes; it decides what each symbol turns into.
enum class Alphabet { code_lengths, literal_length, distance };

/// Base lengths of length symbols 257..285 (RFC 1951, 3.2.5).
inline constexpr std::array<std::uint16_t, 29> length_base = {
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
/// Extra bits of length symbols 257..285.
inline constexpr std::array<std::uint8_t, 29> length_extra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                              2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
/// Base distances of distance symbols 0..29.
inline constexpr std::array<std::uint16_t, 30> distance_base = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
/// Extra bits of distance symbols 0..29.
inline constexpr std::array<std::uint8_t, 30> distance_extra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/// Longest Huffman code DEFLATE allows.
inline constexpr unsigned max_code_bits = 15;
/// Root widths of the three tables.
inline constexpr unsigned literal_root_bits = 10;
inline constexpr unsigned distance_root_bits = 8;
inline constexpr unsigned code_length_root_bits = 7;
/// Table capacities: the root plus at most one full-width subtable per symbol with a long code.
inline constexpr std::size_t literal_table_size =
    (std::size_t{1} << literal_root_bits) + std::size_t{288} * (std::size_t{1} << (max_code_bits - literal_root_bits));
inline constexpr std::size_t distance_table_size =
    (std::size_t{1} << distance_root_bits) + std::size_t{32} * (std::size_t{1} << (max_code_bits - distance_root_bits));
inline constexpr std::size_t code_length_table_size = std::size_t{1} << code_length_root_bits;

/// The entry a symbol of `alphabet` decodes to, without its bit count.
[[nodiscard]] constexpr std::uint32_t symbol_entry(Alphabet alphabet, unsigned symbol) noexcept {
  switch (alphabet) {
    case Alphabet::code_lengths: return make_entry(kind_symbol, 0, 0, symbol);
    case Alphabet::literal_length:
      if (symbol < 256) return make_entry(kind_symbol, 0, 0, symbol);
      if (symbol == 256) return make_entry(kind_end, 0, 0, 0);
      if (symbol <= 285) return make_entry(kind_base, 0, length_extra[symbol - 257], length_base[symbol - 257]);
      return make_entry(kind_invalid, 0, 0, 0);
    case Alphabet::distance:
      if (symbol < 30) return make_entry(kind_base, 0, distance_extra[symbol], distance_base[symbol]);
      return make_entry(kind_invalid, 0, 0, 0);
  }
  return 0;
}

/// Builds a two-level decoding table for canonical Huffman code `lengths` (each 0..15).
/// Returns nullptr on success, else what is wrong with the lengths. `table` must hold
/// `(1 << root_bits) + lengths.size() << (15 - root_bits)` entries.
[[nodiscard]] inline const char* build_table(std::span<const std::uint8_t> lengths, Alphabet alphabet,
                                             unsigned root_bits, std::uint32_t* table) noexcept {
  std::array<unsigned, max_code_bits + 1> count{};
  for (const std::uint8_t length : lengths) ++count[length];
  count[0] = 0;

  // Kraft sum: `left` counts the unused codes at each length.
  int left = 1;
  unsigned longest = 0;
  unsigned used_codes = 0;
  for (unsigned length = 1; length <= max_code_bits; ++length) {
    left = 2 * left - static_cast<int>(count[length]);
    if (left < 0) return "over-subscribed";
    if (count[length] != 0) longest = length;
    used_codes += count[length];
  }
  // An incomplete code is accepted only in the one form zlib emits: a single code of length 1
  // (or no code at all, for a distance alphabet of a block holding only literals).
  if (left > 0 && used_codes > 0 && (alphabet == Alphabet::code_lengths || longest != 1)) return "incomplete";

  std::array<std::uint32_t, max_code_bits + 2> next_code{};
  for (unsigned length = 1; length <= max_code_bits; ++length)
    next_code[length + 1] = (next_code[length] + count[length]) << 1;

  const std::size_t root_size = std::size_t{1} << root_bits;
  const std::uint32_t root_mask = static_cast<std::uint32_t>(root_size - 1);
  for (std::size_t i = 0; i < root_size; ++i) table[i] = 0;

  // Codes are stored in the stream most significant bit first, while the bit reader hands out the
  // least significant bit first: tables are indexed by the reversed code.
  std::array<std::uint16_t, 320> reversed{};
  std::array<std::uint8_t, std::size_t{1} << literal_root_bits> sub_bits{};  // widest code per root prefix
  for (std::size_t symbol = 0; symbol < lengths.size(); ++symbol) {
    const unsigned length = lengths[symbol];
    if (length == 0) continue;
    const std::uint32_t code = next_code[length]++;
    std::uint32_t r = 0;
    for (unsigned bit = 0; bit < length; ++bit) r |= ((code >> bit) & 1u) << (length - 1 - bit);
    reversed[symbol] = static_cast<std::uint16_t>(r);
    if (length > root_bits) {
      const std::uint32_t prefix = r & root_mask;
      if (sub_bits[prefix] < length - root_bits) sub_bits[prefix] = static_cast<std::uint8_t>(length - root_bits);
    }
  }

  std::size_t used = root_size;
  for (std::size_t symbol = 0; symbol < lengths.size(); ++symbol) {
    const unsigned length = lengths[symbol];
    if (length == 0) continue;
    const std::uint32_t r = reversed[symbol];
    const std::uint32_t entry = symbol_entry(alphabet, static_cast<unsigned>(symbol));
    if (length <= root_bits) {
      for (std::uint32_t i = r; i < root_size; i += 1u << length) table[i] = entry | length;
      continue;
    }
    const std::uint32_t prefix = r & root_mask;
    std::uint32_t link = table[prefix];
    if (entry_kind(link) != kind_link) {
      const unsigned width = sub_bits[prefix];
      link = make_entry(kind_link, root_bits, width, static_cast<std::uint32_t>(used));
      table[prefix] = link;
      for (std::size_t i = 0; i < (std::size_t{1} << width); ++i) table[used + i] = 0;
      used += std::size_t{1} << width;
    }
    const std::uint32_t base = entry_value(link);
    const std::uint32_t width = entry_extra(link);
    for (std::uint32_t i = r >> root_bits; i < (1u << width); i += 1u << (length - root_bits))
      table[base + i] = entry | (length - root_bits);
  }
  return nullptr;
}

/// The fixed literal/length and distance code lengths of block type 1 (RFC 1951, 3.2.6).
struct FixedTables {
  std::array<std::uint32_t, literal_table_size> literal{};
  std::array<std::uint32_t, distance_table_size> distance{};
};

/// The fixed tables, built on first use (thread-safe) straight into static storage.
[[nodiscard]] inline const FixedTables& fixed_tables() {
  static FixedTables tables;  // zero-initialized at load time; filled once under the guard below
  static const bool built = [] {
    std::array<std::uint8_t, 288> literal_lengths{};
    for (std::size_t i = 0; i < 144; ++i) literal_lengths[i] = 8;
    for (std::size_t i = 144; i < 256; ++i) literal_lengths[i] = 9;
    for (std::size_t i = 256; i < 280; ++i) literal_lengths[i] = 7;
    for (std::size_t i = 280; i < 288; ++i) literal_lengths[i] = 8;
    std::array<std::uint8_t, 32> distance_lengths{};
    distance_lengths.fill(5);
    const char* literal =
        build_table(literal_lengths, Alphabet::literal_length, literal_root_bits, tables.literal.data());
    const char* distance =
        build_table(distance_lengths, Alphabet::distance, distance_root_bits, tables.distance.data());
    return literal == nullptr && distance == nullptr;
  }();
  static_cast<void>(built);
  return tables;
}

/// The input side: a 64-bit buffer over the compressed bytes, least significant bit first.
/// The buffer holds `count` valid bits at its bottom; bits above them may hold a copy of the input
/// that follows, which is harmless because refills OR in the same values. Past the end of the input,
/// refills supply zeros and `pos` keeps counting, so that `bit_position()` passing the input size
/// tells a truncated stream apart from a valid one. A plain value, so that the hot loop can keep a
/// copy in registers (stores to the output could otherwise alias it).
struct BitReader {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
  std::size_t pos = 0;  // next byte to load
  std::uint64_t bits = 0;
  unsigned count = 0;

  [[nodiscard]] std::uint64_t bit_position() const noexcept { return static_cast<std::uint64_t>(pos) * 8 - count; }

  /// True once zero padding past the input has been consumed.
  [[nodiscard]] bool overran() const noexcept {
    return pos > size && bit_position() > static_cast<std::uint64_t>(size) * 8;
  }

  /// Tops the buffer up to at least 56 bits.
  void refill() noexcept {
    if (count > 56) return;
    if (pos <= size && size - pos >= 8) {
      std::uint64_t word = 0;
      for (int i = 7; i >= 0; --i) word = (word << 8) | data[pos + static_cast<std::size_t>(i)];
      bits |= word << count;
      pos += (63 - count) >> 3;
      count |= 56;
      return;
    }
    while (count <= 56) {
      const std::uint64_t byte = pos < size ? data[pos] : 0;
      bits |= byte << count;
      ++pos;
      count += 8;
    }
  }

  void drop(unsigned n) noexcept {
    bits >>= n;
    count -= n;
  }

  /// The next `n` bits (n <= 32), least significant first.
  [[nodiscard]] std::uint32_t take(unsigned n) noexcept {
    if (count < n) refill();
    const auto value = static_cast<std::uint32_t>(bits & ((std::uint64_t{1} << n) - 1));
    drop(n);
    return value;
  }

  /// Resolves one code through a two-level table and consumes it; returns the entry.
  [[nodiscard]] std::uint32_t decode(const std::uint32_t* table, unsigned root_bits) noexcept {
    std::uint32_t e = table[bits & ((1u << root_bits) - 1)];
    if (entry_kind(e) == kind_link) {
      drop(root_bits);
      e = table[entry_value(e) + (bits & ((1u << entry_extra(e)) - 1))];
    }
    drop(entry_bits(e));
    return e;
  }
};

/// One decoding run: the bit reader, the output cursor and the block decoders.
class Inflater {
 public:
  Inflater(std::span<const std::byte> in, std::span<std::byte> out, const ErrorLocation& where)
      : out_(reinterpret_cast<unsigned char*>(out.data())), out_size_(out.size()), where_(where) {
    in_.data = reinterpret_cast<const unsigned char*>(in.data());
    in_.size = in.size();
  }

  /// Decodes every block up to the final one, then checks that the output is full.
  void run() {
    bool final_block = false;
    while (!final_block) {
      const std::uint64_t block_start = in_.bit_position() / 8;
      final_block = in_.take(1) != 0;
      const std::uint32_t type = in_.take(2);
      check_truncation();
      if (type == 0) {
        stored_block();
      } else if (type == 1) {
        const FixedTables& fixed = fixed_tables();
        huffman_block(fixed.literal.data(), fixed.distance.data());
      } else if (type == 2) {
        if (!tables_) tables_.reset(new std::uint32_t[literal_table_size + distance_table_size]);
        read_dynamic_header();
        huffman_block(tables_.get(), tables_.get() + literal_table_size);
      } else {
        fail("invalid deflate block type 3", block_start);
      }
    }
    if (out_pos_ != out_size_)
      fail("inflated data is shorter than declared; expected " + std::to_string(out_size_) + " bytes, got " +
               std::to_string(out_pos_),
           in_.bit_position() / 8);
  }

 private:
  void check_truncation() const {
    if (in_.overran()) fail("deflate stream is truncated", in_.size);
  }

  [[noreturn]] void fail(const std::string& what, std::uint64_t byte_in_stream) const {
    ErrorLocation at = where_;
    at.offset = where_.offset.value_or(0) + byte_in_stream;
    throw FormatError(what, std::move(at));
  }

  /// An invalid code read from the zero padding past the input is really a truncation.
  [[noreturn]] void fail_code(const char* what, std::uint64_t symbol_start) const {
    if (symbol_start + max_code_bits > static_cast<std::uint64_t>(in_.size) * 8)
      fail("deflate stream is truncated", in_.size);
    fail(what, symbol_start / 8);
  }

  [[noreturn]] void fail_larger() const {
    fail("inflated data is larger than the declared " + std::to_string(out_size_) + " bytes", in_.bit_position() / 8);
  }

  void stored_block() {
    in_.drop(in_.count % 8);
    // Whole bytes still in the buffer go back to the input; the block is then read straight from it.
    std::size_t pos = in_.pos - in_.count / 8;
    in_.bits = 0;
    in_.count = 0;
    in_.pos = pos;
    const std::size_t size = in_.size;
    if (pos > size || size - pos < 4) fail("deflate stream is truncated", size);
    const unsigned char* data = in_.data;
    const unsigned length = data[pos] | (unsigned{data[pos + 1]} << 8);
    const unsigned complement = data[pos + 2] | (unsigned{data[pos + 3]} << 8);
    if ((length ^ 0xFFFFu) != complement)
      fail("corrupt deflate stored block: length " + std::to_string(length) + " does not match its complement " +
               std::to_string(complement),
           pos);
    pos += 4;
    in_.pos = pos;
    if (size - pos < length) fail("deflate stream is truncated", size);
    if (out_size_ - out_pos_ < length) fail_larger();
    if (length != 0) std::memcpy(out_ + out_pos_, data + pos, length);
    out_pos_ += length;
    in_.pos = pos + length;
  }

  void read_dynamic_header() {
    const std::uint64_t header_start = in_.bit_position() / 8;
    const unsigned literal_count = in_.take(5) + 257;
    const unsigned distance_count = in_.take(5) + 1;
    const unsigned code_length_count = in_.take(4) + 4;
    check_truncation();
    if (literal_count > 286)
      fail("corrupt deflate block header: " + std::to_string(literal_count) + " literal/length codes (at most 286)",
           header_start);
    if (distance_count > 30)
      fail("corrupt deflate block header: " + std::to_string(distance_count) + " distance codes (at most 30)",
           header_start);

    static constexpr std::array<std::uint8_t, 19> order = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                                           11, 4,  12, 3, 13, 2, 14, 1, 15};
    std::array<std::uint8_t, 19> code_length_lengths{};
    for (unsigned i = 0; i < code_length_count; ++i)
      code_length_lengths[order[i]] = static_cast<std::uint8_t>(in_.take(3));
    check_truncation();
    std::array<std::uint32_t, code_length_table_size> code_length_table{};
    if (const char* problem =
            build_table(code_length_lengths, Alphabet::code_lengths, code_length_root_bits, code_length_table.data()))
      fail(std::string("corrupt deflate code lengths: ") + problem + " code-length code", header_start);

    std::array<std::uint8_t, 286 + 30> lengths{};
    const unsigned total = literal_count + distance_count;
    unsigned filled = 0;
    while (filled < total) {
      const std::uint64_t symbol_start = in_.bit_position();
      if (in_.count < 16) in_.refill();
      const std::uint32_t e = in_.decode(code_length_table.data(), code_length_root_bits);
      if (entry_kind(e) == kind_invalid) fail_code("invalid deflate code-length code", symbol_start);
      const std::uint32_t symbol = entry_value(e);
      if (symbol < 16) {
        lengths[filled++] = static_cast<std::uint8_t>(symbol);
        continue;
      }
      std::uint8_t value = 0;
      unsigned repeat = 0;
      if (symbol == 16) {
        repeat = 3 + in_.take(2);
        check_truncation();
        if (filled == 0) fail("corrupt deflate code lengths: repeat with no previous length", symbol_start / 8);
        value = lengths[filled - 1];
      } else {
        repeat = symbol == 17 ? 3 + in_.take(3) : 11 + in_.take(7);
        check_truncation();
      }
      if (total - filled < repeat)
        fail("corrupt deflate code lengths: repeat runs past the last code", symbol_start / 8);
      for (unsigned i = 0; i < repeat; ++i) lengths[filled++] = value;
    }
    check_truncation();
    if (lengths[256] == 0) fail("corrupt deflate code lengths: no end-of-block code", header_start);
    std::uint32_t* literal_table = tables_.get();
    if (const char* problem = build_table(std::span(lengths.data(), literal_count), Alphabet::literal_length,
                                          literal_root_bits, literal_table))
      fail(std::string("corrupt deflate code lengths: ") + problem + " literal/length code", header_start);
    if (const char* problem = build_table(std::span(lengths.data() + literal_count, distance_count), Alphabet::distance,
                                          distance_root_bits, literal_table + literal_table_size))
      fail(std::string("corrupt deflate code lengths: ") + problem + " distance code", header_start);
  }

  void huffman_block(const std::uint32_t* literal_table, const std::uint32_t* distance_table) {
    // Work on local copies, which the compiler keeps in registers: stores into the output (unsigned
    // char) could alias the members and force reloads. sync() hands back copies (never the address)
    // before returning or reporting an error.
    BitReader in = in_;
    std::size_t out_pos = out_pos_;
    unsigned char* const out = out_;
    const std::size_t out_size = out_size_;
    // Room for three literals or one match of 258 bytes plus the 8-byte copy slack.
    constexpr std::size_t fast_room = 258 + 8;
    for (;;) {
      // Fast loop: with 8 input bytes left every refill reads real input (no truncation possible),
      // and with `fast_room` bytes of output left no symbol can overflow it.
      while (in.pos <= in.size && in.size - in.pos >= 8 && out_size - out_pos >= fast_room) {
        // 56 buffered bits cover the longest symbol: 15 + 5 extra + 15 + 13 extra = 48 bits.
        if (in.count < 48) in.refill();
        std::uint64_t symbol_start = in.bit_position();
        std::uint32_t e = in.decode(literal_table, literal_root_bits);
        if (entry_kind(e) == kind_symbol) {
          out[out_pos++] = static_cast<unsigned char>(entry_value(e));
          // Two more literals fit in the same refill: at least 41 bits are left after the first.
          symbol_start = in.bit_position();
          e = in.decode(literal_table, literal_root_bits);
          if (entry_kind(e) == kind_symbol) {
            out[out_pos++] = static_cast<unsigned char>(entry_value(e));
            symbol_start = in.bit_position();
            e = in.decode(literal_table, literal_root_bits);
            if (entry_kind(e) == kind_symbol) {
              out[out_pos++] = static_cast<unsigned char>(entry_value(e));
              continue;
            }
          }
        }
        if (entry_kind(e) == kind_end) {
          sync(in, out_pos);
          return;
        }
        if (entry_kind(e) != kind_base) {
          sync(in, out_pos);
          fail_code("invalid deflate literal/length code", symbol_start);
        }
        if (in.count < 33) in.refill();  // after three literals, 33 bits cover the rest of a match
        const std::size_t length = entry_value(e) + in.take(entry_extra(e));
        const std::uint64_t distance_start = in.bit_position();
        const std::uint32_t d = in.decode(distance_table, distance_root_bits);
        if (entry_kind(d) != kind_base) {
          sync(in, out_pos);
          fail_code("invalid deflate distance code", distance_start);
        }
        const std::size_t distance = entry_value(d) + in.take(entry_extra(d));
        if (distance > out_pos) {
          sync(in, out_pos);
          fail_distance(distance, distance_start);
        }
        copy_match(out + out_pos, out_size - out_pos, length, distance);
        out_pos += length;
      }

      // Careful step near the end of the input or the output: one symbol, every bound checked.
      if (in.count < 48) in.refill();
      const std::uint64_t symbol_start = in.bit_position();
      const std::uint32_t e = in.decode(literal_table, literal_root_bits);
      if (entry_kind(e) == kind_symbol) {
        if (in.overran() || out_pos == out_size) break;
        out[out_pos++] = static_cast<unsigned char>(entry_value(e));
        continue;
      }
      if (entry_kind(e) == kind_end) {
        sync(in, out_pos);
        check_truncation();
        return;
      }
      if (entry_kind(e) != kind_base) {
        sync(in, out_pos);
        fail_code("invalid deflate literal/length code", symbol_start);
      }
      const std::size_t length = entry_value(e) + in.take(entry_extra(e));
      const std::uint64_t distance_start = in.bit_position();
      const std::uint32_t d = in.decode(distance_table, distance_root_bits);
      if (entry_kind(d) != kind_base) {
        sync(in, out_pos);
        fail_code("invalid deflate distance code", distance_start);
      }
      const std::size_t distance = entry_value(d) + in.take(entry_extra(d));
      if (in.overran()) break;
      if (distance > out_pos) {
        sync(in, out_pos);
        fail_distance(distance, distance_start);
      }
      if (out_size - out_pos < length) break;
      copy_match(out + out_pos, out_size - out_pos, length, distance);
      out_pos += length;
    }
    // Left the careful step on a truncated stream or a full output.
    sync(in, out_pos);
    check_truncation();
    fail_larger();
  }

  void sync(BitReader in, std::size_t out_pos) noexcept {
    in_ = in;
    out_pos_ = out_pos;
  }

  [[noreturn]] void fail_distance(std::size_t distance, std::uint64_t distance_start) const {
    fail("deflate distance " + std::to_string(distance) + " reaches before the start of the output (" +
             std::to_string(out_pos_) + " bytes written)",
         distance_start / 8);
  }

  /// Copies `length` bytes from `distance` bytes back; `room` bytes are writable at `dst`.
  static void copy_match(unsigned char* dst, std::size_t room, std::size_t length, std::size_t distance) noexcept {
    const unsigned char* src = dst - distance;
    if (distance >= 8 && room >= length + 8) {
      // Eight bytes at a time: with distance >= 8 each chunk reads only bytes already written. The last
      // chunk may spill up to 7 bytes past the match, inside the output; later symbols overwrite them.
      for (std::size_t done = 0; done < length; done += 8) std::memcpy(dst + done, src + done, 8);
      return;
    }
    if (distance == 1) {
      std::memset(dst, *src, length);
      return;
    }
    for (std::size_t i = 0; i < length; ++i) dst[i] = src[i];
  }

  BitReader in_;
  unsigned char* out_;
  std::size_t out_size_;
  std::size_t out_pos_ = 0;
  const ErrorLocation& where_;
  std::unique_ptr<std::uint32_t[]> tables_;  // dynamic-block tables, allocated on the first such block
};

}  // namespace inflate_impl

/// Decodes the raw DEFLATE stream `compressed` (no zlib or gzip wrapper) into `out`, which must come
/// out exactly full: `out.size()` is the declared size and also the cap against deflate bombs.
/// Writes only inside `out` and allocates nothing in proportion to the input or the output.
/// Bytes after the final block are ignored.
/// Throws FormatError for a corrupt or truncated stream, or output longer or shorter than `out`;
/// the error carries `where.file` and `where.member`, and as offset `where.offset` (0 if unset)
/// plus the position in `compressed`.
inline void inflate(std::span<const std::byte> compressed, std::span<std::byte> out, const ErrorLocation& where = {}) {
  inflate_impl::Inflater(compressed, out, where).run();
}

/// Decodes `compressed` into a new vector of exactly `expected_size` bytes; see the span form.
/// Allocates `expected_size` bytes up front: the caller caps it before calling.
[[nodiscard]] inline std::vector<std::byte> inflate(std::span<const std::byte> compressed, std::size_t expected_size,
                                                    const ErrorLocation& where = {}) {
  std::vector<std::byte> out(expected_size);
  inflate(compressed, std::span<std::byte>(out), where);
  return out;
}

}  // namespace tensorfile::detail
