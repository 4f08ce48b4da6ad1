// SPDX-License-Identifier: MIT
/// @file
/// load_gguf(): read a GGUF file (llama.cpp's, ggml's) into an ordered name -> Tensor dict, on the heap, as views of
/// one mapping, or as meta tensors, with its metadata in the dict's attributes; dequantize() of what it loads.
///
/// Block-typed (quantized) tensors. tensorfile's DType is torch's list of element types, and the core (printing,
/// conversion, DLPack, every saver) switches over it; a ggml block type has no element size, so it is not made a
/// DType. A quantized tensor loads instead as what it is in the file: a uint8 tensor of its raw blocks, of shape
/// GgufTensorInfo::storage_shape() (torch order, the last extent the bytes of one row: ne[0] / block size * bytes
/// per block), zero-copy with `mmap` as any other tensor. What makes it a block type travels beside it: the dict's
/// attributes hold "__ggml_types__" (name -> ggml type name, every tensor), gguf_tensor_type() reads it back, and
/// dequantize(loaded, name) gives the float32 tensor of the shape in elements. The front door's CheckpointEntry
/// carries the same (`ggml_type`, the shape in elements) and refuses a buffer of a plain dtype for such a tensor.
/// Plain types (F32, F16, BF16, F64, I8-I64) load as tensors of their dtype. Shapes are torch's order, GGUF's dims
/// reversed (ne[0], the contiguous one, last), as llama.cpp's gguf-py gives numpy shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string_view>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"
#include "tensorfile/formats/gguf/header.hpp"
#include "tensorfile/formats/options.hpp"

