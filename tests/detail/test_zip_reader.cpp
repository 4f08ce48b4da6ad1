// SPDX-License-Identifier: MIT
// Tests of the zip layer: CRC-32, the DEFLATE decoder and ZipReader, on real torch files and hostile archives.
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers.hpp>  // Catch2 v3 defines REQUIRE_THROWS_WITH here
#else
#include <catch2/catch.hpp>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/zip/crc32.hpp"
#include "tensorfile/detail/zip/inflate.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile_catch.hpp"

#ifndef TENSORFILE_TEST_DATA_DIR
#error "TENSORFILE_TEST_DATA_DIR must name the tests/data folder"
#endif

namespace {

using tensorfile::ArgumentError;
using tensorfile::ErrorLocation;
using tensorfile::FormatError;
using tensorfile::LimitError;
using tensorfile::UnsupportedError;
using tensorfile::detail::crc32;
using tensorfile::detail::inflate;
using tensorfile::detail::ZipEntry;
using tensorfile::detail::ZipLimits;
using tensorfile::detail::ZipReader;

using ByteVector = std::vector<std::byte>;

const std::string torch_dir = TENSORFILE_TEST_DATA_DIR "/torch";
const std::string zip_dir = TENSORFILE_TEST_DATA_DIR "/zip";

ByteVector read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ByteVector bytes(chars.size());
  std::transform(chars.begin(), chars.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
  return bytes;
}

ByteVector to_bytes(std::string_view text) {
  ByteVector bytes(text.size());
  std::transform(text.begin(), text.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
  return bytes;
}

std::string to_string(std::span<const std::byte> bytes) {
  std::string text(bytes.size(), '\0');
  std::transform(bytes.begin(), bytes.end(), text.begin(), [](std::byte b) { return static_cast<char>(b); });
  return text;
}

// ---------------------------------------------------------------------------------------------------
// Byte-level builders for hostile input.

void put16(ByteVector& bytes, std::uint64_t at, std::uint64_t value) {
  for (int i = 0; i < 2; ++i) bytes[at + static_cast<std::uint64_t>(i)] = static_cast<std::byte>(value >> (8 * i));
}
void put32(ByteVector& bytes, std::uint64_t at, std::uint64_t value) {
  for (int i = 0; i < 4; ++i) bytes[at + static_cast<std::uint64_t>(i)] = static_cast<std::byte>(value >> (8 * i));
}
void put64(ByteVector& bytes, std::uint64_t at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + static_cast<std::uint64_t>(i)] = static_cast<std::byte>(value >> (8 * i));
}
void append16(ByteVector& bytes, std::uint64_t value) {
  bytes.resize(bytes.size() + 2);
  put16(bytes, bytes.size() - 2, value);
}
void append32(ByteVector& bytes, std::uint64_t value) {
  bytes.resize(bytes.size() + 4);
  put32(bytes, bytes.size() - 4, value);
}
void append64(ByteVector& bytes, std::uint64_t value) {
  bytes.resize(bytes.size() + 8);
  put64(bytes, bytes.size() - 8, value);
}
void append(ByteVector& bytes, std::string_view text) {
  const ByteVector more = to_bytes(text);
  bytes.insert(bytes.end(), more.begin(), more.end());
}
void append(ByteVector& bytes, std::span<const std::byte> more) { bytes.insert(bytes.end(), more.begin(), more.end()); }

/// One member of a hand-made archive.
struct Member {
  std::string name;
  ByteVector payload;      // the bytes as they sit in the archive
  std::uint64_t size = 0;  // declared size; 0 means payload.size()
  std::uint16_t method = 0;
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;     // 0 means the CRC of the payload
  std::string local_name;    // empty means `name`
  bool zip64_extra = false;  // central sizes and offset as 0xFFFFFFFF, values in a zip64 extra field
};

Member stored(std::string name, std::string_view data) {
  Member m;
  m.name = std::move(name);
  m.payload = to_bytes(data);
  return m;
}

/// A hand-made archive and where its records are.
struct Built {
  ByteVector bytes;
  std::vector<std::uint64_t> local;    // local header offsets
  std::vector<std::uint64_t> data;     // data offsets
  std::vector<std::uint64_t> central;  // central header offsets
  std::uint64_t directory = 0;
  std::uint64_t directory_size = 0;
  std::uint64_t zip64_end = 0;
  std::uint64_t locator = 0;
  std::uint64_t end = 0;
};

/// Lays out `members` like torch does (zip64 end records on every file unless `zip64_end` is false),
/// without alignment padding or data descriptors.
Built build_zip(const std::vector<Member>& members, bool zip64_end = true, std::string_view comment = {}) {
  Built b;
  for (const Member& m : members) {
    const std::string& local_name = m.local_name.empty() ? m.name : m.local_name;
    b.local.push_back(b.bytes.size());
    append32(b.bytes, 0x04034b50);
    append16(b.bytes, 20);
    append16(b.bytes, m.flags);
    append16(b.bytes, m.method);
    append32(b.bytes, 0);  // time and date
    append32(b.bytes, 0);  // CRC and sizes are ignored in the local header
    append32(b.bytes, 0);
    append32(b.bytes, 0);
    append16(b.bytes, local_name.size());
    append16(b.bytes, 0);
    append(b.bytes, local_name);
    b.data.push_back(b.bytes.size());
    append(b.bytes, m.payload);
  }
  b.directory = b.bytes.size();
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    const std::uint64_t size = m.size != 0 ? m.size : m.payload.size();
    const std::uint32_t crc = m.crc != 0 ? m.crc : crc32(m.payload);
    b.central.push_back(b.bytes.size());
    append32(b.bytes, 0x02014b50);
    append16(b.bytes, 20);
    append16(b.bytes, 20);
    append16(b.bytes, m.flags);
    append16(b.bytes, m.method);
    append32(b.bytes, 0);
    append32(b.bytes, crc);
    append32(b.bytes, m.zip64_extra ? 0xFFFFFFFF : m.payload.size());
    append32(b.bytes, m.zip64_extra ? 0xFFFFFFFF : size);
    append16(b.bytes, m.name.size());
    append16(b.bytes, m.zip64_extra ? 28 : 0);
    append16(b.bytes, 0);  // comment
    append16(b.bytes, 0);  // disk
    append16(b.bytes, 0);  // internal attributes
    append32(b.bytes, 0);  // external attributes
    append32(b.bytes, m.zip64_extra ? 0xFFFFFFFF : b.local[i]);
    append(b.bytes, m.name);
    if (m.zip64_extra) {
      append16(b.bytes, 0x0001);
      append16(b.bytes, 24);
      append64(b.bytes, size);
      append64(b.bytes, m.payload.size());
      append64(b.bytes, b.local[i]);
    }
  }
  b.directory_size = b.bytes.size() - b.directory;
  if (zip64_end) {
    b.zip64_end = b.bytes.size();
    append32(b.bytes, 0x06064b50);
    append64(b.bytes, 44);
    append16(b.bytes, 0x031E);
    append16(b.bytes, 45);
    append32(b.bytes, 0);
    append32(b.bytes, 0);
    append64(b.bytes, members.size());
    append64(b.bytes, members.size());
    append64(b.bytes, b.directory_size);
    append64(b.bytes, b.directory);
    b.locator = b.bytes.size();
    append32(b.bytes, 0x07064b50);
    append32(b.bytes, 0);
    append64(b.bytes, b.zip64_end);
    append32(b.bytes, 1);
  }
  b.end = b.bytes.size();
  append32(b.bytes, 0x06054b50);
  append16(b.bytes, 0);
  append16(b.bytes, 0);
  append16(b.bytes, members.size());
  append16(b.bytes, members.size());
  append32(b.bytes, b.directory_size);
  append32(b.bytes, b.directory);
  append16(b.bytes, comment.size());
  append(b.bytes, comment);
  return b;
}

/// The three members of a minimal torch file.
std::vector<Member> torch_like() {
  return {stored("archive/data.pkl", "PKL!"), stored("archive/data/0", "01234567"), stored("archive/version", "3\n")};
}

void open_zip(const ByteVector& bytes, const ZipLimits& limits = {}) {
  static_cast<void>(ZipReader::open(bytes, "hostile.pt", limits));
}

std::string at(std::uint64_t offset) { return " (at byte " + std::to_string(offset) + ")"; }

