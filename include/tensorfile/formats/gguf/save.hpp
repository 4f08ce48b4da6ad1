// SPDX-License-Identifier: MIT
/// @file
/// save_gguf(): write named tensors as a GGUF (version 3, little-endian) file: metadata, tensor infos, the data
/// section aligned to `.gguf.alignment`, crash-safely (temporary file, fsync, rename) like save().
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/options.hpp"

namespace tensorfile {

/// Saves `tensors` to `path` as a GGUF file, in their order: the metadata of `.gguf.metadata` (a dict of str keys),
/// every tensor's info (its torch shape reversed into GGUF's dims, ne[0] the last extent), then each tensor's bytes
/// in C order at an offset aligned to `.gguf.alignment` (32, ggml's default; another power of two is written as
/// `general.alignment`). Tensors of a plain ggml type's dtype (float32, float16, bfloat16, float64, int8-int64) are
/// written as that type, or with `.gguf.quantize` the float ones of 2+ dims whose rows hold whole blocks of 32 as
/// Q8_0 or Q4_0 blocks (quantize(), ggml's reference rounding). Metadata values keep the type `.gguf.metadata_types`
/// names for their key ("uint32", "array[string]", as a GGUF load's `__metadata_types__` holds them); others are
/// written as llama.cpp's gguf-py writes Python values: bool, int as int32 (int64 beyond it), float as float32, str, a
/// list as an array of its first element's type. Throws ArgumentError for duplicate or empty names, names of 64 bytes
/// or more (ggml's limit), more than 4 dimensions, meta tensors, a metadata value its type cannot hold and an alignment
/// that is not a power of two; DTypeError for a dtype GGUF has no type for; IoError. SaveOptions::format is ignored.
TENSORFILE_ENTRY void save_gguf(const NamedTensors& tensors, const std::filesystem::path& path,
                                const SaveOptions& options = {});

/// Saves every tensor of `tensors` under its named_tensors() path (see the NamedTensors overload). What a GGUF load
/// gave is written back as it was read: its `__metadata__` and `__metadata_types__` unless `.gguf.metadata` is given
/// (and then its `general.alignment`, unless `.gguf.alignment` asks for another than 32), and each block-typed tensor
/// (uint8 raw blocks, its type in `__ggml_types__`) as its ggml type, with its shape in elements.
TENSORFILE_ENTRY void save_gguf(const Value& tensors, const std::filesystem::path& path,
                                const SaveOptions& options = {});

/// Saves to a new byte vector (see the Value overload).
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_gguf_to_bytes(const Value& tensors,
                                                                         const SaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_gguf_save)
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/formats/gguf/dequantize.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"
#include "tensorfile/formats/gguf/header.hpp"
#include "tensorfile/formats/gguf/load.hpp"

namespace tensorfile {

namespace detail {

/// Little-endian GGUF fields appended to a header buffer.
class GgufFields {
 public:
  template <class T>
  void put(T value) {
    using Bits =
        std::conditional_t<sizeof(T) == 1, std::uint8_t,
                           std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                              std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
    const auto bits = std::bit_cast<Bits>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xFFu));
  }
  void text(std::string_view s) {
    put(static_cast<std::uint64_t>(s.size()));
    for (const char c : s) out.push_back(static_cast<std::byte>(c));
  }
  std::vector<std::byte> out;
};

/// The value type named `name` ("uint32"), or nullopt.
[[nodiscard]] inline std::optional<GgufValueType> gguf_value_type_named(std::string_view name) {
  for (std::uint32_t t = 0; t <= 12; ++t) {
    if (gguf_value_type_name(t) == name) return static_cast<GgufValueType>(t);
  }
  return std::nullopt;
}

/// The type gguf-py gives a Python value (int: int32, or int64 beyond it; float: float32).
[[nodiscard]] inline GgufValueType gguf_inferred_type(const Value& v, const std::string& key) {
  if (v.is_bool()) return GgufValueType::boolean;
  if (v.is_int()) {
    const std::int64_t i = v.as_int();
    const bool narrow = i >= std::numeric_limits<std::int32_t>::min() && i <= std::numeric_limits<std::int32_t>::max();
    return narrow ? GgufValueType::i32 : GgufValueType::i64;
  }
  if (v.is_big_int()) return GgufValueType::u64;
  if (v.is_float()) return GgufValueType::f32;
  if (v.is_string()) return GgufValueType::string;
  if (v.is_list() || v.is_tuple()) return GgufValueType::array;
  throw ArgumentError("metadata \"" + key + "\" holds a " + std::string(Value::kind_name(v.kind())) +
                      "; expected a bool, int, float, str or list");
}

/// Writes `v` as a value of `type` (arrays: elements of `element`, else of their first element's inferred type).
inline void put_gguf_value(GgufFields& f, const Value& v, GgufValueType type, std::optional<GgufValueType> element,
                           const std::string& key) {
  const auto refuse = [&](const std::string& why) {
    throw ArgumentError("metadata \"" + key + "\" " + why + "; expected a value its type " +
                        gguf_value_type_name(static_cast<std::uint32_t>(type)) + " holds");
  };
  const auto integer = [&](std::int64_t lo, std::uint64_t hi) -> std::uint64_t {
    if (v.is_big_int() && type == GgufValueType::u64) {
      const BigInt& big = v.as_big_int();
      std::uint64_t u = 0;
      for (std::size_t i = 0; i < big.bytes.size(); ++i) {
        if (i >= 8 && big.bytes[i] != 0) refuse("is " + big.str() + ", beyond uint64");
        if (i < 8) u |= std::uint64_t{big.bytes[i]} << (8 * i);
      }
      if (!big.bytes.empty() && (big.bytes.back() & 0x80u) != 0) refuse("is negative");
      return u;
    }
    if (!v.is_int() && !v.is_bool()) refuse("is not an int");
    const std::int64_t i = v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
    if (i < lo || (i >= 0 && static_cast<std::uint64_t>(i) > hi)) refuse("is " + std::to_string(i) + ", out of range");
    return static_cast<std::uint64_t>(i);
  };
  switch (type) {
    case GgufValueType::u8: return f.put(static_cast<std::uint8_t>(integer(0, 0xFF)));
    case GgufValueType::i8: return f.put(static_cast<std::uint8_t>(integer(-128, 127)));
    case GgufValueType::u16: return f.put(static_cast<std::uint16_t>(integer(0, 0xFFFF)));
    case GgufValueType::i16: return f.put(static_cast<std::uint16_t>(integer(-32768, 32767)));
    case GgufValueType::u32: return f.put(static_cast<std::uint32_t>(integer(0, 0xFFFFFFFFu)));
    case GgufValueType::i32:
      return f.put(static_cast<std::uint32_t>(integer(std::numeric_limits<std::int32_t>::min(), 0x7FFFFFFF)));
    case GgufValueType::u64: return f.put(integer(0, std::numeric_limits<std::uint64_t>::max()));
    case GgufValueType::i64:
      return f.put(integer(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
    case GgufValueType::f32:
    case GgufValueType::f64: {
      if (!v.is_float() && !v.is_int()) refuse("is not a number");
      const double d = v.is_float() ? v.as_float() : static_cast<double>(v.as_int());
      if (type == GgufValueType::f32) return f.put(static_cast<float>(d));
      return f.put(d);
    }
    case GgufValueType::boolean:
      if (!v.is_bool()) refuse("is not a bool");
      return f.put(static_cast<std::uint8_t>(v.as_bool() ? 1 : 0));
    case GgufValueType::string:
      if (!v.is_string()) refuse("is not a str");
      return f.text(v.as_string());
    case GgufValueType::array: {
      if (!v.is_list() && !v.is_tuple()) refuse("is not a list");
      const List& items = v.elements();
      const GgufValueType of = element             ? *element
                               : items.size() == 0 ? GgufValueType::i32
                                                   : gguf_inferred_type(items[0], key);
      f.put(static_cast<std::uint32_t>(of));
      f.put(static_cast<std::uint64_t>(items.size()));
      for (std::size_t i = 0; i < items.size(); ++i) put_gguf_value(f, items[i], of, std::nullopt, key);
      return;
    }
  }
  refuse("has an unknown type");
}

/// One tensor to write: its name, host tensor, ggml type and GGUF dims.
struct GgufOutTensor {
  const std::string* name;
  Tensor tensor;
  GgmlType type;
  std::vector<std::uint64_t> dims;
};

/// Writes the whole file into `sink`. `types`: the ggml type of a block tensor by name (a GGUF load's); `hints`: the
/// stored type of a metadata key by name.
inline void write_gguf(const NamedTensors& tensors, const Value& metadata, const Dict* hints, const Dict* types,
                       ByteSink& sink, const SaveOptions& options) {
  const std::uint64_t alignment = options.gguf.alignment;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 0xFFFFFFFFu) {
    throw ArgumentError("SaveOptions::gguf.alignment is " + std::to_string(alignment) +
                        "; expected a power of two that fits in 32 bits");
  }
  std::optional<GgmlType> quantize_to;
  if (!options.gguf.quantize.empty()) {
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      if (ggml_type_name(type) == options.gguf.quantize) quantize_to = type;
    }
    if (!quantize_to) {
      throw ArgumentError("SaveOptions::gguf.quantize is \"" + options.gguf.quantize +
                          "\"; expected \"q8_0\", \"q4_0\" or empty");
    }
  }
  std::vector<GgufOutTensor> out;
  out.reserve(tensors.size());
  std::unordered_set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) throw ArgumentError("a tensor name is empty; expected a name");
    if (name.size() >= 64) {
      throw ArgumentError("tensor name \"" + name + "\" takes " + std::to_string(name.size()) +
                          " bytes; expected at most 63 (ggml's GGML_MAX_NAME of 64 holds its NUL)");
    }
    if (!names.insert(name).second) throw ArgumentError("tensor name \"" + name + "\" is given twice");
    if (!tensor.defined()) throw ArgumentError("tensor \"" + name + "\" is undefined; expected a tensor");
    if (tensor.device().is_meta()) {
      throw ArgumentError("tensor \"" + name + "\" is a meta tensor; expected a tensor with data");
    }
    if (tensor.dim() > 4) {
      throw ArgumentError("tensor \"" + name + "\" has " + std::to_string(tensor.dim()) +
                          " dimensions; expected at most 4 (GGUF's limit)");
    }
    std::optional<GgmlType> type;
    const Value* block = types != nullptr ? types->find(std::string_view(name)) : nullptr;
    if (block != nullptr && block->is_string()) {
      for (const GgmlTypeInfo& info : ggml_types()) {
        if (info.is_quantized() && info.name == block->as_string()) type = info.type;
      }
    }
    std::vector<std::uint64_t> dims;
    for (std::size_t d = tensor.dim(); d-- > 0;) dims.push_back(static_cast<std::uint64_t>(tensor.sizes()[d]));
    if (type) {
      const GgmlTypeInfo& info = ggml_type_info(*type);
      if (tensor.dtype() != DType::UInt8 || dims.empty() || dims[0] % info.block_bytes != 0) {
        throw ArgumentError("tensor \"" + name + "\" is named " + std::string(info.name) +
                            " by __ggml_types__ but is not a uint8 tensor of whole blocks; expected its raw blocks");
      }
      dims[0] = dims[0] / info.block_bytes * info.block_size;  // the row's elements
    } else {
      for (const GgmlTypeInfo& info : ggml_types()) {
        if (info.dtype == tensor.dtype()) type = info.type;
      }
      if (!type) {
        throw DTypeError("tensor \"" + name + "\" has dtype " + std::string(dtype_name(tensor.dtype())) +
                         ", which GGUF has no type for; expected float32, float16, bfloat16, float64 or int8-int64");
      }
    }
    Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
    const bool floating = tensor.dtype() == DType::Float32 || tensor.dtype() == DType::Float16 ||
                          tensor.dtype() == DType::BFloat16 || tensor.dtype() == DType::Float64;
    if (quantize_to && floating && dims.size() >= 2 && dims[0] % 32 == 0) {
      const Tensor floats = host.to(DType::Float32).contiguous();
      const GgmlTypeInfo& info = ggml_type_info(*quantize_to);
      Shape raw = floats.sizes();
      raw.back() = raw.back() / 32 * info.block_bytes;
      Tensor blocks(heap_storage(static_cast<std::size_t>(floats.numel()) / 32 * info.block_bytes, false), DType::UInt8,
                    std::move(raw));
      quantize(*quantize_to,
               std::span<const float>(reinterpret_cast<const float*>(floats.raw_data()),
                                      static_cast<std::size_t>(floats.numel())),
               std::span<std::byte>(blocks.mutable_raw_data(), blocks.nbytes()));
      host = std::move(blocks);
      type = quantize_to;
    }
    out.push_back({&name, std::move(host), *type, std::move(dims)});
  }

  GgufFields f;
  const Dict empty;
  const Dict& keys = metadata.is_dict() ? metadata.as_dict() : empty;
  if (!metadata.is_dict() && !metadata.is_none()) throw ArgumentError("the GGUF metadata is not a dict");
  const bool write_alignment = alignment != gguf_default_alignment || keys.contains("general.alignment");
  f.put(gguf_magic);
  f.put(std::uint32_t{3});
  f.put(static_cast<std::uint64_t>(out.size()));
  f.put(static_cast<std::uint64_t>(keys.size() + (write_alignment && !keys.contains("general.alignment") ? 1 : 0)));
  for (const auto& [key_value, value] : keys) {
    if (!key_value.is_string() || key_value.as_string().empty()) {
      throw ArgumentError("a GGUF metadata key is not a non-empty str");
    }
    const std::string& key = key_value.as_string();
    f.text(key);
    if (key == "general.alignment") {  // the alignment the data is written with
      f.put(static_cast<std::uint32_t>(GgufValueType::u32));
      f.put(static_cast<std::uint32_t>(alignment));
      continue;
    }
    GgufValueType type = gguf_inferred_type(value, key);
    std::optional<GgufValueType> element;
    const Value* hint = hints != nullptr ? hints->find(std::string_view(key)) : nullptr;
    if (hint != nullptr && hint->is_string()) {
      std::string_view name = hint->as_string();
      if (name.starts_with("array[") && name.ends_with("]")) {
        element = gguf_value_type_named(name.substr(6, name.size() - 7));
        name = "array";
      }
      if (const auto named = gguf_value_type_named(name)) type = *named;
    }
    f.put(static_cast<std::uint32_t>(type));
    put_gguf_value(f, value, type, element, key);
  }
  if (write_alignment && !keys.contains("general.alignment")) {
    f.text("general.alignment");
    f.put(static_cast<std::uint32_t>(GgufValueType::u32));
    f.put(static_cast<std::uint32_t>(alignment));
  }
  const auto aligned = [&](std::uint64_t n) { return (n + alignment - 1) / alignment * alignment; };
  std::uint64_t offset = 0;
  for (const GgufOutTensor& t : out) {
    f.text(*t.name);
    f.put(static_cast<std::uint32_t>(t.dims.size()));
    for (const std::uint64_t d : t.dims) f.put(d);
    f.put(static_cast<std::uint32_t>(t.type));
    f.put(offset);
    offset = aligned(offset + t.tensor.nbytes());
  }
  f.out.resize(static_cast<std::size_t>(aligned(f.out.size())), std::byte{0});
  sink.write(f.out);
  const std::vector<std::byte> zeros(static_cast<std::size_t>(alignment), std::byte{0});
  for (const GgufOutTensor& t : out) {
    if (t.tensor.is_contiguous()) {
      if (t.tensor.nbytes() != 0) sink.write_borrowed({t.tensor.raw_data(), t.tensor.nbytes()});
    } else {
      t.tensor.for_each_byte_run([&](std::span<const std::byte> run) { sink.write(run); });
    }
    // The last tensor is padded too: ggml reads the data section as one blob of every tensor's padded size, and
    // refuses a file that ends before it (as ggml's writer and gguf-py pad every tensor).
    const std::uint64_t pad = aligned(t.tensor.nbytes()) - t.tensor.nbytes();
    if (pad != 0) sink.write(std::span(zeros).first(static_cast<std::size_t>(pad)));
  }
  sink.flush();  // before `out` (device tensors' host copies) goes
}

