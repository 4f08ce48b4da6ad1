// SPDX-License-Identifier: MIT
// Tests for <tensorfile/interop/dlpack.hpp> on tensorfile's side: hand-made managed tensors, ownership, misuse.
#include <tensorfile/backends/borrowed.hpp>
#include <tensorfile/interop/dlpack.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using tensorfile::Device;
using tensorfile::DType;
using tensorfile::Shape;
using tensorfile::Tensor;

namespace {

/// A producer's managed tensor over its own buffer, counting its deleter's calls.
struct Producer {
  std::vector<float> values;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  DLManagedTensor managed{};
  int deleted = 0;

  Producer(std::vector<float> data, std::vector<std::int64_t> sizes, std::vector<std::int64_t> steps = {})
      : values(std::move(data)), shape(std::move(sizes)), strides(std::move(steps)) {
    managed.dl_tensor.data = values.data();
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = static_cast<std::int32_t>(shape.size());
    managed.dl_tensor.dtype = {static_cast<std::uint8_t>(kDLFloat), 32, 1};
    managed.dl_tensor.shape = shape.empty() ? nullptr : shape.data();
    managed.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<Producer*>(self->manager_ctx)->deleted; };
  }
};

std::vector<float> read(const Tensor& tensor) {
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  tensor.copy_into(reinterpret_cast<std::byte*>(out.data()));
  return out;
}

}  // namespace

TEST_CASE("to_dlpack shares the tensor", "[dlpack]") {
  const Tensor base = Tensor::from_values<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  const long owners = base.storage().use_count();

  SECTION("a strided view with a storage offset: data at its first element, byte_offset 0") {
    const Tensor view = base.transpose(0, 1).narrow(0, 1, 2);  // sizes (2, 3), strides (1, 4), offset 1
    const long viewers = owners + 1;
    DLManagedTensor* managed = tensorfile::to_dlpack(view);
    const DLTensor& out = managed->dl_tensor;
    CHECK(out.data == base.storage().data() + sizeof(float));
    CHECK(out.byte_offset == 0);
    CHECK(out.device.device_type == kDLCPU);
    CHECK(out.device.device_id == 0);
    CHECK(out.ndim == 2);
    CHECK(out.dtype.code == kDLFloat);
    CHECK(out.dtype.bits == 32);
    CHECK(out.dtype.lanes == 1);
    CHECK(std::vector<std::int64_t>(out.shape, out.shape + 2) == Shape{2, 3});
    CHECK(std::vector<std::int64_t>(out.strides, out.strides + 2) == Shape{1, 4});
    CHECK(base.storage().use_count() == viewers + 1);  // the export keeps the storage alive
    managed->deleter(managed);
    CHECK(base.storage().use_count() == viewers);
  }
  SECTION("the storage outlives every tensorfile handle") {
    DLManagedTensor* managed = nullptr;
    {
      const Tensor temporary = Tensor::from_values<std::int32_t>({7, 8, 9});
      managed = tensorfile::to_dlpack(temporary);
    }
    const auto* values = static_cast<const std::int32_t*>(managed->dl_tensor.data);
    CHECK(values[0] == 7);
    CHECK(values[2] == 9);
    CHECK(managed->dl_tensor.dtype.code == kDLInt);
    managed->deleter(managed);
  }
  SECTION("0-d and empty tensors") {
    DLManagedTensor* scalar = tensorfile::to_dlpack(base.select(0, 1).select(0, 2));
    CHECK(scalar->dl_tensor.ndim == 0);
    CHECK(*static_cast<const float*>(scalar->dl_tensor.data) == 6.0F);
    scalar->deleter(scalar);
    DLManagedTensor* empty = tensorfile::to_dlpack(Tensor::zeros({0, 3}, DType::Float64));
    CHECK(empty->dl_tensor.ndim == 2);
    CHECK(empty->dl_tensor.shape[0] == 0);
    empty->deleter(empty);
  }
  SECTION("a CUDA tensor names its device (the address is never dereferenced)") {
    alignas(256) static std::array<std::byte, 256> pretend{};
    const Tensor device_tensor(
        tensorfile::Storage(tensorfile::BorrowedBackend(std::span<std::byte>(pretend), nullptr, Device::cuda(1))),
        DType::Float16, {4, 8});
    DLManagedTensor* managed = tensorfile::to_dlpack(device_tensor);
    CHECK(managed->dl_tensor.device.device_type == kDLCUDA);
    CHECK(managed->dl_tensor.device.device_id == 1);
    CHECK(managed->dl_tensor.data == pretend.data());
    managed->deleter(managed);
  }
  SECTION("refusals") {
    CHECK_THROWS_MATCHES(tensorfile::to_dlpack(Tensor{}), tensorfile::ArgumentError,
                         Catch::Matchers::Message("tensorfile: to_dlpack: the tensor is undefined; expected a tensor "
                                                  "with a storage"));
    CHECK_THROWS_MATCHES(
        tensorfile::to_dlpack(Tensor::zeros({2}, DType::QInt8)), tensorfile::DTypeError,
        Catch::Matchers::Message("tensorfile: to_dlpack: dtype qint8 has no DLPack type code; expected "
                                 "bool, an integer, a float, bfloat16, float8 (not e3m4/e4m3b11) or "
                                 "complex"));
    CHECK_THROWS_MATCHES(tensorfile::to_dlpack(Tensor::zeros({2}, DType::Float32, Device::meta())),
                         tensorfile::DeviceError,
                         Catch::Matchers::Message("tensorfile: to_dlpack: a meta tensor has no bytes to share; "
                                                  "expected a cpu or cuda tensor"));
    alignas(256) static std::array<std::byte, 16> pretend{};
    const Tensor current_cuda(
        tensorfile::Storage(tensorfile::BorrowedBackend(std::span<std::byte>(pretend), nullptr, Device::cuda())),
        DType::Float32, {4});
    CHECK_THROWS_AS(tensorfile::to_dlpack(current_cuda), tensorfile::DeviceError);
    CHECK(base.storage().use_count() == owners);  // nothing leaked by a refusal
  }
}

