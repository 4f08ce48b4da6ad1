// SPDX-License-Identifier: MIT
/// @file
/// load_memmap: a TensorDict from a directory written by tensordict's memmap() (versions 0.4 to 0.14).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/device.hpp"
#include "tensorfile/core/file_modes.hpp"  // MapMode, DirectReads
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/select.hpp"
#include "tensorfile/formats/tensordict/tensordict.hpp"

namespace tensorfile {

/// Loads a directory written by tensordict's `td.memmap(prefix)` (tensordict 0.4 to 0.14, either JSON
/// backend): leaves map their files (MAP_SHARED when writable, MAP_PRIVATE otherwise, as tensordict; see
/// `mmap`: shared makes a file that cannot be opened for writing an IoError), zero-element leaves need no file,
/// sub-collections load recursively (any subdirectory of a tree also loads alone). `map_location` takes one
/// device: unset, CPU tensors mapping the files; "meta", shapes and dtypes only, no .memmap file opened; cuda:N,
/// mapped, then copied there (needs <tensorfile/cuda.hpp>, else DeviceError); a tag map or a callable is an
/// ArgumentError. `select` is asked with each leaf's path from the loaded directory, its keys joined by "/" as
/// named_tensors(to_value(td)) names them ("nested/deeper/c"; a lazy stack's children are "0", "1"...; a
/// tensorclass's and a lazy view's leaves go by their own keys, without "_tensordict" or "_source"): an
/// unselected leaf's data file is never opened, stat'ed or mapped, it becomes a meta tensor (not copied to a
/// device; a missing file of it is no error, nor listed in `tensordict.skipped`); non-tensor data (NonTensorData,
/// NonTensorStack, pickle sidecars) is always kept. With `select_drops` a sub-collection that ends up empty is
/// left out too (a lazy stack keeps its children); with `tensordict.out`, out's entries of those keys stay as they
/// were. Nothing is ever created, grown or written. Every file is opened below the
/// tree's directory: symbolic links are followed only where they stay inside the tree (resolved by the
/// kernel, openat2 RESOLVE_BENEATH, or a walk of its own that a concurrent swap cannot lead out), and a
/// sub-collection that leads back to one of its ancestors is refused. A hard link is a name like any other,
/// so a file of the tree may also have a name outside it: a file with more than one link is never mapped
/// shared unless `tensordict.allow_shared_hard_links` says so (with `mmap` = shared: FormatError). A load
/// concurrent with save_memmap over the same prefix reads the old or the new tree whole. Throws FormatError for a
/// malformed tree (missing meta.json, bad JSON, short file, missing file, undeclared subdirectory, a symlink
/// leaving the tree, a directory cycle), LimitError past max_depth levels, `limits.max_collections` collections or
/// a meta.json longer than `limits.max_meta_json_bytes`, DTypeError for an unknown dtype, IoError when the system
/// refuses, UnsupportedError for lazy classes or ops it does not know, and ArgumentError when the prefix holds
/// non-tensor data (use load_memmap_entry) or `out` has another batch size.
[[nodiscard]] TENSORFILE_ENTRY TensorDict load_memmap(const std::filesystem::path& prefix,
                                                      const LoadOptions& options = {});

/// Loads any node of a tensordict tree, including a NonTensorData or NonTensorStack directory on its own.
/// Same options and errors as load_memmap, except `tensordict.out` (ignored here).
[[nodiscard]] TENSORFILE_ENTRY Entry load_memmap_entry(const std::filesystem::path& prefix,
                                                       const LoadOptions& options = {});

class FolderReader;  // formats/source.hpp: a declaration takes one by reference

namespace detail::td {

/// load_memmap() of the tree at `relative` of `folder` ("" the folder itself), for open() of a folder source.
[[nodiscard]] TENSORFILE_ENTRY TensorDict load_memmap_folder(FolderReader& folder, const std::string& relative,
                                                             const LoadOptions& options);

}  // namespace detail::td

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_tensordict_load_memmap)
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/posix/directory.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/formats/detail/into_refusal.hpp"
#include "tensorfile/formats/source.hpp"
#include "tensorfile/formats/tensordict/detail/files.hpp"
#include "tensorfile/formats/tensordict/detail/keys.hpp"
#include "tensorfile/formats/tensordict/detail/lazy_views.hpp"
#include "tensorfile/formats/tensordict/detail/meta_schema.hpp"

namespace tensorfile::detail::td {

/// Loads one tree: every directory's meta.json is parsed once; every leaf costs one openat, one fstat and
/// one mmap (none on meta). Files are only ever opened, never created, grown or written, and always through
/// the descriptor of their directory, itself opened from the tree's root descriptor: a symbolic link is
/// resolved by the kernel (or a walk) that cannot leave the root, and a tree renamed away by a concurrent
/// save_memmap stays the one this load reads. Over a FolderReader the same tree is read through the folder's
/// readers instead: leaves are views of a reader's mapped() bytes or heap copies, and the link, cycle and
/// concurrent-save checks, which need a file system, are the folder's business.
class MemmapLoader {
 public:
  MemmapLoader(std::filesystem::path prefix, const LoadOptions& options)
      : options_(options), device_(options.map_location.single_device("load_memmap")), prefix_(std::move(prefix)) {
    if (device_) {
      meta_ = device_->is_meta();
      copy_to_device_ = !device_->is_cpu() && !meta_;
    }
  }

  /// The tree at `relative` ("" the folder itself) of `folder`.
  MemmapLoader(FolderReader& folder, std::string relative, const LoadOptions& options)
      : MemmapLoader(relative.empty() ? folder.name() : folder.name() + "/" + relative, options) {
    folder_ = &folder;
    root_relative_ = std::move(relative);
  }

