// SPDX-License-Identifier: MIT
// libFuzzer harness: the zip layer (end records, zip64, central directory, local headers, inflate), and the
// DEFLATE encoder: every input must inflate back from its own compressed stream.
#include <tensorfile/detail/zip/deflate.hpp>
#include <tensorfile/detail/zip/reader.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> archive(reinterpret_cast<const std::byte*>(data), size);
  const auto compressed = tensorfile::detail::deflate(archive);
  const auto back = tensorfile::detail::inflate(compressed, size);  // throws (a crash here) if the stream is bad
  if (!std::equal(back.begin(), back.end(), archive.begin(), archive.end())) std::abort();
  try {
    const tensorfile::detail::ZipLimits limits{.max_entries = 4096, .max_inflated_size = std::uint64_t{16} << 20};
    const auto zip = tensorfile::detail::ZipReader::open(archive, "fuzz.pt", limits);
    for (const auto& entry : zip.entries()) {
      try {
        const auto bytes = zip.read(entry);
        zip.verify_crc(entry, bytes);
        if (entry.method == 0) (void)zip.stored_bytes(entry);
      } catch (const tensorfile::Error&) {
      }
    }
  } catch (const tensorfile::Error&) {
  }
  return 0;
}
