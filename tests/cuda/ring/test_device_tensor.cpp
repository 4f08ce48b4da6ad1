// SPDX-License-Identifier: MIT
// Tensors on a (fake) device: clone() and contiguous() give dense tensors whatever the view, as on the CPU.
#include <tensorfile/core/tensor.hpp>

#include <cstdint>
#include <vector>

#include "cuda/ring/fake_copy_engine.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;

TEST_CASE("clone() and contiguous() of a device tensor are contiguous", "[ring][device_tensor]") {
  const Tensor host = Tensor::from_values<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  SECTION("a transposed view") {
    const Tensor view = host.transpose(0, 1).to(Device::cuda(0));
    REQUIRE_FALSE(view.is_contiguous());  // to() keeps a view's strides
    for (const Tensor& dense : {view.clone(), view.contiguous()}) {
      CHECK(dense.device() == Device::cuda(0));
      CHECK(dense.is_contiguous());
      CHECK(dense.strides() == Shape{2, 1});
      CHECK(dense.storage().size_bytes() == dense.nbytes());
      CHECK(dense.to(Device::cpu()).equal(host.transpose(0, 1)));
    }
  }
  SECTION("an expanded view (stride 0)") {
    const Tensor row = Tensor::from_values<std::int64_t>({7, 8, 9}, {1, 3});
    const Tensor view = row.expand({4, 3}).to(Device::cuda(1));
    const Tensor dense = view.clone();
    CHECK(dense.device() == Device::cuda(1));
    CHECK(dense.strides() == Shape{3, 1});
    CHECK(dense.storage().size_bytes() == 4 * 3 * sizeof(std::int64_t));
    CHECK(dense.to(Device::cpu()).equal(row.expand({4, 3})));
  }
  SECTION("a contiguous tensor with an offset, and requires_grad") {
    const Tensor view = host.select(0, 1).to(Device::cuda(0)).set_requires_grad(true);
    const Tensor dense = view.clone();
    CHECK(dense.is_contiguous());
    CHECK(dense.storage_offset() == 0);
    CHECK(dense.requires_grad());
    CHECK_FALSE(dense.storage().shares_owner_with(view.storage()));
    CHECK(dense.to(Device::cpu()).equal(host.select(0, 1)));
  }
}
