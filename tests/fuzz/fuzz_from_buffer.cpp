// SPDX-License-Identifier: MIT
// libFuzzer harness: from_buffer's options (dtype, count, offset) over a fuzzed buffer.
#include <tensorfile/io/from_buffer.hpp>

#include "fuzz_common.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto dtype = static_cast<tensorfile::DType>(in.ConsumeIntegralInRange<int>(0, 25));
  std::int64_t count = in.ConsumeIntegral<std::int64_t>();
  std::int64_t offset = in.ConsumeIntegral<std::int64_t>();
  if (in.ConsumeBool()) count = in.ConsumeIntegralInRange<std::int64_t>(-2, 64);
  if (in.ConsumeBool()) offset = in.ConsumeIntegralInRange<std::int64_t>(-2, 64);
  const bool writable = in.ConsumeBool();
  std::vector<std::byte> buffer;
  for (auto b : in.ConsumeRemainingBytes<std::uint8_t>()) buffer.push_back(static_cast<std::byte>(b));
  const tensorfile::FromBufferOptions options{.dtype = dtype, .count = count, .offset = offset};
  try {
    tensorfile::Tensor t = writable ? tensorfile::from_buffer(std::span<std::byte>(buffer), options)
                                    : tensorfile::from_buffer(std::span<const std::byte>(buffer), options);
    // The view must lie inside the buffer.
    const std::byte* first = t.storage().data();
    if (t.storage().size_bytes() > 0 &&
        (first < buffer.data() || first + t.storage().size_bytes() > buffer.data() + buffer.size())) {
      __builtin_trap();
    }
    if (count >= 0 && t.numel() != count) __builtin_trap();
    tensorfile_fuzz::touch(t);
  } catch (const tensorfile::Error&) {
  }
  return 0;
}