namespace tensorfile {

/// Loads a GGUF file as an OrderedDict of name -> Tensor in the order of its tensor infos, with attributes
/// {"__metadata__": every key-value pair as parse_gguf_header reads it, "__metadata_types__": key -> its stored type
/// ("uint32", "array[string]"), "__ggml_types__": name -> ggml type name}.
/// The header is validated whole before any data is read (see parse_gguf_header). Data goes to one heap buffer the
/// tensors share (read by `threads`; a tensor not aligned to its element size, possible only with a
/// `general.alignment` below 8, gets its own copy), or with `.mmap` tensors are zero-copy views of one mapping of
/// the file. Block-typed tensors are uint8 tensors of their raw blocks (see the file comment). `.map_location` =
/// "meta" reads the header only; a device copies each tensor through Tensor::to. With `select`, only the kept
/// tensors' bytes are read. The header is parsed with the limits of `.gguf` (LoadOptions::Gguf). One file alone: a
/// part of a llama.cpp split model gives its own tensors (load() and open() give the whole model, see state_dict.hpp).
/// Throws FormatError, UnsupportedError and LimitError as parse_gguf_header, IoError when
/// the file cannot be read, DeviceError when map_location names a missing device; `into` and `slice` are refused
/// (ArgumentError: open() and load() fill and slice).
[[nodiscard]] TENSORFILE_ENTRY Value load_gguf(const std::filesystem::path& path, const LoadOptions& options = {});

/// Loads from bytes in memory: tensors are copied to the heap, or with `.mmap` set (any mode) are zero-copy
/// read-only views into `bytes` (the caller keeps them alive as long as the tensors).
[[nodiscard]] TENSORFILE_ENTRY Value load_gguf(std::span<const std::byte> bytes, const LoadOptions& options = {});

/// Loads from a stream, read to its end into one heap buffer the tensors then share.
[[nodiscard]] TENSORFILE_ENTRY Value load_gguf(std::istream& in, const LoadOptions& options = {});

/// The ggml type of tensor `name` in what load_gguf() (or load()/open() of a GGUF source) returned: read from the
/// dict's "__ggml_types__" attribute; nullopt when `loaded` has no such attribute or no entry for `name`.
[[nodiscard]] TENSORFILE_ENTRY std::optional<GgmlType> gguf_tensor_type(const Value& loaded, std::string_view name);

/// A new float32 heap tensor of `raw`'s elements decoded as `type`: for a block type, `raw` is a uint8 tensor of its
/// raw blocks as load_gguf gives it (its last extent whole blocks), and the result's last extent is that many
/// blocks' elements; for f32, f16 and bf16, `raw` is of that dtype and the result has its shape. Throws ArgumentError
/// for a tensor of another dtype or not on the host, or a last extent that is not whole blocks; UnsupportedError for
/// a type dequantize() does not read (see can_dequantize).
[[nodiscard]] TENSORFILE_ENTRY Tensor dequantize(const Tensor& raw, GgmlType type);

/// dequantize() of tensor `name` of a GGUF load (its type from gguf_tensor_type). Throws ArgumentError when `loaded`
/// has no tensor `name` or no ggml type for it; what dequantize(raw, type) throws.
[[nodiscard]] TENSORFILE_ENTRY Tensor dequantize(const Value& loaded, std::string_view name);

namespace detail {

class FileHandle;  // detail/posix/file.hpp: a declaration takes one by reference

/// load_gguf(path) of a file already open for reading (read-write for MapMode::shared); `path` names it.
[[nodiscard]] TENSORFILE_ENTRY Value load_gguf_file(const FileHandle& file, const std::filesystem::path& path,
                                                    const LoadOptions& options);

/// The meta tree of a validated header (every tensor a meta tensor), its metadata and types in the attributes:
/// what open() lists before any data is read.
TENSORFILE_ENTRY Value gguf_meta_dict(const GgufHeader& header);

/// The header of the open GGUF file `file`, validated whole with `limits` (parse_gguf_header), read with pread; a file
/// of another format tensorfile reads is a FormatError naming it and its loader.
[[nodiscard]] TENSORFILE_ENTRY GgufHeader read_gguf_file_header(const FileHandle& file,
                                                                const std::filesystem::path& path,
                                                                const GgufLimits& limits);

/// The ordered name -> Tensor dict of a validated header as load_gguf builds it, tensor i on `storage_of(i)` (asked
/// only for the tensors `select` keeps; the others are meta, or with `select_drops` left out).
[[nodiscard]] TENSORFILE_ENTRY Value gguf_dict(const GgufHeader& header, const TensorSelect& select, bool select_drops,
                                               const std::function<Storage(std::size_t)>& storage_of);

}  // namespace detail

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers of split models, which state_dict.hpp and checkpoint.hpp read with
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"

// llama.cpp's split models through the shard machinery (state_dict.hpp's layout, checkpoint.hpp's shards): the parts
// found from the name of any one, each checked against its name and the set, and one model's attributes made of them.
namespace tensorfile::detail {

/// The paths of every part of the split model whose part `file` (its split keys `split`, is_split()) is, in order.
/// Throws FormatError naming `file` when its name is not llama.cpp's split name, or disagrees with its keys.
[[nodiscard]] inline std::vector<std::filesystem::path> gguf_split_parts(const std::filesystem::path& file,
                                                                         const GgufSplit& split) {
  const std::string leaf = file.filename().string();
  const std::optional<GgufSplitName> name = parse_gguf_split_name(leaf);
  const std::string expected = gguf_split_file_name("<prefix>", split.no, split.count);
  if (!name) {
    throw FormatError("the file is part " + std::to_string(split.no + 1) + " of a split model of " +
                          std::to_string(split.count) + " files (its split.no and split.count), but its name is not " +
                          "llama.cpp's split name, by which the other parts are found; expected " + expected,
                      {.file = file});
  }
  if (name->count != split.count) {
    throw FormatError("the file's name says " + std::to_string(name->count) + " parts, its split.count " +
                          std::to_string(split.count) + "; expected the same count",
                      {.file = file, .member = std::string(gguf_split_count_key)});
  }
  if (name->no != split.no) {
    throw FormatError("the file's name makes it part " + std::to_string(name->no + 1) + ", its split.no part " +
                          std::to_string(split.no + 1) + " (split.no " + std::to_string(split.no) +
                          "); expected the part its name says",
                      {.file = file, .member = std::string(gguf_split_no_key)});
  }
  std::vector<std::filesystem::path> parts;
  parts.reserve(split.count);
  const std::filesystem::path directory = file.parent_path();
  for (std::uint32_t k = 0; k < split.count; ++k) {
    parts.push_back(directory / gguf_split_file_name(name->prefix, k, split.count));
  }
  return parts;
}

/// Checks part `k` of `parts` (split keys `split`) against the set: the same split.count, split.no k. Throws
/// FormatError naming the part.
inline void check_gguf_split_part(const GgufSplit& split, std::uint32_t k,
                                  const std::vector<std::filesystem::path>& parts) {
  const auto count = static_cast<std::uint32_t>(parts.size());
  if (split.count != count) {
    throw FormatError("split.count is " + std::to_string(split.count) + (split.count == 0 ? " (absent)" : "") +
                          "; expected " + std::to_string(count) + ", as in " + parts.front().filename().string() +
                          " and the file's name",
                      {.file = parts[k], .member = std::string(gguf_split_count_key)});
  }
  if (split.no != k) {
    throw FormatError(
        "split.no is " + std::to_string(split.no) + "; expected " + std::to_string(k) + ", the part its file name says",
        {.file = parts[k], .member = std::string(gguf_split_no_key)});
  }
}

/// Collects the tensor names of the parts of a split model: add(k, name) for each part's tensors in order; a name in
/// two parts is a FormatError naming the part and the tensor. finish(first) checks the first part's
/// split.tensors.count against the names counted.
class GgufSplitNames {
 public:
  explicit GgufSplitNames(const std::vector<std::filesystem::path>& parts) : parts_(parts) {}
  void add(std::size_t k, const std::string& name) {
    const auto [it, fresh] = part_of_.emplace(name, k);
    if (!fresh) {
      throw FormatError("tensor \"" + name + "\" is in two parts of the split model: " +
                            parts_[it->second].filename().string() + " and this one; expected each tensor in one",
                        {.file = parts_[k], .member = name});
    }
  }
  void finish(const GgufSplit& first) const {
    if (first.tensors >= 0 && static_cast<std::uint64_t>(first.tensors) != part_of_.size()) {
      throw FormatError("split.tensors.count is " + std::to_string(first.tensors) + "; expected " +
                            std::to_string(part_of_.size()) + ", the tensors of the " + std::to_string(parts_.size()) +
                            " parts",
                        {.file = parts_.front(), .member = std::string(gguf_split_tensors_key)});
    }
  }