  /// The node at the prefix; nullopt when it was loaded into `out`. A load that failed, or met a missing
  /// file, while a concurrent save replaced the tree at the prefix starts again on the new tree.
  std::optional<Entry> load_root(TensorDict* out) {
    if constexpr (std::endian::native != std::endian::little) {
      throw UnsupportedError("tensordict data files are little-endian; expected a little-endian host",
                             {.file = prefix_});
    }
    if (folder_ != nullptr) {
      Dir root{{}, prefix_, root_relative_};
      return load_node(root, out);
    }
    std::optional<TensorDict> out_before;
    if (out != nullptr) out_before = *out;
    const std::size_t skipped_before = options_.tensordict.skipped != nullptr ? options_.tensordict.skipped->size() : 0;
    for (int attempt = 1;; ++attempt) {
      const bool last_attempt = attempt == max_attempts;
      Dir root{FileHandle::try_open_at(AT_FDCWD, prefix_.c_str(), O_RDONLY | O_DIRECTORY), prefix_, {}};
      if (!root.handle.valid()) {
        const int error = errno;
        if (error == ENOENT && attempt > 1 && !last_attempt) continue;  // between the two renames of a save
        if (error == ENOTDIR) {
          throw UnsupportedError("is a file; expected a tensordict memmap directory (.tdz archives are not supported)",
                                 {.file = prefix_});
        }
        throw IoError("cannot open directory", error, {.file = prefix_});
      }
      root_fd_ = root.handle.fd();
      root_canonical_.reset();
      met_missing_ = false;
      collections_ = 0;
      path_.clear();
      struct stat root_info {};
      if (::fstat(root_fd_, &root_info) != 0) throw IoError("cannot stat", errno, {.file = prefix_});
      try {
        std::optional<Entry> loaded = load_node(root, out);
        if (!met_missing_ || last_attempt || !replaced(root_info)) return loaded;
      } catch (const Error&) {
        if (last_attempt || !replaced(root_info)) throw;
      }
      if (out != nullptr) *out = *out_before;
      if (options_.tensordict.skipped != nullptr) options_.tensordict.skipped->resize(skipped_before);
    }
  }

 private:
  struct Dir {
    FileHandle handle;
    std::filesystem::path path;           // for messages: the prefix joined with the names that led here
    std::string relative;                 // the names that led here from the root, '/'-separated ("" at the root)
    nlink_t links = 0;                    // its link count, from the fstat of load_node
    std::unique_ptr<RangeReader> meta{};  // a folder's: its meta.json, opened when the directory was looked for
  };

  /// Whether the prefix names another directory than `root` now (a concurrent save replaced the tree).
  bool replaced(const struct stat& root) const {
    struct stat now {};
    return ::stat(prefix_.c_str(), &now) != 0 || now.st_dev != root.st_dev || now.st_ino != root.st_ino;
  }

  // ---- opening, relative to a directory descriptor ------------------------------------------

  /// The prefix, canonical, computed when a symlink leads out of the tree (for the message) or is absolute.
  const std::filesystem::path& canonical_root() {
    if (!root_canonical_) {
      std::error_code ec;
      root_canonical_ = std::filesystem::canonical(prefix_, ec);
      if (ec) root_canonical_->clear();  // moved away by a concurrent save: absolute links are refused
    }
    return *root_canonical_;
  }

  /// Opens `name` in `dir` with `flags` (which include O_NOFOLLOW). A symlink is resolved below the tree's
  /// root descriptor, so it is followed only where it stays inside the tree, whatever changes meanwhile; an
  /// invalid handle with errno set when the open fails.
  FileHandle open_in(const Dir& dir, const std::string& name, int flags) {
    FileHandle file = FileHandle::try_open_at(dir.handle.fd(), name.c_str(), flags);
    if (!file.valid() && (errno == ELOOP || errno == ENOTDIR)) {  // a symlink (or not a directory)
      const std::string relative = dir.relative.empty() ? name : dir.relative + '/' + name;
      file = open_beneath(root_fd_, relative, flags, canonical_root().native());
      if (!file.valid() && errno == EXDEV) {
        const std::filesystem::path link = dir.path / name;
        std::error_code ec;
        const std::filesystem::path target = std::filesystem::canonical(link, ec);
        if (!ec) {
          throw FormatError("symbolic link leaves the tree; expected a target under " + canonical_root().string() +
                                ", got " + target.string(),
                            {.file = link});
        }
        errno = ENOENT;  // a dangling link is a missing file
      }
    }
    if (!file.valid() && errno == ENOENT) met_missing_ = true;
    return file;
  }

  /// The subdirectory `name` of `parent`, opened as `handle`.
  static Dir child_dir(const Dir& parent, FileHandle handle, const std::string& name) {
    return {std::move(handle), parent.path / name, parent.relative.empty() ? name : parent.relative + '/' + name};
  }

  /// The subdirectory `name` of `dir`; an invalid handle when it does not exist.
  FileHandle open_subdir(const Dir& dir, const std::string& name) {
    FileHandle fd = open_in(dir, name, dir_open_flags);
    if (fd.valid()) return fd;
    const int error = errno;
    if (error == ENOENT) return {};
    if (error == ENOTDIR) {
      throw FormatError("is not a directory; expected the directory of a sub-collection", {.file = dir.path / name});
    }
    throw IoError("cannot open directory", error, {.file = dir.path / name});
  }

  /// Opens data file `name` of `dir` for mapping; sets `mode`. An invalid handle when it does not exist.
  FileHandle open_data(const Dir& dir, const std::string& name, MapMode& mode) {
    constexpr int base = O_NOFOLLOW | O_NONBLOCK;
    FileHandle fd;
    if (!options_.mmap) {  // as tensordict: shared where this process may write, else copy-on-write
      fd = open_in(dir, name, O_RDWR | base);
      mode = MapMode::shared;
      if (!fd.valid() && (errno == EACCES || errno == EROFS || errno == EPERM || errno == ETXTBSY)) {
        fd = open_in(dir, name, O_RDONLY | base);
        mode = MapMode::copy_on_write;
      }
    } else {
      mode = *options_.mmap;
      fd = open_in(dir, name, (mode == MapMode::shared ? O_RDWR : O_RDONLY) | base);
    }
    if (fd.valid()) return fd;
    const int error = errno;
    if (error == ENOENT) return {};
    if (error == EISDIR) {
      throw FormatError("is a directory; expected a data file", {.file = dir.path / name});
    }
    throw IoError(mode == MapMode::shared ? "cannot open for reading and writing" : "cannot open for reading", error,
                  {.file = dir.path / name});
  }

  /// Opens a small side file (meta.json, pickles) of `dir`; an invalid handle when it does not exist.
  FileHandle open_side_file(const Dir& dir, const std::string& name) {
    FileHandle fd = open_in(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd.valid()) return fd;
    const int error = errno;
    if (error == ENOENT) return {};
    throw IoError("cannot open for reading", error, {.file = dir.path / name});
  }

