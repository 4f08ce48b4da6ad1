// SPDX-License-Identifier: MIT
// Tests of LoadOptions::select for load_npz: kept arrays equal a full load, the others are meta tensors
// of the same dtype and shape (from their .npy header) or left out, and their data is never read.
#include <tensorfile/formats/numpy/npz.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "dict_helpers.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile_test::keys_of;
using tensorfile_test::tensor_at;

TEST_CASE("load_npz select on NumPy's stored and deflated archives, every mode", "[numpy][npz][select]") {
  for (const char* file : {"stored.npz", "deflated.npz"}) {
    const auto path = tensorfile_test::data_dir() / "numpy" / file;
    const Value full = load_npz(path);
    const std::vector<std::string> names = keys_of(full);
    REQUIRE(names.size() >= 3);
    const TensorSelect select = select_paths({names[1]});
    const std::string text = tensorfile_test::read_text(path);
    for (const bool drops : {false, true}) {
      for (const std::optional<MapMode> mmap : {std::optional<MapMode>(), std::optional<MapMode>(MapMode::read_only)}) {
        INFO(file << " drops " << drops << " mmap " << mmap.has_value());
        const LoadOptions options{.mmap = mmap, .select = select, .select_drops = drops};
        for (const Value& part : {load_npz(path, options), load_npz(std::as_bytes(std::span(text)), options)}) {
          if (drops) {
            CHECK(keys_of(part) == std::vector<std::string>{names[1]});
          } else {
            CHECK(keys_of(part) == names);
          }
          for (const std::string& name : keys_of(part)) {
            INFO(name);
            const Tensor& got = tensor_at(part, name);
            const Tensor& want = tensor_at(full, name);
            CHECK(got.dtype() == want.dtype());
            CHECK(got.sizes() == want.sizes());
            CHECK(got.strides() == want.strides());  // fortran_order arrays keep their layout as meta too
            if (name == names[1]) {
              CHECK(got.equal(want));
            } else {
              CHECK(got.device().is_meta());
            }
          }
        }
      }
    }
  }
}

TEST_CASE("load_npz select reads no data of unselected stored members, load_npy refuses select",
          "[numpy][npz][select]") {
  tensorfile_test::ScratchDir dir;
  const auto path = dir / "big.npz";
  Tensor small = Tensor::zeros({3}, DType::Int64);
  for (int i = 0; i < 3; ++i) small.data<std::int64_t>()[i] = 7 * i - 2;
  save_npz(NamedTensors{{"big_a", Tensor::zeros({1 << 20}, DType::Float32)},  // 4 MiB each
                        {"small", small},
                        {"big_b", Tensor::zeros({1024, 1024}, DType::Float32)}},
           path, {.sync = false});
  for (const bool drops : {false, true}) {
    const std::uint64_t before = tensorfile_test::bytes_read_so_far();
    const Value part = load_npz(path, {.select = select_paths({"sm*"}), .select_drops = drops});
    CHECK(tensorfile_test::bytes_read_so_far() - before < 256 * 1024);  // the zip tail (EOCD search), headers, 24 bytes
    CHECK(tensor_at(part, "small").equal(small));
    if (!drops) CHECK(tensor_at(part, "big_b").sizes() == Shape{1024, 1024});
    CHECK(part.as_dict().size() == (drops ? 1u : 3u));
  }
  const std::uint64_t before_full = tensorfile_test::bytes_read_so_far();
  (void)load_npz(path);
  CHECK(tensorfile_test::bytes_read_so_far() - before_full >= 8u << 20);  // the counter does see data reads

  const auto npy = tensorfile_test::data_dir() / "numpy" / "f4_c.npy";
  CHECK_THROWS_AS(load_npy(npy, {.select = select_paths({"x"})}), ArgumentError);
  const std::string text = tensorfile_test::read_text(npy);
  CHECK_THROWS_AS(load_npy(std::as_bytes(std::span(text)), {.select_drops = true}), ArgumentError);
}

TEST_CASE("ZipReader::read_stored_range reads part of a stored member, in memory or from the file",
          "[numpy][npz][select]") {
  using tensorfile::detail::ZipReader;
  const auto path = tensorfile_test::data_dir() / "numpy" / "stored.npz";
  const std::string text = tensorfile_test::read_text(path);
  const auto bytes = std::as_bytes(std::span(text));
  const ZipReader in_memory = ZipReader::open(bytes, path, tensorfile::detail::npz_zip_limits({}));
  const ZipReader from_file = ZipReader::open_file(
      bytes.size(), path,
      [&](std::uint64_t offset, std::span<std::byte> out) {
        REQUIRE(offset + out.size() <= bytes.size());
        std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
      },
      tensorfile::detail::npz_zip_limits({}));
  const auto& entry = in_memory.entries().front();
  const std::vector<std::byte> whole = in_memory.read(entry);
  REQUIRE(whole.size() > 10);
  for (const ZipReader* zip : {&in_memory, &from_file}) {
    const auto& same = zip->entries().front();
    std::vector<std::byte> part(6);
    zip->read_stored_range(same, 4, part);
    CHECK(std::equal(part.begin(), part.end(), whole.begin() + 4));
    CHECK_THROWS_AS(zip->read_stored_range(same, same.size - 2, part), ArgumentError);  // past its end
    CHECK_THROWS_AS(zip->read_stored_range(same, same.size + 1, {}), ArgumentError);
  }
  const auto deflated_path = tensorfile_test::data_dir() / "numpy" / "deflated.npz";
  const std::string deflated_text = tensorfile_test::read_text(deflated_path);
  const ZipReader deflated =
      ZipReader::open(std::as_bytes(std::span(deflated_text)), deflated_path, tensorfile::detail::npz_zip_limits({}));
  std::vector<std::byte> part(4);
  CHECK_THROWS_AS(deflated.read_stored_range(deflated.entries().front(), 0, part), ArgumentError);
}