 private:
  const std::vector<std::filesystem::path>& parts_;
  std::unordered_map<std::string, std::size_t, KeyedStringHash, std::equal_to<>> part_of_;
};

/// Whether `key` is one of the split.* keys, which describe the files of a split model rather than the model.
[[nodiscard]] inline bool is_gguf_split_key(std::string_view key) noexcept {
  return key == gguf_split_no_key || key == gguf_split_count_key || key == gguf_split_tensors_key;
}

/// `metadata` (a GGUF header's dict) without its split.* keys: the model's metadata.
[[nodiscard]] inline Value gguf_model_metadata(const Value& metadata) {
  if (!metadata.is_dict()) return metadata;
  Dict out;
  for (const auto& [key, value] : metadata.as_dict()) {
    if (!key.is_string() || !is_gguf_split_key(key.as_string())) out.set(key, value);
  }
  return Value(std::move(out));
}

/// The attributes of a split model loaded whole, from its parts' loads (None for a part not loaded): the first part's
/// __metadata__ and __metadata_types__ without split.* keys, and every loaded part's __ggml_types__.
[[nodiscard]] inline Value gguf_split_attributes(const std::vector<Value>& parts) {
  Dict types;
  Value metadata{Dict{}};
  Value metadata_types{Dict{}};
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].is_dict() || !parts[k].as_dict().attributes().is_dict()) continue;
    const Dict& attributes = parts[k].as_dict().attributes().as_dict();
    if (k == 0) {
      if (const Value* m = attributes.find("__metadata__")) metadata = gguf_model_metadata(*m);
      if (const Value* t = attributes.find("__metadata_types__")) metadata_types = gguf_model_metadata(*t);
    }
    if (const Value* g = attributes.find("__ggml_types__"); g != nullptr && g->is_dict()) {
      for (const auto& [name, type] : g->as_dict()) types.set(name, type);
    }
  }
  Dict attributes;
  attributes.set("__metadata__", std::move(metadata));
  attributes.set("__metadata_types__", std::move(metadata_types));
  attributes.set("__ggml_types__", Value(std::move(types)));
  return Value(std::move(attributes));
}

}  // namespace tensorfile::detail
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_gguf_load)
#include <cstring>
#include <istream>
#include <string>
#include <vector>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/heap_reads.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/detail/stream_input.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/gguf/dequantize.hpp"
#include "tensorfile/formats/map_location.hpp"

