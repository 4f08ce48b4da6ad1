// SPDX-License-Identifier: MIT
// Regression tests for what the fuzzers found (inputs under tests/fuzz/regressions/<harness>/ are also
// replayed by run_fuzzers.sh through their harness).
#include <tensorfile/tensorfile.hpp>

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
    const Value back = load(std::span<const std::byte>(save_to_bytes(Value(StorageValue{values, "cpu"}))));
    const Tensor& bytes = back.as_storage().tensor;
    CHECK(bytes.dtype() == DType::UInt8);
    CHECK(static_cast<std::size_t>(bytes.numel()) == values.nbytes());
    CHECK(load(std::span<const std::byte>(save_to_bytes(Value(values)))).as_tensor().dtype() == dtype);
  }
}

// The legacy-class dtypes round-trip exactly (the harness keeps to these).
TEST_CASE("A saved bare storage of a legacy storage class round-trips", "[save][fuzz]") {
  for (const DType dtype :
       {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::Float16,
        DType::BFloat16, DType::Float32, DType::Float64, DType::Complex64, DType::Complex128}) {
    INFO(dtype_name(dtype));
    const Value saved(StorageValue{Tensor::zeros({5}, dtype), "cpu"});
    CHECK(load(std::span<const std::byte>(save_to_bytes(saved))) == saved);
  }
}
