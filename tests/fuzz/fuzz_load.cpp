// SPDX-License-Identifier: MIT
// libFuzzer harness: load_torch() from bytes end to end, in heap mode and in mmap mode (views of the input),
// strict and permissive. When heap and mmap loads both succeed their results must be equal; a load of the
// input as a file with `select` must then succeed too, with the same kept tensors.
#include <tensorfile/tensorfile.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace {
std::optional<tensorfile::Value> try_load(std::span<const std::byte> bytes, const tensorfile::LoadOptions& options) {
  return tensorfile_fuzz::try_load([&] { return tensorfile::load_torch(bytes, options); });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto limited = [](tensorfile::LoadOptions o) {
    o.limits.max_depth = 200;
    o.limits.max_memo = 1u << 14;
    o.limits.max_container = 1u << 16;
    o.limits.max_tree_size = 1u << 16;  // `==` below walks both trees
    o.limits.max_copied_text = 1u << 24;
    o.limits.max_total_bytes = std::uint64_t{1} << 28;
    return o;
  };
  const auto heap = try_load(bytes, limited({.strict = true}));
  const auto mapped =
      try_load(bytes, limited({.mmap = tensorfile::MapMode::read_only, .strict = true, .verify_crc = (size & 1) != 0}));
  if (heap && mapped && !(*heap == *mapped)) __builtin_trap();  // two modes, one meaning
  (void)try_load(bytes, limited({.strict = false}));
  // The file path with `select`: records read one by one with pread, only the kept ones.
  const tensorfile_fuzz::InputFile file(bytes);
  if (heap && !file.path().empty()) {
    tensorfile::LoadOptions options = limited({.strict = true});
    options.select = tensorfile_fuzz::half_select(size);
    const auto selected = tensorfile_fuzz::try_load([&] { return tensorfile::load_torch(file.path(), options); });
    if (!selected) __builtin_trap();  // reading less never fails where reading all succeeds
    tensorfile_fuzz::check_selected(*heap, *selected, options.select);
  }
  return 0;
}
