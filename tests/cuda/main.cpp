// SPDX-License-Identifier: MIT
// The CUDA tests' entry point. With a device it runs every test but the [no_device] ones. Without one it
// runs the [no_device] checks (clear errors, no crash) and exits with 77, CTest's SKIP_RETURN_CODE, only
// where no NVIDIA driver is installed or no device is visible; a driver that fails to start, or
// TENSORFILE_REQUIRE_CUDA=1 without a device, fails the run (tests/cuda/skip_rule.hpp).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "cuda/skip_rule.hpp"

#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

namespace {

/// Exit status CTest reads as "skipped" (SKIP_RETURN_CODE in tests/cuda/CMakeLists.txt).
constexpr int skip_return_code = 77;

/// Whether an NVIDIA driver is installed: its library loads, or its control device exists.
bool nvidia_driver_installed() {
  if (void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); driver != nullptr) {
    ::dlclose(driver);
    return true;
  }
  std::error_code ignored;
  return std::filesystem::exists("/dev/nvidiactl", ignored);
}

tensorfile_test::CudaProbe probe_cuda() {
  tensorfile_test::CudaProbe probe;
  const cudaError_t status = cudaGetDeviceCount(&probe.count);
  probe.count_ok = status == cudaSuccess;
  probe.no_device_error = status == cudaErrorNoDevice;
  if (!probe.count_ok) {
    (void)cudaGetLastError();
    probe.count = 0;
    probe.error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  } else if (probe.count == 0) {
    probe.error = "cudaGetDeviceCount found none";
  }
  probe.driver_installed = nvidia_driver_installed();
  const char* require = std::getenv("TENSORFILE_REQUIRE_CUDA");
  probe.require = require != nullptr && std::string(require) == "1";
  return probe;
}

}  // namespace

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  auto& filters = session.configData().testsOrTags;
  const bool chosen = !filters.empty();
  const tensorfile_test::CudaTestDecision decision = tensorfile_test::decide_cuda_tests(probe_cuda());
  if (decision.verdict == tensorfile_test::CudaTestVerdict::run) {
    std::printf("tensorfile CUDA tests: %s\n", decision.reason.c_str());
    if (!chosen) filters.emplace_back("~[no_device]");
    return session.run();
  }
  if (!chosen) filters.emplace_back("[no_device],[skip_rule]");
  const int rc = session.run();
  if (decision.verdict == tensorfile_test::CudaTestVerdict::fail) {
    std::printf("FAILED: %s\n", decision.reason.c_str());
    std::fflush(stdout);
    return 1;
  }
  std::printf("SKIPPED: %s; ran only the [no_device] checks\n", decision.reason.c_str());
  std::fflush(stdout);
  return rc != 0 ? rc : skip_return_code;
}
