// SPDX-License-Identifier: MIT
// libFuzzer harness: load_npy() and load_npz() from bytes in heap, mmap (views of the input) and meta
// modes. Every mode must agree on success (except views refused for big-endian data), heap and mapped
// loads on every value, and a successful load must save back and load again to the same tensors; a .npz load
// of the input as a file with `select` must succeed too, with the same kept tensors.
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/numpy/npz.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace {

std::optional<tensorfile::Value> try_npy(std::span<const std::byte> bytes, const tensorfile::LoadOptions& options) {
  return tensorfile_fuzz::try_load([&] { return tensorfile::Value(tensorfile::load_npy(bytes, options)); });
}

std::optional<tensorfile::Value> try_npz(std::span<const std::byte> bytes, const tensorfile::LoadOptions& options) {
  return tensorfile_fuzz::try_load([&] { return tensorfile::load_npz(bytes, options); });
}

bool big_endian(std::span<const std::byte> bytes) {
  try {
    return tensorfile::parse_npy_header(bytes, bytes.size()).swap_bytes;
  } catch (const tensorfile::Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto heap = try_npy(bytes, {});
  const auto mapped = try_npy(bytes, {.mmap = tensorfile::MapMode::read_only});
  const auto meta = try_npy(bytes, {.map_location = "meta"});
  if (heap.has_value() != meta.has_value()) __builtin_trap();
  if (heap.has_value() != mapped.has_value() && !(heap && big_endian(bytes))) __builtin_trap();
  if (heap && mapped && !(*heap == *mapped)) __builtin_trap();  // two modes, one meaning
  if (heap) {
    const auto saved = tensorfile::save_npy_to_bytes(heap->as_tensor());
    const tensorfile::Tensor again = tensorfile::load_npy(std::span<const std::byte>(saved));
    // bytes, not values: NaNs compare unequal (a regression input is a big-endian complex NaN)
    if (again.dtype() != heap->as_tensor().dtype() || tensorfile::save_npy_to_bytes(again) != saved) __builtin_trap();
  }

  const auto npz_heap = try_npz(bytes, {});
  const auto npz_mapped = try_npz(bytes, {.mmap = tensorfile::MapMode::read_only});
  if (npz_heap && npz_mapped && !(*npz_heap == *npz_mapped)) __builtin_trap();
  if (npz_mapped && !npz_heap) __builtin_trap();  // a view never succeeds where a copy fails
  const tensorfile_fuzz::InputFile file(bytes);   // the file path with `select`: unselected members' data unread
  if (npz_heap && !file.path().empty()) {
    const tensorfile::LoadOptions options{.select = tensorfile_fuzz::half_select(size)};
    const auto selected = tensorfile_fuzz::try_load([&] { return tensorfile::load_npz(file.path(), options); });
    if (!selected) __builtin_trap();
    tensorfile_fuzz::check_selected(*npz_heap, *selected, options.select);
  }
  if (npz_heap) {
    try {
      const auto saved = tensorfile::save_npz_to_bytes(tensorfile::named_tensors(*npz_heap));
      const tensorfile::Value again = tensorfile::load_npz(std::span<const std::byte>(saved));
      if (!(again == *npz_heap)) __builtin_trap();
    } catch (const tensorfile::ArgumentError&) {
      // a name np.load accepts but a written archive may not hold (e.g. "a/../b")
    }
  }
  return 0;
}