namespace tensorfile {

namespace detail {

/// The dtype a GGUF tensor loads as: its plain type's, else uint8 (raw blocks).
[[nodiscard]] inline DType gguf_load_dtype(const GgufTensorInfo& info) {
  return ggml_type_info(info.type).dtype.value_or(DType::UInt8);
}

/// The dict's attributes: the metadata and every tensor's ggml type name.
[[nodiscard]] inline Value gguf_attributes(const GgufHeader& header) {
  Dict types;
  ValueAccess::reserve_more(types, header.tensors.size());
  for (const GgufTensorInfo& info : header.tensors) types.set(info.name, Value(std::string(ggml_type_name(info.type))));
  Dict key_types;  // what save_gguf writes each key back as
  ValueAccess::reserve_more(key_types, header.keys.size());
  for (const GgufKeyInfo& key : header.keys) key_types.set(key.key, Value(key.type_name));
  Dict attributes;
  attributes.set("__metadata__", header.metadata);
  attributes.set("__metadata_types__", Value(std::move(key_types)));
  attributes.set("__ggml_types__", Value(std::move(types)));
  return Value(std::move(attributes));
}

/// The ordered name -> Tensor dict of a validated header, tensor i on `storage_of(i) -> Storage` (asked only for the
/// tensors `select` keeps; the others are meta, or with `select_drops` left out).
template <class StorageOf>
Value build_gguf_dict(const GgufHeader& header, const TensorSelect& select, bool select_drops, StorageOf&& storage_of) {
  Dict dict;
  dict.ordered = true;
  ValueAccess::reserve_more(dict, header.tensors.size());
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const GgufTensorInfo& info = header.tensors[i];
    const bool kept = !select || select(info.name);
    if (!kept && select_drops) continue;
    Storage storage = kept ? storage_of(i) : meta_storage(static_cast<std::size_t>(info.bytes));
    dict.set(info.name, Tensor(std::move(storage), gguf_load_dtype(info), info.storage_shape()));
  }
  dict.set_attributes(gguf_attributes(header));
  return Value(std::move(dict));
}

TENSORFILE_ENTRY Value gguf_dict(const GgufHeader& header, const TensorSelect& select, bool select_drops,
                                 const std::function<Storage(std::size_t)>& storage_of) {
  return build_gguf_dict(header, select, select_drops, storage_of);
}

TENSORFILE_ENTRY Value gguf_meta_dict(const GgufHeader& header) {
  return build_gguf_dict(header, {}, false, [&](std::size_t i) {
    return meta_storage(static_cast<std::size_t>(header.tensors[i].bytes));
  });
}

/// The dict with every kept tensor placed by map_location, its host bytes from `read(info) -> Storage`.
template <class ReadTensor>
Value place_gguf_dict(const GgufHeader& header, const LoadOptions& options, const std::filesystem::path& file,
                      ReadTensor&& read) {
  return build_gguf_dict(header, options.select, options.select_drops, [&](std::size_t i) {
    const GgufTensorInfo& info = header.tensors[i];
    return place_storage(
        options.map_location, static_cast<std::size_t>(info.bytes), "cpu", [&] { return read(info); },
        [&] {
          return ErrorLocation{file, info.name, header.data_offset + info.offset};
        });
  });
}

/// The bytes of the data section the tensors use: from its start to the end of the last tensor.
[[nodiscard]] inline std::uint64_t gguf_data_span(const GgufHeader& header) {
  std::uint64_t end = 0;
  for (const GgufTensorInfo& info : header.tensors) end = std::max(end, info.offset + info.bytes);  // checked
  return end;
}

/// The dict whose tensors are slices of `data` (the data section's first gguf_data_span bytes); with
/// `copy_misaligned`, a tensor whose address is not a multiple of its element size gets a heap copy.
inline Value gguf_dict_over(const GgufHeader& header, const Storage& data, bool copy_misaligned,
                            const LoadOptions& options, const std::filesystem::path& file) {
  return place_gguf_dict(header, options, file, [&](const GgufTensorInfo& info) -> Storage {
    const auto bytes = static_cast<std::size_t>(info.bytes);
    Storage slice = data.slice(static_cast<std::size_t>(info.offset), bytes);
    const auto address = reinterpret_cast<std::uintptr_t>(slice.data());
    if (!copy_misaligned || bytes == 0 || address % element_size(gguf_load_dtype(info)) == 0) return slice;
    Storage aligned = heap_storage(bytes, false);
    std::memcpy(aligned.mutable_data(), slice.data(), bytes);
    return aligned;
  });
}

/// The dict whose kept tensors are each read alone into the heap by `read_at(offset in the file, out)`.
template <class ReadAt>
Value read_selected_gguf(const GgufHeader& header, const LoadOptions& options, const std::filesystem::path& file,
                         ReadAt&& read_at) {
  return place_gguf_dict(header, options, file, [&](const GgufTensorInfo& info) {
    Storage bytes = heap_storage(static_cast<std::size_t>(info.bytes), false);
    if (bytes.size_bytes() != 0) read_at(header.data_offset + info.offset, {bytes.mutable_data(), bytes.size_bytes()});
    return bytes;
  });
}

/// The one reader of in-memory input: `bytes` is the whole file; `views`, when defined, owns it (tensors view it).
inline Value load_gguf_bytes(std::span<const std::byte> bytes, const Storage& views, bool copy_misaligned,
                             const LoadOptions& options, const std::filesystem::path& file) {
  const GgufHeader header = parse_gguf_header(bytes, file, options.gguf);
  const auto span = static_cast<std::size_t>(gguf_data_span(header));
  const auto offset = static_cast<std::size_t>(header.data_offset);
  if (options.map_location.all_meta()) return gguf_dict_over(header, Storage(), false, options, file);
  if (views.defined()) return gguf_dict_over(header, views.slice(offset, span), copy_misaligned, options, file);
  if (options.select) {
    return read_selected_gguf(header, options, file, [&](std::uint64_t at, std::span<std::byte> out) {
      std::memcpy(out.data(), bytes.data() + at, out.size());
    });
  }
  Storage data = heap_storage(span, false, false, options.huge_pages);
  if (span != 0) std::memcpy(data.mutable_data(), bytes.data() + offset, span);
  return gguf_dict_over(header, data, true, options, file);
}

TENSORFILE_ENTRY GgufHeader read_gguf_file_header(const FileHandle& file, const std::filesystem::path& path,
                                                  const GgufLimits& limits) {
  try {
    return parse_gguf_header([&](std::uint64_t offset, std::span<std::byte> out) { file.read_exact(offset, out); },
                             file.size(), path, limits);
  } catch (const FormatError&) {
    rethrow_naming_format(file, path, FileFormat::gguf, "the GGUF magic, a header and tensor infos");
  }
}

TENSORFILE_ENTRY Value load_gguf_file(const FileHandle& file, const std::filesystem::path& path,
                                      const LoadOptions& options) {
  try {
    const std::uint64_t size = file.size();
    if (options.mmap && !options.map_location.all_meta() && size != 0) {
      Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), *options.mmap));
      return load_gguf_bytes({mapping.data(), mapping.size_bytes()}, mapping, false, options, path);
    }
    const GgufHeader header = read_gguf_file_header(file, path, options.gguf);
    if (options.map_location.all_meta()) return gguf_dict_over(header, Storage(), false, options, path);
    if (options.select) {
      return read_selected_gguf(header, options, path,
                                [&](std::uint64_t at, std::span<std::byte> out) { file.read_exact(at, out); });
    }
    const Storage data = read_to_heap(file, header.data_offset, static_cast<std::size_t>(gguf_data_span(header)),
                                      options.threads, options.direct_reads, 8, options.huge_pages);
    return gguf_dict_over(header, data, true, options, path);
  } catch (const FormatError&) {
    rethrow_naming_format(file, path, FileFormat::gguf, "the GGUF magic, a header and tensor infos");
  }
}

}  // namespace detail

