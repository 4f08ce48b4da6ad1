// SPDX-License-Identifier: MIT
// A small command-line driver the torch interop script runs: it maps files and buffers with
// tensorfile and prints what it sees, as hex, so Python can compare it with torch.
#include <tensorfile/tensorfile.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

std::string to_hex(const std::byte* data, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    const auto v = std::to_integer<unsigned>(data[i]);
    out += digits[v >> 4];
    out += digits[v & 15];
  }
  return out;
}

std::vector<std::byte> from_hex(const std::string& hex) {
  std::vector<std::byte> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

int usage() {
  std::cerr << "usage: interop_driver read PATH DTYPE [SIZE]\n"
               "       interop_driver write PATH DTYPE SIZE INDEX HEX\n"
               "       interop_driver frombuffer HEX DTYPE COUNT OFFSET\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage();
  try {
    if (args[0] == "read" && (args.size() == 3 || args.size() == 4)) {
      // One call per case: an options struct whose optional size is set on one path only trips GCC 12's
      // -Wmaybe-uninitialized at -O3 (it copies the disengaged optional's payload).
      const auto dtype = tensorfile::parse_dtype(args[2]);
      const auto t = args.size() == 4 ? tensorfile::from_file(args[1], {.size = std::stoll(args[3]), .dtype = dtype})
                                      : tensorfile::from_file(args[1], {.dtype = dtype});
      std::cout << t.numel() << " " << to_hex(t.raw_data(), t.nbytes()) << "\n";
      return 0;
    }
    if (args[0] == "write" && args.size() == 6) {
      const auto dtype = tensorfile::parse_dtype(args[2]);
      const auto t = tensorfile::from_file(
          args[1], {.mmap = tensorfile::MapMode::shared, .size = std::stoll(args[3]), .dtype = dtype});
      const auto bytes = from_hex(args[5]);
      const auto index = std::stoll(args[4]);
      std::memcpy(t.select(0, index).mutable_raw_data(), bytes.data(), bytes.size());
      return 0;
    }
    if (args[0] == "frombuffer" && args.size() == 5) {
      auto bytes = from_hex(args[1]);
      const auto t = tensorfile::from_buffer(
          std::span<std::byte>(bytes),
          {.dtype = tensorfile::parse_dtype(args[2]), .count = std::stoll(args[3]), .offset = std::stoll(args[4])});
      std::cout << "ok " << t.numel() << " " << to_hex(t.raw_data(), t.nbytes()) << "\n";
      return 0;
    }
  } catch (const tensorfile::Error& error) {
    std::cout << "error " << error.what() << "\n";
    return 1;
  }
  return usage();
}
