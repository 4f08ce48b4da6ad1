// SPDX-License-Identifier: MIT
// Tests of <tensorfile/detail/zip/deflate.hpp>: streams the project's inflate decodes back to the input (random,
// structured, block-crossing, far matches), the size bound on incompressible input, and save_npz's compressed
// archives read back by load_npz. zlib and NumPy check the same streams in tests/numpy/check_with_numpy.py.
#include <tensorfile/detail/zip/deflate.hpp>
#include <tensorfile/detail/zip/reader.hpp>
#include <tensorfile/formats/numpy/npz.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile::detail::deflate;
using tensorfile::detail::inflate;

namespace {

std::vector<std::byte> round_trip(const std::vector<std::byte>& input) {
  const std::vector<std::byte> compressed = deflate(input);
  return inflate(compressed, input.size());
}

}  // namespace

TEST_CASE("deflate streams inflate back to their input", "[deflate]") {
  std::mt19937 random(11);
  const auto bytes_of = [&](std::size_t n, unsigned alphabet) {
    std::vector<std::byte> out(n);
    for (auto& b : out) b = static_cast<std::byte>(random() % alphabet);
    return out;
  };
  std::vector<std::pair<std::string, std::vector<std::byte>>> inputs;
  inputs.emplace_back("empty", std::vector<std::byte>{});
  inputs.emplace_back("one byte", std::vector<std::byte>{std::byte{0xAB}});
  inputs.emplace_back("three bytes", std::vector<std::byte>{std::byte{1}, std::byte{1}, std::byte{1}});
  inputs.emplace_back("zeros across blocks", std::vector<std::byte>(200000));
  inputs.emplace_back("random", bytes_of(140000, 256));
  inputs.emplace_back("two letters", bytes_of(140000, 2));
  std::vector<std::byte> far = bytes_of(32768, 256);  // a period of exactly the window: distance 32768
  for (int i = 0; i < 3; ++i) far.insert(far.end(), far.begin(), far.begin() + 32768);
  inputs.emplace_back("period of the window", far);
  std::vector<std::byte> beyond = bytes_of(32769, 256);  // a period one past the window: no match reaches it
  beyond.insert(beyond.end(), beyond.begin(), beyond.end());
  inputs.emplace_back("period past the window", beyond);
  std::vector<std::byte> floats(40000 * sizeof(float));
  for (std::size_t i = 0; i < 40000; ++i) {
    const float x = static_cast<float>(i % 1000) * 0.25f;
    std::memcpy(floats.data() + i * sizeof(float), &x, sizeof x);
  }
  inputs.emplace_back("floats", floats);
  for (const auto& [name, input] : inputs) {
    INFO(name);
    CHECK(round_trip(input) == input);
  }
  // Incompressible input falls back to stored blocks: 5 bytes per block of about 64 KiB over its size.
  const std::vector<std::byte> noise = bytes_of(300000, 256);
  CHECK(deflate(noise).size() <= noise.size() + 5 * (noise.size() / 65000 + 1) + 1);
  // Compressible input gets smaller.
  CHECK(deflate(std::vector<std::byte>(200000)).size() < 4000);
  CHECK(deflate(floats).size() < floats.size() / 4);
}

TEST_CASE("save_npz with compress writes deflated members load_npz reads back", "[deflate][npz]") {
  std::vector<float> ramp(5000);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i % 50);
  const NamedTensors tensors = {
      {"ramp", Tensor::from_values<float>(std::span<const float>(ramp), {50, 100})},
      {"ints", Tensor::from_values<std::int64_t>({1, 2, 3})},
      {"empty", Tensor::from_values<double>(std::span<const double>(), {0, 3})},
      {"transposed", Tensor::from_values<std::int16_t>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1)}};
  const std::vector<std::byte> stored = save_npz_to_bytes(tensors);
  const std::vector<std::byte> compressed = save_npz_to_bytes(tensors, {.npz = {.compress = true}});
  CHECK(compressed.size() < stored.size() / 2);
  const auto zip = detail::ZipReader::open(compressed, {}, detail::npz_zip_limits({}));
  REQUIRE(zip.entries().size() == tensors.size());
  for (const auto& entry : zip.entries()) {
    CHECK(entry.method == 8);
    zip.verify_crc(entry, zip.read(entry));
  }
  const Value back = load_npz(compressed, {.verify_crc = true});
  REQUIRE(back.as_dict().size() == tensors.size());
  for (const auto& [name, tensor] : tensors) CHECK(back[name].as_tensor().equal(tensor));
  // A mapped load of a compressed archive inflates to the heap rather than viewing it.
  const Value mapped = load_npz(compressed, {.mmap = MapMode::read_only});
  CHECK(mapped["ramp"].as_tensor().equal(tensors[0].second));
}