  /// A folder's reader of file `name` of `dir`; null when the folder has none.
  std::unique_ptr<RangeReader> open_in_folder(const Dir& dir, const std::string& name) {
    return folder_->open(dir.relative.empty() ? name : dir.relative + '/' + name);
  }

  /// All of a small file (meta.json, pickles) of `dir`; nullopt when it does not exist.
  std::optional<std::string> read_side_text(Dir& dir, const std::string& name) {
    const std::filesystem::path path = dir.path / name;
    if (folder_ != nullptr) {
      std::unique_ptr<RangeReader> reader =
          name == meta_name_ && dir.meta ? std::move(dir.meta) : open_in_folder(dir, name);
      if (!reader) return std::nullopt;
      return read_small_file(*reader, path.string(), options_.limits.max_meta_json_bytes);
    }
    const FileHandle fd = open_side_file(dir, name);
    if (!fd.valid()) return std::nullopt;
    return read_whole_file(fd, path, options_.limits.max_meta_json_bytes);
  }

  /// The sub-collection directory `name` of `dir`; nullopt when it does not exist (in a folder: has no meta.json).
  std::optional<Dir> open_child(const Dir& dir, const std::string& name) {
    if (folder_ != nullptr) {
      std::unique_ptr<RangeReader> meta = open_in_folder(dir, name + '/' + meta_name_);
      if (!meta) return std::nullopt;
      Dir child = child_dir(dir, FileHandle(), name);
      child.meta = std::move(meta);
      return child;
    }
    FileHandle fd = open_subdir(dir, name);
    if (!fd.valid()) return std::nullopt;
    return child_dir(dir, std::move(fd), name);
  }

  /// The bytes of an optional side file (other.pickle, pickle.pkl).
  std::optional<Bytes> read_side_bytes(Dir& dir, const std::string& name) {
    const std::optional<std::string> read = read_side_text(dir, name);
    if (!read) return std::nullopt;
    const std::string& text = *read;
    Bytes bytes;
    bytes.data.resize(text.size());
    std::memcpy(bytes.data.data(), text.data(), text.size());
    return bytes;
  }

  void report_skipped(const std::filesystem::path& path) {
    if (options_.tensordict.skipped != nullptr) options_.tensordict.skipped->push_back(path);
  }

  // ---- selection ----------------------------------------------------------------------------

  /// Appends a key to the select path for one scope (a sub-collection or lazy stack child being loaded).
  class PathStep {
   public:
    PathStep(std::string& path, std::string_view key) : path_(path), size_(path.size()) {
      if (!path_.empty()) path_ += '/';
      path_ += key;
    }
    PathStep(const PathStep&) = delete;
    PathStep& operator=(const PathStep&) = delete;
    ~PathStep() { path_.resize(size_); }

   private:
    std::string& path_;
    std::size_t size_;
  };

  /// Whether options.select keeps the leaf `key` of the collection loading now.
  bool selected(std::string_view key) {
    if (!options_.select) return true;
    const PathStep step(path_, key);
    return options_.select(path_);
  }

  /// Whether a sub-collection left empty by select_drops is to be left out too.
  static bool emptied(const Entry& entry, std::uint64_t dropped_before, std::uint64_t dropped_after) {
    return dropped_after != dropped_before && entry.is_tensordict() && entry.as_tensordict().empty() &&
           entry.as_tensordict().class_fields().empty();
  }

  // ---- nodes --------------------------------------------------------------------------------

  /// Loads the collection in `dir`, dispatching on its `_type`; nullopt when loaded into `out`.
  std::optional<Entry> load_node(Dir& dir, TensorDict* out) {
    if (depth_ >= max_depth) {
      throw LimitError("tree is nested too deeply; expected at most " + std::to_string(max_depth) + " levels",
                       {.file = dir.path});
    }
    if (++collections_ > options_.limits.max_collections) {  // symlinked sub-collections can expand a small tree
      throw LimitError("tree holds more than " + std::to_string(options_.limits.max_collections) +
                           " collections (symbolic links to shared sub-collections count each time they are "
                           "reached); expected at most max_collections",
                       {.file = dir.path});
    }
    struct stat info {};
    if (folder_ == nullptr) {  // a folder's names only nest: no cycle
      if (::fstat(dir.handle.fd(), &info) != 0) throw IoError("cannot stat", errno, {.file = dir.path});
      for (const Ancestor& ancestor : ancestors_) {  // a symlinked sub-collection may lead back up: a cycle
        if (ancestor.device == info.st_dev && ancestor.inode == info.st_ino) {
          throw FormatError("directory cycle: the sub-collection directory is its own ancestor " +
                                ancestor.path.string() +
                                " (a symbolic link leads back up); expected a tree, got a directory inside itself",
                            {.file = dir.path});
        }
      }
    }
    struct Leave {
      int& depth;
      std::vector<Ancestor>& ancestors;
      ~Leave() {
        --depth;
        ancestors.pop_back();
      }
    };
    ++depth_;
    ancestors_.push_back({info.st_dev, info.st_ino, dir.path});
    const Leave leave{depth_, ancestors_};
    dir.links = info.st_nlink;
    const std::optional<std::string> meta_text = read_side_text(dir, meta_name_);
    if (!meta_text) {
      throw FormatError("file is missing; expected the meta.json of a tensordict memmap directory, got no file",
                        {.file = dir.path / meta_name_});
    }
    const std::filesystem::path meta_path = dir.path / meta_name_;
    const std::string& text = *meta_text;
    DirMeta meta = read_dir_meta(text, meta_path);
    JsonReader reader(text, meta_path);
    if (!meta.type_at) {
      throw FormatError("meta.json has no \"_type\"; expected the class of the collection, got none",
                        {.file = meta_path});
    }
    reader.seek(*meta.type_at);
    if (reader.peek() != '"') {
      throw FormatError("\"_type\" is not a string; expected a class such as \"" + std::string(tensordict_type) +
                            "\", got " + reader.snippet_at(*meta.type_at),
                        {.file = meta_path, .offset = *meta.type_at});
    }
    std::string scratch;
    std::string type_name(reader.parse_string(scratch));
    const std::string_view cls = class_name_of(type_name);
    const bool from_tensordict = module_of(type_name).starts_with("tensordict");

    if (from_tensordict && cls == "TensorDict") return load_tensordict(dir, meta, reader, std::move(type_name), out);
    if (from_tensordict && cls == "LazyStackedTensorDict") {
      return load_lazy_stack(dir, reader, std::move(type_name), out);
    }
    if (from_tensordict && cls == "NonTensorData") return Entry(load_non_tensor(dir, reader, std::move(type_name)));
    if (from_tensordict && cls == "NonTensorStack") {
      const bool has_data =
          std::any_of(meta.members.begin(), meta.members.end(), [](const MetaMember& m) { return m.key == "data"; });
      if (has_data) return Entry(load_non_tensor(dir, reader, std::move(type_name)));
      return load_lazy_stack(dir, reader, std::move(type_name), out);  // the pre-0.4 layout: 0/, 1/...
    }
    if (from_tensordict && cls.starts_with("_") && cls.ends_with("TensorDict")) {
      return load_lazy_view(dir, reader, cls, type_name, out);
    }
    // Anything else: a tensorclass when it has _tensordict/, else a TensorDict-like class stored as a TensorDict.
    if (std::optional<Dir> inner = open_child(dir, tensordict_dir_name_)) {
      return load_tensorclass(dir, *inner, reader, std::move(type_name), out);
    }
    return load_tensordict(dir, meta, reader, std::move(type_name), out);
  }

