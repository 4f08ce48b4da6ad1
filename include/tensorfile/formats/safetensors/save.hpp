// SPDX-License-Identifier: MIT
/// @file
/// save_safetensors(): write named tensors as a .safetensors file with the reference writer's layout,
/// crash-safely (temporary file, fsync, rename) like save().
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/safetensors/metadata.hpp"

namespace tensorfile {

/// Saves named tensors (in any order; see `.safetensors.sort`) to `path` as a .safetensors file with the
/// reference writer's layout: 8-byte little-endian header length, the JSON header (`__metadata__`
/// first, then each tensor's dtype, shape and data_offsets) padded with spaces to a multiple of 8,
/// then every tensor's bytes contiguously (strided tensors are written in C order, device tensors
/// copied to the host first). Written beside `path` and renamed over it when complete (fsync'd unless
/// `.sync = false`). Throws ArgumentError for duplicate names, tensors that share memory (save clones
/// instead), meta tensors and text that is not UTF-8; DTypeError for dtypes the format lacks
/// (complex32, complex128, quantized); IoError. SaveOptions::format is ignored.
TENSORFILE_ENTRY void save_safetensors(const NamedTensors& tensors, const std::filesystem::path& path,
                                       const SaveOptions& options = {});

/// Saves to a stream.
TENSORFILE_ENTRY void save_safetensors(const NamedTensors& tensors, std::ostream& out, const SaveOptions& options = {});

/// Saves to a new byte vector.
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_safetensors_to_bytes(const NamedTensors& tensors,
                                                                                const SaveOptions& options = {});

/// Saves every tensor of `tensors` (a state dict, a load_safetensors() result...) under its
/// named_tensors() path, with the `__metadata__` a safetensors load kept unless `.safetensors.metadata` is given.
TENSORFILE_ENTRY void save_safetensors(const Value& tensors, const std::filesystem::path& path,
                                       const SaveOptions& options = {});

/// Saves a Value's tensors to a new byte vector (see the path overload).
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_safetensors_to_bytes(const Value& tensors,
                                                                                const SaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <span>
#include <unordered_set>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/text/json_writer.hpp"
#include "tensorfile/formats/safetensors/detail/dtypes.hpp"

namespace tensorfile {

namespace detail {

/// Appends `text` as the reference's JSON writer does (raw UTF-8, short escapes, other controls as
/// \u00xx); text that is not UTF-8 is refused, naming `what`.
inline void append_safetensors_string(std::string& out, std::string_view text, const std::string& what) {
  const std::size_t bad = append_json_string(out, text, JsonCharset::utf8, OnInvalidUtf8::stop);
  bool surrogate = false;
  for (std::size_t i = 0; bad == std::string_view::npos && i < text.size();) {
    const std::int32_t cp = decode_wtf8(text, i);
    surrogate = surrogate || (cp >= 0xD800 && cp < 0xE000);
  }
  if (bad != std::string_view::npos || surrogate) {
    throw ArgumentError(what + " is not valid UTF-8; expected text a safetensors header can hold");
  }
}

/// The byte extent [first, last) a tensor's elements reach in its storage's memory (empty: first == last).
inline std::pair<const std::byte*, const std::byte*> byte_extent(const Tensor& t) {
  if (t.numel() == 0) return {nullptr, nullptr};
  std::int64_t last = t.storage_offset();
  for (std::size_t d = 0; d < t.dim(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
  const std::byte* base = t.storage().data();
  const auto elem = static_cast<std::int64_t>(t.element_size());
  return {base + t.storage_offset() * elem, base + (last + 1) * elem};
}

/// Refuses tensors whose memory overlaps another's: the file would hold the bytes twice and the loaded
/// tensors would no longer share them.
inline void refuse_shared_tensors(const NamedTensors& tensors) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].second.numel() != 0 && tensors[i].second.device().is_cpu()) order.push_back(i);
  }
  const auto first = [&](std::size_t i) {
    return reinterpret_cast<std::uintptr_t>(byte_extent(tensors[i].second).first);
  };
  const auto last = [&](std::size_t i) {
    return reinterpret_cast<std::uintptr_t>(byte_extent(tensors[i].second).second);
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return first(a) < first(b); });
  for (std::size_t k = 1, reaching = order.empty() ? 0 : order[0]; k < order.size(); ++k) {
    const std::size_t here = order[k];
    if (first(here) < last(reaching) &&
        tensors[here].second.storage().shares_owner_with(tensors[reaching].second.storage())) {
      throw ArgumentError("tensors \"" + tensors[reaching].first + "\" and \"" + tensors[here].first +
                          "\" share memory; safetensors stores each tensor's bytes once per name, so save "
                          "clones (tensor.clone()) or drop the duplicate names");
    }
    if (last(here) > last(reaching)) reaching = here;
  }
}

/// Writes the whole file into `sink`. `metadata_kept`: the tensors came from a load that kept a `__metadata__`,
/// written back even when empty (`"__metadata__":{}` and none differ in the reference's metadata()).
inline void write_safetensors(const NamedTensors& tensors, ByteSink& sink, const SaveOptions& options,
                              bool metadata_kept = false) {
  struct Entry {
    const std::string* name;
    Tensor tensor;  // on the host
    const SafetensorsDType* dtype;
  };
  std::vector<Entry> entries;
  entries.reserve(tensors.size());
  std::unordered_set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw ArgumentError("tensor \"" + name + "\" is undefined; expected a tensor");
    const SafetensorsDType* dtype = find_safetensors_dtype(tensor.dtype());
    if (dtype == nullptr) {
      throw DTypeError("tensor \"" + name + "\" has dtype " + std::string(dtype_name(tensor.dtype())) +
                       ", which safetensors has no name for");
    }
    if (tensor.device().is_meta()) {
      throw ArgumentError("tensor \"" + name + "\" is a meta tensor; expected a tensor with data");
    }
    if (!names.insert(name).second) throw ArgumentError("tensor name \"" + name + "\" is given twice");
    entries.push_back({&name, tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu()), dtype});
  }
  refuse_shared_tensors(tensors);
  if (options.safetensors.sort) {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      if (a.dtype->rank != b.dtype->rank) return a.dtype->rank > b.dtype->rank;
      return *a.name < *b.name;
    });
  }

  std::string header = "{";
  if (!options.safetensors.metadata.empty() || metadata_kept) {
    header += "\"__metadata__\":{";
    for (std::size_t i = 0; i < options.safetensors.metadata.size(); ++i) {
      const auto& [key, value] = options.safetensors.metadata[i];
      if (i != 0) header += ',';
      append_safetensors_string(header, key, "metadata key \"" + key + "\"");
      header += ':';
      append_safetensors_string(header, value, "metadata value of \"" + key + "\"");
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (const Entry& entry : entries) {
    if (header.size() > 1) header += ',';
    append_safetensors_string(header, *entry.name, "tensor name \"" + *entry.name + "\"");
    header += ":{\"dtype\":\"";
    header += entry.dtype->name;
    header += "\",\"shape\":[";
    for (std::size_t d = 0; d < entry.tensor.dim(); ++d) {
      if (d != 0) header += ',';
      header += std::to_string(entry.tensor.sizes()[d]);
    }
    const std::uint64_t end = offset + entry.tensor.nbytes();
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += '}';
  if (options.safetensors.pad_header) header.resize((header.size() + 7) / 8 * 8, ' ');
  if (header.size() > 100'000'000) {
    throw ArgumentError("the header takes " + std::to_string(header.size()) +
                        " bytes; expected at most 100000000 (the format's limit)");
  }

  std::byte length[8];
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xFF);
  sink.write(length);
  sink.write(std::as_bytes(std::span(header)));
  for (const Entry& entry : entries) {
    if (entry.tensor.is_contiguous()) {
      if (entry.tensor.nbytes() != 0) sink.write_borrowed({entry.tensor.raw_data(), entry.tensor.nbytes()});
    } else {
      entry.tensor.for_each_byte_run([&](std::span<const std::byte> run) { sink.write(run); });
    }
  }
  sink.flush();  // before `entries` (device tensors' host copies) goes
}

/// Writes a Value's named tensors with the `__metadata__` it kept, unless `options` gives metadata.
inline void write_safetensors(const Value& tensors, ByteSink& sink, SaveOptions options) {
  const Dict* kept = options.safetensors.metadata.empty() ? safetensors_metadata(tensors) : nullptr;
  if (kept != nullptr) {
    for (const auto& [key, value] : *kept) {
      if (!key.is_string() || !value.is_string()) {
        throw ArgumentError("__metadata__ holds a value that is not a str; expected a dict of str to str");
      }
      options.safetensors.metadata.emplace_back(key.as_string(), value.as_string());
    }
  }
  write_safetensors(named_tensors(tensors), sink, options, kept != nullptr);
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_safetensors_save)
namespace tensorfile {

TENSORFILE_ENTRY void save_safetensors(const NamedTensors& tensors, const std::filesystem::path& path,
                                       const SaveOptions& options) {
  detail::AtomicFileSink sink(path, options.sync);
  detail::write_safetensors(tensors, sink, options);
  sink.commit();
}

TENSORFILE_ENTRY void save_safetensors(const NamedTensors& tensors, std::ostream& out, const SaveOptions& options) {
  detail::StreamSink sink(out);
  detail::write_safetensors(tensors, sink, options);
}

TENSORFILE_ENTRY std::vector<std::byte> save_safetensors_to_bytes(const NamedTensors& tensors,
                                                                  const SaveOptions& options) {
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::write_safetensors(tensors, sink, options);
  return out;
}

TENSORFILE_ENTRY void save_safetensors(const Value& tensors, const std::filesystem::path& path,
                                       const SaveOptions& options) {
  detail::AtomicFileSink sink(path, options.sync);
  detail::write_safetensors(tensors, sink, options);
  sink.commit();
}

TENSORFILE_ENTRY std::vector<std::byte> save_safetensors_to_bytes(const Value& tensors, const SaveOptions& options) {
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::write_safetensors(tensors, sink, options);
  return out;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_safetensors_save)