/// Writes DEFLATE bit fields: `bits` least significant bit first, `code` (a Huffman code) most
/// significant bit first.
class BitWriter {
 public:
  void bits(std::uint32_t value, unsigned count) {
    for (unsigned i = 0; i < count; ++i) push((value >> i) & 1u);
  }
  void code(std::uint32_t value, unsigned length) {
    for (unsigned i = length; i-- > 0;) push((value >> i) & 1u);
  }
  void fixed_literal(unsigned symbol) {
    if (symbol < 144) {
      code(0x30 + symbol, 8);
    } else if (symbol < 256) {
      code(0x190 + symbol - 144, 9);
    } else if (symbol < 280) {
      code(symbol - 256, 7);
    } else {
      code(0xC0 + symbol - 280, 8);
    }
  }
  void align() {
    while (count_ % 8 != 0) push(0);
  }
  void byte(std::uint8_t value) { bits(value, 8); }
  [[nodiscard]] std::size_t bit_count() const { return count_; }
  [[nodiscard]] ByteVector finish() {
    align();
    return bytes_;
  }

 private:
  void push(std::uint32_t bit) {
    if (count_ % 8 == 0) bytes_.push_back(std::byte{0});
    bytes_.back() |= static_cast<std::byte>(bit << (count_ % 8));
    ++count_;
  }
  ByteVector bytes_;
  std::size_t count_ = 0;
};

/// Canonical Huffman codes for `lengths` (RFC 1951, 3.2.2), as (code, length) per symbol.
std::vector<std::pair<std::uint32_t, unsigned>> canonical(const std::vector<unsigned>& lengths) {
  std::array<std::uint32_t, 17> count{};
  for (unsigned length : lengths) ++count[length];
  count[0] = 0;
  std::array<std::uint32_t, 17> next{};
  for (unsigned bits = 1; bits < 16; ++bits) next[bits + 1] = (next[bits] + count[bits]) << 1;
  std::vector<std::pair<std::uint32_t, unsigned>> codes(lengths.size());
  for (std::size_t s = 0; s < lengths.size(); ++s)
    if (lengths[s] != 0) codes[s] = {next[lengths[s]]++, lengths[s]};
  return codes;
}

/// Writes a dynamic block header up to the code-length code; returns that code. `code_length_lengths`
/// is indexed by code-length symbol (0..18).
std::vector<std::pair<std::uint32_t, unsigned>> dynamic_header(BitWriter& w, unsigned hlit, unsigned hdist,
                                                               const std::vector<unsigned>& code_length_lengths) {
  static constexpr std::array<unsigned, 19> order = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  unsigned hclen = 4;
  for (unsigned i = 0; i < 19; ++i)
    if (code_length_lengths[order[i]] != 0) hclen = std::max(hclen, i + 1);
  w.bits(1, 1);
  w.bits(2, 2);
  w.bits(hlit, 5);
  w.bits(hdist, 5);
  w.bits(hclen - 4, 4);
  for (unsigned i = 0; i < hclen; ++i) w.bits(code_length_lengths[order[i]], 3);
  return canonical(code_length_lengths);
}

void inflate_into(const ByteVector& compressed, std::size_t size, const ErrorLocation& where = {}) {
  ByteVector out(size);
  inflate(compressed, std::span<std::byte>(out), where);
}

/// The reason of the FormatError `inflate` throws, or a note that it did not.
std::string inflate_failure(std::span<const std::byte> compressed, std::size_t size) {
  ByteVector out(size);
  try {
    inflate(compressed, std::span<std::byte>(out));
  } catch (const FormatError& e) {
    return e.reason();
  }
  return "<no error>";
}

struct InflateCase {
  std::string name;
  std::size_t size = 0;
  std::uint32_t crc = 0;
};

std::vector<InflateCase> inflate_cases() {
  std::ifstream in(zip_dir + "/inflate_cases.txt");
  REQUIRE(in.good());
  std::vector<InflateCase> cases;
  InflateCase c;
  std::string crc;
  while (in >> c.name >> c.size >> crc) {
    c.crc = static_cast<std::uint32_t>(std::stoul(crc, nullptr, 16));
    cases.push_back(c);
  }
  REQUIRE(cases.size() == 7);
  return cases;
}

/// What DUMPS.txt says about one entry of a sample.
struct DumpedEntry {
  std::string name;
  std::uint32_t crc = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
  std::uint64_t local_header_offset = 0;
  std::uint64_t data_offset = 0;
};

std::uint64_t field(const std::string& line, const std::string& key, int base = 10) {
  const std::size_t at = line.find(key);
  REQUIRE(at != std::string::npos);
  return std::stoull(line.substr(at + key.size()), nullptr, base);
}

/// Parses the zip part of DUMPS.txt: sample file name -> entries.
std::vector<std::pair<std::string, std::vector<DumpedEntry>>> read_dumps() {
  std::ifstream in(torch_dir + "/DUMPS.txt");
  REQUIRE(in.good());
  std::vector<std::pair<std::string, std::vector<DumpedEntry>>> samples;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("== ", 0) == 0) {
      samples.emplace_back(line.substr(3, line.find(' ', 3) - 3), std::vector<DumpedEntry>{});
    } else if (line.rfind('[', 0) == 0 && line.find("] '") != std::string::npos) {
      DumpedEntry e;
      const std::size_t open = line.find('\'');
      e.name = line.substr(open + 1, line.rfind('\'') - open - 1);
      samples.back().second.push_back(e);
    } else if (line.rfind("    CD: ", 0) == 0) {
      DumpedEntry& e = samples.back().second.back();
      e.crc = static_cast<std::uint32_t>(field(line, " crc=0x", 16));
      e.compressed_size = field(line, " csize=");
      e.size = field(line, " usize=");
      e.local_header_offset = field(line, " lho=");
    } else if (line.rfind("    data@", 0) == 0) {
      samples.back().second.back().data_offset = field(line, "    data@");
    }
  }
  return samples;
}

std::vector<std::filesystem::path> torch_zip_samples() {
  std::vector<std::filesystem::path> paths;
  for (const auto& item : std::filesystem::directory_iterator(torch_dir))
    if (item.path().extension() == ".pt" && item.path().filename() != "legacy_format.pt") paths.push_back(item.path());
  std::sort(paths.begin(), paths.end());
  REQUIRE(paths.size() >= 20);
  return paths;
}

}  // namespace

// ===================================================================================================
// CRC-32

TEST_CASE("crc32", "[zip][crc32]") {
  SECTION("standard check values") {
    CHECK(crc32({}) == 0);
    CHECK(crc32(to_bytes("123456789")) == 0xCBF43926u);
    CHECK(crc32(to_bytes("The quick brown fox jumps over the lazy dog")) == 0x414FA339u);
    CHECK(crc32(to_bytes("3\n")) == 0x55679ED1u);  // every torch `version` record (DUMPS.txt)
  }
  SECTION("running value continues a checksum, at every split point and length") {
    ByteVector data(300);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + (i >> 3));
    const std::uint32_t whole = crc32(data);
    for (std::size_t split = 0; split <= data.size(); ++split) {
      const std::span<const std::byte> all(data);
      CHECK(crc32(all.subspan(split), crc32(all.first(split))) == whole);
    }
    // The byte-at-a-time tail and the 16-byte loop agree for every length.
    std::uint32_t bytewise = 0;
    for (std::size_t n = 0; n < data.size(); ++n) {
      CHECK(crc32(std::span<const std::byte>(data).first(n)) == bytewise);
      bytewise = crc32(std::span<const std::byte>(data).subspan(n, 1), bytewise);
    }
  }
}

// ===================================================================================================
// DEFLATE decoder

TEST_CASE("inflate: streams written by zlib", "[zip][inflate]") {
  for (const InflateCase& c : inflate_cases()) {
    INFO("case " << c.name);
    const ByteVector compressed = read_file(zip_dir + "/inflate_" + c.name + ".deflate");
    SECTION("span form, " + c.name) {
      ByteVector out(c.size);
      inflate(compressed, std::span<std::byte>(out));
      CHECK(crc32(out) == c.crc);
    }
    SECTION("vector form, " + c.name) {
      const ByteVector out = inflate(compressed, c.size);
      CHECK(out.size() == c.size);
      CHECK(crc32(out) == c.crc);
    }
    SECTION("the declared size caps the output, " + c.name) {
      if (c.size > 0)
        CHECK(inflate_failure(compressed, c.size - 1) ==
              "inflated data is larger than the declared " + std::to_string(c.size - 1) + " bytes");
      CHECK(inflate_failure(compressed, c.size + 1) == "inflated data is shorter than declared; expected " +
                                                           std::to_string(c.size + 1) + " bytes, got " +
                                                           std::to_string(c.size));
    }
    SECTION("bytes after the final block are ignored, " + c.name) {
      ByteVector padded = compressed;
      append(padded, "trailing junk");
      ByteVector out(c.size);
      inflate(padded, std::span<std::byte>(out));
      CHECK(crc32(out) == c.crc);
    }
  }
}

