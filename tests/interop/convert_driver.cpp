// SPDX-License-Identifier: MIT
// convert_driver CORPUS: converts every pair of a torch-written corpus with Tensor::to and compares the bytes.
#include <cstdio>
#include <exception>

#include "core/convert_corpus.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: convert_driver CORPUS\n");
    return 2;
  }
  try {
    const auto cases = tensorfile_test::read_convert_corpus(argv[1]);
    std::int64_t elements = 0;
    std::int64_t failures = 0;
    int failed_pairs = 0;
    for (const auto& c : cases) {
      const std::int64_t bad = tensorfile_test::check_convert_case(c);
      elements += c.count;
      failures += bad;
      failed_pairs += bad != 0 ? 1 : 0;
    }
    std::printf("%zu dtype pairs, %lld elements (each contiguous and strided): %lld differ from torch in %d pairs\n",
                cases.size(), static_cast<long long>(elements), static_cast<long long>(failures), failed_pairs);
    return failures == 0 && !cases.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convert_driver: %s\n", e.what());
    return 1;
  }
}
