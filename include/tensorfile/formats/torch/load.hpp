// SPDX-License-Identifier: MIT
/// @file
/// load_torch(): read a torch.save file (zip or legacy format) into a Value, safely, with map_location and mmap.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <span>
#include <string>

#include "tensorfile/config.hpp"
#include "tensorfile/core/device.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/options.hpp"

namespace tensorfile {

/// Loads a torch.save file (zip or legacy format) as torch.load does, without running any code:
/// only tensors, containers and plain values are built (strict mode). Storages are read into heap
/// memory (a zip file's stored records into one arena they share, neighbours gathered into one preadv
/// each; legacy files whole into one buffer), or with `.mmap` set become views into one mapping
/// of the file in that MapMode. With `threads` of 2 or more, a full heap load reads the zip's
/// local headers on other threads while the pickle runs, and copies the small records that lie among
/// them from what it read there.
/// A heap load maps nothing: a file truncated meanwhile gives FormatError or IoError. A mapped load
/// of a file that another process truncates can die of SIGBUS (as any mapping can).
/// `select`: in zip files the records of unselected tensors are not read (those stored uncompressed,
/// little-endian and bound for the host: all that torch.save writes); a legacy file is one stream read whole, so
/// there it saves the copies only. A storage that a selected tensor shares is read whole. `into`: read straight
/// into the buffer where the tensor is a whole stored record (every tensor of a torch.save state dict, in heap
/// loads of zip files and cuda::load_torch's streamed records); the result holds a tensor over the buffer at that
/// path (for a view of a larger storage: its own copy). Paths named in `into` are read even when `select` leaves
/// them out.
/// Throws FormatError for corrupt or hostile input, UnsupportedError for valid constructs tensorfile
/// does not read, IoError when the file cannot be read, DeviceError when map_location names a missing device.
[[nodiscard]] TENSORFILE_ENTRY Value load_torch(const std::filesystem::path& path, const LoadOptions& options = {});

/// Loads from bytes in memory. Storages are copied to the heap, or with `.mmap` set (any mode) are
/// zero-copy views into `bytes` (read-only; the caller keeps the bytes alive as long as the tensors).
[[nodiscard]] TENSORFILE_ENTRY Value load_torch(std::span<const std::byte> bytes, const LoadOptions& options = {});

/// Loads from a stream, read to its end into one heap buffer that the loaded storages then share.
[[nodiscard]] TENSORFILE_ENTRY Value load_torch(std::istream& in, const LoadOptions& options = {});

namespace detail {
class FileHandle;  // detail/posix/file.hpp: a declaration takes one by reference

// Used outside this header's definitions: by load_state_dict and by <tensorfile/cuda.hpp>'s streamed loads.

/// load_torch(path) of a file already open for reading (read-write for MapMode::shared); `path` names it in
/// messages. load_state_dict opens shards below their directory and comes here.
TENSORFILE_ENTRY Value load_torch_file(const FileHandle& file, const std::filesystem::path& path,
                                       const LoadOptions& options);
/// load_torch of a file of `size` bytes read by ranges through `read_at` (thread-safe: a RangeReader's), named
/// `name` in messages. A zip file costs its end records, directory, local headers and pickle, then the records the
/// load keeps (each one read, on up to `threads` threads); a legacy file is an ArgumentError (read it whole).
[[nodiscard]] TENSORFILE_ENTRY Value
load_torch_ranged(const std::function<void(std::uint64_t offset, std::span<std::byte> out)>& read_at,
                  std::uint64_t size, const std::string& name, const LoadOptions& options);
/// load_torch of `whole`, a heap buffer of a file's bytes that no one else reads or writes (a reader read whole for one
/// load()): its stored records become slices of it that the tensors share, as a stream's do, rather than copies.
[[nodiscard]] TENSORFILE_ENTRY Value load_torch_owned(const Storage& whole, const LoadOptions& options);
/// Whether `t` is the whole of its storage in C order: a buffer of its bytes can then stand for the storage.
[[nodiscard]] TENSORFILE_ENTRY bool whole_storage(const Tensor& t) noexcept;
/// The caller's bytes of an `into` tensor, as a storage.
[[nodiscard]] TENSORFILE_ENTRY Storage buffer_of(const Tensor& t);
/// Why `buffer` cannot take the values of the file's tensor `t` once loaded to `device` (LoadOptions::into); empty
/// when it can.
[[nodiscard]] TENSORFILE_ENTRY std::string into_mismatch(const Tensor& t, Device device, const Tensor& buffer);
/// Throws the ArgumentError of an `into` buffer that cannot be filled, naming its path and the file.
[[noreturn]] TENSORFILE_ENTRY void refuse_into(const std::string& path, const std::string& why,
                                               const std::filesystem::path& file);
/// The tensors of `v` at the paths `options.into` names (those it holds), by path.
[[nodiscard]] TENSORFILE_ENTRY std::map<std::string, Tensor, std::less<>> into_tensors(const Value& v,
                                                                                       const LoadOptions& options);

}  // namespace detail

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_torch_load)
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <istream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/bytes/byte_order.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/posix/direct_reads.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/posix/parallel_reads.hpp"
#include "tensorfile/detail/posix/populate.hpp"
#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile/formats/detail/heap_reads.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/detail/stream_input.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/torch/archive.hpp"
#include "tensorfile/formats/torch/detail/pickle_machine.hpp"
#include "tensorfile/formats/torch/detail/torch_hooks.hpp"

namespace tensorfile {

namespace detail {

/// The bytes of a whole torch file and the ways storage bytes may be taken from it.
struct TorchArchive {
  std::filesystem::path path;        ///< for messages; empty for memory input
  std::span<const std::byte> bytes;  ///< the whole file (with `pread_only`, its first bytes only)
  Storage views;                     ///< when set, storages are zero-copy slices of it
  const FileHandle* file = nullptr;  ///< otherwise, pread from here (path input) ...
  ZipReader::ReadAt read_at;         ///< ... or read by ranges from here (a RangeReader) ...
                                     ///< ... or copy from `bytes` (memory input)
  bool pread_only = false;           ///< a zip file reached through `file` or `read_at` alone: nothing is mapped
  std::uint64_t size = 0;            ///< with `pread_only`, the file's size when opened

  /// Whether bytes past `bytes` can be read: through `file` or `read_at`.
  [[nodiscard]] bool positional() const noexcept { return file != nullptr || static_cast<bool>(read_at); }
  /// Reads exactly `out.size()` bytes at `offset` through `file` or `read_at`.
  void read_exact(std::uint64_t offset, std::span<std::byte> out) const {
    if (file != nullptr) return file->read_exact(offset, out);
    read_at(offset, out);
  }
};

/// The stored records of a zip file read with pread while the pickle runs (those not deferred into the arena:
/// bound for another device or a map_location function), grouped into batches of neighbours that are read
/// once each: a file of many tiny tensors costs a read and a buffer per batch, not one per tensor.
/// Storages are slices of their batch's buffer, as they are of the one buffer of a small file.
class RecordBatches {
 public:
  /// Records larger than this get a read and a buffer of their own.
  static constexpr std::uint64_t small_record = std::uint64_t{64} << 10;
  /// Most bytes one batch spans.
  static constexpr std::uint64_t batch_span = std::uint64_t{1} << 20;