  /// A TensorDict directory: leaves mapped, sub-collections loaded, in meta.json order.
  std::optional<Entry> load_tensordict(Dir& dir, DirMeta& meta, JsonReader& reader, std::string type_name,
                                       TensorDict* out) {
    const std::filesystem::path& meta_path = reader.file();
    Shape batch;
    if (meta.shape_at) {
      reader.seek(*meta.shape_at);
      auto shape = reader.try_parse_shape();
      if (!shape) {
        throw FormatError(
            "invalid batch size; expected a list of non-negative integers, got " + reader.snippet_at(*meta.shape_at),
            {.file = meta_path, .member = "shape", .offset = *meta.shape_at});
      }
      batch = std::move(*shape);
    }
    std::optional<Device> device = read_device(reader, meta.device_at);
    if (device_) device = device_;

    if (out != nullptr) check_out_batch(*out, batch, dir.path);
    TensorDict td(std::move(batch), device);
    td.set_type_name(std::move(type_name));
    if (meta.torch_container_at) td.set_torch_container(read_torch_container(reader, *meta.torch_container_at));
    TensorDictAccess::reserve(td, meta.members.size());
    std::vector<std::string> declared;
    for (MetaMember& member : meta.members) {
      switch (member.kind) {
        case MemberKind::reserved: continue;
        case MemberKind::not_object:
        case MemberKind::other: continue;  // each key comes once (read_dir_meta kept a repeated key's last value)
        case MemberKind::leaf: {
          const bool keep = selected(member.key);
          std::optional<Entry> leaf = load_leaf(dir, member, reader, meta_ || !keep);  // unselected: no file opened
          if (!keep && options_.select_drops) {
            ++dropped_;
            leaf.reset();
          }
          if (!leaf) {
            td.erase(member.key);
            continue;
          }
          add_entry(td, member, std::move(*leaf), meta_path);
          continue;
        }
        case MemberKind::collection: {
          std::string name = encode_key(member.key);
          std::optional<Dir> child = open_child(dir, name);
          if (!child && is_safe_legacy_key(member.key, true)) {
            name = member.key;
            child = open_child(dir, name);
          }
          if (!child) {
            td.erase(member.key);
            missing(dir.path / encode_key(member.key), member.key,
                    "sub-collection directory is missing; expected a directory with a meta.json, got no directory");
            continue;
          }
          declared.push_back(name);
          TensorDict* into = nullptr;
          if (out != nullptr) {
            Entry* existing = out->find(member.key);
            if (existing != nullptr && existing->is_tensordict()) into = &existing->as_tensordict();
          }
          const std::uint64_t dropped_before = dropped_;
          std::optional<Entry> entry;
          {
            const PathStep step(path_, member.key);
            entry = load_node(*child, into);
          }
          if (entry && emptied(*entry, dropped_before, dropped_)) {
            td.erase(member.key);
          } else if (entry) {
            add_entry(td, member, std::move(*entry), meta_path);
          }
          continue;
        }
      }
    }
    check_undeclared(dir, declared);
    if (out == nullptr) return Entry(std::move(td));
    merge_into(*out, std::move(td));
    return std::nullopt;
  }

  void add_entry(TensorDict& td, const MetaMember& member, Entry entry, const std::filesystem::path& meta_path) {
    if (std::string problem = TensorDictAccess::batch_problem(td, entry); !problem.empty()) {
      throw FormatError(problem, {.file = meta_path, .member = member.key, .offset = member.value_at});
    }
    TensorDictAccess::set_unchecked(td, member.key, std::move(entry));
  }

  /// out= semantics: the loaded entries replace out's; out takes the file's batch size when it is empty.
  static void check_out_batch(const TensorDict& out, const Shape& batch, const std::filesystem::path& dir) {
    if (!out.empty() && out.batch_size() != batch) {
      throw ArgumentError("out has another batch size; expected " + detail::shape_string(batch) +
                              " as in the file, got " + detail::shape_string(out.batch_size()),
                          {.file = dir});
    }
  }

  static void merge_into(TensorDict& out, TensorDict loaded) {
    TensorDictAccess::set_batch_unchecked(out, loaded.batch_size());
    TensorDictAccess::set_kind(out, loaded.kind(), loaded.stack_dim());
    out.set_device(loaded.device());
    out.set_type_name(loaded.type_name());
    out.class_fields() = loaded.class_fields();
    out.class_pickle() = loaded.class_pickle();
    out.set_torch_container(loaded.torch_container());
    for (const auto& item : loaded) TensorDictAccess::set_unchecked(out, item.key, item.value);
  }

