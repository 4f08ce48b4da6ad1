// SPDX-License-Identifier: MIT
// libFuzzer harness: the front door, open() over the input as memory and as a RangeReader that gives short reads.
// Both sources must agree on success and on every entry; every entry's tensor() must equal load_all()'s tensor at its
// path, and read_into() must fill a buffer with the same bytes.
#include <tensorfile/checkpoint.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

/// The input behind a RangeReader whose reads stop short at a few bytes, so that every reader loop is exercised.
class ShortReader final : public tensorfile::RangeReader {
 public:
  explicit ShortReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::size_t read(std::uint64_t offset, std::span<std::byte> buffer) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min({buffer.size(), bytes_.size() - static_cast<std::size_t>(offset),
                                    static_cast<std::size_t>(offset % 61 + 1) * 64});
    std::memcpy(buffer.data(), bytes_.data() + offset, n);
    return n;
  }
  std::optional<std::uint64_t> size() const override { return bytes_.size(); }
  std::string name() const override { return "fuzz-reader"; }

 private:
  std::span<const std::byte> bytes_;
};

/// Same dtype, sizes and bytes (Tensor::equal says NaN is never equal; a file's NaNs are).
bool same_bytes(const tensorfile::Tensor& a, const tensorfile::Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (!a.device().is_cpu() || !b.device().is_cpu()) return a.device() == b.device();
  std::vector<std::byte> x(a.nbytes()), y(b.nbytes());
  a.copy_into(std::span<std::byte>(x));
  b.copy_into(std::span<std::byte>(y));
  return x == y;
}

std::optional<tensorfile::Checkpoint> try_open(const tensorfile::Source& source) {
  try {
    return tensorfile::open(source);
  } catch (const tensorfile::Error&) {
    return std::nullopt;
  }
}

/// Every entry read three ways (tensor(), read_into(), load_all()) agrees; traps otherwise.
void check_entries(const tensorfile::Checkpoint& checkpoint) {
  const auto all = tensorfile_fuzz::try_load([&] { return checkpoint.load_all(); });
  if (!all) return;  // the index parsed, the data did not: an error, as it must be
  const auto loaded = tensorfile::named_tensors(*all);
  for (const tensorfile::CheckpointEntry& entry : checkpoint.entries()) {
    tensorfile::Tensor tensor;
    try {
      tensor = checkpoint.tensor(entry.path);
    } catch (const tensorfile::Error&) {
      __builtin_trap();  // load_all() read it
    }
    tensorfile_fuzz::touch(tensor);
    if (tensor.dtype() != entry.dtype || tensor.sizes() != entry.shape) __builtin_trap();
    for (const auto& [path, other] : loaded) {
      if (path == entry.path && !same_bytes(tensor, other)) __builtin_trap();
    }
    if (entry.nbytes > (std::uint64_t{1} << 24) || !tensor.device().is_cpu()) continue;
    const tensorfile::Tensor buffer = tensorfile::Tensor::zeros(entry.shape, entry.dtype);
    try {
      checkpoint.read_into(entry.path, buffer);
    } catch (const tensorfile::Error&) {
      __builtin_trap();
    }
    if (!same_bytes(buffer, tensor)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto in_memory = try_open(tensorfile::Source::memory(bytes));
  ShortReader reader(bytes);
  const auto by_reader = try_open(tensorfile::Source::reader(reader));
  if (in_memory.has_value() != by_reader.has_value()) __builtin_trap();
  if (!in_memory) return 0;
  if (in_memory->format() != by_reader->format() || in_memory->entries().size() != by_reader->entries().size()) {
    __builtin_trap();
  }
  tensorfile_fuzz::walk(in_memory->values());
  check_entries(*in_memory);
  check_entries(*by_reader);
  return 0;
}