  RecordBatches(const std::vector<ZipEntry>& entries, const TorchArchive& archive)
      : entries_(&entries), archive_(&archive), batch_of_(entries.size(), unbatched) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].method == 0 && entries[i].size != 0 && entries[i].size <= small_record) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return entries[a].data_offset < entries[b].data_offset; });
    for (const std::size_t i : order) {
      const std::uint64_t begin = entries[i].data_offset;
      const std::uint64_t end = begin + entries[i].size;
      if (batches_.empty() || end - batches_.back().begin > batch_span) batches_.push_back({begin, end, {}});
      batches_.back().end = std::max(batches_.back().end, end);
      batch_of_[i] = batches_.size() - 1;
    }
  }

  /// The bytes of `entry` (one of the entries given) as a slice of its batch, read on first use;
  /// nullopt for a record that is not batched. Throws what TorchArchive::read_exact throws.
  [[nodiscard]] std::optional<Storage> slice(const ZipEntry& entry) {
    const auto index = static_cast<std::size_t>(&entry - entries_->data());
    if (batch_of_[index] == unbatched) return std::nullopt;
    Batch& batch = batches_[batch_of_[index]];
    if (!batch.bytes.defined()) {
      Storage bytes = heap_storage(static_cast<std::size_t>(batch.end - batch.begin), false);
      archive_->read_exact(batch.begin, {bytes.mutable_data(), bytes.size_bytes()});
      batch.bytes = std::move(bytes);
    }
    return batch.bytes.slice(static_cast<std::size_t>(entry.data_offset - batch.begin),
                             static_cast<std::size_t>(entry.size));
  }

 private:
  static constexpr std::size_t unbatched = SIZE_MAX;
  struct Batch {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    Storage bytes;
  };
  const std::vector<ZipEntry>* entries_;
  const TorchArchive* archive_;
  std::vector<std::size_t> batch_of_;  // per entry: its batch, or unbatched
  std::vector<Batch> batches_;
};

template <class Where>
std::int64_t checked_record_bytes(std::int64_t numel, DType dtype, Where&& where) {
  const auto bytes = checked_mul(numel, static_cast<std::int64_t>(element_size(dtype)));
  if (!bytes) {
    throw FormatError("storage of " + std::to_string(numel) + " " + std::string(dtype_name(dtype)) +
                          " elements overflows int64 bytes",
                      where());
  }
  return *bytes;
}

inline PickleLimits pickle_limits(const LoadOptions& options) {
  PickleLimits limits;
  limits.max_depth = options.limits.max_depth;
  limits.max_memo = options.limits.max_memo;
  limits.max_container = options.limits.max_container;
  limits.max_tree_size = options.limits.max_tree_size;
  limits.max_copied_text = options.limits.max_copied_text;
  return limits;
}

/// Storages by first byte, and what takes their place.
using StorageReplacements = std::unordered_map<const std::byte*, Storage>;

/// Calls `fn` with each tensor or storage Value inside the dict keys and set items of `v` (nearly always none).
template <class Fn>
void for_key_tensors(const Value& v, bool in_key, Fn& fn, std::size_t depth = 0) {
  if (depth > 100000) return;
  switch (v.kind()) {
    case Value::Kind::tensor:
    case Value::Kind::storage:
      if (in_key) fn(v);
      return;
    case Value::Kind::list:
    case Value::Kind::tuple:
      for (const Value& item : v.elements()) for_key_tensors(item, in_key, fn, depth + 1);
      return;
    case Value::Kind::dict:
      for (const auto& [key, item] : v.as_dict()) {
        for_key_tensors(key, true, fn, depth + 1);
        for_key_tensors(item, in_key, fn, depth + 1);
      }
      return;
    case Value::Kind::set:
      for (const Value& item : v.as_set().items) for_key_tensors(item, true, fn, depth + 1);
      return;
    case Value::Kind::object:
      for_key_tensors(v.as_object().args, in_key, fn, depth + 1);
      for_key_tensors(v.as_object().state, in_key, fn, depth + 1);
      return;
    default: return;
  }
}

template <class Replacement>
void replace_storages(Value& v, const Replacement& replacement, const std::unordered_set<const void*>& keys,
                      std::size_t depth) {
  const auto moved = [&](const Tensor& t) -> std::optional<Tensor> {
    const Storage* placed = replacement(t.storage());
    if (placed == nullptr) return std::nullopt;
    return Tensor(*placed, t.dtype(), t.sizes(), t.strides(), t.storage_offset(), t.requires_grad());
  };
  if (depth > 100000) return;
  switch (v.kind()) {
    case Value::Kind::tensor:
      if (auto t = moved(v.as_tensor())) {
        if (keys.contains(v.identity())) {  // also a key somewhere: a new tensor here, the key left as it is
          v = v.is_parameter() ? Value::parameter(*std::move(t)) : Value(*std::move(t));
        } else {
          ValueAccess::tensor(v) = *std::move(t);
        }
      }
      return;
    case Value::Kind::storage:
      if (auto t = moved(v.as_storage().tensor)) v = Value(StorageValue{*t, v.as_storage().location});
      return;
    case Value::Kind::list:
      for (auto& item : ValueAccess::list_items(v)) replace_storages(item, replacement, keys, depth + 1);
      return;
    case Value::Kind::tuple: {
      std::vector<Value> items(v.as_tuple().begin(), v.as_tuple().end());
      for (auto& item : items) replace_storages(item, replacement, keys, depth + 1);
      v = Value::tuple(List(std::move(items)));
      return;
    }
    case Value::Kind::dict: {
      for (auto& item : ValueAccess::items(ValueAccess::dict(v))) {
        replace_storages(item.second, replacement, keys, depth + 1);
      }
      return;
    }
    case Value::Kind::set:
      for (auto& item : ValueAccess::set_items(v)) replace_storages(item, replacement, keys, depth + 1);
      return;
    case Value::Kind::object:
      replace_storages(ValueAccess::object(v).args, replacement, keys, depth + 1);
      replace_storages(ValueAccess::object(v).state, replacement, keys, depth + 1);
      return;
    default: return;
  }
}

/// Points the tensors in `v` whose storage `replacement` answers (a Storage*, or null to keep it) at that storage
/// instead: legacy loads place storages after the pickle has used them, `select` drops them, `into` redirects them.
/// A tensor is changed in its box, so a tensor the tree holds twice is changed once and no box is made again; but
/// a tensor that is also a dict key gets a new box where it is a value (its key must not change under the index).
template <class Replacement>
void replace_storages(Value& v, const Replacement& replacement) {
  std::unordered_set<const void*> keys;
  auto note = [&keys](const Value& key) { keys.insert(key.identity()); };
  for_key_tensors(v, false, note);
  replace_storages(v, replacement, keys, 0);
}