TEST_CASE("inflate: truncated streams", "[zip][inflate]") {
  for (const InflateCase& c : inflate_cases()) {
    INFO("case " << c.name);
    const ByteVector compressed = read_file(zip_dir + "/inflate_" + c.name + ".deflate");
    // Every cut of the small streams, about 60 cuts of the large ones.
    const std::size_t step = compressed.size() < 4000 ? tensorfile_test::exhaustive_step() : compressed.size() / 60;
    for (std::size_t cut = 0; cut < compressed.size(); cut += step) {
      INFO("cut at " << cut);
      const ByteVector part(compressed.begin(), compressed.begin() + static_cast<std::ptrdiff_t>(cut));
      CHECK(inflate_failure(part, c.size) == "deflate stream is truncated");
    }
  }
  REQUIRE_THROWS_WITH(inflate_into({}, 0), "tensorfile: deflate stream is truncated (at byte 0)");
}

TEST_CASE("inflate: corrupted streams never crash", "[zip][inflate]") {
  // Random bit flips and byte changes: each run either fails with a FormatError or decodes to
  // exactly the declared size; the sanitizers watch for out-of-bounds access.
  std::mt19937 rng(1234);
  for (const std::string name : {"fixed", "dynamic", "huffman_only", "rle", "stored"}) {
    const ByteVector compressed = read_file(zip_dir + "/inflate_" + name + ".deflate");
    const std::vector<InflateCase> cases = inflate_cases();
    const InflateCase c =
        *std::find_if(cases.begin(), cases.end(), [&](const InflateCase& x) { return x.name == name; });
    for (int round = 0; round < 150; ++round) {
      ByteVector bad = compressed;
      const int changes = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < changes; ++k) {
        const std::size_t at_byte = rng() % std::min<std::size_t>(bad.size(), 300);
        bad[at_byte] ^= static_cast<std::byte>(1u << (rng() % 8));
      }
      ByteVector out(c.size);
      try {
        inflate(bad, std::span<std::byte>(out));
      } catch (const FormatError&) {
      }
    }
  }
}

TEST_CASE("inflate: hand-made streams", "[zip][inflate]") {
  SECTION("block type 3, with the location of the caller") {
    REQUIRE_THROWS_WITH(inflate_into(ByteVector{std::byte{0x07}}, 1),
                        "tensorfile: invalid deflate block type 3 (at byte 0)");
    REQUIRE_THROWS_WITH(inflate_into(ByteVector{std::byte{0x07}}, 1, {"x.pt", "x/data.pkl", 100}),
                        "tensorfile: x.pt: x/data.pkl: invalid deflate block type 3 (at byte 100)");
    REQUIRE_THROWS_AS(inflate_into(ByteVector{std::byte{0x07}}, 1), FormatError);
  }
  SECTION("stored block whose length does not match its complement") {
    const ByteVector bad = {std::byte{0x01}, std::byte{0x05}, std::byte{0x00}, std::byte{0x00}, std::byte{0x00}};
    REQUIRE_THROWS_WITH(
        inflate_into(bad, 5),
        "tensorfile: corrupt deflate stored block: length 5 does not match its complement 0 (at byte 1)");
  }
  SECTION("stored block shorter than its length") {
    ByteVector bad = {std::byte{0x01}, std::byte{0x05}, std::byte{0x00}, std::byte{0xFA}, std::byte{0xFF}};
    append(bad, "ab");
    REQUIRE_THROWS_WITH(inflate_into(bad, 5), "tensorfile: deflate stream is truncated (at byte 7)");
  }
  SECTION("stored block larger than the declared size") {
    ByteVector bad = {std::byte{0x01}, std::byte{0x05}, std::byte{0x00}, std::byte{0xFA}, std::byte{0xFF}};
    append(bad, "abcde");
    REQUIRE_THROWS_WITH(inflate_into(bad, 4),
                        "tensorfile: inflated data is larger than the declared 4 bytes (at byte 5)");
    inflate_into(bad, 5);
  }
  SECTION("distance before the start of the output") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    w.fixed_literal('a');
    w.fixed_literal(257);  // length 3
    const std::size_t distance_at = w.bit_count() / 8;
    w.code(1, 5);  // distance 2
    w.fixed_literal(256);
    REQUIRE_THROWS_WITH(
        inflate_into(w.finish(), 4),
        "tensorfile: deflate distance 2 reaches before the start of the output (1 bytes written)" + at(distance_at));
  }
  SECTION("literal/length symbol 286 and distance symbol 30 do not exist") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    w.fixed_literal(286);
    w.bits(0, 24);
    REQUIRE_THROWS_WITH(inflate_into(w.finish(), 4), "tensorfile: invalid deflate literal/length code (at byte 0)");

    BitWriter d;
    d.bits(1, 1);
    d.bits(1, 2);
    d.fixed_literal('a');
    d.fixed_literal(257);
    const std::size_t distance_at = d.bit_count() / 8;
    d.code(30, 5);
    d.bits(0, 24);
    REQUIRE_THROWS_WITH(inflate_into(d.finish(), 4), "tensorfile: invalid deflate distance code" + at(distance_at));
  }
  SECTION("too many literal/length or distance codes") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(2, 2);
    w.bits(30, 5);  // 287 codes
    w.bits(0, 5);
    w.bits(0, 4);
    w.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(w.finish(), 4),
                        "tensorfile: corrupt deflate block header: 287 literal/length codes (at most 286) (at byte 0)");
    BitWriter d;
    d.bits(1, 1);
    d.bits(2, 2);
    d.bits(0, 5);
    d.bits(30, 5);  // 31 codes
    d.bits(0, 4);
    d.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(d.finish(), 4),
                        "tensorfile: corrupt deflate block header: 31 distance codes (at most 30) (at byte 0)");
  }
  SECTION("over-subscribed and incomplete code-length codes") {
    BitWriter w;
    dynamic_header(w, 0, 0, std::vector<unsigned>(19, 1));
    w.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(w.finish(), 4),
                        "tensorfile: corrupt deflate code lengths: over-subscribed code-length code (at byte 0)");
    BitWriter i;
    std::vector<unsigned> one(19, 0);
    one[0] = 1;
    dynamic_header(i, 0, 0, one);
    i.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(i.finish(), 4),
                        "tensorfile: corrupt deflate code lengths: incomplete code-length code (at byte 0)");
  }
  SECTION("repeat code 16 with no previous length") {
    BitWriter w;
    std::vector<unsigned> lengths(19, 0);
    lengths[0] = 1;
    lengths[16] = 1;
    const auto codes = dynamic_header(w, 0, 0, lengths);
    const std::size_t symbol_at = w.bit_count() / 8;
    w.code(codes[16].first, codes[16].second);
    w.bits(0, 2);
    w.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(w.finish(), 4),
                        "tensorfile: corrupt deflate code lengths: repeat with no previous length" + at(symbol_at));
  }
  SECTION("repeat past the last code, missing end-of-block code") {
    std::vector<unsigned> lengths(19, 0);
    lengths[0] = 1;
    lengths[18] = 1;
    BitWriter w;  // 257 + 1 lengths, then 138 + 138 zeros
    auto codes = dynamic_header(w, 0, 0, lengths);
    w.code(codes[18].first, codes[18].second);
    w.bits(127, 7);
    const std::size_t second_at = w.bit_count() / 8;
    w.code(codes[18].first, codes[18].second);
    w.bits(127, 7);
    w.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(w.finish(), 4),
                        "tensorfile: corrupt deflate code lengths: repeat runs past the last code" + at(second_at));

    BitWriter e;  // 138 + 119 + 1 zeros: no code for symbol 256
    codes = dynamic_header(e, 0, 0, lengths);
    e.code(codes[18].first, codes[18].second);
    e.bits(127, 7);
    e.code(codes[18].first, codes[18].second);
    e.bits(108, 7);
    e.code(codes[0].first, codes[0].second);
    e.bits(0, 16);
    REQUIRE_THROWS_WITH(inflate_into(e.finish(), 4),
                        "tensorfile: corrupt deflate code lengths: no end-of-block code (at byte 0)");
  }
  SECTION("over-subscribed and incomplete literal/length and distance codes") {
    // Code-length alphabet {0, 1, 2, 18}, two bits each. The literal/length lengths below are
    // (symbol: length) pairs; everything else is 0. One distance code follows.
    const auto block = [](const std::vector<std::pair<unsigned, unsigned>>& literal_lengths, unsigned distance_length) {
      std::vector<unsigned> lengths(19, 0);
      lengths[0] = lengths[1] = lengths[2] = lengths[18] = 2;
      BitWriter w;
      const auto codes = dynamic_header(w, 0, 0, lengths);
      std::vector<unsigned> all(258, 0);
      for (const auto& [symbol, length] : literal_lengths) all[symbol] = length;
      all[257] = distance_length;
      for (unsigned length : all) w.code(codes[length].first, codes[length].second);
      w.bits(0, 32);
      return w.finish();
    };
    REQUIRE_THROWS_WITH(inflate_into(block({{0, 1}, {1, 1}, {256, 1}}, 1), 4),
                        "tensorfile: corrupt deflate code lengths: over-subscribed literal/length code (at byte 0)");
    REQUIRE_THROWS_WITH(inflate_into(block({{'a', 2}, {256, 2}}, 1), 4),
                        "tensorfile: corrupt deflate code lengths: incomplete literal/length code (at byte 0)");
    // A single distance code of length 1 is the one incomplete code zlib writes; it is accepted.
    // A single distance code of length 2 is not.
    REQUIRE_THROWS_WITH(inflate_into(block({{'a', 1}, {256, 1}}, 2), 4),
                        "tensorfile: corrupt deflate code lengths: incomplete distance code (at byte 0)");
    // The header is accepted; the zero bits after it decode as 'a'.
    CHECK(inflate_failure(block({{'a', 1}, {256, 1}}, 1), 0) == "inflated data is larger than the declared 0 bytes");
  }
  SECTION("a one-symbol distance code decodes, its missing half does not") {
    // 258 literal/length codes {'a': 1, 256: 2, 257: 2} and one distance code of length 1 (code 0).
    // The stream writes 'a', then a match of length 3 at distance 1, then either the end of block or
    // a second match using the distance code 1, which does not exist.
    const auto stream = [](bool bad_distance, std::size_t* bad_at) {
      BitWriter w;
      std::vector<unsigned> code_length_lengths(19, 0);
      code_length_lengths[0] = code_length_lengths[1] = code_length_lengths[2] = code_length_lengths[18] = 2;
      const auto cl = dynamic_header(w, 1, 0, code_length_lengths);
      std::vector<unsigned> lengths(259, 0);
      lengths['a'] = 1;
      lengths[256] = 2;
      lengths[257] = 2;
      lengths[258] = 1;  // distance symbol 0
      for (unsigned length : lengths) w.code(cl[length].first, cl[length].second);
      const auto lit = canonical(std::vector<unsigned>(lengths.begin(), lengths.begin() + 258));
      w.code(lit['a'].first, lit['a'].second);
      w.code(lit[257].first, lit[257].second);  // length 3
      w.code(0, 1);                             // distance 1
      if (bad_distance) {
        w.code(lit[257].first, lit[257].second);
        *bad_at = w.bit_count() / 8;
        w.code(1, 1);
      } else {
        w.code(lit[256].first, lit[256].second);
      }
      w.bits(0, 32);
      return w.finish();
    };
    std::size_t bad_at = 0;
    CHECK(to_string(inflate(stream(false, &bad_at), 4)) == "aaaa");
    const ByteVector bad = stream(true, &bad_at);
    REQUIRE_THROWS_WITH(inflate_into(bad, 7), "tensorfile: invalid deflate distance code" + at(bad_at));
  }
  SECTION("distance 32768 and length 258 from code 284") {
    BitWriter w;
    w.bits(0, 1);
    w.bits(0, 2);
    w.align();
    w.bits(32768 & 0xFFFF, 16);
    w.bits(~32768u & 0xFFFF, 16);
    for (unsigned i = 0; i < 32768; ++i) w.byte(static_cast<std::uint8_t>((i * 37) ^ (i >> 7)));
    w.bits(1, 1);
    w.bits(1, 2);
    w.fixed_literal(284);
    w.bits(31, 5);  // 227 + 31 = 258
    w.code(29, 5);
    w.bits(8191, 13);  // 24577 + 8191 = 32768
    w.fixed_literal(256);
    const ByteVector out = inflate(w.finish(), 32768 + 258);
    CHECK(std::equal(out.begin(), out.begin() + 258, out.begin() + 32768));
  }
  SECTION("deflate bomb: output beyond the declared size is refused before it is written") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    w.fixed_literal(0);
    for (int i = 0; i < 100000; ++i) {  // 100000 copies of 258 bytes: 25.8 MB from 160 KB
      w.fixed_literal(285);
      w.code(0, 5);
    }
    w.fixed_literal(256);
    const ByteVector bomb = w.finish();
    // After the literal, three copies fit in 1000 bytes (775 bytes); the fourth ends at bit 63.
    REQUIRE_THROWS_WITH(inflate_into(bomb, 1000),
                        "tensorfile: inflated data is larger than the declared 1000 bytes (at byte 7)");
    CHECK(inflate_failure(bomb, 0) == "inflated data is larger than the declared 0 bytes");
    CHECK(inflate(bomb, 1 + 258 * 100000).size() == 1 + 258 * 100000);
  }
  SECTION("output shorter than declared") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    w.fixed_literal('a');
    w.fixed_literal(256);
    REQUIRE_THROWS_WITH(inflate_into(w.finish(), 5),
                        "tensorfile: inflated data is shorter than declared; expected 5 bytes, got 1 (at byte 2)");
  }
}

