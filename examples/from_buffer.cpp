// SPDX-License-Identifier: MIT
// Example: view memory you already own as a tensor (torch.frombuffer), without copying it.
#include <tensorfile/tensorfile.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <vector>

int main() {
  // A packet: an 8-byte header, then six little-endian int32 values.
  auto packet = std::make_shared<std::vector<std::byte>>(8 + 6 * sizeof(std::int32_t));
  for (std::int32_t i = 0; i < 6; ++i) {
    std::memcpy(packet->data() + 8 + 4 * i, &i, sizeof i);
  }

  // Skip the header; the tensor shares the packet's memory and keeps the packet alive.
  const auto values =
      tensorfile::from_buffer(std::span<std::byte>(*packet), packet, {.dtype = tensorfile::DType::Int32, .offset = 8})
          .reshape({2, 3});
  packet.reset();
  std::cout << "values: " << values << "\n";
  std::cout << "transposed: " << values.transpose(0, 1) << "\n";

  // Const memory gives a read-only tensor: writing through it throws.
  const std::vector<std::byte> frozen(4);
  const auto read_only =
      tensorfile::from_buffer(std::span<const std::byte>(frozen), {.dtype = tensorfile::DType::Float32});
  try {
    read_only.data<float>()[0] = 1.0f;
  } catch (const tensorfile::Error& error) {
    std::cout << "as expected: " << error.what() << "\n";
  }
  return 0;
}
