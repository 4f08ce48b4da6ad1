// SPDX-License-Identifier: MIT
// Reads a dtype-conversion corpus written by tests/interop/convert_corpus.py and checks Tensor::to against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorfile/core/tensor.hpp"

namespace tensorfile_test {

/// One source dtype, one destination dtype, the source elements and torch's converted bytes.
struct ConvertCase {
  tensorfile::DType from;
  tensorfile::DType to;
  std::int64_t count;
  std::vector<std::byte> source;
  std::vector<std::byte> expected;
};

/// Every pair in the corpus file; throws std::runtime_error when the file is malformed.
inline std::vector<ConvertCase> read_convert_corpus(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  const auto take = [&](std::size_t n) {
    if (bytes.size() - at < n) throw std::runtime_error("convert corpus " + path.string() + " is truncated");
    const char* p = bytes.data() + at;
    at += n;
    return p;
  };
  if (std::string(take(8), 8) != "TFCONV1\n") throw std::runtime_error("not a convert corpus: " + path.string());
  std::vector<ConvertCase> cases;
  while (at < bytes.size()) {
    ConvertCase c{};
    for (auto* dtype : {&c.from, &c.to}) {
      const auto length = static_cast<unsigned char>(*take(1));
      *dtype = tensorfile::parse_dtype(std::string(take(length), length));
    }
    std::uint64_t count = 0;
    std::memcpy(&count, take(8), 8);
    c.count = static_cast<std::int64_t>(count);
    const auto* src = reinterpret_cast<const std::byte*>(take(count * tensorfile::element_size(c.from)));
    c.source.assign(src, src + count * tensorfile::element_size(c.from));
    const auto* dst = reinterpret_cast<const std::byte*>(take(count * tensorfile::element_size(c.to)));
    c.expected.assign(dst, dst + count * tensorfile::element_size(c.to));
    cases.push_back(std::move(c));
  }
  return cases;
}

/// The source values as a contiguous tensor, and (every = 2) as a strided view of a storage twice as long.
inline tensorfile::Tensor convert_case_source(const ConvertCase& c, std::int64_t every) {
  const std::size_t elem = tensorfile::element_size(c.from);
  auto storage = tensorfile::heap_storage(c.source.size() * static_cast<std::size_t>(every));
  for (std::int64_t i = 0; i < c.count; ++i) {
    std::memcpy(storage.mutable_data() + static_cast<std::size_t>(i * every) * elem,
                c.source.data() + static_cast<std::size_t>(i) * elem, elem);
  }
  return {std::move(storage), c.from, {c.count}, {every}};
}

/// Converts the case with Tensor::to (contiguous and strided); returns the number of differing elements and
/// prints the first few of each pair to stderr.
inline std::int64_t check_convert_case(const ConvertCase& c) {
  std::int64_t failures = 0;
  const std::size_t in = tensorfile::element_size(c.from);
  const std::size_t out = tensorfile::element_size(c.to);
  for (const std::int64_t every : {1, 2}) {
    const tensorfile::Tensor converted = convert_case_source(c, every).to(c.to);
    std::vector<std::byte> got(converted.nbytes());
    converted.copy_into(std::span<std::byte>(got));
    for (std::int64_t i = 0; i < c.count; ++i) {
      const auto index = static_cast<std::size_t>(i);
      if (std::memcmp(got.data() + index * out, c.expected.data() + index * out, out) == 0) continue;
      if (++failures <= 4) {
        std::string line = std::string(tensorfile::dtype_name(c.from)) + " -> " +
                           std::string(tensorfile::dtype_name(c.to)) + (every == 1 ? "" : " (strided)") + " [" +
                           std::to_string(i) + "]: source 0x";
        const auto hex = [&line](const std::byte* p, std::size_t n) {
          char digits[3];
          for (std::size_t k = n; k-- > 0;) {
            std::snprintf(digits, sizeof digits, "%02x", std::to_integer<unsigned>(p[k]));
            line += digits;
          }
        };
        hex(c.source.data() + index * in, in);
        line += ", got 0x";
        hex(got.data() + index * out, out);
        line += ", torch 0x";
        hex(c.expected.data() + index * out, out);
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    }
  }
  return failures;
}

}  // namespace tensorfile_test