// ===================================================================================================
// ZipReader on real torch files

TEST_CASE("ZipReader: every torch sample matches DUMPS.txt", "[zip][reader]") {
  const auto dumps = read_dumps();
  std::size_t checked = 0;
  for (const auto& [file, expected] : dumps) {
    if (file == "legacy_format.pt") continue;
    INFO("sample " << file);
    const ByteVector bytes = read_file(torch_dir + "/" + file);
    const ZipReader zip = ZipReader::open(bytes, file);
    REQUIRE(zip.entries().size() == expected.size());
    // Saved to a path, the prefix is the file's stem; saved to a buffer, it is "archive".
    CHECK(zip.prefix() ==
          (file == "t_float32_2x3_buffer.pt" ? "archive" : std::filesystem::path(file).stem().string()));
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const ZipEntry& e = zip.entries()[i];
      INFO("entry " << expected[i].name);
      CHECK(e.name == expected[i].name);
      CHECK(e.crc32 == expected[i].crc);
      CHECK(e.compressed_size == expected[i].compressed_size);
      CHECK(e.size == expected[i].size);
      CHECK(e.local_header_offset == expected[i].local_header_offset);
      CHECK(e.data_offset == expected[i].data_offset);
      CHECK(e.data_offset % 64 == 0);
      CHECK(e.method == 0);
      CHECK(zip.find(std::string_view(e.name).substr(zip.prefix().size() + 1)) == &e);
      zip.verify_crc(e);
    }
    ++checked;
  }
  CHECK(checked == 21);
}

TEST_CASE("ZipReader: torch samples", "[zip][reader]") {
  SECTION("every sample opens; data.pkl and version are found; CRCs verify") {
    for (const auto& path : torch_zip_samples()) {
      INFO("sample " << path.filename().string());
      const ByteVector bytes = read_file(path);
      const ZipReader zip = ZipReader::open(bytes, path);
      const ZipEntry* pickle = zip.find("data.pkl");
      const ZipEntry* version = zip.find("version");
      REQUIRE(pickle != nullptr);
      REQUIRE(version != nullptr);
      CHECK(to_string(zip.stored_bytes(*version)) == "3\n");
      CHECK(std::to_integer<int>(zip.read(*pickle).at(0)) == 0x80);  // PROTO
      for (const ZipEntry& e : zip.entries()) zip.verify_crc(e);
    }
  }
  SECTION("t_float32_2x3.pt, byte for byte") {
    const ByteVector bytes = read_file(torch_dir + "/t_float32_2x3.pt");
    const ZipReader zip = ZipReader::open(bytes, "t_float32_2x3.pt");
    CHECK(zip.prefix() == "t_float32_2x3");
    REQUIRE(zip.entries().size() == 3);
    CHECK(zip.entries()[0].name == "t_float32_2x3/data.pkl");
    CHECK(zip.entries()[0].data_offset == 64);
    const ZipEntry* storage = zip.find("data/0");
    REQUIRE(storage != nullptr);
    CHECK(storage->name == "t_float32_2x3/data/0");
    REQUIRE(storage->size == 24);
    const std::span<const std::byte> data = zip.stored_bytes(*storage);
    CHECK(data.data() == bytes.data() + storage->data_offset);  // zero-copy
    std::array<float, 6> values{};
    std::memcpy(values.data(), data.data(), sizeof values);
    CHECK(values == std::array<float, 6>{0, 1, 2, 3, 4, 5});
    ByteVector copy(24);
    zip.read(*storage, copy);
    CHECK(std::equal(copy.begin(), copy.end(), data.begin()));
    CHECK(zip.find("data/1") == nullptr);
    CHECK(zip.find("t_float32_2x3/data/0") == nullptr);  // names are looked up under the prefix
    CHECK(zip.find("") == nullptr);
  }
  SECTION("a file saved to a buffer has the prefix 'archive'") {
    const ByteVector bytes = read_file(torch_dir + "/t_float32_2x3_buffer.pt");
    const ZipReader zip = ZipReader::open(bytes, "t_float32_2x3_buffer.pt");
    CHECK(zip.prefix() == "archive");
    REQUIRE(zip.find("data/0") != nullptr);
  }
  SECTION("a flipped data byte fails the optional CRC check only") {
    ByteVector bytes = read_file(torch_dir + "/t_float32_2x3.pt");
    const std::uint64_t offset = ZipReader::open(bytes, "x").find("data/0")->data_offset;
    bytes[offset + 3] ^= std::byte{1};
    const ZipReader zip = ZipReader::open(bytes, "t_float32_2x3.pt");
    const ZipEntry& storage = *zip.find("data/0");
    REQUIRE_THROWS_WITH(zip.verify_crc(storage),
                        "tensorfile: t_float32_2x3.pt: t_float32_2x3/data/0: CRC-32 mismatch; "
                        "expected 0x91e79017, got " +
                            tensorfile::detail::zip_impl::hex32(crc32(zip.stored_bytes(storage))) + at(offset));
  }
  SECTION("the legacy (non-zip) format is named") {
    const std::string path = torch_dir + "/legacy_format.pt";
    const ByteVector bytes = read_file(path);
    REQUIRE_THROWS_WITH(static_cast<void>(ZipReader::open(bytes, path)),
                        "tensorfile: " + path +
                            ": not a zip archive: no end-of-central-directory record; it starts "
                            "like a pickle stream (the legacy torch.save format) (at byte 486)");
  }
  SECTION("wrong output size and deflate-only access") {
    const ByteVector bytes = read_file(torch_dir + "/t_float32_2x3.pt");
    const ZipReader zip = ZipReader::open(bytes, "t.pt");
    ByteVector small(23);
    REQUIRE_THROWS_WITH(zip.read(*zip.find("data/0"), small),
                        "tensorfile: t.pt: t_float32_2x3/data/0: the output buffer does not match the entry size; "
                        "expected 24 bytes, got 23 (at byte 320)");
    REQUIRE_THROWS_AS(zip.read(*zip.find("data/0"), small), ArgumentError);
  }
}