  /// The torch_container_member object save_memmap() writes; anything else there is a FormatError.
  static TorchContainer read_torch_container(JsonReader& reader, std::size_t at) {
    reader.seek(at);
    const Value v = parse_json_value(reader);
    const auto fail = [&](const std::string& what) {
      throw FormatError("invalid torch container record: " + what,
                        {.file = reader.file(), .member = std::string(torch_container_member), .offset = at});
    };
    TorchContainer container;
    const Value* kind = v.as_dict().find(std::string_view("container"));
    if (kind == nullptr || !kind->is_string()) fail("expected a \"container\" str");
    const std::string& name = kind->as_string();
    bool known = false;
    for (const auto k : {TorchContainer::Kind::dict, TorchContainer::Kind::ordered_dict, TorchContainer::Kind::list,
                         TorchContainer::Kind::tuple}) {
      if (name == TorchContainer::kind_name(k)) {
        container.kind = k;
        known = true;
      }
    }
    if (!known) fail("expected dict, OrderedDict, list or tuple, got " + quoted_key(name));
    if (const Value* keys = v.as_dict().find(std::string_view("int_keys"))) {
      if (!keys->is_list()) fail("expected \"int_keys\" to be a list of str");
      for (const Value& key : keys->as_list()) {
        std::int64_t n = 0;
        const std::string* text = key.is_string() ? &key.as_string() : nullptr;
        const char* end = text != nullptr ? text->data() + text->size() : nullptr;
        if (text == nullptr || std::from_chars(text->data(), end, n) != std::from_chars_result{end, std::errc{}}) {
          fail("expected \"int_keys\" to hold decimal int texts");
        }
        container.int_keys.push_back(*text);
      }
    }
    if (const Value* attributes = v.as_dict().find(std::string_view("attributes"))) container.attributes = *attributes;
    return container;
  }

  std::optional<Device> read_device(JsonReader& reader, std::optional<std::size_t> at) {
    if (!at) return std::nullopt;
    reader.seek(*at);
    const int c = reader.peek();
    if (c == 'n') return std::nullopt;  // null
    if (c == '"') {
      std::string scratch;
      const std::string_view text = reader.parse_string(scratch);
      if (text == "None") return std::nullopt;
      try {
        return Device::parse(text);
      } catch (const ArgumentError&) {
      }
    }
    throw FormatError("invalid device; expected a device such as \"cpu\" or \"cuda:0\", got " + reader.snippet_at(*at),
                      {.file = reader.file(), .member = "device", .offset = *at});
  }

  /// Reports a missing file or directory: an error unless skip_missing (then listed in `skipped`).
  void missing(const std::filesystem::path& path, const std::string& key, const std::string& what) {
    if (options_.tensordict.skip_missing) {
      report_skipped(path);
      return;
    }
    throw FormatError(what, {.file = path, .member = key});
  }

  /// Throws (or reports) subdirectories of `dir` that meta.json does not declare.
  void check_undeclared(const Dir& dir, std::vector<std::string>& declared) {
    if (options_.tensordict.skip_undeclared && options_.tensordict.skipped == nullptr) return;
    std::sort(declared.begin(), declared.end());
    declared.erase(std::unique(declared.begin(), declared.end()), declared.end());
    std::vector<std::string> subdirectories;
    if (folder_ != nullptr) {
      std::optional<std::vector<std::string>> names = folder_->list(dir.relative);
      if (!names) return;  // a folder that cannot be listed: nothing to compare
      for (std::string& name : *names) {
        if (name.size() > 1 && name.ends_with('/')) subdirectories.push_back(name.substr(0, name.size() - 1));
      }
    } else {
      // A directory's link count is 2 + its subdirectories on most file systems: nothing to list when it matches.
      if (dir.links == 2 + declared.size()) return;
      subdirectories = list_subdirectories(dir.handle, dir.path);
    }
    for (const std::string& name : subdirectories) {
      if (std::binary_search(declared.begin(), declared.end(), name)) continue;
      if (options_.tensordict.skip_undeclared) {
        report_skipped(dir.path / name);
        continue;
      }
      throw FormatError(
          "subdirectory is not declared in meta.json; expected only the sub-collections meta.json "
          "lists, got an undeclared directory (left by an earlier save, or a tensordict 0.3 tree? "
          "skip_undeclared ignores it)",
          {.file = dir.path / name});
    }
  }

  // ---- leaves -------------------------------------------------------------------------------

  /// Checks a leaf entry's dtype, shape and is_nested; returns the byte size of its data.
  void check_leaf(const MetaMember& member, JsonReader& reader) {
    const std::filesystem::path& meta_path = reader.file();
    if (!member.dtype) {
      throw DTypeError("unknown dtype; expected a torch dtype name such as \"torch.float32\", got " +
                           reader.snippet_at(member.dtype_at),
                       {.file = meta_path, .member = member.key, .offset = member.dtype_at});
    }
    if (!member.shape) {
      throw FormatError(
          "invalid shape; expected a list of non-negative integers, got " + reader.snippet_at(member.shape_at),
          {.file = meta_path, .member = member.key, .offset = member.shape_at});
    }
    if (!member.is_nested_valid) {
      throw FormatError("invalid is_nested; expected true or false, got " + reader.snippet_at(member.is_nested_at),
                        {.file = meta_path, .member = member.key, .offset = member.is_nested_at});
    }
  }

  /// numel * element size of `shape`, or a FormatError when the shape passes numpy's bound (its bytes with each 0
  /// counted as 1 fit in int64), past which an empty tensor's strides overflow.
  static std::size_t byte_size(const Shape& shape, DType dtype, const MetaMember& member,
                               const std::filesystem::path& meta_path) {
    const auto item = static_cast<std::int64_t>(element_size(dtype));
    if (!detail::checked_extent_bytes(shape, item)) {
      throw FormatError("shape " + detail::shape_string(shape) +
                            " is too large; expected at most 2^63 bytes, each 0 in the shape counted as 1",
                        {.file = meta_path, .member = member.key, .offset = member.shape_at});
    }
    std::int64_t bytes = item;
    for (const auto s : shape) bytes *= s;  // within the bound above
    if (static_cast<std::uint64_t>(bytes) > SIZE_MAX) {
      throw FormatError("shape " + detail::shape_string(shape) + " does not fit the address space",
                        {.file = meta_path, .member = member.key, .offset = member.shape_at});
    }
    return static_cast<std::size_t>(bytes);
  }

  /// A tensor or nested tensor leaf, a meta tensor (no file opened) when `meta`; nullopt when its file is
  /// missing and skip_missing is set.
  std::optional<Entry> load_leaf(const Dir& dir, MetaMember& member, JsonReader& reader, bool meta) {
    check_leaf(member, reader);
    const DType dtype = *member.dtype;
    Shape shape = std::move(*member.shape);
    if (member.is_nested) return load_nested(dir, member, reader, std::move(shape), meta);
    const std::size_t bytes = byte_size(shape, dtype, member, reader.file());
    if (meta) return Entry(Tensor(meta_storage(bytes), dtype, std::move(shape)));
    if (bytes == 0) return Entry(on_device(Tensor::zeros(std::move(shape), dtype)));  // no file, as tensordict
    std::optional<Storage> storage = map_leaf_file(dir, member.key, "", bytes);
    if (!storage) return std::nullopt;
    return Entry(on_device(Tensor(std::move(*storage), dtype, std::move(shape))));
  }