/// replace_storages() from a map of the storages to replace.
inline void replace_storages(Value& v, const StorageReplacements& placed) {
  replace_storages(v, [&placed](const Storage& storage) -> const Storage* {
    const auto it = placed.find(storage.data());
    return it == placed.end() ? nullptr : &it->second;
  });
}

/// The storages (by first byte) of the tensors in `v` that `options.select` keeps (or `options.into` names), and
/// those of tensors used as dict keys or set items (which have no path, and are keys by what they are).
inline std::unordered_set<const std::byte*> selected_storages(const Value& v, const LoadOptions& options) {
  std::unordered_set<const std::byte*> kept;
  auto keep = [&](const std::string& path, const Tensor& t) {
    if (options.select(path) || options.into.contains(path)) kept.insert(t.storage().data());
  };
  walk_tensors(v, "", keep);
  auto keep_key = [&kept](const Value& key) {
    kept.insert((key.is_tensor() ? key.as_tensor() : key.as_storage().tensor).storage().data());
  };
  for_key_tensors(v, false, keep_key);
  return kept;
}

/// Removes the dict items (at any depth) whose value is a tensor or bare storage over a storage `dropped` accepts.
template <class Dropped>
void drop_from_dicts(Value& v, const Dropped& dropped, std::size_t depth = 0) {
  if (depth > 100000) return;
  const auto is_dropped = [&](const Value& item) {
    const Tensor* t = item.is_tensor() ? &item.as_tensor() : item.is_storage() ? &item.as_storage().tensor : nullptr;
    return t != nullptr && dropped(t->storage());
  };
  switch (v.kind()) {
    case Value::Kind::dict: {
      Dict& dict = ValueAccess::dict(v);
      bool any = false;
      for (auto& item : ValueAccess::items(dict)) {
        if (is_dropped(item.second)) {
          any = true;
        } else {
          drop_from_dicts(item.second, dropped, depth + 1);
        }
      }
      // In one pass: erasing n keys one by one shifted the items n times (200,000 dropped keys ran past 5 minutes).
      if (any) ValueAccess::erase_if(dict, [&](const Dict::Item& item) { return is_dropped(item.second); });
      return;
    }
    case Value::Kind::list:
      for (auto& item : ValueAccess::list_items(v)) drop_from_dicts(item, dropped, depth + 1);
      return;
    case Value::Kind::object:
      drop_from_dicts(ValueAccess::object(v).args, dropped, depth + 1);
      drop_from_dicts(ValueAccess::object(v).state, dropped, depth + 1);
      return;
    default: return;
  }
}

/// Applies `options.select` to a loaded `v` whose kept storages (by first byte) are `kept`: the other
/// host tensors become meta tensors of the same dtype, shape and strides, or with `select_drops` leave
/// their dicts (the bytes they held, or would have held, are let go).
inline void apply_selection(Value& v, const std::unordered_set<const std::byte*>& kept, const LoadOptions& options) {
  const auto dropped = [&kept](const Storage& storage) {
    return storage.device().is_cpu() && storage.data() != nullptr && !kept.contains(storage.data());
  };
  if (options.select_drops) drop_from_dicts(v, dropped);
  // One meta stand-in per dropped storage, shared by its tensors as they shared the storage.
  StorageReplacements stand_ins;
  replace_storages(v, [&](const Storage& storage) -> const Storage* {
    if (!dropped(storage)) return nullptr;
    const auto [it, first] = stand_ins.try_emplace(storage.data());
    if (first) it->second = meta_storage(storage.size_bytes());
    return &it->second;
  });
}

TENSORFILE_ENTRY bool whole_storage(const Tensor& t) noexcept {
  return t.is_contiguous() && t.storage_offset() == 0 && t.nbytes() == t.storage().size_bytes() && t.nbytes() != 0;
}

/// The address of `t`'s first element on its device (raw_data() for host tensors only).
[[nodiscard]] inline const std::byte* first_byte(const Tensor& t) noexcept {
  const std::byte* const data = t.storage().data();
  return data == nullptr ? nullptr : data + static_cast<std::size_t>(t.storage_offset()) * t.element_size();
}

TENSORFILE_ENTRY Storage buffer_of(const Tensor& t) {
  return t.storage().slice(static_cast<std::size_t>(t.storage_offset()) * t.element_size(), t.nbytes());
}

TENSORFILE_ENTRY std::string into_mismatch(const Tensor& t, Device device, const Tensor& buffer) {
  if (!buffer.defined()) return "expected a tensor over the caller's memory, got an undefined tensor";
  if (device.is_meta()) return "this load places the tensor on meta, where it has no values";
  if (buffer.device() != device) {
    return "the file's tensor loads to " + device.str() + ", the buffer is on " + buffer.device().str() +
           " (a buffer must be where map_location puts its tensor)";
  }
  if (buffer.dtype() != t.dtype()) {
    return "the file's tensor is " + std::string(dtype_name(t.dtype())) + ", the buffer " +
           std::string(dtype_name(buffer.dtype()));
  }
  if (buffer.sizes() != t.sizes()) {
    return "the file's tensor has shape " + shape_string(t.sizes()) + ", the buffer " + shape_string(buffer.sizes());
  }
  if (!buffer.is_contiguous()) return "the buffer is not contiguous";
  if (!buffer.storage().writable()) return "the buffer is read-only";
  return {};
}

[[noreturn]] TENSORFILE_ENTRY void refuse_into(const std::string& path, const std::string& why,
                                               const std::filesystem::path& file) {
  throw ArgumentError("into[\"" + path + "\"]: " + why, {.file = file});
}

TENSORFILE_ENTRY std::map<std::string, Tensor, std::less<>> into_tensors(const Value& v, const LoadOptions& options) {
  std::map<std::string, Tensor, std::less<>> named;
  if (options.into.empty()) return named;
  auto found = [&](const std::string& path, const Tensor& t) {
    if (options.into.contains(path)) named.emplace(path, t);
  };
  walk_tensors(v, "", found);
  return named;
}

/// The loaded tensors that `options.into` names, by the same paths, after checking each buffer against its
/// tensor; an ArgumentError names the path and the file.
[[nodiscard]] inline std::map<std::string, Tensor, std::less<>> into_targets(const Value& v, const LoadOptions& options,
                                                                             const std::filesystem::path& file) {
  std::map<std::string, Tensor, std::less<>> loaded = into_tensors(v, options);
  for (const auto& [path, buffer] : options.into) {
    const auto it = loaded.find(path);
    if (it == loaded.end()) refuse_into(path, "the file holds no tensor at this path", file);
    if (std::string why = into_mismatch(it->second, it->second.device(), buffer); !why.empty()) {
      refuse_into(path, why, file);
    }
  }
  return loaded;
}