TEST_CASE("ZipReader: copies share the name pool, so names outlive the reader they were read by", "[zip][reader]") {
  const ByteVector bytes = read_file(torch_dir + "/state_dict_linear_bn.pt");
  std::vector<std::string> names;
  std::optional<ZipReader> copy;
  {
    const ZipReader original = ZipReader::open(bytes, "state_dict_linear_bn.pt");
    for (const ZipEntry& e : original.entries()) names.emplace_back(e.name);
    copy.emplace(original);
  }  // `original` goes; its copy keeps the pool its names point into
  REQUIRE(copy->entries().size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(copy->entries()[i].name == names[i]);
    CHECK(copy->find(names[i].substr(copy->prefix().size() + 1)) == &copy->entries()[i]);
  }
}

TEST_CASE("ZipReader: archives rewritten by Python's zipfile", "[zip][reader]") {
  const ByteVector original_bytes = read_file(torch_dir + "/state_dict_linear_bn.pt");
  const ZipReader original = ZipReader::open(original_bytes, "state_dict_linear_bn.pt");
  for (const std::string name : {"state_dict_deflated.zip", "state_dict_python_stored.zip"}) {
    INFO("archive " << name);
    const ByteVector bytes = read_file(zip_dir + "/" + name);
    const ZipReader zip = ZipReader::open(bytes, name);
    CHECK(zip.prefix() == "state_dict_linear_bn");
    REQUIRE(zip.entries().size() == original.entries().size());
    for (const ZipEntry& e : original.entries()) {
      INFO("entry " << e.name);
      const ZipEntry* copy = zip.find(std::string_view(e.name).substr(original.prefix().size() + 1));
      REQUIRE(copy != nullptr);
      CHECK(copy->method == (name == "state_dict_deflated.zip" ? 8 : 0));
      CHECK(copy->size == e.size);
      CHECK(copy->crc32 == e.crc32);
      const ByteVector contents = zip.read(*copy);
      const std::span<const std::byte> expected = original.stored_bytes(e);
      CHECK(std::equal(contents.begin(), contents.end(), expected.begin(), expected.end()));
      zip.verify_crc(*copy);
      zip.verify_crc(*copy, contents);
    }
  }
  SECTION("a deflated entry cannot be viewed in place") {
    const ByteVector bytes = read_file(zip_dir + "/state_dict_deflated.zip");
    const ZipReader zip = ZipReader::open(bytes, "d.zip");
    REQUIRE_THROWS_WITH(zip.stored_bytes(*zip.find("data.pkl")),
                        "tensorfile: d.zip: state_dict_linear_bn/data.pkl: the entry is deflate-compressed; only "
                        "stored entries can be used in place (at byte 59)");
    REQUIRE_THROWS_AS(zip.stored_bytes(*zip.find("data.pkl")), UnsupportedError);
  }
}

// ===================================================================================================
// ZipReader on hand-made and hostile archives

TEST_CASE("ZipReader: well-formed hand-made archives", "[zip][reader]") {
  SECTION("torch-like layout with zip64 end records") {
    const Built b = build_zip(torch_like());
    const ZipReader zip = ZipReader::open(b.bytes, "ok.pt");
    CHECK(zip.prefix() == "archive");
    REQUIRE(zip.find("data/0") != nullptr);
    CHECK(to_string(zip.stored_bytes(*zip.find("data/0"))) == "01234567");
    CHECK(zip.find("data/0")->data_offset == b.data[1]);
  }
  SECTION("classic end record only, and a comment that contains an end-record signature") {
    const std::string comment = std::string("PK\x05\x06", 4) + std::string(30, 'c');
    const Built b = build_zip(torch_like(), false, comment);
    const ZipReader zip = ZipReader::open(b.bytes, "ok.pt");
    CHECK(zip.entries().size() == 3);
  }
  SECTION("the longest comment") {
    const Built b = build_zip(torch_like(), true, std::string(65535, 'c'));
    CHECK(ZipReader::open(b.bytes, "ok.pt").entries().size() == 3);
  }
  SECTION("zip64 extra fields in the central directory") {
    std::vector<Member> members = torch_like();
    members[1].zip64_extra = true;
    const Built b = build_zip(members);
    const ZipReader zip = ZipReader::open(b.bytes, "ok.pt");
    const ZipEntry* e = zip.find("data/0");
    REQUIRE(e != nullptr);
    CHECK(e->size == 8);
    CHECK(e->compressed_size == 8);
    CHECK(e->local_header_offset == b.local[1]);
    CHECK(to_string(zip.stored_bytes(*e)) == "01234567");
  }
  SECTION("an archive without entries") {
    const Built b = build_zip({});
    const ZipReader zip = ZipReader::open(b.bytes, "empty.zip");
    CHECK(zip.entries().empty());
    CHECK(zip.prefix().empty());
    CHECK(zip.find("data.pkl") == nullptr);
  }
  SECTION("many entries: lookups by name, records in any order") {
    std::vector<Member> members;
    members.push_back(stored("big/data.pkl", "p"));
    for (int i = 12000; i-- > 0;) members.push_back(stored("big/data/" + std::to_string(i), std::to_string(i)));
    const Built b = build_zip(members);
    const ZipReader zip = ZipReader::open(b.bytes, "big.pt");
    CHECK(zip.entries().size() == 12001);
    for (int i : {0, 1, 10, 999, 11999}) {
      const ZipEntry* e = zip.find("data/" + std::to_string(i));
      REQUIRE(e != nullptr);
      CHECK(to_string(zip.stored_bytes(*e)) == std::to_string(i));
    }
    CHECK(zip.find("data/12000") == nullptr);
  }
}

