// SPDX-License-Identifier: MIT
// When the CUDA tests run, skip or fail: skipped only where no NVIDIA driver is installed or no device is
// visible; a driver that is there but fails to start fails the run, and TENSORFILE_REQUIRE_CUDA=1 fails it too.
#pragma once

#include <string>

namespace tensorfile_test {

/// What the CUDA tests do on this machine.
enum class CudaTestVerdict { run, skip, fail };

/// What the machine says about CUDA.
struct CudaProbe {
  bool count_ok = false;          ///< cudaGetDeviceCount returned cudaSuccess
  int count = 0;                  ///< the devices it found
  bool no_device_error = false;   ///< it returned cudaErrorNoDevice (a driver, 0 devices visible)
  std::string error{};            ///< its error, "cudaErrorX: text", when not count_ok
  bool driver_installed = false;  ///< libcuda.so.1 loads or /dev/nvidiactl exists
  bool require = false;           ///< TENSORFILE_REQUIRE_CUDA=1: a missing GPU is a failure
};

/// The verdict and why. The runtime answers cudaErrorInsufficientDriver both without a driver and with one
/// older than the toolkit, so the driver's presence, not the error code, tells a skip from a failure.
struct CudaTestDecision {
  CudaTestVerdict verdict = CudaTestVerdict::skip;  ///< run, skip or fail
  std::string reason;                               ///< one line, printed
};

/// Decides from `probe`.
inline CudaTestDecision decide_cuda_tests(const CudaProbe& probe) {
  if (probe.count_ok && probe.count > 0) {
    return {CudaTestVerdict::run, std::to_string(probe.count) + " CUDA device(s)"};
  }
  const std::string found = probe.count_ok || probe.no_device_error ? "0 CUDA devices (" + probe.error + ")"
                                                                    : "cudaGetDeviceCount: " + probe.error;
  std::string reason;
  CudaTestVerdict verdict = CudaTestVerdict::skip;
  if (!probe.driver_installed) {
    reason = "no NVIDIA driver (libcuda.so.1 does not load, no /dev/nvidiactl); " + found;
  } else if (probe.count_ok || probe.no_device_error) {
    reason = "an NVIDIA driver but " + found;
  } else {
    verdict = CudaTestVerdict::fail;
    reason = "an NVIDIA driver is installed but CUDA does not start: " + found;
  }
  if (probe.require && verdict == CudaTestVerdict::skip) {
    verdict = CudaTestVerdict::fail;
    reason = "TENSORFILE_REQUIRE_CUDA=1 and " + reason;
  }
  return {verdict, reason};
}

}  // namespace tensorfile_test