/// Writes the values of every `options.into` tensor (`loaded`, from into_targets) to its buffer, except the
/// buffers in `read_directly` (whose records were read straight into them), and points the result's tensors at
/// the buffers where a tensor is the whole of its storage. A storage two paths share goes to the first path's
/// buffer.
inline void fill_into(Value& v, const LoadOptions& options, const std::map<std::string, Tensor, std::less<>>& loaded,
                      const std::unordered_set<const std::byte*>& read_directly = {}) {
  if (options.into.empty()) return;
  StorageReplacements placed;
  for (const auto& [path, buffer] : options.into) {
    if (const Tensor& t = loaded.at(path); whole_storage(t)) placed.emplace(t.storage().data(), buffer_of(buffer));
  }
  for (const auto& [path, buffer] : options.into) {
    const Tensor& t = loaded.at(path);
    const std::byte* const first = first_byte(buffer);
    // Skipped: buffers read straight from the file, and tensors already over their buffer (a device load
    // streamed the record there).
    if (read_directly.contains(first) || t.nbytes() == 0 || first_byte(t) == first) continue;
    // A storage read straight into another path's buffer was never read into its own bytes: copy from there.
    const auto it = placed.find(t.storage().data());
    const bool elsewhere = it != placed.end() && read_directly.contains(it->second.data());
    const Tensor source = elsewhere ? Tensor(it->second, t.dtype(), t.sizes(), t.strides(), t.storage_offset()) : t;
    if (buffer.device().is_cpu()) {
      (source.device().is_cpu() ? source : source.to(Device::cpu())).copy_into(buffer.mutable_raw_data());
    } else if (const auto write = device_copy_hook().write) {
      write(source, buffer);
    } else {
      throw DeviceError(
          "cannot write into a buffer on " + buffer.device().str() +
          ": tensorfile was built without CUDA (include <tensorfile/cuda.hpp> and link tensorfile::cuda)");
    }
  }
  replace_storages(v, placed);
}

/// A load of the zip format, in phases run in this order: opening the index (constructor); check_archive (the
/// header records, verify_crc); find_pickle; index_data_records; plan_record_reads (the arena, the local headers
/// beside the pickle, the file mirror); run_pickle (load_storage per storage record); read_records (into, select,
/// complete_reads, fill_into); check_pickle_end. The members are the state the phases share; run() runs them once.
class ZipLoad {
 public:
  ZipLoad(const TorchArchive& archive, const LoadOptions& options)
      : archive_(archive), options_(options),
        read_threads_(options.threads != 0 ? options.threads : default_read_threads()),
        zip_(open_index(archive, options, read_threads_)), headers_read_(!archive.pread_only), prefix_(zip_.prefix()),
        each_on_its_own_(options.select || !options.into.empty()), to_meta_(options.map_location.all_meta()) {}
  ZipLoad(const ZipLoad&) = delete;  // header_pass_ holds `this`
  ZipLoad& operator=(const ZipLoad&) = delete;
  ~ZipLoad() = default;

  [[nodiscard]] Value run() {
    check_archive();
    find_pickle();
    index_data_records();
    plan_record_reads();
    Value result = run_pickle();
    read_records(result);
    check_pickle_end();
    return result;
  }

 private:
  // A file read with pread is indexed without its local headers: those of the few records read first are read
  // by check_archive, the rest by header_pass_ (with the pickle running meanwhile where it can) or before the
  // pickle.
  [[nodiscard]] static ZipReader open_index(const TorchArchive& archive, const LoadOptions& options,
                                            std::size_t read_threads) {
    ZipReader::ReadAt read_at;
    if (archive.positional()) {
      read_at = [&archive](std::uint64_t offset, std::span<std::byte> out) { archive.read_exact(offset, out); };
    }
    const ZipLimits limits{.max_entries = options.limits.max_records, .header_threads = read_threads};
    return archive.pread_only ? ZipReader::open_file_index(archive.size, archive.path, read_at, limits)
                              : ZipReader::open(archive.bytes, archive.path, limits, read_at);
  }

  void read_headers() {
    if (!headers_read_) zip_.read_local_headers();
    headers_read_ = true;
  }

  [[nodiscard]] std::string member(std::string_view name) const { return prefix_ + "/" + std::string(name); }

  /// Refuses TorchScript archives, reads the header records (version, byteorder, and the pickle's local header)
  /// and, with verify_crc, every record's CRC.
  void check_archive() {
    if (zip_.find("constants.pkl") != nullptr) {
      throw UnsupportedError("this is a TorchScript archive (torch.jit.save); tensorfile reads torch.save files",
                             {.file = archive_.path});
    }
    if (!headers_read_) {
      for (const std::string_view name : {".data/version", "version", "byteorder", "data.pkl"}) {
        if (const ZipEntry* entry = zip_.find(name)) zip_.read_local_header(*entry);
      }
    }
    big_endian_ = read_torch_zip_header(zip_, archive_.path).big_endian;
    if (options_.verify_crc) {
      read_headers();
      for (const auto& entry : zip_.entries()) zip_.verify_crc(entry);
    }
  }

  void find_pickle() {
    pickle_ = zip_.find("data.pkl");
    if (pickle_ == nullptr) {
      throw FormatError("the archive has no data.pkl record", {archive_.path, member("data.pkl")});
    }
    pickle_name_ = std::string(pickle_->name);
    // The pickle in memory, or (a stored pickle of a file read with pread) read by the machine a window at a time:
    // a 5,000-tensor state dict's pickle is half a megabyte, all of it in memory at the load's peak otherwise.
    pickle_streamed_ = pickle_->method == 0 && !zip_.in_memory() && archive_.positional();
    if (pickle_->method == 0 && zip_.in_memory()) {
      pickle_bytes_ = zip_.stored_bytes(*pickle_);
    } else if (!pickle_streamed_) {
      inflated_ = zip_.read(*pickle_);
      pickle_bytes_ = inflated_;
    }
  }

  /// data/<n> records by n, so that thousands of storages are found without a search each.
  void index_data_records() {
    numbered_records_.assign(zip_.entries().size(), nullptr);
    data_record_.assign(zip_.entries().size(), false);
    for (const ZipEntry& entry : zip_.entries()) {
      const std::string_view name(entry.name);
      if (!name.starts_with(prefix_) || name.substr(prefix_.size()).substr(0, 6) != "/data/") continue;
      data_record_[static_cast<std::size_t>(&entry - zip_.entries().data())] = true;
      ++data_records_;
      if (const auto n = decimal_key(name.substr(prefix_.size() + 6)); n && *n < numbered_records_.size()) {
        numbered_records_[*n] = &entry;
      }
    }
  }

  [[nodiscard]] std::byte* arena_bytes_of(std::size_t entry) { return arena_.mutable_data() + arena_slot_[entry]; }

  // Deferred only when place_storage hands the host bytes back unread (no map_location function); asked
  // once per location tag in a row, as files name the same tag for every storage.
  [[nodiscard]] bool stays_on_host(const std::string& location) {
    if (host_tag_ && host_tag_->first == location) return host_tag_->second;
    bool on_host = false;
    if (options_.map_location.function() == nullptr) {
      try {
        on_host = Device::parse(options_.map_location.target_tag(location)).is_cpu();
      } catch (const ArgumentError&) {
      }
    }
    host_tag_.emplace(location, on_host);
    return on_host;
  }

  [[nodiscard]] std::optional<Storage> batch_slice(const ZipEntry& record) {
    if (!archive_.pread_only || big_endian_ || each_on_its_own_) return std::nullopt;
    if (!batches_) batches_.emplace(zip_.entries(), archive_);
    return batches_->slice(record);
  }