TEST_CASE("ZipReader: not a zip, or truncated", "[zip][reader][hostile]") {
  SECTION("empty and short inputs") {
    REQUIRE_THROWS_WITH(open_zip({}), "tensorfile: hostile.pt: not a zip archive: the file is empty (at byte 0)");
    REQUIRE_THROWS_WITH(open_zip(to_bytes("hello")),
                        "tensorfile: hostile.pt: not a zip archive: no end-of-central-directory record (at byte 5)");
    ByteVector tar(600, std::byte{0});
    std::memcpy(tar.data() + 257, "ustar", 5);
    REQUIRE_THROWS_WITH(open_zip(tar),
                        "tensorfile: hostile.pt: not a zip archive: no end-of-central-directory record; "
                        "it is a tar archive (the pre-0.2 torch.save format) (at byte 600)");
    REQUIRE_THROWS_WITH(open_zip(to_bytes("PYTORCH1 and more")),
                        "tensorfile: hostile.pt: not a zip archive: no end-of-central-directory record; it is the "
                        "preview-release torch format (at byte 17)");
    REQUIRE_THROWS_AS(open_zip(to_bytes("hello")), FormatError);
  }
  SECTION("a real torch file cut at every length") {
    const ByteVector whole = read_file(torch_dir + "/t_float32_2x3.pt");
    for (std::size_t cut = 0; cut < whole.size(); ++cut) {
      INFO("cut at " << cut);
      const ByteVector part(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
      std::string expected = "tensorfile: hostile.pt: not a zip archive: ";
      if (cut == 0) {
        expected += "the file is empty";
      } else {
        expected += "no end-of-central-directory record";
        if (cut >= 4) expected += "; it starts like a zip archive, so it is probably truncated";
      }
      REQUIRE_THROWS_WITH(open_zip(part), expected + at(cut));
    }
  }
  SECTION("the front of the file missing") {
    const ByteVector whole = read_file(torch_dir + "/t_float32_2x3.pt");
    const ByteVector tail(whole.begin() + 100, whole.end());
    // The zip64 locator (now at byte 723 - 100) still points at byte 667.
    REQUIRE_THROWS_WITH(open_zip(tail),
                        "tensorfile: hostile.pt: the zip64 end-of-central-directory record at byte "
                        "667 does not fit before its locator (at byte 623)");
  }
}

TEST_CASE("ZipReader: lying end records", "[zip][reader][hostile]") {
  SECTION("central directory offset past the end (classic record)") {
    Built b = build_zip(torch_like(), false);
    put32(b.bytes, b.end + 16, 0x10000);
    REQUIRE_THROWS_WITH(open_zip(b.bytes), "tensorfile: hostile.pt: the central directory (" +
                                               std::to_string(b.directory_size) +
                                               " bytes at byte 65536) runs into "
                                               "the end records at byte " +
                                               std::to_string(b.end) + at(b.end));
  }
  SECTION("central directory size past the end (zip64 record; classic placeholders)") {
    Built b = build_zip(torch_like());
    put32(b.bytes, b.end + 12, 0xFFFFFFFF);
    put32(b.bytes, b.end + 16, 0xFFFFFFFF);
    put64(b.bytes, b.zip64_end + 40, std::uint64_t{1} << 62);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: the central directory (4611686018427387904 bytes "
                        "at byte " +
                            std::to_string(b.directory) +
                            ") runs into the end records at "
                            "byte " +
                            std::to_string(b.zip64_end) + at(b.zip64_end));
    put64(b.bytes, b.zip64_end + 40, b.directory_size);
    put64(b.bytes, b.zip64_end + 48, ~std::uint64_t{0} - 10);  // offset + size wraps around
    REQUIRE_THROWS_WITH(open_zip(b.bytes), "tensorfile: hostile.pt: the central directory (" +
                                               std::to_string(b.directory_size) +
                                               " bytes at byte 18446744073709551605) "
                                               "runs into the end records at byte " +
                                               std::to_string(b.zip64_end) + at(b.zip64_end));
  }
  SECTION("zip64 record disagrees with the classic record") {
    Built b = build_zip(torch_like());
    put64(b.bytes, b.zip64_end + 24, 4);
    put64(b.bytes, b.zip64_end + 32, 4);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: the zip64 end-of-central-directory record "
                        "disagrees with the classic one on the entry count; expected 3, got 4" +
                            at(b.zip64_end));
    b = build_zip(torch_like());
    put64(b.bytes, b.zip64_end + 48, 1);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: the zip64 end-of-central-directory record "
                        "disagrees with the classic one on the central directory offset; expected " +
                            std::to_string(b.directory) + ", got 1" + at(b.zip64_end));
  }
  SECTION("zip64 locator pointing past the end, or at something else") {
    Built b = build_zip(torch_like());
    put64(b.bytes, b.locator + 8, 1000000);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: the zip64 end-of-central-directory record at byte "
                        "1000000 does not fit before its locator" +
                            at(b.locator));
    put64(b.bytes, b.locator + 8, 0);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: bad zip64 end-of-central-directory signature; "
                        "expected 0x06064b50, got 0x04034b50 (at byte 0)");
    b = build_zip(torch_like());
    put64(b.bytes, b.zip64_end + 4, 1000);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: bad zip64 end-of-central-directory record size; "
                        "expected 44 to 44, got 1000" +
                            at(b.zip64_end));
  }
  SECTION("entry counts the central directory cannot hold, and the entry limit") {
    Built b = build_zip(torch_like());
    put16(b.bytes, b.end + 8, 0xFFFF);
    put16(b.bytes, b.end + 10, 0xFFFF);
    put64(b.bytes, b.zip64_end + 24, 1000);
    put64(b.bytes, b.zip64_end + 32, 1000);
    REQUIRE_THROWS_WITH(open_zip(b.bytes), "tensorfile: hostile.pt: a central directory of " +
                                               std::to_string(b.directory_size) + " bytes cannot hold 1000 entries" +
                                               at(b.zip64_end));
    put64(b.bytes, b.zip64_end + 24, std::uint64_t{1} << 40);
    put64(b.bytes, b.zip64_end + 32, std::uint64_t{1} << 40);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: the archive declares 1099511627776 entries, more "
                        "than the limit of 16777216" +
                            at(b.zip64_end));
    REQUIRE_THROWS_AS(open_zip(b.bytes), LimitError);
    const Built ok = build_zip(torch_like());
    REQUIRE_THROWS_WITH(
        open_zip(ok.bytes, {.max_entries = 2}),
        "tensorfile: hostile.pt: the archive declares 3 entries, more than the limit of 2" + at(ok.zip64_end));
  }
  SECTION("central directory size disagrees with its entries") {
    Built b = build_zip(torch_like(), false);
    put16(b.bytes, b.end + 8, 2);
    put16(b.bytes, b.end + 10, 2);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: the central directory size disagrees with its "
                        "entries; expected " +
                            std::to_string(b.directory_size) + " bytes, got " +
                            std::to_string(b.central[2] - b.directory) + at(b.end));
  }
  SECTION("multi-disk archives") {
    Built b = build_zip(torch_like(), false);
    put16(b.bytes, b.end + 4, 1);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: multi-disk zip archives are not supported" + at(b.end));
    REQUIRE_THROWS_AS(open_zip(b.bytes), UnsupportedError);
  }
}

