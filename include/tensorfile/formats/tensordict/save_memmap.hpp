// SPDX-License-Identifier: MIT
/// @file
/// save_memmap and memmap: write a TensorDict as the directory tree tensordict 0.14's td.memmap(prefix) writes.
#pragma once

#include <filesystem>

#include "tensorfile/config.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/tensordict/tensordict.hpp"

namespace tensorfile {

/// Writes `td` as tensordict 0.14's `td.memmap(prefix)` does: a directory per collection holding meta.json,
/// one raw C-order file per tensor leaf (`<%XX-encoded key>.memmap`; none for zero elements), nested tensors
/// with their `.shape.memmap` table, tensorclasses under `_tensordict/`, non-tensor data as JSON (pickle
/// bytes written back verbatim). The tree is written into a temporary sibling directory, data files before
/// each meta.json, then renamed into place (an existing tree is replaced, atomically where the system can).
/// A TensorDict without a device records "None" (tensordict writes "cpu"; both load in tensordict), and one that
/// stands for a torch container other than a str-keyed dict records it (TensorDict::torch_container()).
/// Throws ArgumentError for keys named "shape", "device", "_type" (tensordict would lose them) or
/// torch_container_member, file-name collisions, non-UTF-8 keys, meta tensors and an existing prefix that is not a
/// tree; DTypeError for dtypes tensordict cannot load (float8); UnsupportedError for non-JSON data; IoError when the
/// system refuses; DeviceError for device tensors without CUDA support. Nothing is left behind on failure.
/// `tensordict.json` picks the meta.json text, `tensordict.overwrite` false refuses (ArgumentError) an existing tree
/// at the prefix, `tensordict.encode_keys` false writes raw keys for older readers (refusing unsafe ones), `sync`
/// fsyncs every file and directory before the tree is renamed into place. SaveOptions::format is ignored.
TENSORFILE_ENTRY void save_memmap(const TensorDict& td, const std::filesystem::path& prefix,
                                  const SaveOptions& options = {});

/// save_memmap, returning a TensorDict whose tensors are shared (MAP_SHARED) mappings of the new files, as
/// tensordict's memmap()/memmap_(): writes to them reach the files. Same options and errors.
[[nodiscard]] TENSORFILE_ENTRY TensorDict memmap(const TensorDict& td, const std::filesystem::path& prefix,
                                                 const SaveOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_tensordict_save_memmap)
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/posix/directory.hpp"
#include "tensorfile/detail/posix/random_bits.hpp"
#include "tensorfile/formats/tensordict/detail/files.hpp"
#include "tensorfile/formats/tensordict/detail/keys.hpp"
#include "tensorfile/formats/tensordict/detail/meta_schema.hpp"

namespace tensorfile::detail::td {

/// Whether tensordict's loader knows `dtype` (its table lacks the float8 types and quint2x4).
[[nodiscard]] constexpr bool tensordict_loads_dtype(DType dtype) noexcept {
  return dtype_info(dtype).kind != DTypeKind::float8 && dtype != DType::QUInt2x4;
}

/// Writes one tree into a fresh sibling directory of the prefix, then renames it into place.
class MemmapWriter {
 public:
  MemmapWriter(const SaveOptions& options, bool remap) : options_(options), remap_(remap) {}