TEST_CASE("DLPack type codes for every dtype both name", "[dlpack]") {
  struct Expected {
    DType dtype;
    std::uint8_t code;
    std::uint8_t bits;
  };
  const std::array<Expected, 21> table{{
      {DType::Bool, 6, 8},
      {DType::UInt8, kDLUInt, 8},
      {DType::Int8, kDLInt, 8},
      {DType::Int16, kDLInt, 16},
      {DType::Int32, kDLInt, 32},
      {DType::Int64, kDLInt, 64},
      {DType::UInt16, kDLUInt, 16},
      {DType::UInt32, kDLUInt, 32},
      {DType::UInt64, kDLUInt, 64},
      {DType::Float16, kDLFloat, 16},
      {DType::BFloat16, kDLBfloat, 16},
      {DType::Float32, kDLFloat, 32},
      {DType::Float64, kDLFloat, 64},
      {DType::Complex32, kDLComplex, 32},
      {DType::Complex64, kDLComplex, 64},
      {DType::Complex128, kDLComplex, 128},
      {DType::Float8_e4m3fn, 10, 8},
      {DType::Float8_e4m3fnuz, 11, 8},
      {DType::Float8_e5m2, 12, 8},
      {DType::Float8_e5m2fnuz, 13, 8},
      {DType::Float8_e8m0fnu, 14, 8},
  }};
  for (const auto& [dtype, code, bits] : table) {
    CAPTURE(tensorfile::dtype_name(dtype));
    const Tensor tensor = Tensor::zeros({2, 2}, dtype);
    DLManagedTensor* managed = tensorfile::to_dlpack(tensor);
    CHECK(managed->dl_tensor.dtype.code == code);
    CHECK(managed->dl_tensor.dtype.bits == bits);
    CHECK(managed->dl_tensor.dtype.lanes == 1);
    // Through a foreign deleter, so from_dlpack reads the struct instead of recognising its own export.
    static DLManagedTensor* inner = nullptr;
    inner = managed;
    DLManagedTensor outer = *managed;
    outer.deleter = [](DLManagedTensor*) { inner->deleter(inner); };
    const Tensor back = tensorfile::from_dlpack(&outer);
    CHECK(back.dtype() == dtype);
    CHECK(back.sizes() == Shape{2, 2});
    CHECK(back.storage().data() == tensor.storage().data());
  }
}

