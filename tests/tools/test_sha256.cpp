// SPDX-License-Identifier: MIT
// Tests of sha256.hpp: NIST FIPS 180-4 example vectors and incremental updates.
#include <sha256.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile_catch.hpp"

namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

std::string sha256_of(std::string_view text) { return tensorfile::detail::sha256_hex(bytes_of(text)); }

}  // namespace

TEST_CASE("Sha256", "[sha256]") {
  using tensorfile::detail::Sha256;

  SECTION("NIST vectors") {
    CHECK(sha256_of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
                    "nopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  }

  SECTION("one million 'a', in one piece and in uneven pieces") {
    const std::string million(1000000, 'a');
    const std::string expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    CHECK(sha256_of(million) == expected);
    Sha256 hash;
    std::size_t at = 0;
    for (std::size_t piece = 1; at < million.size(); piece = piece * 7 % 1000 + 1) {
      const std::size_t take = std::min(piece, million.size() - at);
      hash.update(bytes_of(std::string_view(million).substr(at, take)));
      at += take;
    }
    CHECK(hash.hex_digest() == expected);
  }

  SECTION("padding boundaries: 55, 56, 63, 64 and 65 bytes") {
    // From Python's hashlib.sha256(b"x" * n).hexdigest().
    CHECK(sha256_of(std::string(55, 'x')) == "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    CHECK(sha256_of(std::string(56, 'x')) == "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
    CHECK(sha256_of(std::string(63, 'x')) == "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2");
    CHECK(sha256_of(std::string(64, 'x')) == "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
    CHECK(sha256_of(std::string(65, 'x')) == "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9");
  }

  SECTION("byte-at-a-time updates give the one-piece digest") {
    for (const std::size_t n : {0u, 1u, 55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 127u, 128u, 129u}) {
      const std::string message(n, 'x');
      Sha256 bytewise;
      for (const char& c : message) bytewise.update(bytes_of(std::string_view(&c, 1)));
      CHECK(bytewise.hex_digest() == sha256_of(message));
    }
  }

  SECTION("the portable and the dispatched (SHA-NI where the CPU has it) compression agree") {
    namespace impl = tensorfile::detail::sha256_impl;
    std::vector<unsigned char> blocks(64 * 37);
    std::uint32_t x = 12345;
    for (auto& b : blocks) {
      x = x * 1103515245u + 12345u;
      b = static_cast<unsigned char>(x >> 24);
    }
    for (const std::size_t count : {1u, 2u, 37u}) {
      auto portable = impl::initial_state;
      auto dispatched = impl::initial_state;
      impl::compress_portable(portable, blocks.data(), count);
      impl::compress(dispatched, blocks.data(), count);
      CHECK(portable == dispatched);
    }
  }

  SECTION("digest bytes match the hex text") {
    Sha256 hash;
    hash.update(bytes_of("abc"));
    const auto digest = hash.digest();
    CHECK(std::to_integer<int>(digest[0]) == 0xba);
    CHECK(std::to_integer<int>(digest[31]) == 0xad);
  }
}
