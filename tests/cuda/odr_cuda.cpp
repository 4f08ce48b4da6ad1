// SPDX-License-Identifier: MIT
// A second translation unit including <tensorfile/cuda.hpp>: the link fails if a CUDA header defines a
// non-inline function, and the hook-installing variable must stay one object.
#include <tensorfile/cuda.hpp>

#include "tensorfile_catch.hpp"

namespace cuda_odr_test {
const void* hook_from_second_unit() {
  return reinterpret_cast<const void*>(tensorfile::detail::device_copy_hook().copy);
}
}  // namespace cuda_odr_test

TEST_CASE("<tensorfile/cuda.hpp> links from two translation units and installs one hook", "[no_device][cuda][odr]") {
  CHECK(cuda_odr_test::hook_from_second_unit() == reinterpret_cast<const void*>(&tensorfile::detail::cuda_copy_tensor));
  CHECK(tensorfile::detail::cuda_copy_hook_installed);
}