/// write_gguf() of a Value: a GGUF load's metadata, key types and block types from its attributes.
inline void write_gguf(const Value& tensors, ByteSink& sink, const SaveOptions& options) {
  const Dict* attributes = tensors.is_dict() && tensors.as_dict().attributes().is_dict()
                               ? &tensors.as_dict().attributes().as_dict()
                               : nullptr;
  const auto attribute = [&](std::string_view name) -> const Dict* {
    const Value* found = attributes != nullptr ? attributes->find(name) : nullptr;
    return found != nullptr && found->is_dict() ? &found->as_dict() : nullptr;
  };
  const bool given = !options.gguf.metadata.is_none();
  const Dict* loaded = attribute("__metadata__");
  const Value metadata = given ? options.gguf.metadata : loaded != nullptr ? Value(*loaded) : Value();
  const Dict* hints = options.gguf.metadata_types.is_dict() ? &options.gguf.metadata_types.as_dict()
                      : given                               ? nullptr
                                                            : attribute("__metadata_types__");
  SaveOptions adjusted = options;  // a load's alignment kept, unless another than the default is asked for
  const Value* alignment = loaded != nullptr && !given ? loaded->find("general.alignment") : nullptr;
  if (alignment != nullptr && alignment->is_int() && alignment->as_int() > 0 &&
      options.gguf.alignment == gguf_default_alignment) {
    adjusted.gguf.alignment = static_cast<std::uint64_t>(alignment->as_int());
  }
  write_gguf(named_tensors(tensors), metadata, hints, attribute("__ggml_types__"), sink, adjusted);
}

}  // namespace detail

TENSORFILE_ENTRY void save_gguf(const NamedTensors& tensors, const std::filesystem::path& path,
                                const SaveOptions& options) {
  detail::AtomicFileSink sink(path, options.sync);
  const Dict* hints = options.gguf.metadata_types.is_dict() ? &options.gguf.metadata_types.as_dict() : nullptr;
  detail::write_gguf(tensors, options.gguf.metadata, hints, nullptr, sink, options);
  sink.commit();
}

TENSORFILE_ENTRY void save_gguf(const Value& tensors, const std::filesystem::path& path, const SaveOptions& options) {
  detail::AtomicFileSink sink(path, options.sync);
  detail::write_gguf(tensors, sink, options);
  sink.commit();
}

TENSORFILE_ENTRY std::vector<std::byte> save_gguf_to_bytes(const Value& tensors, const SaveOptions& options) {
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::write_gguf(tensors, sink, options);
  return out;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_gguf_save)
