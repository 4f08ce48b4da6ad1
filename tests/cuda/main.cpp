// SPDX-License-Identifier: MIT
// The CUDA tests' entry point: without a usable device it runs only the [no_device] checks (clear
// errors, no crash), prints why the rest is skipped and exits with 77, CTest's SKIP_RETURN_CODE.
#include <cuda_runtime_api.h>

#include <cstdio>

#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

/// Exit status CTest reads as "skipped" (SKIP_RETURN_CODE in tests/cuda/CMakeLists.txt).
constexpr int skip_return_code = 77;

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  auto& filters = session.configData().testsOrTags;
  const bool chosen = !filters.empty();
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) {
    std::printf("tensorfile CUDA tests: %d CUDA device(s)\n", count);
    if (!chosen) filters.emplace_back("~[no_device]");
    return session.run();
  }
  (void)cudaGetLastError();
  if (!chosen) filters.emplace_back("[no_device]");
  const int rc = session.run();
  if (status != cudaSuccess) {
    std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s: %s); ran only the [no_device] checks\n",
                cudaGetErrorName(status), cudaGetErrorString(status));
  } else {
    std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount: 0 devices); ran only the [no_device] checks\n");
  }
  std::fflush(stdout);
  return rc != 0 ? rc : skip_return_code;
}