  // Joins header_pass_ and throws its error: before anything that needs a data_offset, and after the pickle (a
  // header's error comes first, as in a reader that reads every header before the pickle).
  void wait_for_headers() {
    if (header_pass_.joinable()) header_pass_.join();
    if (header_error_) std::rethrow_exception(header_error_);
  }

  // `prepare` runs first on that thread; `sink` gets each window it reads.
  void read_headers_beside(std::function<void()> prepare, ZipReader::WindowSink sink) {
    try {
      header_pass_ = std::jthread([this, prepare, sink, threads = read_threads_] {
        try {
          if (prepare) prepare();
          zip_.read_local_headers(sink, threads - 1);
        } catch (...) {
          header_error_ = std::current_exception();
        }
      });
    } catch (const std::system_error&) {  // no thread to be had: read them here
      if (prepare) prepare();
      zip_.read_local_headers(sink, read_threads_ - 1);
    }
    headers_read_ = true;  // by header_pass_: wait_for_headers() before using a data_offset
  }

  /// header_pass_'s sink for a full load to the host: copies the arena's records among entries [first, end)
  /// whose bytes lie in `window` (read at `offset`) into the arena.
  void copy_records(std::uint64_t offset, std::span<const std::byte> window, std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      const ZipEntry& entry = zip_.entries()[i];  // its data_offset was set by this thread
      if (arena_slot_[i] == no_slot || entry.data_offset < offset || entry.data_offset - offset > window.size() ||
          window.size() - (entry.data_offset - offset) < entry.size) {
        continue;
      }
      std::memcpy(arena_bytes_of(i), window.data() + (entry.data_offset - offset),
                  static_cast<std::size_t>(entry.size));
      prefilled_[i] = 1;
    }
  }

  // The local headers of a zip file read with pread, read by another thread while the pickle runs, where the
  // pickle needs no data_offset: the records are read after it (a full load to the host, select, into) or never
  // (meta). Below a few hundred records, a thread costs more than the headers' reads it would hide. The pickle's
  // thread and header_pass_'s together are `read_threads` (one: the headers are read first).
  void plan_record_reads() {
    constexpr std::size_t min_records_beside = 256;
    const bool headers_may_go_beside = !headers_read_ && read_threads_ > 1 &&
                                       zip_.entries().size() >= min_records_beside && !options_.torch.storage_source;
    if (archive_.pread_only && !big_endian_ && !to_meta_) plan_arena(headers_may_go_beside);
    if (to_meta_ && headers_may_go_beside) read_headers_beside({}, {});
    read_headers();
  }

  // A full load to the host also copies the records whose bytes lie in the windows header_pass_ reads into the
  // arena (prefilled_), unless the arena is to mirror the file (whose layout needs the headers first).
  void plan_arena(bool headers_may_go_beside) {
    arena_slot_.assign(zip_.entries().size(), no_slot);
    arena_slice_.assign(zip_.entries().size(), Slice::unused);
    std::uint64_t arena_bytes = 0;
    for (std::size_t i = 0; i < zip_.entries().size(); ++i) {
      const ZipEntry& entry = zip_.entries()[i];
      if (entry.method != 0 || entry.size == 0 || !data_record_[i]) continue;
      arena_slot_[i] = arena_bytes;
      arena_bytes += (entry.size + HeapBackend::alignment - 1) / HeapBackend::alignment * HeapBackend::alignment;
    }
    const bool may_read_directly =
        options_.direct_reads == DirectReads::always ||
        (options_.direct_reads == DirectReads::automatic && arena_bytes >= direct_read_bytes);
    // Copies only where the records saved on the host stay there (they would be lost on records bound elsewhere).
    if (headers_may_go_beside && !may_read_directly && arena_bytes != 0 && !each_on_its_own_ && stays_on_host("cpu")) {
      arena_ = heap_storage(static_cast<std::size_t>(arena_bytes), false, false, options_.huge_pages);
      prefilled_.assign(zip_.entries().size(), 0);
      // The arena's pages in one call, rather than a fault per page as the copies reach them (best effort).
      read_headers_beside([this] { populate_for_write(arena_.mutable_data(), arena_.size_bytes()); },
                          [this](std::uint64_t offset, std::span<const std::byte> window, std::size_t first,
                                 std::size_t end) { copy_records(offset, window, first, end); });
    } else if (headers_may_go_beside && !may_read_directly && each_on_its_own_) {
      read_headers_beside({}, {});
    }
    read_headers();
    if (arena_bytes != 0 && archive_.file != nullptr) mirror_file(may_read_directly, arena_bytes);
    // Stored records lie inside the file, so the arena is at most the file's size (plus alignment).
    if (arena_bytes != 0 && !arena_.defined())
      arena_ = heap_storage(static_cast<std::size_t>(arena_bytes), false, false, options_.huge_pages);
  }

  // Records read around the page cache need an arena laid out as the file (headers and padding included,
  // a few percent for large records), so that they can be read in whole pages straight into it.
  void mirror_file(bool may_read_directly, std::uint64_t arena_bytes) {
    std::uint64_t first = UINT64_MAX;  // the file range of the records, and whether all are aligned as the arena's
    std::uint64_t last = 0;
    // Only a direct read needs the arena laid out as the file; header_pass_ (started only without one) leaves the
    // records' offsets unknown here, and its arena is laid out by record.
    bool aligned = may_read_directly;
    for (std::size_t i = 0; i < zip_.entries().size() && aligned; ++i) {
      if (arena_slot_[i] == no_slot) continue;
      const ZipEntry& entry = zip_.entries()[i];
      first = std::min(first, entry.data_offset);
      last = std::max(last, entry.data_offset + entry.size);
      aligned = entry.data_offset % HeapBackend::alignment == 0;
    }
    if (!aligned) return;
    const std::uint64_t start = first / direct_alignment * direct_alignment;
    direct_ = direct_reads_for(options_.direct_reads, *archive_.file, start, last - start, arena_bytes);
    if (direct_) {
      arena_ = heap_storage(static_cast<std::size_t>(last - start), false, false, options_.huge_pages);
      for (std::size_t i = 0; i < zip_.entries().size(); ++i) {
        if (arena_slot_[i] != no_slot) arena_slot_[i] = zip_.entries()[i].data_offset - start;
      }
      mirror_ = FileMirror{&*direct_, {arena_.mutable_data(), static_cast<std::size_t>(last - start)}, start};
    }
  }

  /// The storage of the pickle's persistent id `key` (TorchHooks::LoadStorage).
  [[nodiscard]] Storage load_storage(const std::string& key, DType dtype, std::int64_t numel,
                                     const std::string& location, std::uint64_t at) {
    const auto in_pickle = [&] { return ErrorLocation{archive_.path, pickle_name_, at}; };  // built only to throw
    const auto n = decimal_key(key);
    const ZipEntry* record = n && *n < numbered_records_.size() && numbered_records_[*n] != nullptr
                                 ? numbered_records_[*n]
                                 : zip_.find("data/" + key);
    if (record == nullptr) throw FormatError("storage record " + member("data/" + key) + " is missing", in_pickle());
    const auto bytes = checked_record_bytes(numel, dtype, in_pickle);
    if (static_cast<std::uint64_t>(bytes) != record->size) {
      throw FormatError("storage " + key + " declares " + std::to_string(numel) + " " + std::string(dtype_name(dtype)) +
                            " elements; expected " + std::to_string(bytes) + " bytes in its record, got " +
                            std::to_string(record->size),
                        in_pickle());
    }
    total_bytes_ += record->size;
    if (total_bytes_ > options_.limits.max_total_bytes) {
      throw LimitError("storages exceed " + std::to_string(options_.limits.max_total_bytes) + " bytes", in_pickle());
    }
    if (options_.torch.storage_source) {
      const StorageRecord info{
          key, record->name, location, dtype, record->data_offset, record->size, record->method == 0 && !big_endian_};
      if (std::optional<Storage> given = options_.torch.storage_source(info)) {
        if (given->size_bytes() != record->size) {
          throw ArgumentError("storage_source gave " + std::to_string(given->size_bytes()) + " bytes for storage " +
                                  key + "; expected " + std::to_string(record->size),
                              in_pickle());
        }
        return *std::move(given);
      }
    }
    // What place_storage would do, asked once per tag.
    if (stays_on_host(location)) return read_record(*record, dtype, location);
    return place_storage(
        options_.map_location, static_cast<std::size_t>(record->size), location,
        [&] { return read_record(*record, dtype, location); },
        [&] {
          return ErrorLocation{archive_.path, std::string(record->name)};
        });
  }

  /// The host bytes of `record`: its arena slice (read after the pickle), a slice of the mapping or of a batch,
  /// or a buffer of its own read now.
  [[nodiscard]] Storage read_record(const ZipEntry& record, DType dtype, const std::string& location) {
    Storage cpu;
    const auto size = static_cast<std::size_t>(record.size);
    const auto index = static_cast<std::size_t>(&record - zip_.entries().data());
    if (arena_.defined() && arena_slot_[index] != no_slot && stays_on_host(location)) {
      cpu = arena_.slice(static_cast<std::size_t>(arena_slot_[index]), size);
      if (arena_slice_[index] == Slice::unused) arena_slice_[index] = Slice::unread;
      return cpu;
    }
    wait_for_headers();  // the other ways read at the record's data_offset
    if (record.method == 0 && archive_.views.defined() && !big_endian_) {
      cpu = archive_.views.slice(static_cast<std::size_t>(record.data_offset), size);
    } else if (std::optional<Storage> batched = batch_slice(record)) {
      cpu = *std::move(batched);
    } else {
      cpu = heap_storage(size, false, false, options_.huge_pages);
      std::span<std::byte> out(cpu.mutable_data(), size);
      if (record.method == 0 && archive_.positional() && !archive_.views.defined()) {
        archive_.read_exact(record.data_offset, out);
      } else {
        zip_.read(record, out);
      }
      if (big_endian_) swap_elements(out, is_complex(dtype) ? element_size(dtype) / 2 : element_size(dtype));
    }
    return cpu;
  }

  // Reads the unread slices that `wanted` accepts (all when null).
  void complete_reads(const std::unordered_set<const std::byte*>* wanted) {
    wait_for_headers();
    ParallelReads reads;
    for (std::size_t i = 0; i < arena_slice_.size(); ++i) {
      const bool unread = arena_slice_[i] == Slice::unread && (prefilled_.empty() || prefilled_[i] == 0);
      std::byte* const data = unread ? arena_bytes_of(i) : nullptr;
      if (data != nullptr && (wanted == nullptr || wanted->contains(data))) {
        const ZipEntry& record = zip_.entries()[i];
        const auto buffer = read_into_.find(data);
        reads.add(record.data_offset,
                  {buffer != read_into_.end() ? buffer->second : data, static_cast<std::size_t>(record.size)},
                  record.name);
        if (wanted == nullptr) arena_slice_[i] = Slice::read;
      }
    }
    if (reads.empty()) return;
    if (archive_.file != nullptr) {
      reads.run(*archive_.file, read_threads_, mirror_ ? &*mirror_ : nullptr);
    } else {
      reads.run(archive_.read_at, read_threads_);
    }
  }

  // `window`: a PickleSource's window size, if not the default.
  template <class Input, class... Window>
  void run_machine(Input input, TorchHooks& hooks, Value& result, Window... window) {
    PickleMachine machine(std::move(input), hooks, {archive_.path, pickle_name_}, pickle_limits(options_), window...);
    machine.expect_large_dict(data_records_);
    result = machine.run();
    pickle_end_ = machine.end();
  }

  [[nodiscard]] Value run_pickle() {
    TorchHooks hooks(options_, {archive_.path, pickle_name_},
                     [this](const std::string& key, DType dtype, std::int64_t numel, const std::string& location,
                            std::uint64_t at) { return load_storage(key, dtype, numel, location, at); });
    hooks.expect_storages(zip_.entries().size());
    // Neither: an undefined block, boxes one by one.
    hooks.box_together_with(arena_.defined() ? arena_ : archive_.views);
    hooks.before_reading_storages([this] { complete_reads(nullptr); });
    Value result;
    try {  // the machine, its memo, the storage keys and the pickle are let go before the records are read
      if (pickle_streamed_) {
        const std::uint64_t start = pickle_->data_offset;
        // A ranged reader's window is larger: each refill is a request (a GET, for remote storage).
        constexpr std::size_t ranged_window = std::size_t{1} << 20;
        const TorchArchive& archive = archive_;
        run_machine(PickleSource{pickle_->size,
                                 [start, &archive](std::uint64_t offset, std::span<std::byte> out) {
                                   archive.read_exact(start + offset, out);
                                 }},
                    hooks, result,
                    archive_.file != nullptr ? PickleMachine<TorchHooks>::default_window : ranged_window);
      } else {
        run_machine(pickle_bytes_, hooks, result);
      }
    } catch (...) {
      wait_for_headers();  // a local header's error first
      throw;
    }
    wait_for_headers();
    hooks.forget_storages();
    inflated_ = std::vector<std::byte>();
    return result;
  }

  /// Reads the records the pickle left unread (those `select` keeps), the `into` tensors that are a whole record
  /// not read yet into the caller's buffer instead, then fills the other `into` buffers.
  void read_records(Value& result) {
    std::unordered_set<const std::byte*> read_directly;
    const auto into = into_targets(result, options_, archive_.path);  // selected, so select leaves them as they are
    std::unordered_set<const std::byte*> unread_slices;
    if (!into.empty()) {
      for (std::size_t i = 0; i < arena_slice_.size(); ++i) {
        if (arena_slice_[i] == Slice::unread) unread_slices.insert(arena_bytes_of(i));
      }
    }
    for (const auto& [path, t] : into) {
      const std::byte* const slice = t.storage().data();
      if (unread_slices.contains(slice) && whole_storage(t) && !read_into_.contains(slice)) {
        std::byte* const buffer = options_.into.find(path)->second.mutable_raw_data();
        read_into_.emplace(slice, buffer);
        read_directly.insert(buffer);
      }
    }
    if (options_.select) {
      const auto kept = selected_storages(result, options_);
      complete_reads(&kept);
      apply_selection(result, kept, options_);
    } else {
      complete_reads(nullptr);
    }
    fill_into(result, options_, into, read_directly);
  }

  void check_pickle_end() const {
    const auto pickle_size = static_cast<std::size_t>(pickle_->size);
    if (pickle_end_ != pickle_size) {
      throw FormatError("data.pkl has " + std::to_string(pickle_size - pickle_end_) + " bytes after STOP",
                        {archive_.path, pickle_name_, pickle_end_});
    }
  }

  const TorchArchive& archive_;
  const LoadOptions& options_;
  const std::size_t read_threads_;
  ZipReader zip_;
  bool headers_read_;  // false until every local header is read (or header_pass_ reads them)
  const std::string prefix_;
  bool big_endian_ = false;

  const ZipEntry* pickle_ = nullptr;
  std::string pickle_name_;
  std::vector<std::byte> inflated_;
  std::span<const std::byte> pickle_bytes_;
  bool pickle_streamed_ = false;
  std::size_t pickle_end_ = 0;

  std::vector<const ZipEntry*> numbered_records_;
  std::vector<bool> data_record_;  // per entry: whether it is a data/ record
  std::size_t data_records_ = 0;

  // Stored records bound for the host are slices of one arena (holding the records alone, not the zip's
  // headers, padding and pickle), read after the pickle, together (ParallelReads: neighbours share a preadv),
  // unless header_pass_ copied them from the windows it read for the local headers.
  Storage arena_;
  std::vector<std::uint64_t> arena_slot_;  // per entry: its offset in the arena, or no_slot
  static constexpr std::uint64_t no_slot = UINT64_MAX;
  // Per entry: whether its arena slice was handed out, and whether it was read. Walked in entry order, which
  // is file order in the files torch writes: the reads need no sorting.
  enum class Slice : std::uint8_t { unused, unread, read };
  std::vector<Slice> arena_slice_;
  std::optional<FileHandle> direct_;  // the file opened O_DIRECT, when the arena mirrors it
  std::optional<FileMirror> mirror_;
  std::unordered_map<const std::byte*, std::byte*> read_into_;  // arena slice -> the `into` buffer read instead
  std::optional<std::pair<std::string, bool>> host_tag_;        // the last tag asked about, and the answer
  std::optional<RecordBatches> batches_;                        // made when a record is first read during the pickle
  const bool each_on_its_own_;                                  // only some records may be read
  const bool to_meta_;                                          // nothing is read: no arena either
  std::uint64_t total_bytes_ = 0;

  std::vector<std::uint8_t> prefilled_;  // per entry (bytes, not vector<bool>: the header threads write apart)
  std::exception_ptr header_error_;
  std::jthread header_pass_;  // declared after what it writes to, so that it is joined before they go
};

