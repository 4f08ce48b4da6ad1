// SPDX-License-Identifier: MIT
// libFuzzer harness: scan() of arbitrary bytes (a zip's .pkl records or a run of pickles). Nothing is ever run;
// every offset it reports lies inside the input and no finding list grows past its cap.
#include <tensorfile/scan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const tensorfile::ScanReport report = tensorfile::scan(bytes, {.allow = {"a.b"}});
    if (report.bytes_read > size) __builtin_trap();
    for (const tensorfile::ScannedGlobal& global : report.globals) {
      if (global.offset >= size) __builtin_trap();
    }
    if (report.anomalies.size() > 5 * 64 + 5) __builtin_trap();  // five pickles, 64 findings each, plus trailers
    (void)report.safe();
  } catch (const tensorfile::Error&) {
  }
  return 0;
}