TEST_CASE("from_dlpack takes a producer's tensor", "[dlpack]") {
  SECTION("values, strides, byte_offset; the deleter runs once, when the last view goes") {
    // A (3, 2) view of a 2x4 buffer: element (i, j) at 1 + i + 4 * j, starting one float in (byte_offset 4).
    Producer producer({0, 1, 2, 3, 4, 5, 6, 7}, {3, 2}, {1, 4});
    producer.managed.dl_tensor.byte_offset = sizeof(float);
    Tensor tensor = tensorfile::from_dlpack(&producer.managed);
    CHECK(tensor.data<const float>() == producer.values.data() + 1);
    CHECK(tensor.sizes() == Shape{3, 2});
    CHECK(tensor.strides() == Shape{1, 4});
    CHECK(read(tensor) == std::vector<float>{1, 5, 2, 6, 3, 7});
    CHECK(tensor.is_writable());
    CHECK(tensor.storage().name() == "dlpack");
    CHECK(tensor.storage().kind() == tensorfile::StorageKind::borrowed);
    CHECK(tensor.storage().size_bytes() == 7 * sizeof(float));  // exactly what the view reaches
    tensor.data<float>()[0] = 42;                               // zero-copy: the producer sees the write
    CHECK(producer.values[1] == 42);
    Tensor row = tensor.select(0, 2);
    const Tensor copy = tensor;
    tensor = Tensor{};
    CHECK(producer.deleted == 0);
    CHECK(read(row) == std::vector<float>{3, 7});
    row = Tensor{};
    CHECK(producer.deleted == 0);
    (void)copy;
  }
  SECTION("the deleter ran exactly once") {
    Producer producer({1, 2, 3, 4, 5, 6}, {2, 3});
    { const Tensor tensor = tensorfile::from_dlpack(&producer.managed); }
    CHECK(producer.deleted == 1);
  }
  SECTION("null strides mean row-major; 0-d; a null deleter is allowed") {
    Producer producer({1, 2, 3, 4, 5, 6}, {2, 3});
    {
      const Tensor tensor = tensorfile::from_dlpack(&producer.managed);
      CHECK(tensor.strides() == Shape{3, 1});
      CHECK(read(tensor.select(0, 1)) == std::vector<float>{4, 5, 6});
    }
    CHECK(producer.deleted == 1);
    Producer scalar({9}, {});
    scalar.managed.deleter = nullptr;
    CHECK(tensorfile::from_dlpack(&scalar.managed).item<float>() == 9);
  }
  SECTION("an empty tensor with null data") {
    Producer producer({}, {0, 5});
    producer.managed.dl_tensor.data = nullptr;
    {
      const Tensor tensor = tensorfile::from_dlpack(&producer.managed);
      CHECK(tensor.numel() == 0);
      CHECK(tensor.sizes() == Shape{0, 5});
    }
    CHECK(producer.deleted == 1);
  }
  SECTION("a CUDA tensor becomes a cuda:N tensor over the same address; pinned host memory is cpu") {
    Producer producer({1, 2, 3, 4}, {4});
    producer.managed.dl_tensor.device = {kDLCUDA, 2};
    {
      const Tensor tensor = tensorfile::from_dlpack(&producer.managed);
      CHECK(tensor.device() == Device::cuda(2));
      CHECK(tensor.storage().data() == reinterpret_cast<const std::byte*>(producer.values.data()));
      CHECK_THROWS_AS(tensor.data<const float>(), tensorfile::DeviceError);  // never read on the host
    }
    producer.managed.dl_tensor.device = {kDLCUDAHost, 0};
    CHECK(tensorfile::from_dlpack(&producer.managed).device() == Device::cpu());
    CHECK(producer.deleted == 2);
  }
  SECTION("tensorfile's own export comes back as the original tensor") {
    const Tensor original = Tensor::from_values<double>({1, 2, 3, 4}, {2, 2}).transpose(0, 1);
    const long owners = original.storage().use_count();
    const Tensor back = tensorfile::from_dlpack(tensorfile::to_dlpack(original));
    CHECK(back.storage().shares_owner_with(original.storage()));
    CHECK(back.strides() == original.strides());
    CHECK(original.storage().use_count() == owners + 1);  // the export was released; `back` is the one more
  }
}