/// Reads the zip format.
inline Value load_zip(const TorchArchive& archive, const LoadOptions& options) {
  ZipLoad load(archive, options);
  return load.run();
}

/// Reads the legacy format: magic, protocol, sys_info and object pickles, the storage key list,
/// then each storage as an int64 element count and its little-endian bytes.
inline Value load_legacy(const TorchArchive& archive, const LoadOptions& options) {
  const ErrorLocation where{.file = archive.path};
  LoadOptions plain = options;
  plain.strict = true;
  const auto no_storage = [](const std::string&, DType, std::int64_t, const std::string&, std::uint64_t) -> Storage {
    throw FormatError("storage reference in a legacy header pickle");
  };
  TorchHooks header_hooks(plain, where, no_storage);

  PickleMachine magic_machine(archive.bytes, header_hooks, where, pickle_limits(options));
  const Value magic = magic_machine.run(0);
  static constexpr std::uint8_t magic_bytes[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (!magic.is_big_int() ||
      magic.as_big_int().bytes != std::vector<std::uint8_t>(std::begin(magic_bytes), std::end(magic_bytes))) {
    throw FormatError("not a torch file: a pickle without torch's legacy magic number", {archive.path, "", 0});
  }
  std::size_t pos = magic_machine.end();
  PickleMachine protocol_machine(archive.bytes, header_hooks, where, pickle_limits(options));
  const Value protocol = protocol_machine.run(pos);
  if (!protocol.is_int() || protocol.as_int() != 1001) {
    throw FormatError("legacy protocol version is not 1001", {archive.path, "", pos});
  }
  pos = protocol_machine.end();
  PickleMachine info_machine(archive.bytes, header_hooks, where, pickle_limits(options));
  if (!info_machine.run(pos).is_dict()) throw FormatError("legacy sys_info is not a dict", {archive.path, "", pos});
  pos = info_machine.end();

  struct Pending {
    Storage storage;
    DType dtype;
    std::int64_t numel;
    std::string location;
  };
  std::map<std::string, Pending> pending;
  std::uint64_t total_bytes = 0;
  const auto load_storage = [&](const std::string& key, DType dtype, std::int64_t numel, const std::string& location,
                                std::uint64_t at) -> Storage {
    const auto in_pickle = [&] { return ErrorLocation{archive.path, "", at}; };
    const auto bytes = checked_record_bytes(numel, dtype, in_pickle);
    total_bytes += static_cast<std::uint64_t>(bytes);
    if (total_bytes > archive.bytes.size()) {  // every byte must come from the file: never allocate a claim
      throw FormatError("storages declare " + std::to_string(total_bytes) + " bytes; expected at most the file's " +
                            std::to_string(archive.bytes.size()),
                        in_pickle());
    }
    Storage storage = options.map_location.all_meta()
                          ? meta_storage(static_cast<std::size_t>(bytes))
                          : heap_storage(static_cast<std::size_t>(bytes), true, false, options.huge_pages);
    pending.emplace(key, Pending{storage, dtype, numel, location});
    return storage;
  };
  TorchHooks hooks(options, where, load_storage);
  PickleMachine object_machine(archive.bytes, hooks, where, pickle_limits(options));
  Value result = object_machine.run(pos);
  pos = object_machine.end();
  PickleMachine keys_machine(archive.bytes, header_hooks, where, pickle_limits(options));
  const Value keys = keys_machine.run(pos);
  pos = keys_machine.end();
  if (!keys.is_list()) throw FormatError("legacy storage key list is not a list", {archive.path, "", pos});

  StorageReplacements placed;
  std::size_t filled = 0;
  for (const auto& key_value : keys.as_list()) {
    if (!key_value.is_string()) throw FormatError("legacy storage key is not a string", {archive.path, "", pos});
    const std::string& key = key_value.as_string();
    auto it = pending.find(key);
    if (it == pending.end())
      throw FormatError("legacy storage " + key + " is listed but never used", {archive.path, "", pos});
    Pending& p = it->second;
    if (archive.bytes.size() - pos < 8) throw FormatError("file ends before storage " + key, {archive.path, "", pos});
    std::int64_t count = 0;
    std::memcpy(&count, archive.bytes.data() + pos, 8);
    if constexpr (std::endian::native == std::endian::big) count = byteswap(count);
    if (count != p.numel) {
      throw FormatError("legacy storage " + key + " holds " + std::to_string(count) + " elements; expected " +
                            std::to_string(p.numel),
                        {archive.path, "", pos});
    }
    pos += 8;
    const std::size_t bytes = p.storage.size_bytes();
    if (archive.bytes.size() - pos < bytes) {
      throw FormatError("file ends inside storage " + key + "; expected " + std::to_string(bytes) + " bytes",
                        {archive.path, "", pos});
    }
    if (p.storage.device().is_cpu() && bytes != 0) {
      std::memcpy(p.storage.mutable_data(), archive.bytes.data() + pos, bytes);
    }
    pos += bytes;
    ++filled;
    if (!p.storage.device().is_cpu()) continue;
    const Storage cpu = p.storage;
    Storage target = place_storage(
        options.map_location, bytes, p.location, [&] { return cpu; },
        [&] {
          return ErrorLocation{archive.path, key, pos};
        });
    if (!target.shares_owner_with(cpu) && cpu.data() != nullptr) placed.emplace(cpu.data(), target);
  }
  if (filled != pending.size()) {
    throw FormatError(
        "legacy file lists " + std::to_string(filled) + " storages; expected " + std::to_string(pending.size()),
        {archive.path, "", pos});
  }
  if (!placed.empty()) replace_storages(result, placed);
  if (options.select) apply_selection(result, selected_storages(result, options), options);
  fill_into(result, options, into_targets(result, options, archive.path));
  return result;
}

/// The one reader every load_torch() overload funnels into.
inline Value load_archive(const TorchArchive& archive, const LoadOptions& options) {
  refuse_slice_rule(options, "load_torch()", archive.path);
  const FileFormat format = detect_format(archive.bytes);
  // The tar magic sits at byte 257, after a member name that may start like a pickle.
  if (format != FileFormat::torch_zip && archive.bytes.size() >= 262 &&
      std::memcmp(archive.bytes.data() + 257, "ustar", 5) == 0) {
    throw UnsupportedError("this is the pre-2017 tar format of torch.save; re-save it with a newer torch",
                           {.file = archive.path});
  }
  if (format == FileFormat::torch_zip) return load_zip(archive, options);
  if (format == FileFormat::torch_legacy) return load_legacy(archive, options);
  if (format == FileFormat::safetensors) {
    throw UnsupportedError("this is a safetensors file; read it with load_safetensors", {.file = archive.path});
  }
  if (archive.bytes.size() >= 8 && std::memcmp(archive.bytes.data(), "PYTORCH1", 8) == 0) {
    throw UnsupportedError("this is the preview-release torch format (PYTORCH1)", {.file = archive.path});
  }
  std::string head;
  for (std::size_t i = 0; i < std::min<std::size_t>(4, archive.bytes.size()); ++i) {
    head += std::string(i ? " " : "") + detail::hex_text(std::to_integer<unsigned>(archive.bytes[i]), 2);
  }
  throw FormatError("not a torch file; expected a zip archive or a pickle, got bytes " +
                        (head.empty() ? std::string("(empty file)") : head),
                    {.file = archive.path, .offset = 0});
}

TENSORFILE_ENTRY Value load_torch_file(const FileHandle& file, const std::filesystem::path& path,
                                       const LoadOptions& options) {
  TorchArchive archive;
  archive.path = path;
  const std::uint64_t size = file.size();
  if (size == 0) throw FormatError("file is empty; expected a torch file", {.file = path});
  if (!options.mmap) {
    // Heap loads map nothing, so that a file truncated meanwhile is an error, never SIGBUS. A zip file's
    // index, pickle and records are read with pread, the records alone kept (see load_zip).
    std::array<std::byte, format_sniff_bytes> head{};
    const auto head_size = static_cast<std::size_t>(std::min<std::uint64_t>(size, head.size()));
    file.read_exact(0, {head.data(), head_size});
    archive.bytes = {head.data(), head_size};
    const FileFormat format = detect_format(archive.bytes);
    if (format == FileFormat::torch_zip) {
      archive.file = &file;
      archive.pread_only = true;
      archive.size = size;
      return load_archive(archive, options);
    }
    if (format != FileFormat::torch_legacy) return load_archive(archive, options);  // refused by its head
    // Legacy files: read whole into one buffer the tensors share (by `threads` threads, around the page
    // cache as direct_reads says); no call per record.
    const Storage whole = read_to_heap(file, 0, static_cast<std::size_t>(size), options.threads, options.direct_reads,
                                       1, options.huge_pages);
    archive.bytes = {whole.data(), whole.size_bytes()};
    archive.views = whole;
    return load_archive(archive, options);
  }
  Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), *options.mmap));
  archive.bytes = {mapping.data(), mapping.size_bytes()};
  archive.views = mapping;
  archive.file = &file;  // local headers by pread
  return load_archive(archive, options);
}

}  // namespace detail

