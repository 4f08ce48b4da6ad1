// SPDX-License-Identifier: MIT
// libFuzzer harness: parse_gguf_header() from bytes and through a ranged reader that checks every read stays in the
// file; both must agree. A header that parses has its promises checked (tensors inside the file, aligned, not
// overlapping) and every dequantizable tensor decoded from the input's bytes. It is then opened and loaded through
// the front door (heap and views): every tensor holds the input's bytes at its offset, and the small block tensors
// dequantize from the loaded result as from the input.
#include <tensorfile/checkpoint.hpp>
#include <tensorfile/formats/gguf/dequantize.hpp>
#include <tensorfile/formats/gguf/header.hpp>
#include <tensorfile/formats/gguf/load.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

namespace {

template <class Fn>
std::optional<tensorfile::GgufHeader> try_parse(Fn&& fn) {
  try {
    return fn();
  } catch (const tensorfile::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto whole = try_parse([&] { return tensorfile::parse_gguf_header(bytes, "fuzz.gguf"); });
  const auto ranged = try_parse([&] {
    const auto read = [&](std::uint64_t offset, std::span<std::byte> out) {
      if (offset > size || out.size() > size - offset) __builtin_trap();  // a read past the file
      std::memcpy(out.data(), data + offset, out.size());
    };
    return tensorfile::parse_gguf_header(read, size, "fuzz.gguf");
  });
  if (whole.has_value() != ranged.has_value()) __builtin_trap();
  if (!whole) return 0;
  if (whole->data_offset != ranged->data_offset || whole->tensors.size() != ranged->tensors.size() ||
      !(whole->metadata == ranged->metadata)) {
    __builtin_trap();  // one parse, two ways of reading
  }
  const tensorfile::GgufHeader& h = *whole;
  if (h.data_offset > size || h.alignment == 0 || (h.alignment & (h.alignment - 1)) != 0) __builtin_trap();
  std::uint64_t visits = 0;
  tensorfile_fuzz::walk_from(h.metadata, 0, visits, std::uint64_t{1} << 30);
  for (const tensorfile::GgufTensorInfo& t : h.tensors) {
    if (t.offset % h.alignment != 0 || t.offset + t.bytes > size - h.data_offset) __builtin_trap();
    if (t.dims.size() > 4) __builtin_trap();
    const tensorfile::GgmlTypeInfo& info = tensorfile::ggml_type_info(t.type);
    if (!tensorfile::can_dequantize(t.type) || t.bytes > (std::size_t{1} << 20)) continue;
    std::vector<float> out(static_cast<std::size_t>(t.bytes / info.block_bytes * info.block_size));
    tensorfile::dequantize(t.type, bytes.subspan(static_cast<std::size_t>(h.data_offset + t.offset), t.bytes), out);
  }
  for (const bool views : {false, true}) {
    tensorfile::LoadOptions options;
    if (views) options.mmap = tensorfile::MapMode::read_only;
    const tensorfile::Checkpoint checkpoint = tensorfile::open(tensorfile::Source::memory(bytes, "fuzz.gguf"), options);
    const tensorfile::Value loaded = checkpoint.load_all();  // a parsed header loads: no error past it
    if (checkpoint.entries().size() != h.tensors.size()) __builtin_trap();
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
      const tensorfile::GgufTensorInfo& t = h.tensors[i];
      const tensorfile::Value* value = loaded.as_dict().find(t.name);
      if (value == nullptr || !value->is_tensor()) __builtin_trap();
      const tensorfile::Tensor& tensor = value->as_tensor();
      if (tensor.nbytes() != t.bytes || tensor.sizes() != t.storage_shape()) __builtin_trap();
      if (t.bytes != 0 && std::memcmp(tensor.raw_data(), data + h.data_offset + t.offset, t.bytes) != 0) {
        __builtin_trap();  // not the input's bytes
      }
      if (views && t.bytes != 0 && tensor.raw_data() != bytes.data() + h.data_offset + t.offset) __builtin_trap();
      const tensorfile::GgmlTypeInfo& info = tensorfile::ggml_type_info(t.type);
      if (info.is_quantized() && tensorfile::can_dequantize(t.type) && t.bytes <= (std::size_t{1} << 16) &&
          !t.dims.empty()) {
        (void)tensorfile::dequantize(loaded, t.name);
      }
    }
  }
  return 0;
}
