// SPDX-License-Identifier: MIT
// The program every consumer project builds: it must compile against the packaged headers and run.
#include <tensorfile/tensorfile.hpp>

#include <array>
#include <iostream>

int main() {
  std::array<float, 4> values{1, 2, 3, 4};
  const auto t =
      tensorfile::from_buffer(std::as_writable_bytes(std::span(values)), {.dtype = tensorfile::DType::Float32})
          .reshape({2, 2});
  std::cout << t << "\n";
  return t.view<const float>()(1, 0) == 3.0f && TENSORFILE_VERSION >= 100 ? 0 : 1;
}
