// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/dtype.hpp>: sizes, names, parsing and the C++ type map.
#include <tensorfile/core/dtype.hpp>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("element_size and names match torch", "[dtype]") {
  struct Row {
    DType dtype;
    std::size_t size;
    const char* torch;
  };
  const Row rows[] = {
      {DType::Bool, 1, "torch.bool"},
      {DType::UInt8, 1, "torch.uint8"},
      {DType::Int8, 1, "torch.int8"},
      {DType::Int16, 2, "torch.int16"},
      {DType::Int32, 4, "torch.int32"},
      {DType::Int64, 8, "torch.int64"},
      {DType::UInt16, 2, "torch.uint16"},
      {DType::UInt32, 4, "torch.uint32"},
      {DType::UInt64, 8, "torch.uint64"},
      {DType::Float16, 2, "torch.float16"},
      {DType::BFloat16, 2, "torch.bfloat16"},
      {DType::Float32, 4, "torch.float32"},
      {DType::Float64, 8, "torch.float64"},
      {DType::Complex32, 4, "torch.complex32"},
      {DType::Complex64, 8, "torch.complex64"},
      {DType::Complex128, 16, "torch.complex128"},
      {DType::Float8_e4m3fn, 1, "torch.float8_e4m3fn"},
      {DType::Float8_e5m2, 1, "torch.float8_e5m2"},
      {DType::Float8_e4m3fnuz, 1, "torch.float8_e4m3fnuz"},
      {DType::Float8_e5m2fnuz, 1, "torch.float8_e5m2fnuz"},
      {DType::QInt8, 1, "torch.qint8"},
      {DType::QUInt8, 1, "torch.quint8"},
      {DType::QInt32, 4, "torch.qint32"},
      {DType::QUInt4x2, 1, "torch.quint4x2"},
  };
  for (const auto& row : rows) {
    INFO(row.torch);
    CHECK(element_size(row.dtype) == row.size);
    CHECK(torch_name(row.dtype) == row.torch);
    CHECK(parse_dtype(row.torch) == row.dtype);
    CHECK(parse_dtype(std::string(row.torch).substr(6)) == row.dtype);
  }
}

TEST_CASE("parse_dtype accepts torch's aliases and rejects the unknown", "[dtype]") {
  SECTION("aliases") {
    CHECK(parse_dtype("float") == DType::Float32);
    CHECK(parse_dtype("torch.double") == DType::Float64);
    CHECK(parse_dtype("half") == DType::Float16);
    CHECK(parse_dtype("long") == DType::Int64);
    CHECK(parse_dtype("int") == DType::Int32);
    CHECK(parse_dtype("short") == DType::Int16);
    CHECK(parse_dtype("cfloat") == DType::Complex64);
    CHECK(parse_dtype("cdouble") == DType::Complex128);
    CHECK(parse_dtype("chalf") == DType::Complex32);
  }
  SECTION("unknown names") {
    CHECK_FALSE(try_parse_dtype("float31").has_value());
    CHECK_FALSE(try_parse_dtype("").has_value());
    CHECK_FALSE(try_parse_dtype("Float32").has_value());
    REQUIRE_THROWS_WITH(parse_dtype("torch.flaot32"),
                        "tensorfile: unknown dtype \"torch.flaot32\"; expected a torch dtype name such as \"float32\"");
    CHECK_THROWS_AS(parse_dtype("x"), DTypeError);
  }
}

TEST_CASE("C++ element types map to dtypes", "[dtype]") {
  STATIC_REQUIRE(dtype_of<float> == DType::Float32);
  STATIC_REQUIRE(dtype_of<const double> == DType::Float64);
  STATIC_REQUIRE(dtype_of<Half> == DType::Float16);
  STATIC_REQUIRE(dtype_of<BFloat16> == DType::BFloat16);
  STATIC_REQUIRE(dtype_of<std::complex<float>> == DType::Complex64);
  STATIC_REQUIRE(dtype_of<bool> == DType::Bool);
  STATIC_REQUIRE(dtype_of<std::uint64_t> == DType::UInt64);
  STATIC_REQUIRE_FALSE(element_type<std::string>);
  STATIC_REQUIRE(is_floating_point(DType::BFloat16));
  STATIC_REQUIRE_FALSE(is_floating_point(DType::Int8));
  STATIC_REQUIRE(is_complex(DType::Complex32));
}