  Tensor on_device(Tensor tensor) const {
    if (!copy_to_device_) return tensor;
    return tensor.to(*device_);
  }

  /// Maps the first `bytes` of the data file of `key` (suffix "" or ".shape"); nullopt when missing and skipped.
  std::optional<Storage> map_leaf_file(const Dir& dir, const std::string& key, std::string_view suffix,
                                       std::size_t bytes) {
    name_.clear();
    append_encoded_key(name_, key);
    name_ += suffix;
    name_ += ".memmap";
    if (folder_ != nullptr) return read_folder_leaf(dir, key, suffix, bytes);
    MapMode mode = MapMode::read_only;
    FileHandle fd = open_data(dir, name_, mode);
    if (!fd.valid() && is_safe_legacy_key(key, false)) {
      const std::string encoded = name_;
      name_.assign(key);
      if (!suffix.empty()) {
        name_ = nested_shape_file_name(name_ + ".memmap");
      } else {
        name_ += ".memmap";
      }
      fd = open_data(dir, name_, mode);
      if (!fd.valid()) name_ = encoded;
    }
    if (!fd.valid()) {
      std::string what = "data file is missing; expected at least " + std::to_string(bytes) + " bytes, got no file";
      if (!is_safe_legacy_key(key, false)) {
        what += " (the raw key is not a safe file name, so no legacy name was tried)";
      }
      missing(dir.path / name_, key, what);
      return std::nullopt;
    }
    struct stat info {};
    if (::fstat(fd.fd(), &info) != 0) throw IoError("cannot stat", errno, {.file = dir.path / name_});
    if (!S_ISREG(info.st_mode)) {
      throw FormatError("is not a regular file; expected a data file", {.file = dir.path / name_, .member = key});
    }
    if (mode == MapMode::shared && info.st_nlink > 1 && !options_.tensordict.allow_shared_hard_links) {
      if (options_.mmap) {
        throw FormatError("data file has " + std::to_string(info.st_nlink) +
                              " hard links; expected 1 for a shared writable mapping (another name of the file may "
                              "lie outside the tree; allow_shared_hard_links maps it anyway)",
                          {.file = dir.path / name_, .member = key});
      }
      mode = MapMode::copy_on_write;
    }
    const auto size = static_cast<std::uint64_t>(info.st_size);
    if (size < bytes) {
      throw FormatError(
          "data file is too short; expected at least " + std::to_string(bytes) + " bytes, got " + std::to_string(size),
          {.file = dir.path / name_, .member = key});
    }
    std::optional<Mapping> mapping = Mapping::try_map(fd, bytes, mode);
    if (!mapping) {
      const int error = errno;
      throw IoError("cannot map " + std::to_string(bytes) + " bytes", error, {.file = dir.path / name_, .member = key});
    }
    return Storage(MmapBackend(std::move(*mapping)));
  }

  /// map_leaf_file() in a folder (`name_` set): a view of the reader's mapped() bytes, which keeps the reader, or
  /// the first `bytes` read to the heap; `mmap` set with a reader that cannot be mapped is an ArgumentError.
  std::optional<Storage> read_folder_leaf(const Dir& dir, const std::string& key, std::string_view suffix,
                                          std::size_t bytes) {
    std::unique_ptr<RangeReader> reader = open_in_folder(dir, name_);
    if (!reader && is_safe_legacy_key(key, false)) {
      const std::string legacy = suffix.empty() ? key + ".memmap" : nested_shape_file_name(key + ".memmap");
      reader = open_in_folder(dir, legacy);
      if (reader) name_ = legacy;
    }
    const std::filesystem::path path = dir.path / name_;
    if (!reader) {
      missing(path, key, "data file is missing; expected at least " + std::to_string(bytes) + " bytes, got no file");
      return std::nullopt;
    }
    std::shared_ptr<RangeReader> owner(std::move(reader));
    const SourceBytes source(Source::reader(*owner), false);
    if (source.size() < bytes) {
      throw FormatError("data file is too short; expected at least " + std::to_string(bytes) + " bytes, got " +
                            std::to_string(source.size()),
                        {.file = path, .member = key});
    }
    if (const std::optional<std::span<const std::byte>> mapped = source.mapped()) {
      return Storage(BorrowedBackend(mapped->first(bytes), owner));
    }
    if (options_.mmap) {
      throw ArgumentError("the folder's reader cannot be mapped (mapped() is nullopt); expected .mmap unset for it",
                          {.file = path, .member = key});
    }
    if (source.held().defined()) return source.held().slice(0, bytes);  // an unsized reader, read whole
    Storage storage = heap_storage(bytes, false, false, options_.huge_pages);
    source.read_exact(0, {storage.mutable_data(), bytes});
    return storage;
  }