TEST_CASE("from_dlpack refuses what it cannot represent and leaves the tensor with the caller", "[dlpack]") {
  Producer producer({1, 2, 3, 4, 5, 6}, {2, 3}, {3, 1});
  auto refused = [&](const std::string& message) {
    CHECK_THROWS_WITH(tensorfile::from_dlpack(&producer.managed), message);
    CHECK(producer.deleted == 0);  // on failure the caller still owns the managed tensor
  };
  SECTION("null") {
    CHECK_THROWS_MATCHES(tensorfile::from_dlpack(static_cast<DLManagedTensor*>(nullptr)), tensorfile::ArgumentError,
                         Catch::Matchers::Message("tensorfile: from_dlpack: null managed tensor; expected a DLPack "
                                                  "tensor"));
  }
  SECTION("dtypes") {
    producer.managed.dl_tensor.dtype = {static_cast<std::uint8_t>(kDLFloat), 32, 4};
    refused(
        "tensorfile: from_dlpack: DLPack dtype (code 2, bits 32, lanes 4) has no tensorfile dtype; expected "
        "bool, int/uint 8-64, float 16/32/64, bfloat16, float8 or complex 32/64/128 with 1 lane");
    producer.managed.dl_tensor.dtype = {static_cast<std::uint8_t>(kDLOpaqueHandle), 64, 1};
    CHECK_THROWS_AS(tensorfile::from_dlpack(&producer.managed), tensorfile::DTypeError);
    producer.managed.dl_tensor.dtype = {static_cast<std::uint8_t>(kDLFloat), 8, 1};
    CHECK_THROWS_AS(tensorfile::from_dlpack(&producer.managed), tensorfile::DTypeError);
    producer.managed.dl_tensor.dtype = {7, 8, 1};  // float8 e3m4: tensorfile has no such dtype
    CHECK_THROWS_AS(tensorfile::from_dlpack(&producer.managed), tensorfile::DTypeError);
  }
  SECTION("devices") {
    producer.managed.dl_tensor.device = {kDLOpenCL, 0};
    refused(
        "tensorfile: from_dlpack: DLPack device type 4 is not supported; expected kDLCPU (1), kDLCUDA (2) or "
        "kDLCUDAHost (3)");
    producer.managed.dl_tensor.device = {kDLCUDA, -1};
    refused("tensorfile: from_dlpack: CUDA device id -1; expected 0 or more");
  }
  SECTION("negative strides, sizes and ndim; null shape and data") {
    producer.strides = {-3, 1};
    producer.managed.dl_tensor.strides = producer.strides.data();
    refused("tensorfile: from_dlpack: stride -3 in dim 0; expected 0 or more (tensorfile has no negative strides)");
    producer.strides = {3, 1};
    producer.managed.dl_tensor.strides = producer.strides.data();
    producer.shape = {2, -3};
    producer.managed.dl_tensor.shape = producer.shape.data();
    refused("tensorfile: from_dlpack: size -3 in dim 1; expected 0 or more");
    producer.managed.dl_tensor.ndim = -1;
    refused("tensorfile: from_dlpack: ndim -1; expected 0 or more");
    producer.managed.dl_tensor.ndim = 2;
    producer.managed.dl_tensor.shape = nullptr;
    refused("tensorfile: from_dlpack: ndim > 0 and a null shape");
  }
  SECTION("null data with elements") {
    producer.managed.dl_tensor.data = nullptr;
    refused("tensorfile: from_dlpack: null data with elements; expected a data pointer");
  }
  SECTION("an extent past 64 bits") {
    producer.shape = {std::int64_t{1} << 40, std::int64_t{1} << 40};
    producer.strides = {std::int64_t{1} << 40, 1};
    producer.managed.dl_tensor.shape = producer.shape.data();
    producer.managed.dl_tensor.strides = producer.strides.data();
    refused("tensorfile: from_dlpack: the view's extent overflows 64 bits; expected a tensor that fits in memory");
    producer.managed.dl_tensor.shape[0] = 2;
    producer.managed.dl_tensor.shape[1] = 3;
    producer.managed.dl_tensor.strides[0] = 3;
    producer.managed.dl_tensor.byte_offset = ~std::uint64_t{0};
    refused("tensorfile: from_dlpack: the view's extent overflows 64 bits; expected a tensor that fits in memory");
  }
  // After any refusal the caller releases the tensor itself, once.
  producer.managed.deleter(&producer.managed);
  CHECK(producer.deleted == 1);
}

#if TENSORFILE_DLPACK_VERSIONED
TEST_CASE("versioned DLPack tensors carry the read-only flag", "[dlpack]") {
  const Tensor writable = Tensor::from_values<float>({1, 2, 3});
  DLManagedTensorVersioned* out = tensorfile::to_dlpack_versioned(writable);
  CHECK(out->version.major == DLPACK_MAJOR_VERSION);
  CHECK(out->flags == 0);
  out->deleter(out);

  const Tensor read_only(writable.storage().slice(0, 12), DType::Float32, {3});
  const Tensor frozen(tensorfile::Storage(tensorfile::BorrowedBackend(
                          std::span<const std::byte>(read_only.storage().data(), 12), nullptr, Device::cpu())),
                      DType::Float32, {3});
  out = tensorfile::to_dlpack_versioned(frozen);
  CHECK((out->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  // A foreign versioned tensor: the flag makes a read-only tensorfile tensor; the deleter runs once.
  static int deleted = 0;
  static DLManagedTensorVersioned* inner = nullptr;
  inner = out;
  DLManagedTensorVersioned outer = *out;
  outer.deleter = [](DLManagedTensorVersioned*) {
    ++deleted;
    inner->deleter(inner);
  };
  {
    const Tensor back = tensorfile::from_dlpack(&outer);
    CHECK_FALSE(back.is_writable());
    CHECK(back.data<const float>()[2] == 3);
  }
  CHECK(deleted == 1);
  // Another major version: refused, and (as DLPack requires) its deleter is called.
  DLManagedTensorVersioned* future = tensorfile::to_dlpack_versioned(writable);
  inner = future;
  DLManagedTensorVersioned wrapped = *future;
  wrapped.deleter = outer.deleter;
  wrapped.version.major = DLPACK_MAJOR_VERSION + 1;
  CHECK_THROWS_AS(tensorfile::from_dlpack(&wrapped), tensorfile::ArgumentError);
  CHECK(deleted == 2);
}
#endif