TENSORFILE_ENTRY Value load_gguf(const std::filesystem::path& path, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_gguf()", path);
  detail::refuse_slice_rule(options, "load_gguf()", path);
  const bool shared = options.mmap == MapMode::shared;
  return detail::load_gguf_file(
      detail::FileHandle::open(path, shared ? detail::OpenMode::read_write : detail::OpenMode::read), path, options);
}

TENSORFILE_ENTRY Value load_gguf(std::span<const std::byte> bytes, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_gguf()");
  detail::refuse_slice_rule(options, "load_gguf()");
  return detail::load_gguf_bytes(bytes, options.mmap ? Storage(BorrowedBackend(bytes)) : Storage(), false, options, {});
}

TENSORFILE_ENTRY Value load_gguf(std::istream& in, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_gguf()");
  detail::refuse_slice_rule(options, "load_gguf()");
  const Storage whole = detail::read_stream_to_heap(in);
  return detail::load_gguf_bytes({whole.data(), whole.size_bytes()}, whole, true, options, {});
}

TENSORFILE_ENTRY std::optional<GgmlType> gguf_tensor_type(const Value& loaded, std::string_view name) {
  if (!loaded.is_dict() || !loaded.as_dict().attributes().is_dict()) return std::nullopt;
  const Value* types = loaded.as_dict().attributes().as_dict().find("__ggml_types__");
  if (types == nullptr || !types->is_dict()) return std::nullopt;
  const Value* type = types->as_dict().find(name);
  if (type == nullptr || !type->is_string()) return std::nullopt;
  for (const GgmlTypeInfo& info : ggml_types()) {
    if (info.name == type->as_string()) return info.type;
  }
  return std::nullopt;
}