TEST_CASE("ZipReader: lying central directory entries", "[zip][reader][hostile]") {
  SECTION("bad central header signature") {
    Built b = build_zip(torch_like());
    put32(b.bytes, b.central[1], 0x12345678);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: bad central directory header signature; expected "
                        "0x02014b50, got 0x12345678" +
                            at(b.central[1]));
  }
  SECTION("name running past the central directory") {
    Built b = build_zip(torch_like());
    put16(b.bytes, b.central[2] + 28, 200);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: a central directory header runs past the end of "
                        "the central directory" +
                            at(b.central[2]));
  }
  SECTION("duplicate names") {
    const Built b = build_zip({stored("archive/data.pkl", "a"), stored("archive/x", "b"), stored("archive/x", "c")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/x: duplicate entry name" + at(b.central[2]));
  }
  SECTION("names outside the prefix") {
    Built b = build_zip({stored("archive/data.pkl", "a"), stored("other/data/0", "b")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: other/data/0: the entry is outside the archive "
                        "prefix 'archive/'" +
                            at(b.central[1]));
    b = build_zip({stored("archive/data.pkl", "a"), stored("archivex/data/0", "b")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archivex/data/0: the entry is outside the archive "
                        "prefix 'archive/'" +
                            at(b.central[1]));
    b = build_zip({stored("archive/data.pkl", "a"), stored("archive", "b")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive: the entry is outside the archive "
                        "prefix 'archive/'" +
                            at(b.central[1]));
    b = build_zip({stored("data.pkl", "a")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: data.pkl: the first entry is not inside a "
                        "top-level folder, so the archive has no prefix (at byte 39)");
    b = build_zip({stored("/data.pkl", "a")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: /data.pkl: the first entry is not inside a "
                        "top-level folder, so the archive has no prefix (at byte 40)");
  }
  SECTION("names are printed safely") {
    const Built b = build_zip({stored("archive/data.pkl", "a"), stored(std::string("evil\n\x1b[2J\0x", 11), "b")});
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: evil\\x0a\\x1b[2J\\x00x: the entry is outside the "
                        "archive prefix 'archive/'" +
                            at(b.central[1]));
  }
  SECTION("encryption and unsupported methods") {
    std::vector<Member> members = torch_like();
    members[0].flags = 1;
    Built b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data.pkl: encrypted zip entries are not "
                        "supported" +
                            at(b.central[0]));
    REQUIRE_THROWS_AS(open_zip(b.bytes), UnsupportedError);
    members = torch_like();
    members[0].method = 12;
    b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data.pkl: unsupported zip compression "
                        "method 12 (bzip2); only stored (0) and deflate (8) are supported" +
                            at(b.central[0]));
    REQUIRE_THROWS_AS(open_zip(b.bytes), UnsupportedError);
    members[0].method = 77;
    b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data.pkl: unsupported zip compression "
                        "method 77; only stored (0) and deflate (8) are supported" +
                            at(b.central[0]));
  }
  SECTION("stored entry whose sizes differ") {
    std::vector<Member> members = torch_like();
    members[1].size = 9;
    const Built b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data/0: a stored entry has a compressed "
                        "size of 8 bytes but a size of 9" +
                            at(b.central[1]));
  }
  SECTION("zip64 extra fields that lie") {
    std::vector<Member> members = torch_like();
    members[1].zip64_extra = true;
    Built b = build_zip(members);
    const std::uint64_t extra = b.central[1] + 46 + members[1].name.size();
    SECTION("compressed size past the end") {
      put64(b.bytes, extra + 4, std::uint64_t{1} << 50);   // size
      put64(b.bytes, extra + 12, std::uint64_t{1} << 50);  // compressed size
      REQUIRE_THROWS_WITH(open_zip(b.bytes),
                          "tensorfile: hostile.pt: archive/data/0: the entry data "
                          "(1125899906842624 bytes at byte " +
                              std::to_string(b.data[1]) + ") runs past the end of the archive" + at(b.data[1]));
    }
    SECTION("local header offset past the end") {
      put64(b.bytes, extra + 20, ~std::uint64_t{0});
      REQUIRE_THROWS_WITH(open_zip(b.bytes),
                          "tensorfile: hostile.pt: archive/data/0: the local file header at byte "
                          "18446744073709551615 runs past the end of the archive "
                          "(at byte 18446744073709551615)");
    }
    SECTION("field too short") {
      put16(b.bytes, extra + 2, 16);
      put16(b.bytes, extra + 20, 0x5A5A);  // the last 8 bytes become an unknown extra field (id 0x5a5a)
      put16(b.bytes, extra + 22, 4);
      REQUIRE_THROWS_WITH(open_zip(b.bytes),
                          "tensorfile: hostile.pt: archive/data/0: the zip64 extra field is too "
                          "short; expected 24 bytes, got 16" +
                              at(b.central[1]));
    }
    SECTION("extra field running past the extra data") {
      put16(b.bytes, extra + 2, 25);
      REQUIRE_THROWS_WITH(open_zip(b.bytes),
                          "tensorfile: hostile.pt: archive/data/0: an extra field runs past the "
                          "end of the extra data" +
                              at(b.central[1]));
    }
    SECTION("placeholders without a zip64 extra field") {
      put16(b.bytes, extra, 0x5A5A);
      REQUIRE_THROWS_WITH(open_zip(b.bytes),
                          "tensorfile: hostile.pt: archive/data/0: a field is 0xFFFFFFFF but "
                          "there is no zip64 extra field" +
                              at(b.central[1]));
    }
  }
  SECTION("deflate entries: declared sizes beyond the limit or beyond what deflate can produce") {
    std::vector<Member> members = torch_like();
    members[1].method = 8;
    members[1].payload = to_bytes(std::string(100, '\0'));
    members[1].size = 1000000000;
    Built b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data/0: the declared size of 1000000000 "
                        "bytes cannot come from 100 bytes of deflate data (at most 1032 times "
                        "larger)" +
                            at(b.central[1]));
    members[1].size = 103201;
    b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data/0: the declared size of 103201 "
                        "bytes cannot come from 100 bytes of deflate data (at most 1032 times "
                        "larger)" +
                            at(b.central[1]));
    members[1].size = 103200;
    b = build_zip(members);
    open_zip(b.bytes);
    REQUIRE_THROWS_WITH(open_zip(b.bytes, {.max_inflated_size = 1000}),
                        "tensorfile: hostile.pt: archive/data/0: the declared size of 103200 bytes is more than the "
                        "limit of 1000 for a compressed entry" +
                            at(b.central[1]));
    REQUIRE_THROWS_AS(open_zip(b.bytes, {.max_inflated_size = 1000}), LimitError);
  }
}

TEST_CASE("ZipReader: lying local headers and overlapping entries", "[zip][reader][hostile]") {
  SECTION("local and central names differ") {
    std::vector<Member> members = torch_like();
    members[0].local_name = "archive/data.pkx";
    const Built b = build_zip(members);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data.pkl: the local file header name "
                        "'archive/data.pkx' differs from the central directory name (at byte 0)");
  }
  SECTION("local and central methods differ") {
    Built b = build_zip(torch_like());
    put16(b.bytes, b.local[2] + 8, 8);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/version: the local file header "
                        "compression method 8 differs from the central directory method 0" +
                            at(b.local[2]));
  }
  SECTION("bad local signature") {
    Built b = build_zip(torch_like());
    put32(b.bytes, b.local[1], 0x08074b50);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/data/0: bad local file header signature; "
                        "expected 0x04034b50, got 0x08074b50" +
                            at(b.local[1]));
  }
  SECTION("local extra field running past the end") {
    Built b = build_zip(torch_like());
    put16(b.bytes, b.local[2] + 28, 0xFFFF);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/version: the local file header runs past "
                        "the end of the archive" +
                            at(b.local[2]));
  }
  SECTION("an entry's data covering the next entry") {
    std::vector<Member> members = torch_like();
    Built b = build_zip(members);
    put32(b.bytes, b.central[0] + 20, 20);  // data.pkl claims 20 bytes: its 4, then data/0's local header
    put32(b.bytes, b.central[0] + 24, 20);
    REQUIRE_THROWS_WITH(open_zip(b.bytes), "tensorfile: hostile.pt: archive/data/0: the entry (bytes " +
                                               std::to_string(b.local[1]) + " to " + std::to_string(b.data[1] + 8) +
                                               ") overlaps the entry 'archive/data.pkl' (bytes 0 to " +
                                               std::to_string(b.data[0] + 20) + ")" + at(b.local[1]));
  }
  SECTION("an entry hidden inside another entry's data") {
    // data/01's local header and data sit inside data.pkl's payload: the same bytes serve two entries.
    // The central entry of `version` (a name of the same length) is rewritten to point at them.
    const Built inner = build_zip({stored("archive/data/01", "01234567")});
    std::vector<Member> members = {stored("archive/data.pkl", ""), stored("archive/version", "3\n")};
    members[0].payload.assign(inner.bytes.begin(), inner.bytes.begin() + static_cast<std::ptrdiff_t>(inner.directory));
    Built b = build_zip(members);
    put32(b.bytes, b.central[1] + 16, crc32(to_bytes("01234567")));
    put32(b.bytes, b.central[1] + 20, 8);
    put32(b.bytes, b.central[1] + 24, 8);
    put32(b.bytes, b.central[1] + 42, b.data[0]);
    std::memcpy(b.bytes.data() + b.central[1] + 46, "archive/data/01", 15);
    const std::uint64_t hidden_end = b.data[0] + 30 + 15 + 8;
    REQUIRE_THROWS_WITH(open_zip(b.bytes), "tensorfile: hostile.pt: archive/data/01: the entry (bytes " +
                                               std::to_string(b.data[0]) + " to " + std::to_string(hidden_end) +
                                               ") overlaps the entry 'archive/data.pkl' (bytes 0 to " +
                                               std::to_string(b.data[0] + members[0].payload.size()) + ")" +
                                               at(b.data[0]));
  }
  SECTION("an entry reaching into the central directory or the end records") {
    Built b = build_zip(torch_like());
    put32(b.bytes, b.central[2] + 20, 10);
    put32(b.bytes, b.central[2] + 24, 10);
    REQUIRE_THROWS_WITH(open_zip(b.bytes),
                        "tensorfile: hostile.pt: archive/version: the entry (bytes " + std::to_string(b.local[2]) +
                            " to " + std::to_string(b.data[2] + 10) + ") overlaps the central directory (bytes " +
                            std::to_string(b.directory) + " to " + std::to_string(b.zip64_end) + ")" + at(b.local[2]));

    // A complete local header and its data hidden in the archive comment, after the end records.
    const Built inner = build_zip({stored("archive/version", "3\n")});
    const std::string comment(reinterpret_cast<const char*>(inner.bytes.data()), inner.directory);
    b = build_zip(torch_like(), true, comment);
    const std::uint64_t hidden = b.end + 22;
    put32(b.bytes, b.central[2] + 42, hidden);
    REQUIRE_THROWS_WITH(open_zip(b.bytes), "tensorfile: hostile.pt: archive/version: the entry (bytes " +
                                               std::to_string(hidden) + " to " + std::to_string(hidden + 47) +
                                               ") overlaps the end records at byte " + std::to_string(b.zip64_end) +
                                               at(hidden));
  }
  SECTION("a deflate bomb inside an archive") {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    w.fixed_literal(0);
    for (int i = 0; i < 1000; ++i) {
      w.fixed_literal(285);
      w.code(0, 5);
    }
    w.fixed_literal(256);
    std::vector<Member> members = torch_like();
    members[1].method = 8;
    members[1].payload = w.finish();
    members[1].size = 1000;  // it would inflate to 258001 bytes
    const Built b = build_zip(members);
    const ZipReader zip = ZipReader::open(b.bytes, "hostile.pt");
    ByteVector out(1000);
    REQUIRE_THROWS_WITH(zip.read(*zip.find("data/0"), out),
                        "tensorfile: hostile.pt: archive/data/0: inflated data "
                        "is larger than the declared 1000 bytes" +
                            at(b.data[1] + 7));
    REQUIRE_THROWS_WITH(zip.verify_crc(*zip.find("data/0")),
                        "tensorfile: hostile.pt: archive/data/0: inflated data "
                        "is larger than the declared 1000 bytes" +
                            at(b.data[1] + 7));
  }
  SECTION("a corrupt deflate entry reports its archive offset") {
    std::vector<Member> members = torch_like();
    members[2].method = 8;
    members[2].payload = {std::byte{0x07}, std::byte{0}};
    members[2].size = 2;
    const Built b = build_zip(members);
    const ZipReader zip = ZipReader::open(b.bytes, "hostile.pt");
    REQUIRE_THROWS_WITH(zip.read(*zip.find("version")),
                        "tensorfile: hostile.pt: archive/version: invalid deflate "
                        "block type 3" +
                            at(b.data[2]));
  }
  SECTION("an entry from another archive is refused") {
    const ByteVector small = read_file(torch_dir + "/meta.pt");
    const ByteVector large = read_file(torch_dir + "/all_dtypes.pt");
    const ZipReader a = ZipReader::open(small, "meta.pt");
    const ZipReader b = ZipReader::open(large, "all_dtypes.pt");
    const ZipEntry& far = *b.find("data/9");
    REQUIRE_THROWS_WITH(a.stored_bytes(far),
                        "tensorfile: meta.pt: all_dtypes/data/9: the entry does not belong to "
                        "this archive (at byte 2752)");
  }
}