TENSORFILE_ENTRY Value load_torch(const std::filesystem::path& path, const LoadOptions& options) {
  const bool shared = options.mmap == MapMode::shared;
  return detail::load_torch_file(
      detail::FileHandle::open(path, shared ? detail::OpenMode::read_write : detail::OpenMode::read), path, options);
}

TENSORFILE_ENTRY Value load_torch(std::span<const std::byte> bytes, const LoadOptions& options) {
  detail::TorchArchive archive;
  archive.bytes = bytes;
  if (options.mmap) archive.views = Storage(BorrowedBackend(bytes));
  return detail::load_archive(archive, options);
}

TENSORFILE_ENTRY Value load_torch(std::istream& in, const LoadOptions& options) {
  return detail::load_torch_owned(detail::read_stream_to_heap(in), options);
}

TENSORFILE_ENTRY Value
detail::load_torch_ranged(const std::function<void(std::uint64_t offset, std::span<std::byte> out)>& read_at,
                          std::uint64_t size, const std::string& name, const LoadOptions& options) {
  if (size == 0) throw FormatError("file is empty; expected a torch file", {.file = name});
  std::array<std::byte, format_sniff_bytes> head{};
  const auto head_size = static_cast<std::size_t>(std::min<std::uint64_t>(size, head.size()));
  read_at(0, {head.data(), head_size});
  detail::TorchArchive archive;
  archive.path = name;
  archive.bytes = {head.data(), head_size};
  const FileFormat format = detect_format(archive.bytes);
  if (format == FileFormat::torch_legacy) {  // its records are not indexed: the caller reads it whole
    throw ArgumentError("a legacy torch file is not read by ranges; expected it read whole", {.file = name});
  }
  if (format == FileFormat::torch_zip) {
    archive.read_at = read_at;
    archive.pread_only = true;
    archive.size = size;
  }
  return detail::load_archive(archive, options);  // a zip, or refused by its head
}

TENSORFILE_ENTRY Value detail::load_torch_owned(const Storage& whole, const LoadOptions& options) {
  TorchArchive archive;
  archive.bytes = {whole.data(), whole.size_bytes()};
  archive.views = whole;
  return load_archive(archive, options);
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_torch_load)
