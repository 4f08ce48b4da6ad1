// SPDX-License-Identifier: MIT
// libFuzzer harness: load_safetensors() from bytes in heap, mmap (views of the input) and meta modes.
// Every mode must agree on success, heap and mmap loads on every value, and a successful load must
// save back and load again to the same tensors. A load of the input as a file with `select` must succeed
// too, with the same kept tensors.
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/formats/safetensors/save.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace {
std::optional<tensorfile::Value> try_load(std::span<const std::byte> bytes, const tensorfile::LoadOptions& options) {
  return tensorfile_fuzz::try_load([&] { return tensorfile::load_safetensors(bytes, options); });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto heap = try_load(bytes, {});
  const auto mapped = try_load(bytes, {.mmap = tensorfile::MapMode::read_only});
  const auto meta = try_load(bytes, {.map_location = "meta"});
  if (heap.has_value() != mapped.has_value() || heap.has_value() != meta.has_value()) __builtin_trap();
  if (!heap) return 0;
  if (!(*heap == *mapped)) __builtin_trap();     // two modes, one meaning
  const tensorfile_fuzz::InputFile file(bytes);  // the file path with `select`: a pread per kept tensor
  if (!file.path().empty()) {
    const tensorfile::LoadOptions options{.select = tensorfile_fuzz::half_select(size)};
    const auto selected = tensorfile_fuzz::try_load([&] { return tensorfile::load_safetensors(file.path(), options); });
    if (!selected) __builtin_trap();
    tensorfile_fuzz::check_selected(*heap, *selected, options.select);
  }
  try {
    const auto saved =
        tensorfile::save_safetensors_to_bytes(*heap, {.safetensors = {.sort = false}});  // header order kept
    const tensorfile::Value again = tensorfile::load_safetensors(std::span<const std::byte>(saved));
    if (!(again == *heap)) __builtin_trap();
  } catch (const tensorfile::ArgumentError&) {
    // a rewritten header past the format's limit
  }
  return 0;
}
