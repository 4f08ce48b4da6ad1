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
/// tensors' bytes are read. Throws FormatError, UnsupportedError and LimitError as parse_gguf_header, IoError when
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

}  // namespace detail

}  // namespace tensorfile

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
  for (const GgufKeyInfo& key : header.keys) {
    std::string type = gguf_value_type_name(static_cast<std::uint32_t>(key.type));
    if (key.type == GgufValueType::array) {
      type += "[" + gguf_value_type_name(static_cast<std::uint32_t>(key.element_type)) + "]";
    }
    key_types.set(key.key, Value(std::move(type)));
  }
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
  const GgufHeader header = parse_gguf_header(bytes, file);
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

TENSORFILE_ENTRY Value load_gguf_file(const FileHandle& file, const std::filesystem::path& path,
                                      const LoadOptions& options) {
  try {
    const std::uint64_t size = file.size();
    if (options.mmap && !options.map_location.all_meta() && size != 0) {
      Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), *options.mmap));
      return load_gguf_bytes({mapping.data(), mapping.size_bytes()}, mapping, false, options, path);
    }
    const GgufHeader header = parse_gguf_header(
        [&](std::uint64_t offset, std::span<std::byte> out) { file.read_exact(offset, out); }, size, path);
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