TEST_CASE("ZipReader: local headers read on several threads", "[zip][reader][hostile]") {
  // 2,000 members, each with 5,000 bytes of data, so every local header is its own read (the batches of
  // neighbouring headers stop at a 4 KiB gap) and 4 threads take 500 headers each.
  std::vector<Member> members = {stored("archive/data.pkl", "PKL!")};
  for (int i = 0; i < 2000; ++i) members.push_back(stored("archive/data/" + std::to_string(i), std::string(5000, 'x')));
  Built b = build_zip(members);
  // Called from several threads: no Catch2 assertion in it.
  std::atomic<std::size_t> reads{0};
  const ZipReader::ReadAt read_at = [&](std::uint64_t offset, std::span<std::byte> out) {
    if (offset > b.bytes.size() || out.size() > b.bytes.size() - offset) throw std::out_of_range("read past the end");
    std::memcpy(out.data(), b.bytes.data() + offset, out.size());
    ++reads;
  };
  const auto open_with = [&](std::size_t threads) {
    return ZipReader::open_file(b.bytes.size(), "hostile.pt", read_at, {.header_threads = threads});
  };
  SECTION("the same index as one thread") {
    const ZipReader one = open_with(1);
    reads = 0;
    const ZipReader four = open_with(4);
    CHECK(reads > 2000);  // a header each, plus the end records and the central directory
    REQUIRE(four.entries().size() == 2001);
    for (std::size_t i = 0; i < 2001; ++i) {
      CHECK(four.entries()[i].data_offset == b.data[i]);
      CHECK(four.entries()[i].data_offset == one.entries()[i].data_offset);
    }
  }
  SECTION("the first bad header in entry order is the one reported") {
    // Entries 1700 (the fourth thread's range) and 900 (the second's) are broken; 900 is reported, as by
    // one thread, whichever thread fails first.
    put32(b.bytes, b.local[1700], 0x08074b50);
    put16(b.bytes, b.local[900] + 8, 8);
    const std::string expected =
        "tensorfile: hostile.pt: archive/data/899: the local file header compression method "
        "8 differs from the central directory method 0" +
        at(b.local[900]);
    REQUIRE_THROWS_WITH(open_with(1), expected);
    REQUIRE_THROWS_WITH(open_with(4), expected);
    REQUIRE_THROWS_WITH(open_with(3), expected);
  }
}

TEST_CASE("ZipReader: an index without its local headers, completed later, hands over the windows it read",
          "[zip][reader]") {
  // Small records (each in the window of its header and the next), then one past the windows' 4 KiB gap.
  std::vector<Member> members = {stored("archive/data.pkl", "PKL!")};
  for (int i = 0; i < 1000; ++i) {
    members.push_back(stored("archive/data/" + std::to_string(i),
                             std::string(static_cast<std::size_t>(1 + i % 300), static_cast<char>('a' + i % 26))));
  }
  members.push_back(stored("archive/data/big", std::string(10000, 'z')));
  members.push_back(stored("archive/version", "3\n"));
  Built b = build_zip(members);
  const ZipReader::ReadAt read_at = [&](std::uint64_t offset, std::span<std::byte> out) {
    if (offset > b.bytes.size() || out.size() > b.bytes.size() - offset) throw std::out_of_range("read past the end");
    std::memcpy(out.data(), b.bytes.data() + offset, out.size());
  };
  const auto index_with = [&](std::size_t threads) {
    return ZipReader::open_file_index(b.bytes.size(), "index.pt", read_at, {.header_threads = threads});
  };
  for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
    INFO(threads << " header threads");
    ZipReader zip = index_with(threads);
    const ZipEntry& pickle = *zip.find("data.pkl");
    REQUIRE_THROWS_AS(zip.read(pickle), ArgumentError);  // no data_offset before its header is read
    zip.read_local_header(pickle);
    CHECK(pickle.data_offset == b.data[0]);
    CHECK(zip.read(pickle) == to_bytes("PKL!"));

    // Written from the header threads, each to the entries of its own windows: no Catch2 assertion in the sink.
    const std::size_t count = zip.entries().size();
    std::vector<int> handed(count, 0);
    std::vector<ByteVector> copied(count);
    zip.read_local_headers(
        [&](std::uint64_t offset, std::span<const std::byte> window, std::size_t first, std::size_t end) {
          for (std::size_t i = first; i < end; ++i) {
            ++handed[i];
            const ZipEntry& entry = zip.entries()[i];
            if (entry.data_offset >= offset && entry.data_offset + entry.size <= offset + window.size()) {
              const auto from = window.begin() + static_cast<std::ptrdiff_t>(entry.data_offset - offset);
              copied[i].assign(from, from + static_cast<std::ptrdiff_t>(entry.size));
            }
          }
        });
    std::size_t in_windows = 0;
    for (std::size_t i = 0; i < count; ++i) {
      INFO(zip.entries()[i].name);
      CHECK(handed[i] == 1);
      CHECK(zip.entries()[i].data_offset == b.data[i]);
      if (!copied[i].empty()) {
        ++in_windows;
        CHECK(copied[i] == members[i].payload);
      }
    }
    CHECK(copied[1001].empty());     // data/big: past the gap, never read with the headers
    CHECK(in_windows >= count - 8);  // the others, but for the last of some windows
  }
  SECTION("a bad local header is reported as open_file reports it, and nothing after it is handed over") {
    put32(b.bytes, b.local[700], 0x08074b50);
    const std::string expected =
        "tensorfile: index.pt: archive/data/699: bad local file header signature; expected 0x04034b50, got "
        "0x08074b50" +
        at(b.local[700]);
    REQUIRE_THROWS_WITH(ZipReader::open_file(b.bytes.size(), "index.pt", read_at), expected);
    for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
      ZipReader zip = index_with(threads);
      std::mutex mutex;
      std::size_t last_end = 0;  // of the windows handed over: none holds the bad header or one after it
      const auto note = [&](std::uint64_t, std::span<const std::byte>, std::size_t, std::size_t end) {
        const std::lock_guard lock(mutex);
        last_end = std::max(last_end, end);
      };
      REQUIRE_THROWS_WITH(zip.read_local_headers(note), expected);
      CHECK(last_end <= 700);
    }
  }
  SECTION("an entry of another reader is refused") {
    ZipReader zip = index_with(1);
    const ZipReader other = index_with(1);
    REQUIRE_THROWS_AS(zip.read_local_header(other.entries()[3]), ArgumentError);
  }
}