  /// A nested tensor: the int64 size table in <name>.shape.memmap, the packed values in <name>.memmap.
  std::optional<Entry> load_nested(const Dir& dir, const MetaMember& member, JsonReader& reader, Shape table_shape,
                                   bool meta) {
    const std::filesystem::path& meta_path = reader.file();
    const DType dtype = *member.dtype;
    if (table_shape.size() != 2) {
      throw FormatError("nested tensor shape is not a size table; expected [components, rank], got " +
                            detail::shape_string(table_shape),
                        {.file = meta_path, .member = member.key, .offset = member.shape_at});
    }
    if (meta) {  // as tensordict: a meta tensor of the size table's shape
      const std::size_t bytes = byte_size(table_shape, dtype, member, meta_path);
      return Entry(Tensor(meta_storage(bytes), dtype, std::move(table_shape)));
    }
    const std::size_t table_bytes = byte_size(table_shape, DType::Int64, member, meta_path);
    Tensor table;
    if (table_bytes == 0) {
      table = Tensor::zeros(table_shape, DType::Int64);
    } else {
      std::optional<Storage> storage = map_leaf_file(dir, member.key, ".shape", table_bytes);
      if (!storage) return std::nullopt;
      table = Tensor(std::move(*storage), DType::Int64, table_shape);
    }
    std::int64_t total = 0;
    const std::int64_t* sizes = table.numel() == 0 ? nullptr : table.data<const std::int64_t>();
    for (std::int64_t row = 0; row < table_shape[0]; ++row) {
      std::int64_t count = 1;
      for (std::int64_t d = 0; d < table_shape[1]; ++d) {
        const std::int64_t s = sizes[row * table_shape[1] + d];
        auto product = s < 0 ? std::nullopt : detail::checked_mul(count, s);
        if (!product) {
          throw FormatError(
              "nested size table holds an invalid size; expected non-negative sizes, got " + std::to_string(s),
              {.file = dir.path / nested_shape_file_name(encode_key(member.key) + ".memmap"),
               .member = member.key,
               .offset = static_cast<std::uint64_t>((row * table_shape[1] + d) * 8)});
        }
        count = *product;
      }
      auto sum = detail::checked_add(total, count);
      if (!sum)
        throw FormatError("nested tensor is too large; expected at most 2^63 elements",
                          {.file = meta_path, .member = member.key});
      total = *sum;
    }
    const Shape flat{total};
    const std::size_t bytes = byte_size(flat, dtype, member, meta_path);
    NestedTensor nested;
    nested.nested_sizes = table;
    if (bytes == 0) {
      nested.values = Tensor::zeros(flat, dtype);
    } else {
      std::optional<Storage> storage = map_leaf_file(dir, member.key, "", bytes);
      if (!storage) return std::nullopt;
      nested.values = Tensor(std::move(*storage), dtype, flat);
    }
    nested.values = on_device(std::move(nested.values));
    return Entry(std::move(nested));
  }

  // ---- other collections --------------------------------------------------------------------

  /// The meta.json members other than `_type`, in order.
  static Dict other_members(JsonReader& reader) {
    reader.seek(0);
    Value doc = parse_json_document(reader);
    Dict fields;
    for (const auto& [key, value] : doc.as_dict()) {
      if (key.as_string() != "_type") fields.set(key, value);
    }
    return fields;
  }

  /// NonTensorData or NonTensorStack: JSON data, and the pickle sidecar as opaque bytes.
  NonTensorData load_non_tensor(Dir& dir, JsonReader& reader, std::string type_name) {
    NonTensorData data;
    data.type_name = std::move(type_name);
    data.fields = other_members(reader);
    if (data.is_stack()) {
      const Value* payload = data.fields.find(std::string_view("data"));
      if (payload != nullptr && payload->is_string()) {
        if (payload->as_string() != "pickle.pkl") {
          throw FormatError("NonTensorStack data is a string; expected a list or \"pickle.pkl\", got \"" +
                                payload->as_string() + "\"",
                            {.file = reader.file(), .member = "data"});
        }
        data.pickle = read_side_bytes(dir, "pickle.pkl");
        if (!data.pickle) {
          missing(dir.path / "pickle.pkl", "data", "pickle file is missing; expected pickle.pkl, got no file");
        }
      }
    } else {
      data.pickle = read_side_bytes(dir, "other.pickle");
    }
    return data;
  }

  /// A tensorclass: its fields in _tensordict/, its other attributes in meta.json and other.pickle.
  std::optional<Entry> load_tensorclass(Dir& dir, Dir& inner, JsonReader& reader, std::string type_name,
                                        TensorDict* out) {
    Dict fields = other_members(reader);
    std::optional<Bytes> pickle = read_side_bytes(dir, "other.pickle");
    std::vector<std::string> declared{tensordict_dir_name_};
    std::optional<Entry> loaded = load_node(inner, out);
    check_undeclared(dir, declared);
    TensorDict* td = out;
    if (loaded) {
      if (!loaded->is_tensordict()) {
        throw FormatError(
            "_tensordict/ holds a " + std::string(Entry::kind_name(loaded->kind())) + "; expected a TensorDict",
            {.file = inner.path});
      }
      td = &loaded->as_tensordict();
    }
    TensorDictAccess::set_kind(*td, TensorDictKind::tensorclass, 0);
    td->set_type_name(std::move(type_name));
    td->class_fields() = std::move(fields);
    td->class_pickle() = std::move(pickle);
    return loaded;
  }

  /// A LazyStackedTensorDict (or a pre-0.4 NonTensorStack): children in 0/, 1/... along "stack_dim".
  std::optional<Entry> load_lazy_stack(Dir& dir, JsonReader& reader, std::string type_name, TensorDict* out) {
    const Dict fields = other_members(reader);
    const Value* dim = fields.find(std::string_view("stack_dim"));
    if (dim == nullptr || !dim->is_int()) {
      throw FormatError("lazy stack has no integer \"stack_dim\"; expected an int, got " +
                            std::string(dim == nullptr ? "none" : Value::kind_name(dim->kind())),
                        {.file = reader.file()});
    }
    TensorDict td;
    TensorDictAccess::set_kind(td, TensorDictKind::lazy_stack, dim->as_int());
    td.set_type_name(std::move(type_name));
    std::vector<std::string> declared;
    for (std::size_t i = 0;; ++i) {
      std::string name = std::to_string(i);
      std::optional<Dir> child = open_child(dir, name);
      if (!child) break;
      const PathStep step(path_, name);
      std::optional<Entry> entry = load_node(*child, nullptr);
      TensorDictAccess::set_unchecked(td, name, std::move(*entry));
      declared.push_back(std::move(name));
    }
    check_undeclared(dir, declared);
    TensorDictAccess::set_batch_unchecked(td, TensorDictAccess::stacked_batch_size(td));
    if (device_) td.set_device(device_);
    if (out == nullptr) return Entry(std::move(td));
    check_out_batch(*out, td.batch_size(), dir.path);
    merge_into(*out, std::move(td));
    return std::nullopt;
  }

