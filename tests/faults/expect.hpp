// SPDX-License-Identifier: MIT
// The fault programs' check: prints a failed condition and counts it (from any thread); main
// returns non-zero when `failures` is not 0.
#pragma once

#include <atomic>
#include <cstdio>

namespace {
std::atomic<int> failures{0};
}  // namespace

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                            \
    }                                                                        \
  } while (0)
