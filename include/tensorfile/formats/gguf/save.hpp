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
///
/// With `.gguf.split_max_tensors` or `.gguf.split_max_size`, the model is written as llama.cpp's gguf-split writes
/// it: files `<prefix>-00001-of-0000N.gguf` ... (gguf_split_file_name; `prefix` is `path` less its `.gguf`, or less its
/// split name when it is one), the tensors in order, a new file begun when the next tensor would pass either bound
/// (a file holds one tensor at least). Every file carries split.no (uint16, from 0), split.count (uint16) and
/// split.tensors.count (int32, the model's tensors), and `general.alignment` when the alignment is not 32; the first
/// also the metadata (any split.* keys it holds are replaced). Every file is written and synced under a temporary name
/// before any is renamed into place (last part first), so a failure leaves the files that were there; after the
/// renames, the parts of an earlier split of that prefix into another count are removed. A load running beside the
/// renames may see parts of both saves (each file whole); more than 65,535 files is an ArgumentError.
TENSORFILE_ENTRY void save_gguf(const NamedTensors& tensors, const std::filesystem::path& path,
                                const SaveOptions& options = {});

/// Saves every tensor of `tensors` under its named_tensors() path (see the NamedTensors overload). What a GGUF load
/// gave is written back as it was read: its `__metadata__` and `__metadata_types__` unless `.gguf.metadata` is given
/// (and then its `general.alignment`, unless `.gguf.alignment` asks for another than 32), and each block-typed tensor
/// (uint8 raw blocks, its type in `__ggml_types__`) as its ggml type, with its shape in elements.
TENSORFILE_ENTRY void save_gguf(const Value& tensors, const std::filesystem::path& path,
                                const SaveOptions& options = {});

/// Saves to a new byte vector (see the Value overload); a split option is an ArgumentError (split files need a path).
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_gguf_to_bytes(const Value& tensors,
                                                                         const SaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_gguf_save)