  /// A lazy view tensordict memmapped without materialising it (_SubTensorDict, _PermutedTensorDict...): its
  /// `_source/` loaded, then the index or op of meta.json applied to every leaf, as views where torch gives
  /// views. Any other `_...TensorDict` class, or an op it does not name, is an UnsupportedError.
  std::optional<Entry> load_lazy_view(Dir& dir, JsonReader& reader, std::string_view cls, const std::string& type_name,
                                      TensorDict* out) {
    const std::filesystem::path& meta_path = reader.file();
    const bool sub = cls == "_SubTensorDict";
    const ErrorLocation where{.file = meta_path, .member = sub ? "index" : "custom_op_kwargs"};
    const bool custom_op = cls == "_PermutedTensorDict" || cls == "_TransposedTensorDict" ||
                           cls == "_UnsqueezedTensorDict" || cls == "_SqueezedTensorDict" || cls == "_ViewedTensorDict";
    if (!sub && !custom_op) {
      throw UnsupportedError("collection type " + type_name +
                                 " is not supported; expected a TensorDict, tensorclass, lazy stack, non-tensor "
                                 "data, _SubTensorDict or a permuted, transposed, (un)squeezed or viewed TensorDict",
                             {.file = meta_path});
    }
    const Dict fields = other_members(reader);
    std::optional<Dir> found = open_child(dir, source_dir_name_);
    if (!found) {
      throw FormatError("source directory is missing; expected the viewed collection of " + std::string(cls) +
                            " in _source/, got no directory",
                        {.file = dir.path / source_dir_name_});
    }
    Dir& source_dir = *found;
    // Views and gathers are taken on the mapped source; the result moves to the device whole.
    const bool device_copy = std::exchange(copy_to_device_, false);
    std::optional<Entry> source;
    try {
      source = load_node(source_dir, nullptr);
    } catch (...) {
      copy_to_device_ = device_copy;
      throw;
    }
    copy_to_device_ = device_copy;
    if (!source->is_tensordict()) {
      throw FormatError("_source/ holds a " + std::string(Entry::kind_name(source->kind())) + "; expected a TensorDict",
                        {.file = source_dir.path});
    }
    const Shape& batch = source->as_tensordict().batch_size();
    LazyOp op;
    if (sub) {
      const Value* index = fields.find(std::string_view("index"));
      if (index == nullptr) throw FormatError("meta.json has no \"index\"; expected the index of the view", where);
      op.index = parse_batch_index(*index, batch.size(), where);
      op.text = "indexed " + index_text(op.index);
    } else {
      op = parse_custom_op(cls, fields, batch, where);
    }
    Entry result = op_entry(*source, op, batch.size(), where);
    if (copy_to_device_) result = leaves_on_device(std::move(result));
    TensorDict& td = result.as_tensordict();
    td.set_lazy_view(op.text + " of _source");
    std::vector<std::string> declared{source_dir_name_};
    check_undeclared(dir, declared);
    if (out == nullptr) return result;
    check_out_batch(*out, td.batch_size(), dir.path);
    merge_into(*out, std::move(td));
    out->set_lazy_view(op.text + " of _source");
    return std::nullopt;
  }

  /// Every tensor of `entry` copied to the requested device.
  Entry leaves_on_device(Entry entry) const {
    if (entry.is_tensor()) {
      if (entry.as_tensor().device().is_meta()) return entry;  // unselected: nothing to copy
      return Entry(on_device(std::move(entry.as_tensor())));
    }
    if (entry.is_tensordict()) {
      for (const auto& item : entry.as_tensordict()) {
        TensorDictAccess::set_unchecked(entry.as_tensordict(), item.key, leaves_on_device(item.value));
      }
    }
    return entry;
  }

  struct Ancestor {
    dev_t device;
    ino_t inode;
    std::filesystem::path path;
  };

  const LoadOptions& options_;
  std::optional<Device> device_;  // map_location's one device; unset: the saved one
  std::filesystem::path prefix_;
  FolderReader* folder_ = nullptr;  // reads the tree through a folder's readers, not the file system
  std::string root_relative_;       // with a folder: the tree's directory in it
  int root_fd_ = -1;
  std::optional<std::filesystem::path> root_canonical_;
  static constexpr int max_depth = 256;     // directory levels; the recursion would exhaust the stack long after
  static constexpr int max_attempts = 100;  // loads restarted because a concurrent save replaced the tree
  bool met_missing_ = false;                // a file or directory was missing (a tree being removed looks so)
  std::vector<Ancestor> ancestors_;         // the directories from the root to the one loading
  bool meta_ = false;
  bool copy_to_device_ = false;
  int depth_ = 0;
  std::uint64_t collections_ = 0;  // directories loaded so far, each time a link reaches one
  std::string path_;               // the select path of the collection loading now ("" at the root)
  std::uint64_t dropped_ = 0;      // leaves select_drops left out so far
  std::string name_;               // reused buffer for data file names
  const std::string meta_name_ = "meta.json";
  const std::string tensordict_dir_name_ = "_tensordict";
  const std::string source_dir_name_ = "_source";
};

TENSORFILE_ENTRY TensorDict load_memmap_folder(FolderReader& folder, const std::string& relative,
                                               const LoadOptions& options) {
  MemmapLoader loader(folder, relative, options);
  std::optional<Entry> entry = loader.load_root(options.tensordict.out);
  if (!entry) return *options.tensordict.out;
  if (!entry->is_tensordict()) {
    throw ArgumentError("holds a " + std::string(Entry::kind_name(entry->kind())) + "; expected a TensorDict directory",
                        {.file = relative.empty() ? folder.name() : folder.name() + "/" + relative});
  }
  return std::move(entry->as_tensordict());
}

}  // namespace tensorfile::detail::td

namespace tensorfile {

TENSORFILE_ENTRY TensorDict load_memmap(const std::filesystem::path& prefix, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_memmap()", prefix);
  detail::refuse_slice_rule(options, "load_memmap()", prefix);
  detail::td::MemmapLoader loader(prefix, options);
  std::optional<Entry> entry = loader.load_root(options.tensordict.out);
  if (!entry) return *options.tensordict.out;
  if (!entry->is_tensordict()) {
    throw ArgumentError("holds a " + std::string(Entry::kind_name(entry->kind())) +
                            "; expected a TensorDict directory (load_memmap_entry reads any node)",
                        {.file = prefix});
  }
  return std::move(entry->as_tensordict());
}

TENSORFILE_ENTRY Entry load_memmap_entry(const std::filesystem::path& prefix, const LoadOptions& options) {
  detail::refuse_into_buffers(options, "load_memmap_entry()", prefix);
  detail::refuse_slice_rule(options, "load_memmap_entry()", prefix);
  detail::td::MemmapLoader loader(prefix, options);
  return std::move(*loader.load_root(nullptr));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_tensordict_load_memmap)