  /// Writes `td` at `prefix`; returns the TensorDict of shared mappings when remapping.
  std::optional<TensorDict> write(const TensorDict& td, std::filesystem::path prefix) {
    if constexpr (std::endian::native != std::endian::little) {
      throw UnsupportedError("tensordict data files are little-endian; expected a little-endian host",
                             {.file = prefix});
    }
    if (!prefix.has_filename()) prefix = prefix.parent_path();
    if (prefix.empty() || prefix.filename() == "." || prefix.filename() == "..") {
      throw ArgumentError("is not a directory name; expected a path ending in the tree's directory name",
                          {.file = prefix});
    }
    std::filesystem::path parent = prefix.parent_path();
    if (parent.empty()) parent = ".";
    const std::string base = prefix.filename().string();
    const bool exists = check_existing(prefix);

    const FileHandle parent_dir = FileHandle::try_open_at(AT_FDCWD, parent.c_str(), O_RDONLY | O_DIRECTORY);
    if (!parent_dir.valid()) throw IoError("cannot open directory", errno, {.file = parent});
    const int parent_fd = parent_dir.fd();
    const std::string temp = make_sibling(parent_fd, parent, base, "tmp");
    std::optional<TensorDict> mapped;
    try {
      const FileHandle root = FileHandle::try_open_at(parent_fd, temp.c_str(), dir_open_flags);
      if (!root.valid()) throw IoError("cannot open directory", errno, {.file = parent / temp});
      struct stat old_root {};  // a replaced tree keeps its root's permission bits (a private tree stays private)
      if (exists && ::stat(prefix.c_str(), &old_root) == 0) ::fchmod(root.fd(), old_root.st_mode & 07777);
      if (remap_) mapped.emplace();
      write_collection(td, root.fd(), prefix, mapped ? &*mapped : nullptr);
      install(parent_fd, parent, temp, base, exists, prefix);
    } catch (...) {
      (void)remove_tree_at(parent_fd, temp.c_str());
      throw;
    }
    if (options_.sync) ::fsync(parent_fd);
    return mapped;
  }

 private:
  /// Whether the prefix exists (and may be replaced); throws when it may not.
  bool check_existing(const std::filesystem::path& prefix) const {
    struct stat info {};
    if (::lstat(prefix.c_str(), &info) != 0) {
      if (errno == ENOENT) return false;
      throw IoError("cannot stat", errno, {.file = prefix});
    }
    if (S_ISLNK(info.st_mode)) {
      throw ArgumentError("is a symbolic link; expected a directory to replace or a new path", {.file = prefix});
    }
    if (!S_ISDIR(info.st_mode)) {
      throw ArgumentError("exists and is not a directory; expected a new path or a tensordict tree", {.file = prefix});
    }
    if (!options_.tensordict.overwrite) {
      throw ArgumentError("exists; expected a new path (overwrite is off)", {.file = prefix});
    }
    std::error_code ec;
    const bool is_tree = std::filesystem::exists(prefix / "meta.json", ec) || std::filesystem::is_empty(prefix, ec);
    if (!is_tree) {
      throw ArgumentError("exists and is not a tensordict tree; expected an empty directory or one holding meta.json",
                          {.file = prefix});
    }
    return true;
  }