#include <fcntl.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/posix/directory.hpp"
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
inline void put_gguf_value(GgufFields& f, const Value& v, GgufValueType type, std::string_view element,
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
      // `element` names the items' type ("uint8", "array[uint8]", "array" for arrays of any type); unnamed or
      // unknown, it is inferred from the first item.
      std::string_view inner;
      std::optional<GgufValueType> named;
      if (element == "array") {
        named = GgufValueType::array;
      } else if (element.starts_with("array[") && element.ends_with("]")) {
        named = GgufValueType::array;
        inner = element.substr(6, element.size() - 7);
      } else {
        named = gguf_value_type_named(element);
      }
      const GgufValueType of = named               ? *named
                               : items.size() == 0 ? GgufValueType::i32
                                                   : gguf_inferred_type(items[0], key);
      f.put(static_cast<std::uint32_t>(of));
      f.put(static_cast<std::uint64_t>(items.size()));
      for (std::size_t i = 0; i < items.size(); ++i) put_gguf_value(f, items[i], of, inner, key);
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

/// The tensors to write, checked, each with its ggml type and dims (quantized when `.gguf.quantize` asks). `types`:
/// the ggml type of a block tensor by name (a GGUF load's).
[[nodiscard]] inline std::vector<GgufOutTensor> gguf_out_tensors(const NamedTensors& tensors, const Dict* types,
                                                                 const SaveOptions& options) {
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
  return out;
}

/// One file's split keys: part `no` of `count`, of a model of `tensors` tensors.
struct GgufSplitKeys {
  std::uint32_t no = 0;
  std::uint32_t count = 0;
  std::uint64_t tensors = 0;
};

/// Writes one whole file of `out` into `sink`: `metadata` (a dict, or None; `hints`: the stored type of a key by
/// name) less any split.* keys it holds, with `split` the file's own split.* keys.
inline void write_gguf_file(std::span<const GgufOutTensor> out, const Value& metadata, const Dict* hints,
                            const std::optional<GgufSplitKeys>& split, ByteSink& sink, std::uint64_t alignment) {
  GgufFields f;
  const Dict empty;
  const Dict& keys = metadata.is_dict() ? metadata.as_dict() : empty;
  if (!metadata.is_dict() && !metadata.is_none()) throw ArgumentError("the GGUF metadata is not a dict");
  const bool write_alignment = alignment != gguf_default_alignment || keys.contains("general.alignment");
  std::size_t split_keys_given = 0;
  for (const auto& [key_value, value] : keys) {
    if (key_value.is_string() && is_gguf_split_key(key_value.as_string())) ++split_keys_given;
  }
  f.put(gguf_magic);
  f.put(std::uint32_t{3});
  f.put(static_cast<std::uint64_t>(out.size()));
  f.put(static_cast<std::uint64_t>(keys.size() - split_keys_given + (split ? 3 : 0) +
                                   (write_alignment && !keys.contains("general.alignment") ? 1 : 0)));
  for (const auto& [key_value, value] : keys) {
    if (!key_value.is_string() || key_value.as_string().empty()) {
      throw ArgumentError("a GGUF metadata key is not a non-empty str");
    }
    const std::string& key = key_value.as_string();
    if (is_gguf_split_key(key)) continue;  // a split file's own, below; never another file's
    f.text(key);
    if (key == "general.alignment") {  // the alignment the data is written with
      f.put(static_cast<std::uint32_t>(GgufValueType::u32));
      f.put(static_cast<std::uint32_t>(alignment));
      continue;
    }
    GgufValueType type = gguf_inferred_type(value, key);
    std::string_view element;
    const Value* hint = hints != nullptr ? hints->find(std::string_view(key)) : nullptr;
    if (hint != nullptr && hint->is_string()) {
      std::string_view name = hint->as_string();
      if (name.starts_with("array[") && name.ends_with("]")) {
        element = name.substr(6, name.size() - 7);
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
  if (split) {  // as llama.cpp's gguf-split writes them: after the model's keys
    f.text(gguf_split_no_key);
    f.put(static_cast<std::uint32_t>(GgufValueType::u16));
    f.put(static_cast<std::uint16_t>(split->no));
    f.text(gguf_split_count_key);
    f.put(static_cast<std::uint32_t>(GgufValueType::u16));
    f.put(static_cast<std::uint16_t>(split->count));
    f.text(gguf_split_tensors_key);
    f.put(static_cast<std::uint32_t>(GgufValueType::i32));
    f.put(static_cast<std::uint32_t>(split->tensors));
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

/// Whether `options` ask for split files.
[[nodiscard]] inline bool gguf_split_asked(const SaveOptions& options) noexcept {
  return options.gguf.split_max_tensors != 0 || options.gguf.split_max_size != 0;
}

/// The parts of a split save: each part's first tensor in `out`, then out.size() (gguf-split's rule: a new part when
/// the next tensor would pass a bound, at least one tensor a part).
[[nodiscard]] inline std::vector<std::size_t> gguf_split_plan(std::span<const GgufOutTensor> out,
                                                              const SaveOptions& options) {
  const std::uint64_t max_tensors = options.gguf.split_max_tensors;
  const std::uint64_t max_bytes = options.gguf.split_max_size;
  const std::uint64_t alignment = options.gguf.alignment;
  std::vector<std::size_t> starts{0};
  std::uint64_t tensors = 0;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t size = (out[i].tensor.nbytes() + alignment - 1) / alignment * alignment;
    const bool full = tensors > 0 && ((max_tensors != 0 && tensors + 1 > max_tensors) ||
                                      (max_bytes != 0 && size > max_bytes - std::min(bytes, max_bytes)));
    if (full) {
      starts.push_back(i);
      tensors = 0;
      bytes = 0;
    }
    ++tensors;
    bytes += size;
  }
  starts.push_back(out.size());
  if (starts.size() - 1 > 65'535) {
    throw ArgumentError("the split save makes " + std::to_string(starts.size() - 1) +
                        " files; expected at most 65535 (split.count is a uint16): raise split_max_tensors or "
                        "split_max_size");
  }
  return starts;
}

/// The prefix of a split save to `path`: less its `.gguf`, or less its split name when it is one.
[[nodiscard]] inline std::string gguf_split_prefix(const std::filesystem::path& path) {
  const std::string text = path.string();
  if (const std::optional<GgufSplitName> name = parse_gguf_split_name(text)) return name->prefix;
  if (text.ends_with(".gguf")) return text.substr(0, text.size() - 5);
  return text;
}

/// Removes the parts of earlier split saves of `prefix` into another count than `count`.
inline void remove_stale_gguf_parts(const std::string& prefix, std::uint32_t count) {
  const std::filesystem::path base(prefix);
  const std::filesystem::path directory = base.parent_path();
  const FileHandle dir =
      FileHandle::try_open_at(AT_FDCWD, directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (!dir.valid()) return;  // what is left is removed by a later save
  std::vector<DirectoryEntry> entries;
  if (read_directory(dir.fd(), entries) != 0) return;
  const std::string stem = base.filename().string();
  for (const DirectoryEntry& entry : entries) {
    if (entry.is_directory) continue;
    const std::optional<GgufSplitName> name = parse_gguf_split_name(entry.name);
    if (name && name->prefix == stem && name->count != count) (void)::unlinkat(dir.fd(), entry.name.c_str(), 0);
  }
}

/// Writes the model as one file to `path`, or with a split option as llama.cpp's split files (see save_gguf).
inline void save_gguf_files(const NamedTensors& tensors, const Value& metadata, const Dict* hints, const Dict* types,
                            const std::filesystem::path& path, const SaveOptions& options) {
  const std::vector<GgufOutTensor> out = gguf_out_tensors(tensors, types, options);
  if (!gguf_split_asked(options)) {
    AtomicFileSink sink(path, options.sync);
    write_gguf_file(out, metadata, hints, std::nullopt, sink, options.gguf.alignment);
    sink.commit();
    return;
  }
  const std::vector<std::size_t> starts = gguf_split_plan(out, options);
  const auto count = static_cast<std::uint32_t>(starts.size() - 1);
  if (out.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw ArgumentError("the split save holds " + std::to_string(out.size()) +
                        " tensors; expected at most 2147483647 (split.tensors.count is an int32)");
  }
  const std::string prefix = gguf_split_prefix(path);
  std::vector<std::unique_ptr<AtomicFileSink>> sinks;
  sinks.reserve(count);
  Value only_split{Dict{}};  // the other parts: the alignment and the split keys alone, as gguf-split writes them
  for (std::uint32_t k = 0; k < count; ++k) {
    sinks.push_back(std::make_unique<AtomicFileSink>(gguf_split_file_name(prefix, k, count), options.sync));
    const std::span<const GgufOutTensor> part(out.data() + starts[k], starts[k + 1] - starts[k]);
    write_gguf_file(part, k == 0 ? metadata : only_split, k == 0 ? hints : nullptr, GgufSplitKeys{k, count, out.size()},
                    *sinks.back(), options.gguf.alignment);
    sinks.back()->finish();
  }
  for (std::uint32_t k = count; k-- > 0;) sinks[k]->commit();  // the first part, which a load starts from, last
  remove_stale_gguf_parts(prefix, count);
}

/// `write(named tensors, metadata, key types, block types, options)` of a Value: a GGUF load's metadata, key types
/// and block types from its attributes.
template <class Write>
void with_gguf_attributes(const Value& tensors, const SaveOptions& options, Write&& write) {
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
  write(named_tensors(tensors), metadata, hints, attribute("__ggml_types__"), adjusted);
}

}  // namespace detail

TENSORFILE_ENTRY void save_gguf(const NamedTensors& tensors, const std::filesystem::path& path,
                                const SaveOptions& options) {
  const Dict* hints = options.gguf.metadata_types.is_dict() ? &options.gguf.metadata_types.as_dict() : nullptr;
  detail::save_gguf_files(tensors, options.gguf.metadata, hints, nullptr, path, options);
}

TENSORFILE_ENTRY void save_gguf(const Value& tensors, const std::filesystem::path& path, const SaveOptions& options) {
  detail::with_gguf_attributes(
      tensors, options,
      [&](const NamedTensors& named, const Value& metadata, const Dict* hints, const Dict* types,
          const SaveOptions& adjusted) { detail::save_gguf_files(named, metadata, hints, types, path, adjusted); });
}

TENSORFILE_ENTRY std::vector<std::byte> save_gguf_to_bytes(const Value& tensors, const SaveOptions& options) {
  if (detail::gguf_split_asked(options)) {
    throw ArgumentError("SaveOptions::gguf.split_max_tensors and split_max_size write files; expected a path");
  }
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::with_gguf_attributes(
      tensors, options,
      [&](const NamedTensors& named, const Value& metadata, const Dict* hints, const Dict* types,
          const SaveOptions& adjusted) {
        const std::vector<detail::GgufOutTensor> tensors_out = detail::gguf_out_tensors(named, types, adjusted);
        detail::write_gguf_file(tensors_out, metadata, hints, std::nullopt, sink, adjusted.gguf.alignment);
      });
  return out;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_gguf_save)
