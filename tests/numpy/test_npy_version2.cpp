// SPDX-License-Identifier: MIT
// save_npy's format version 2.0 path: a header longer than 65535 bytes (only a very long shape makes one with
// the dtypes tensorfile writes) gets a 4-byte length, 64-byte aligned data, and loads back. NumPy's own header
// writer and 2.0 reader check the same bytes in tests/numpy/check_with_numpy.py.
#include <tensorfile/formats/numpy/npy.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("save_npy switches to format 2.0 when the header passes 65535 bytes", "[npy]") {
  for (const std::size_t ndim : {std::size_t{8}, std::size_t{25000}}) {
    INFO(ndim << " dimensions");
    const Tensor t = Tensor::from_values<std::int16_t>({-7}, Shape(ndim, 1));
    const std::vector<std::byte> bytes = save_npy_to_bytes(t);
    REQUIRE(bytes.size() > 12);
    const auto byte = [&](std::size_t i) { return std::to_integer<std::uint32_t>(bytes[i]); };
    const bool v2 = ndim > 1000;
    CHECK(byte(6) == (v2 ? 2u : 1u));
    CHECK(byte(7) == 0u);
    const std::uint32_t length = v2 ? byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24 : byte(8) | byte(9) << 8;
    const std::size_t data_offset = (v2 ? 12 : 10) + std::size_t{length};
    if (v2) CHECK(length > 0xFFFF);
    CHECK(data_offset % 64 == 0);
    REQUIRE(bytes.size() == data_offset + 2);
    CHECK(std::to_integer<char>(bytes[data_offset - 1]) == '\n');
    const Tensor back = load_npy(bytes);
    CHECK(back.dim() == ndim);
    CHECK(back.equal(t));
  }
}