  /// Creates a fresh directory ".<base>.tensorfile-<tag>-<random>" in `parent_fd`; returns its name.
  static std::string make_sibling(int parent_fd, const std::filesystem::path& parent, const std::string& base,
                                  std::string_view tag) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      char suffix[17];
      std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random_bits()));
      std::string name = "." + base + ".tensorfile-" + std::string(tag) + "-" + suffix;
      if (::mkdirat(parent_fd, name.c_str(), 0777) == 0) return name;
      if (errno != EEXIST) throw IoError("cannot create directory", errno, {.file = parent / name});
    }
    throw IoError("cannot create a temporary directory", EEXIST, {.file = parent});
  }

  /// Moves the finished tree `temp` to `base`: an atomic exchange with an existing tree where the system
  /// offers one, else two renames; the old tree is then removed by unlinking its names, never truncating a
  /// file, so that a load_memmap still reading it (through its directory descriptors) keeps what it opened.
  void install(int parent_fd, const std::filesystem::path& parent, const std::string& temp, const std::string& base,
               bool exists, const std::filesystem::path& prefix) {
    if (!exists) {
      if (::renameat(parent_fd, temp.c_str(), parent_fd, base.c_str()) != 0) {
        throw IoError("cannot rename the new tree into place", errno, {.file = prefix});
      }
      return;
    }
#ifdef SYS_renameat2
    constexpr unsigned exchange = 1u << 1;  // RENAME_EXCHANGE
    if (::syscall(SYS_renameat2, parent_fd, temp.c_str(), parent_fd, base.c_str(), exchange) == 0) {
      (void)remove_tree_at(parent_fd, temp.c_str());  // now the old tree
      return;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      throw IoError("cannot exchange the new tree with the old one", errno, {.file = prefix});
    }
#endif
    const std::string old = make_sibling(parent_fd, parent, base, "old");
    if (::renameat(parent_fd, base.c_str(), parent_fd, old.c_str()) != 0) {
      throw IoError("cannot move the old tree aside", errno, {.file = prefix});
    }
    if (::renameat(parent_fd, temp.c_str(), parent_fd, base.c_str()) != 0) {
      const int error = errno;
      (void)::renameat(parent_fd, old.c_str(), parent_fd, base.c_str());  // put the old tree back
      throw IoError("cannot rename the new tree into place", error, {.file = prefix});
    }
    (void)remove_tree_at(parent_fd, old.c_str());
  }

  // ---- names --------------------------------------------------------------------------------

  /// The file-system name of `key` (without ".memmap"), or ArgumentError when raw names are asked for
  /// and the key is unsafe as one.
  std::string name_of(const std::string& key, bool directory, const std::filesystem::path& shown) const {
    if (options_.tensordict.encode_keys) return encode_key(key);
    if (!is_safe_legacy_key(key, directory)) {
      throw ArgumentError("key is not a safe file name; expected no '/', '\\', NUL or drive prefix" +
                              std::string(directory ? ", and not \"\", \".\" or \"..\"" : "") +
                              " when encode_keys is off, got " + quoted_key(key),
                          {.file = shown, .member = key});
    }
    return key;
  }

  static void refuse_reserved(const std::string& key, const std::filesystem::path& shown) {
    if (key == torch_container_member) {
      throw ArgumentError(
          "key collides with the meta.json member that records the torch container; expected "
          "another key, got " +
              quoted_key(key),
          {.file = shown, .member = key});
    }
    if (key == "shape" || key == "device" || key == "_type") {
      throw ArgumentError(
          "key collides with a reserved meta.json member (tensordict would lose it); expected a key "
          "other than \"shape\", \"device\" and \"_type\", got " +
              quoted_key(key),
          {.file = shown, .member = key});
    }
  }

  static void refuse_type_field(const Dict& fields, const std::filesystem::path& shown) {
    if (fields.find(std::string_view("_type")) != nullptr) {
      throw ArgumentError("fields hold \"_type\", which meta.json reserves; expected other names",
                          {.file = shown, .member = "_type"});
    }
  }

  // ---- files --------------------------------------------------------------------------------

  /// Creates `name` in `dir` (never replacing anything); the handle names it shown / name in errors.
  FileHandle create_file(int dir, const std::string& name, const std::filesystem::path& shown, const std::string& key) {
    FileHandle fd = FileHandle::try_open_at(
        dir, name.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | (remap_ ? O_RDWR : O_WRONLY), 0666, shown / name);
    if (!fd.valid()) {
      const int error = errno;
      if (error == EEXIST) {
        throw ArgumentError("file name is already used by another key; expected distinct file names, got a collision",
                            {.file = shown / name, .member = key});
      }
      throw IoError("cannot create", error, {.file = shown / name, .member = key});
    }
    return fd;
  }

  void write_small_file(int dir, const std::string& name, std::string_view bytes, const std::filesystem::path& shown) {
    const FileHandle fd = create_file(dir, name, shown, {});
    fd.write_all(0, std::as_bytes(std::span(bytes.data(), bytes.size())));
    if (options_.sync && ::fsync(fd.fd()) != 0) throw IoError("cannot sync", errno, {.file = shown / name});
  }

  /// Writes the elements of `tensor` in C order to a new file; returns the leaf of the result tree.
  Tensor write_tensor(int dir, const std::string& name, const Tensor& tensor, const std::filesystem::path& shown,
                      const std::string& key) {
    if (!tensor.defined()) {
      throw ArgumentError("tensor is undefined; expected a tensor with data", {.file = shown / name, .member = key});
    }
    if (!tensordict_loads_dtype(tensor.dtype())) {
      throw DTypeError("dtype " + std::string(dtype_name(tensor.dtype())) +
                           " cannot be read back by tensordict; expected a dtype of its loader's table",
                       {.file = shown / name, .member = key});
    }
    if (tensor.device().is_meta()) {
      throw ArgumentError("tensor is on meta and has no data; expected a tensor with data",
                          {.file = shown / name, .member = key});
    }
    const Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
    const std::size_t bytes = host.nbytes();
    if (bytes == 0) return Tensor::zeros(host.sizes(), host.dtype());  // tensordict writes no file
    const FileHandle fd = create_file(dir, name, shown, key);
    const std::byte* source = nullptr;
    if (host.is_contiguous()) {
      source = host.raw_data();
    } else {
      if (scratch_size_ < bytes) {
        scratch_.reset(new std::byte[bytes]);
        scratch_size_ = bytes;
      }
      host.copy_into(scratch_.get());
      source = scratch_.get();
    }
    fd.write_all(0, {source, bytes});
    if (options_.sync && ::fsync(fd.fd()) != 0) throw IoError("cannot sync", errno, {.file = shown / name});
    if (!remap_) return {};
    std::optional<Mapping> mapping = Mapping::try_map(fd, bytes, MapMode::shared);
    if (!mapping) {
      const int error = errno;
      throw IoError("cannot map " + std::to_string(bytes) + " bytes", error, {.file = shown / name, .member = key});
    }
    return Tensor(Storage(MmapBackend(std::move(*mapping))), host.dtype(), host.sizes());
  }

  /// Creates subdirectory `name` of `dir` and opens it.
  static FileHandle make_dir(int dir, const std::string& name, const std::filesystem::path& shown,
                             const std::string& key) {
    if (::mkdirat(dir, name.c_str(), 0777) != 0) {
      const int error = errno;
      if (error == EEXIST) {
        throw ArgumentError(
            "directory name is already used by another key; expected distinct file names, got a "
            "collision",
            {.file = shown / name, .member = key});
      }
      throw IoError("cannot create directory", error, {.file = shown / name, .member = key});
    }
    FileHandle fd = FileHandle::try_open_at(dir, name.c_str(), dir_open_flags);
    if (!fd.valid()) throw IoError("cannot open directory", errno, {.file = shown / name, .member = key});
    return fd;
  }

  void finish_dir(int dir, const std::string& meta, const std::filesystem::path& shown) {
    write_small_file(dir, "meta.json", meta, shown);  // last: the directory is complete once it exists
    if (options_.sync && ::fsync(dir) != 0) throw IoError("cannot sync", errno, {.file = shown});
  }

  // ---- collections --------------------------------------------------------------------------

  /// Writes a TensorDict, tensorclass or lazy stack into the open directory `dir`; fills `mapped`.
  void write_collection(const TensorDict& td, int dir, const std::filesystem::path& shown, TensorDict* mapped) {
    if (mapped != nullptr) *mapped = shell_of(td);
    switch (td.kind()) {
      case TensorDictKind::plain: write_plain(td, dir, shown, mapped, td.type_name()); return;
      case TensorDictKind::tensorclass: {
        refuse_type_field(td.class_fields(), shown);
        const FileHandle inner = make_dir(dir, "_tensordict", shown, {});
        write_plain(td, inner.fd(), shown / "_tensordict", mapped, tensordict_type);
        if (td.class_pickle()) write_small_file(dir, "other.pickle", as_chars(*td.class_pickle()), shown);
        std::string meta;
        JsonWriter json(meta, options_.tensordict.json, false);
        json.where = {.file = shown / "meta.json"};
        meta += '{';
        json.key("_type");
        json.string(td.type_name());
        for (const auto& [key, value] : td.class_fields()) {
          json.item_separator();
          json.where.member = key.is_string() ? key.as_string() : std::string();
          json.key(key.as_string());
          json.value(value);
        }
        meta += '}';
        finish_dir(dir, meta, shown);
        return;
      }
      case TensorDictKind::lazy_stack: {
        std::size_t index = 0;
        for (const auto& item : td) {
          if (item.key != std::to_string(index++)) {
            throw ArgumentError("lazy stack key is out of sequence; expected \"" + std::to_string(index - 1) +
                                    "\", got " + quoted_key(item.key),
                                {.file = shown, .member = item.key});
          }
          const FileHandle child = make_dir(dir, item.key, shown, item.key);
          Entry written = write_entry_dir(item.value, child.fd(), shown / item.key);
          if (mapped != nullptr) TensorDictAccess::set_unchecked(*mapped, item.key, std::move(written));
        }
        std::string meta;
        JsonWriter json(meta, options_.tensordict.json, false);
        json.where = {.file = shown / "meta.json"};
        meta += '{';
        json.key("_type");
        json.string(td.type_name());
        json.item_separator();
        json.key("stack_dim");
        json.integer(td.stack_dim());
        meta += '}';
        finish_dir(dir, meta, shown);
        return;
      }
    }
  }

  /// Writes a sub-collection entry (TensorDict or non-tensor data) into the open directory `dir`.
  Entry write_entry_dir(const Entry& entry, int dir, const std::filesystem::path& shown) {
    if (entry.is_non_tensor()) {
      write_non_tensor(entry.as_non_tensor(), dir, shown);
      return entry;
    }
    if (!entry.is_tensordict()) {
      throw ArgumentError("lazy stack item is a " + std::string(Entry::kind_name(entry.kind())) +
                              "; expected a TensorDict or non-tensor data",
                          {.file = shown});
    }
    if (!remap_) {
      write_collection(entry.as_tensordict(), dir, shown, nullptr);
      return TensorDict();
    }
    TensorDict mapped;
    write_collection(entry.as_tensordict(), dir, shown, &mapped);
    return mapped;
  }

  /// The TensorDict layout: one file per tensor leaf, one directory per sub-collection, then meta.json.
  void write_plain(const TensorDict& td, int dir, const std::filesystem::path& shown, TensorDict* mapped,
                   std::string_view type_name) {
    std::string meta;
    meta.reserve(64 + td.size() * 96);
    JsonWriter json(meta, options_.tensordict.json, false);
    json.where.file = shown / "meta.json";
    meta += '{';
    bool first = true;
    for (const auto& item : td) {
      const std::string& key = item.key;
      refuse_reserved(key, shown);
      json.where.member = key;
      if (!first) json.item_separator();
      first = false;
      json.key(key);
      std::optional<Entry> written;
      switch (item.value.kind()) {
        case Entry::Kind::tensor: {
          const Tensor& tensor = item.value.as_tensor();
          written.emplace(write_tensor(dir, name_of(key, false, shown) + ".memmap", tensor, shown, key));
          leaf_json(json, tensor.device(), tensor.sizes(), tensor.dtype(), false);
          break;
        }
        case Entry::Kind::nested_tensor: {
          const NestedTensor& nested = item.value.as_nested_tensor();
          if (!nested.nested_sizes.defined() || nested.nested_sizes.dim() != 2 ||
              nested.nested_sizes.dtype() != DType::Int64) {
            throw ArgumentError("nested tensor sizes are not an int64 [components, rank] table",
                                {.file = shown, .member = key});
          }
          const std::string file = name_of(key, false, shown) + ".memmap";
          NestedTensor out;
          out.nested_sizes = write_tensor(dir, nested_shape_file_name(file), nested.nested_sizes, shown, key);
          out.values = write_tensor(dir, file, nested.values, shown, key);
          if (remap_ && !out.nested_sizes.defined()) out.nested_sizes = nested.nested_sizes;
          written.emplace(std::move(out));
          leaf_json(json, nested.values.device(), nested.nested_sizes.sizes(), nested.values.dtype(), true);
          break;
        }
        case Entry::Kind::tensordict: {
          const std::string name = name_of(key, true, shown);
          const FileHandle child = make_dir(dir, name, shown, key);
          written.emplace(write_entry_dir(item.value, child.fd(), shown / name));
          meta += '{';
          json.key("type");
          json.string(item.value.as_tensordict().class_name());
          meta += '}';
          break;
        }
        case Entry::Kind::non_tensor: {
          const std::string name = name_of(key, true, shown);
          const FileHandle child = make_dir(dir, name, shown, key);
          write_non_tensor(item.value.as_non_tensor(), child.fd(), shown / name);
          written.emplace(item.value);
          meta += '{';
          json.key("type");
          json.string(class_name_of(item.value.as_non_tensor().type_name));
          meta += '}';
          break;
        }
      }
      if (mapped != nullptr) TensorDictAccess::set_unchecked(*mapped, key, std::move(*written));
    }
    json.where.member.clear();
    if (td.kind() == TensorDictKind::plain && !td.torch_container().is_plain_dict()) {
      if (!first) json.item_separator();
      first = false;
      write_torch_container(json, td.torch_container());
    }
    if (!first) json.item_separator();
    json.key("shape");
    json.shape(td.batch_size());
    json.item_separator();
    json.key("device");
    // tensordict records "cpu" even for a TensorDict without a device; "None", which its loader reads as no
    // device, lets such a TensorDict load back equal.
    json.string(td.device() ? "cpu" : "None");
    json.item_separator();
    json.key("_type");
    json.string(type_name);
    meta += '}';
    finish_dir(dir, meta, shown);
  }

  /// The torch_container_member: {"container": "OrderedDict", "int_keys": [...], "attributes": ...}, the last two
  /// only when present. tensordict's loader skips an object with neither "type" nor "dtype" and "shape".
  static void write_torch_container(JsonWriter& json, const TorchContainer& container) {
    json.where.member = torch_container_member;
    json.key(torch_container_member);
    json.raw("{");
    json.key("container");
    json.string(TorchContainer::kind_name(container.kind));
    if (!container.int_keys.empty()) {
      json.item_separator();
      json.key("int_keys");
      json.raw("[");
      for (std::size_t i = 0; i < container.int_keys.size(); ++i) {
        if (i != 0) json.item_separator();
        json.string(container.int_keys[i]);
      }
      json.raw("]");
    }
    if (!container.attributes.is_none()) {
      json.item_separator();
      json.key("attributes");
      json.value(container.attributes);
    }
    json.raw("}");
    json.where.member.clear();
  }

  static void leaf_json(JsonWriter& json, Device device, const Shape& shape, DType dtype, bool nested) {
    json.raw("{");
    json.key("device");
    json.string(device.str());
    json.item_separator();
    json.key("shape");
    json.shape(shape);
    json.item_separator();
    json.key("dtype");
    json.string(torch_name(dtype));
    json.item_separator();
    json.key("is_nested");
    json.boolean(nested);
    json.raw("}");
  }

  /// NonTensorData: meta.json (and other.pickle); NonTensorStack: compact meta.json (and pickle.pkl).
  void write_non_tensor(const NonTensorData& data, int dir, const std::filesystem::path& shown) {
    refuse_type_field(data.fields, shown);
    const bool stack = data.is_stack();
    if (data.pickle) write_small_file(dir, stack ? "pickle.pkl" : "other.pickle", as_chars(*data.pickle), shown);
    std::string meta;
    JsonWriter json(meta, options_.tensordict.json, stack);  // tensordict writes stacks compact with either backend
    json.where = {.file = shown / "meta.json"};
    meta += '{';
    json.key("_type");
    json.string(data.type_name);
    for (const auto& [key, value] : data.fields) {
      json.item_separator();
      if (!key.is_string()) {
        throw ArgumentError("field name is not a str; expected str names", {.file = shown / "meta.json"});
      }
      json.where.member = key.as_string();
      json.key(key.as_string());
      json.value(value);
    }
    meta += '}';
    finish_dir(dir, meta, shown);
  }

  static std::string_view as_chars(const Bytes& bytes) {
    return {reinterpret_cast<const char*>(bytes.data.data()), bytes.data.size()};
  }

  /// A TensorDict with td's kind, type, batch size, device and class fields, and no entries.
  static TensorDict shell_of(const TensorDict& td) {
    TensorDict out(td.batch_size(), td.device());
    TensorDictAccess::set_kind(out, td.kind(), td.stack_dim());
    out.set_type_name(td.type_name());
    out.class_fields() = td.class_fields();
    out.class_pickle() = td.class_pickle();
    out.set_torch_container(td.torch_container());
    return out;
  }

  const SaveOptions& options_;
  bool remap_;
  std::unique_ptr<std::byte[]> scratch_;
  std::size_t scratch_size_ = 0;
};

}  // namespace tensorfile::detail::td

namespace tensorfile {

TENSORFILE_ENTRY void save_memmap(const TensorDict& td, const std::filesystem::path& prefix,
                                  const SaveOptions& options) {
  detail::td::MemmapWriter writer(options, false);
  (void)writer.write(td, prefix);
}

TENSORFILE_ENTRY TensorDict memmap(const TensorDict& td, const std::filesystem::path& prefix,
                                   const SaveOptions& options) {
  detail::td::MemmapWriter writer(options, true);
  return std::move(*writer.write(td, prefix));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_tensordict_save_memmap)
