// SPDX-License-Identifier: MIT
// What a loaded torch object tree or TensorDict holds: tensors, plain values and the tree around them, with
// the paths, storage ids and hashes of inspect's output (the rules of tests/interop/torch_reference.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tensorfile/core/storage.hpp>
#include <tensorfile/core/tensor.hpp>
#include <tensorfile/core/value.hpp>
#include <tensorfile/formats/tensordict/tensordict.hpp>

namespace tensorfile::cli {

/// The device tag the file gave each storage it holds, as seen by a map_location callable during load.
class StorageTags {
 public:
  /// Records that `storage` holds one of the file's storage records, saved under `tag`.
  void add(const Storage& storage, std::string_view tag);
  /// The tag of a storage that holds a record; `fallback` for any other when set (loads that cannot tell),
  /// else nullopt (a tensor saved on meta, which has no record).
  [[nodiscard]] std::optional<std::string> find(const Storage& storage) const;
  /// Number of storages added.
  [[nodiscard]] std::size_t size() const noexcept { return tags_.size(); }

  std::optional<std::string> fallback{};  ///< tag of storages never added; none: they hold no record

 private:
  std::map<std::pair<const std::byte*, const void*>, std::string> tags_;
};

/// One tensor (or bare storage, seen as a 1-d tensor of all of it).
struct TensorRecord {
  std::string path{};                    ///< as named_tensors() spells it: "" for the root, "a/0/b" below
  Tensor tensor{};                       ///< as loaded: meta when no data was read
  bool parameter = false;                ///< an nn.Parameter
  bool has_record = true;                ///< false for a tensor saved on meta (no bytes in the file)
  std::string tag{};                     ///< the saved device tag ("cpu", "cuda:0"), "meta", or "?" when unknown
  std::optional<std::size_t> storage{};  ///< id shared by the tensors of one storage; none without a record
  std::optional<std::string> sha256{};   ///< hex digest of the values in C order, when hashed
};

/// One plain (non-tensor) leaf.
struct ValueRecord {
  std::string path{};  ///< as TensorRecord::path
  std::string type{};  ///< none, bool, int, float, complex, str, bytes, device, dtype or unsupported
  std::string json{};  ///< the value as JSON
  std::string text{};  ///< the value for people: Python's repr, or what an unsupported object is
};

/// One line of the tree: a container, a tensor or a value, at a depth under the root.
struct TreeNode {
  enum class Kind { container, tensor, value };
  Kind kind = Kind::container;  ///< what the line shows
  std::size_t depth = 0;        ///< 0 for the root
  std::string label{};          ///< dict key, "[i]" for an element, empty for the root
  std::string text{};           ///< containers: "dict, 3 items"
  std::size_t index = 0;        ///< tensors and values: the index into Description::tensors or ::values
};

/// Everything inspect prints about one file.
struct Description {
  std::vector<TensorRecord> tensors;         ///< depth first, in file order
  std::vector<ValueRecord> values;           ///< depth first, in file order
  std::vector<TreeNode> tree;                ///< every container, tensor and value, depth first
  std::vector<std::uint64_t> storage_bytes;  ///< size of each storage, by id
};

/// Describes a torch object tree. `tags` says which storages hold records and their saved device tags;
/// `hashes` adds the SHA-256 of every tensor with data (which reads it).
[[nodiscard]] Description describe_value(const Value& root, const StorageTags& tags, bool hashes);

/// Describes a TensorDict tree (tensors report device "cpu", where load_memmap puts them).
[[nodiscard]] Description describe_tensordict(const TensorDict& root, bool hashes);

/// inspect --json: {"format", "tensors": [...], "values": [...]} on one line, as torch_reference.py prints it.
[[nodiscard]] std::string description_json(const Description& description, std::string_view format, bool hashes);

/// What Python would call the type of an object tensorfile keeps opaque ("numpy.ndarray", "tensor:sparse_coo",
/// "torch.nn.modules.linear.Linear"); for a Global (a class or function reference), its qualified name.
[[nodiscard]] std::string unsupported_name(const Value& v);

}  // namespace tensorfile::cli
