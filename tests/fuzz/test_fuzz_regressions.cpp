// SPDX-License-Identifier: MIT
// Regression tests for what the fuzzers found (inputs under tests/fuzz/regressions/<harness>/ are also
// replayed by run_fuzzers.sh through their harness).
#include <tensorfile/detail/zip/reader.hpp>
#include <tensorfile/tensorfile.hpp>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

// fuzz_roundtrip, regressions/roundtrip/storage_value_float8_becomes_uint8: a bare storage (StorageValue)
// of a dtype without a legacy storage class (float8_*, uint16/32/64, complex32) is saved as
// torch.UntypedStorage, exactly as torch 2.x saves it, so it loads back as its bytes (uint8), as in torch.
// Documented behaviour; tensors of these dtypes keep their dtype (_rebuild_tensor_v3).
TEST_CASE("A saved bare storage of a newer dtype comes back as its bytes", "[save][fuzz]") {
  for (const DType dtype :
       {DType::Float8_e8m0fnu, DType::Float8_e4m3fn, DType::UInt16, DType::UInt32, DType::UInt64, DType::Complex32}) {
    INFO(dtype_name(dtype));
    const Tensor values = Tensor::zeros({4}, dtype);
    const Value back = load_torch(std::span<const std::byte>(save_torch_to_bytes(Value(StorageValue{values, "cpu"}))));
    const Tensor& bytes = back.as_storage().tensor;
    CHECK(bytes.dtype() == DType::UInt8);
    CHECK(static_cast<std::size_t>(bytes.numel()) == values.nbytes());
    CHECK(load_torch(std::span<const std::byte>(save_torch_to_bytes(Value(values)))).as_tensor().dtype() == dtype);
  }
}

// The legacy-class dtypes round-trip exactly (the harness keeps to these).
TEST_CASE("A saved bare storage of a legacy storage class round-trips", "[save][fuzz]") {
  for (const DType dtype :
       {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::Float16,
        DType::BFloat16, DType::Float32, DType::Float64, DType::Complex64, DType::Complex128}) {
    INFO(dtype_name(dtype));
    const Value saved(StorageValue{Tensor::zeros({5}, dtype), "cpu"});
    CHECK(load_torch(std::span<const std::byte>(save_torch_to_bytes(saved))) == saved);
  }
}

// fuzz_safetensors, regressions/safetensors/empty_metadata_dropped_on_save: a header with
// `"__metadata__":{}` loads with an empty map kept, and saving the result wrote no `__metadata__`, so the
// file loaded back differed from the load it was saved from. An empty map is now written back; a Value
// without one still saves without `__metadata__`.
TEST_CASE("An empty safetensors __metadata__ survives a save", "[safetensors][save][fuzz]") {
  const std::string header = R"({"__metadata__":{},"H":{"dtype":"U16","shape":[3],"data_offsets":[0,6]}})";
  std::vector<std::byte> file(8 + header.size() + 6, std::byte{0});
  file[0] = static_cast<std::byte>(header.size());
  std::memcpy(file.data() + 8, header.data(), header.size());
  const Value loaded = load_safetensors(std::span<const std::byte>(file));
  REQUIRE(safetensors_metadata(loaded) != nullptr);
  CHECK(safetensors_metadata(loaded)->size() == 0);
  const std::vector<std::byte> saved = save_safetensors_to_bytes(loaded);
  const std::string saved_text(reinterpret_cast<const char*>(saved.data()), saved.size());
  CHECK(saved_text.find(R"("__metadata__":{})") != std::string::npos);
  const Value again = load_safetensors(std::span<const std::byte>(saved));
  CHECK(again == loaded);
  const tensorfile_test::ScratchDir dir;  // the same through a file
  save_safetensors(loaded, dir / "empty_metadata.safetensors");
  CHECK(load_safetensors(dir / "empty_metadata.safetensors") == loaded);

  // Given metadata replaces the kept map; without a kept map nothing is written.
  const Value given = load_safetensors(
      std::span<const std::byte>(save_safetensors_to_bytes(loaded, {.safetensors = {.metadata = {{"format", "pt"}}}})));
  REQUIRE(safetensors_metadata(given) != nullptr);
  CHECK(safetensors_metadata(given)->size() == 1);
  const Value bare = load_safetensors(std::span<const std::byte>(save_safetensors_to_bytes(named_tensors(loaded))));
  CHECK(safetensors_metadata(bare) == nullptr);
}

// fuzz_zip, fuzz_load and fuzz_numpy, regressions/<harness>/name_pool_early_long_name: an early entry whose name
// (a 16-bit length) runs over the headers after it, in a central directory too small for the entries it declares.
// The zip index's name pool was once sized from the declared count and overrun by such a name before the entry's
// own checks failed (a heap overflow under ASan). Each is a FormatError now.
TEST_CASE("A central directory name that runs over later headers is refused, never copied past its pool",
          "[zip][fuzz]") {
  for (const char* harness : {"zip", "load", "numpy"}) {
    INFO(harness);
    const std::string bytes = tensorfile_test::read_text(tensorfile_test::data_dir() / ".." / "fuzz" / "regressions" /
                                                         harness / "name_pool_early_long_name");
    REQUIRE(bytes.size() > 700);
    CHECK_THROWS_AS(detail::ZipReader::open(std::as_bytes(std::span(bytes.data(), bytes.size())), "regression"),
                    FormatError);
  }
}