TENSORFILE_ENTRY Tensor dequantize(const Tensor& raw, GgmlType type) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  const std::string name(info.name);
  const DType expected = info.dtype.value_or(DType::UInt8);
  if (!raw.defined() || raw.dtype() != expected) {
    throw ArgumentError("dequantize of " + name + " takes a " + std::string(dtype_name(expected)) + " tensor" +
                        (info.is_quantized() ? " of its raw blocks" : "") + "; got " +
                        (raw.defined() ? std::string(dtype_name(raw.dtype())) : std::string("an undefined tensor")));
  }
  if (!raw.device().is_cpu()) {
    throw ArgumentError("dequantize reads host tensors; got one on " + raw.device().str());
  }
  Shape shape = raw.sizes();
  if (info.is_quantized()) {
    if (shape.empty() || shape.back() % info.block_bytes != 0) {
      throw ArgumentError("dequantize of " + name + " takes rows of whole " + std::to_string(info.block_bytes) +
                          "-byte blocks; got a tensor of shape " + detail::shape_string(shape));
    }
    shape.back() = shape.back() / info.block_bytes * info.block_size;
  }
  const Tensor bytes = raw.contiguous();
  std::size_t elements = 1;
  for (const std::int64_t extent : shape) elements *= static_cast<std::size_t>(extent);
  Tensor out(heap_storage(elements * sizeof(float), false), DType::Float32, shape);
  const std::span<const std::byte> in(bytes.raw_data(), bytes.nbytes());
  dequantize(type, in,
             std::span<float>(reinterpret_cast<float*>(out.mutable_raw_data()), static_cast<std::size_t>(out.numel())));
  return out;
}

TENSORFILE_ENTRY Tensor dequantize(const Value& loaded, std::string_view name) {
  const Value* tensor = loaded.is_dict() ? loaded.as_dict().find(name) : nullptr;
  if (tensor == nullptr || !tensor->is_tensor()) {
    throw ArgumentError("the load holds no tensor \"" + std::string(name) + "\"; expected a name of a GGUF load");
  }
  const std::optional<GgmlType> type = gguf_tensor_type(loaded, name);
  if (!type) {
    throw ArgumentError("the load names no ggml type for \"" + std::string(name) +
                        "\"; expected the result of a GGUF load (its __ggml_types__ attribute)");
  }
  return dequantize(tensor->as_tensor(), *type);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_gguf_load)
