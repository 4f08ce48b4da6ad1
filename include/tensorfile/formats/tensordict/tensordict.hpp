// SPDX-License-Identifier: MIT
/// @file
/// TensorDict: tensordict's insertion-ordered tree of tensors, nested TensorDicts and non-tensor data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/ordered_index.hpp"

namespace tensorfile {

class TensorDict;

/// A path of keys through nested TensorDicts, outermost first: {"nested", "e"}.
using NestedKey = std::vector<std::string>;

/// `_type` of a plain TensorDict, as tensordict writes it.
inline constexpr std::string_view tensordict_type = "<class 'tensordict._td.TensorDict'>";
/// `_type` of a LazyStackedTensorDict.
inline constexpr std::string_view lazy_stacked_tensordict_type = "<class 'tensordict._lazy.LazyStackedTensorDict'>";
/// `_type` of a NonTensorData leaf.
inline constexpr std::string_view non_tensor_data_type = "<class 'tensordict.tensorclass.NonTensorData'>";
/// `_type` of a NonTensorStack leaf.
inline constexpr std::string_view non_tensor_stack_type = "<class 'tensordict.tensorclass.NonTensorStack'>";

namespace detail::td {

/// The bare class name of a `_type` string: "<class 'tensordict._td.TensorDict'>" -> "TensorDict";
/// the text itself when it is not of that form.
[[nodiscard]] constexpr std::string_view class_name_of(std::string_view type_name) noexcept {
  if (!type_name.starts_with("<class '") || !type_name.ends_with("'>")) return type_name;
  std::string_view qualified = type_name.substr(8, type_name.size() - 10);
  const std::size_t dot = qualified.rfind('.');
  return dot == std::string_view::npos ? qualified : qualified.substr(dot + 1);
}

/// The module of a `_type` string: "<class 'tensordict._td.TensorDict'>" -> "tensordict._td"; empty if none.
[[nodiscard]] constexpr std::string_view module_of(std::string_view type_name) noexcept {
  if (!type_name.starts_with("<class '") || !type_name.ends_with("'>")) return {};
  std::string_view qualified = type_name.substr(8, type_name.size() - 10);
  const std::size_t dot = qualified.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : qualified.substr(0, dot);
}

/// Same dtype, shape, device and (on the host) values; requires_grad is not compared (never persisted).
[[nodiscard]] inline bool same_tensor_values(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes() || a.device() != b.device()) return false;
  if (!a.device().is_cpu()) return true;  // meta (or device) tensors: shapes and dtypes only
  return a.equal(b);
}

/// Whether two Dicts hold the same items in the same order.
[[nodiscard]] inline bool same_dict(const Dict& a, const Dict& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a.items()[i].first == b.items()[i].first) || !(a.items()[i].second == b.items()[i].second)) return false;
  }
  return true;
}

struct TensorDictAccess;

}  // namespace detail::td

/// A nested ("jagged") tensor as tensordict stores it (`is_nested: true`): components of one dtype and rank
/// whose shapes differ, packed back to back in C order.
struct NestedTensor {
  Tensor values;        ///< every component's elements back to back: 1-d and contiguous, the value dtype
  Tensor nested_sizes;  ///< int64 [components, rank] on the host: the shape of each component

  /// Number of components.
  [[nodiscard]] std::int64_t size() const {
    return nested_sizes.defined() && nested_sizes.dim() == 2 ? nested_sizes.size(0) : 0;
  }

  /// The shape of component `i` (0 <= i < size(); throws ArgumentError otherwise).
  [[nodiscard]] TENSORFILE_ENTRY Shape component_shape(std::int64_t i) const;

  /// Component `i` as a view of `values` (shares its storage).
  [[nodiscard]] TENSORFILE_ENTRY Tensor component(std::int64_t i) const;

  /// Packs host tensors of one dtype and rank into a new NestedTensor (a heap copy). Throws ArgumentError
  /// when the list is empty or dtypes or ranks differ.
  [[nodiscard]] TENSORFILE_ENTRY static NestedTensor from_components(std::span<const Tensor> components);

  /// Same values and component shapes.
  [[nodiscard]] bool equal(const NestedTensor& other) const {
    return detail::td::same_tensor_values(values, other.values) &&
           detail::td::same_tensor_values(nested_sizes, other.nested_sizes);
  }

 private:
  static std::int64_t numel_of(const Shape& shape) {
    std::int64_t n = 1;
    for (const auto s : shape) n *= s;
    return n;
  }
  TENSORFILE_ENTRY void check_index(std::int64_t i) const;
};

/// A non-tensor leaf: tensordict's NonTensorData (one value) or NonTensorStack (a list along a batch
/// dimension). JSON data is held as Values; pickled data only as opaque bytes, never unpickled.
struct NonTensorData {
  std::string type_name{non_tensor_data_type};  ///< `_type`: non_tensor_data_type, non_tensor_stack_type or a subclass
  Dict fields{};  ///< meta.json members after `_type`, in order ("data", "_is_non_tensor", "_metadata"...)
  std::optional<Bytes> pickle{};  ///< other.pickle (NonTensorData) or pickle.pkl (NonTensorStack), raw bytes

  /// Whether this is a NonTensorStack.
  [[nodiscard]] bool is_stack() const noexcept { return detail::td::class_name_of(type_name) == "NonTensorStack"; }

  /// The bare class name of `type_name` ("NonTensorData", "NonTensorStack" or a subclass's name).
  [[nodiscard]] std::string_view class_name() const noexcept { return detail::td::class_name_of(type_name); }

  /// The JSON payload ("data"); None when absent, e.g. pickled into `pickle`.
  [[nodiscard]] TENSORFILE_ENTRY const Value& data() const;

  /// A NonTensorStack's stacking dimension ("stack_dim"; 0 when absent).
  [[nodiscard]] TENSORFILE_ENTRY std::int64_t stack_dim() const;

  /// Same type, fields (in order) and pickle bytes.
  friend bool operator==(const NonTensorData& a, const NonTensorData& b) {
    return a.type_name == b.type_name && detail::td::same_dict(a.fields, b.fields) && a.pickle == b.pickle;
  }
};

/// A NonTensorData holding `data` (JSON-like: None, bool, int, float, str, list, tuple, str-keyed dict),
/// with the fields tensordict writes: {"data": data, "_is_non_tensor": true, "_metadata": null}.
[[nodiscard]] TENSORFILE_ENTRY NonTensorData non_tensor(Value data);

/// A NonTensorStack of `items` (nested lists for more than one dimension) stacked along `stack_dim`, with
/// the fields tensordict writes: {"stack_dim": d, "device": null, "data": items}.
[[nodiscard]] TENSORFILE_ENTRY NonTensorData non_tensor_stack(List items, std::int64_t stack_dim = 0);

/// One value of a TensorDict: a tensor, a nested tensor, a TensorDict (or tensorclass, or lazy stack)
/// or non-tensor data. Copies are deep for nested TensorDicts and share tensor storages.
class Entry {
 public:
  /// What an Entry holds.
  enum class Kind : std::uint8_t { tensor, nested_tensor, tensordict, non_tensor };

  Entry(Tensor tensor) : tensor_(std::move(tensor)) {}  ///< a tensor leaf
  Entry(NestedTensor nested)
      : kind_(Kind::nested_tensor), boxed_(new NestedTensor(std::move(nested))) {}  ///< a nested tensor leaf
  Entry(TensorDict tensordict);                                                     ///< a sub-TensorDict
  Entry(NonTensorData data)
      : kind_(Kind::non_tensor), boxed_(new NonTensorData(std::move(data))) {}  ///< a non-tensor leaf
  Entry(const Entry& other);  ///< deep copy of a TensorDict; tensors share storage
  /// Moves; the moved-from Entry keeps its kind but no longer holds a value.
  Entry(Entry&& other) noexcept
      : kind_(other.kind_), tensor_(std::move(other.tensor_)), boxed_(std::exchange(other.boxed_, nullptr)) {}
  Entry& operator=(const Entry& other);  ///< deep copy of a TensorDict; tensors share storage
  /// Moves.
  Entry& operator=(Entry&& other) noexcept {
    Entry(std::move(other)).swap(*this);
    return *this;
  }
  ~Entry();  ///< releases the value

  /// Exchanges the values of two Entries.
  void swap(Entry& other) noexcept {
    std::swap(kind_, other.kind_);
    std::swap(tensor_, other.tensor_);
    std::swap(boxed_, other.boxed_);
  }

  [[nodiscard]] Kind kind() const noexcept { return kind_; }                                      ///< what it holds
  [[nodiscard]] bool is_tensor() const noexcept { return kind() == Kind::tensor; }                ///< a Tensor
  [[nodiscard]] bool is_nested_tensor() const noexcept { return kind() == Kind::nested_tensor; }  ///< a NestedTensor
  [[nodiscard]] bool is_tensordict() const noexcept { return kind() == Kind::tensordict; }        ///< a TensorDict
  [[nodiscard]] bool is_non_tensor() const noexcept { return kind() == Kind::non_tensor; }        ///< NonTensorData
  /// Whether this is a leaf (anything but a TensorDict).
  [[nodiscard]] bool is_leaf() const noexcept { return kind() != Kind::tensordict; }

  /// The held value; each throws ArgumentError naming both kinds when the Entry holds another kind.
  [[nodiscard]] const Tensor& as_tensor() const {
    expect(Kind::tensor);
    return tensor_;
  }
  /// The Tensor, to change.
  [[nodiscard]] Tensor& as_tensor() {
    expect(Kind::tensor);
    return tensor_;
  }
  /// The NestedTensor.
  [[nodiscard]] const NestedTensor& as_nested_tensor() const { return boxed<NestedTensor>(Kind::nested_tensor); }
  /// The NestedTensor, to change.
  [[nodiscard]] NestedTensor& as_nested_tensor() { return boxed<NestedTensor>(Kind::nested_tensor); }
  /// The sub-TensorDict.
  [[nodiscard]] const TensorDict& as_tensordict() const { return boxed<TensorDict>(Kind::tensordict); }
  /// The sub-TensorDict, to change.
  [[nodiscard]] TensorDict& as_tensordict() { return boxed<TensorDict>(Kind::tensordict); }
  /// The NonTensorData.
  [[nodiscard]] const NonTensorData& as_non_tensor() const { return boxed<NonTensorData>(Kind::non_tensor); }
  /// The NonTensorData, to change.
  [[nodiscard]] NonTensorData& as_non_tensor() { return boxed<NonTensorData>(Kind::non_tensor); }

  /// The entry `key` of a sub-TensorDict: `td["nested"]["e"]`. Throws ArgumentError when this is not a
  /// TensorDict or the key is missing.
  [[nodiscard]] const Entry& operator[](std::string_view key) const;
  /// The entry `key` of a sub-TensorDict, to change; throws as the const form does.
  [[nodiscard]] Entry& operator[](std::string_view key);

  /// The name of a kind: "Tensor", "NestedTensor", "TensorDict", "NonTensorData".
  [[nodiscard]] static std::string_view kind_name(Kind kind) noexcept {
    constexpr std::string_view names[] = {"Tensor", "NestedTensor", "TensorDict", "NonTensorData"};
    return names[static_cast<std::size_t>(kind)];
  }

  /// Same kind and equal contents (tensors: dtype, shape, device and values; TensorDicts: see TensorDict).
  friend bool operator==(const Entry& a, const Entry& b);

 private:
  // Throws ArgumentError naming both kinds unless this Entry holds `wanted`.
  void expect(Kind wanted) const {
    if (kind_ != wanted) wrong_kind(wanted);
  }
  [[noreturn]] TENSORFILE_ENTRY void wrong_kind(Kind wanted) const;
  template <class T>
  T& boxed(Kind wanted) const {
    expect(wanted);
    return *static_cast<T*>(boxed_);
  }

  // A tagged union by hand (std::variant costs every including TU its instantiations): a tensor inline, the large
  // rare kinds boxed, so that an Entry stays a Tensor plus two words. `boxed_` is owned; ~Entry deletes it by kind.
  Kind kind_ = Kind::tensor;
  Tensor tensor_;
  void* boxed_ = nullptr;
};

/// The torch container a TensorDict was made from (to_tensordict() records it, to_value() rebuilds it), so that
/// a torch -> tensordict -> torch round trip keeps what a TensorDict cannot hold: int keys, list and tuple
/// containers, OrderedDict and its JSON attributes (a state_dict's `_metadata`). save_memmap() writes it to
/// meta.json as the member `torch_container_member`, an object that tensordict's loader skips.
struct TorchContainer {
  /// The container's Python type.
  enum class Kind : std::uint8_t { dict, ordered_dict, list, tuple };
  Kind kind = Kind::dict;               ///< dict, OrderedDict, list or tuple
  std::vector<std::string> int_keys{};  ///< dicts: the keys that were Python ints, as text ("0", "-3")
  Value attributes{};                   ///< OrderedDicts: their attributes (JSON values only); None when none

  /// True for a plain dict with str keys and no attributes: nothing to record.
  [[nodiscard]] bool is_plain_dict() const noexcept {
    return kind == Kind::dict && int_keys.empty() && attributes.is_none();
  }
  /// Python's name of `kind`: "dict", "OrderedDict", "list", "tuple".
  [[nodiscard]] static std::string_view kind_name(Kind kind) noexcept {
    switch (kind) {
      case Kind::dict: return "dict";
      case Kind::ordered_dict: return "OrderedDict";
      case Kind::list: return "list";
      case Kind::tuple: return "tuple";
    }
    return "dict";
  }
  /// Same kind, the same int keys in any order, and equal attributes.
  TENSORFILE_ENTRY friend bool operator==(const TorchContainer& a, const TorchContainer& b);
};

/// The meta.json member that holds a TensorDict's TorchContainer (written only when it is not a plain dict).
inline constexpr std::string_view torch_container_member = "_tensorfile_torch_container";

/// What a TensorDict directory holds, beyond its entries.
enum class TensorDictKind : std::uint8_t {
  plain,        ///< a TensorDict (or a TensorDict-like class stored the same way)
  tensorclass,  ///< a `@tensorclass` instance: its fields are the entries, its other attributes class_fields()
  lazy_stack,   ///< a LazyStackedTensorDict: entries "0", "1"... stacked along stack_dim()
};

/// An insertion-ordered map from string keys to tensors, nested TensorDicts and non-tensor data, with a
/// batch size (the leading dimensions every entry shares) and an optional device, as tensordict's
/// TensorDict. Copies are deep for the tree and share tensor storages; clone() copies the tensors too.
///
/// Build one with `TensorDict({{"a", tensor}, {"nested", TensorDict({{"b", t}}, {2})}}, {2})`; read with
/// `td["nested"]["b"].as_tensor()` or `td.get({"nested", "b"})`.
class TensorDict {
 public:
  /// One key and its value.
  struct Item {
    std::string key;  ///< the key (any UTF-8 text, "" included)
    Entry value;      ///< the value
  };

  /// An empty TensorDict: batch size (), no device.
  TensorDict() = default;

  /// An empty TensorDict with batch size `batch_size` and `device` (none by default).
  explicit TensorDict(Shape batch_size, std::optional<Device> device = std::nullopt)
      : batch_size_(std::move(batch_size)), device_(device) {}

  /// A TensorDict of `items` in order; throws ArgumentError as set() does.
  TENSORFILE_ENTRY TensorDict(std::initializer_list<std::pair<std::string_view, Entry>> items, Shape batch_size = {},
                              std::optional<Device> device = std::nullopt);

  /// A tensorclass instance: `fields` holds its tensor (and non-tensor) fields, batch size and device;
  /// `type_name` is its `_type` ("<class '__main__.MyTC'>"); `class_fields` its other JSON attributes.
  [[nodiscard]] static TensorDict tensorclass(std::string type_name, TensorDict fields, Dict class_fields = {}) {
    fields.kind_ = TensorDictKind::tensorclass;
    fields.type_name_ = std::move(type_name);
    fields.class_fields_ = std::move(class_fields);
    return fields;
  }

  /// A LazyStackedTensorDict of `items` (usually TensorDicts of one batch size) along `stack_dim`; the
  /// entries are keyed "0", "1"... and the batch size is the items' with their count inserted at stack_dim.
  [[nodiscard]] TENSORFILE_ENTRY static TensorDict lazy_stack(std::vector<Entry> items, std::int64_t stack_dim = 0);

  // ---- the collection itself ----------------------------------------------------------------

  [[nodiscard]] TensorDictKind kind() const noexcept { return kind_; }             ///< plain, tensorclass, lazy stack
  [[nodiscard]] const Shape& batch_size() const noexcept { return batch_size_; }   ///< leading dims of every entry
  [[nodiscard]] std::optional<Device> device() const noexcept { return device_; }  ///< none, or where the tensors live
  [[nodiscard]] const std::string& type_name() const noexcept { return type_name_; }  ///< `_type` written to meta.json
  /// The bare class name ("TensorDict", "MyTC"), as a parent's {"type": ...} entry names it.
  [[nodiscard]] std::string_view class_name() const noexcept { return detail::td::class_name_of(type_name_); }
  [[nodiscard]] std::int64_t stack_dim() const noexcept { return stack_dim_; }  ///< lazy stacks: stacking dim
  /// Tensorclasses: the JSON attributes stored next to `_tensordict/` (meta.json members after `_type`).
  [[nodiscard]] const Dict& class_fields() const noexcept { return class_fields_; }
  /// Tensorclasses: the JSON attributes, to change.
  [[nodiscard]] Dict& class_fields() noexcept { return class_fields_; }
  /// Tensorclasses: the raw bytes of other.pickle (attributes that are not JSON), never unpickled.
  [[nodiscard]] const std::optional<Bytes>& class_pickle() const noexcept { return class_pickle_; }
  /// Tensorclasses: the raw bytes of other.pickle, to set or clear.
  [[nodiscard]] std::optional<Bytes>& class_pickle() noexcept { return class_pickle_; }
  /// When read from one of tensordict's lazy layouts (a _SubTensorDict, a _PermutedTensorDict...): how this
  /// collection derives from the stored one ("permuted (1, 0) of _source"); empty otherwise. Not saved (a save
  /// writes the materialised collection) and not compared.
  [[nodiscard]] const std::string& lazy_view() const noexcept { return lazy_view_; }
  /// Records how this collection derives from a stored one (see lazy_view()).
  void set_lazy_view(std::string text) { lazy_view_ = std::move(text); }

  /// Sets the batch size; throws ArgumentError when an entry does not start with it.
  TENSORFILE_ENTRY void set_batch_size(Shape batch_size);
  /// Sets the device recorded for the collection (tensors are not moved).
  void set_device(std::optional<Device> device) noexcept { device_ = device; }
  /// Sets `_type` (a TensorDict subclass, a tensorclass's class).
  void set_type_name(std::string type_name) { type_name_ = std::move(type_name); }
  /// The torch container this TensorDict stands for (a plain dict unless to_tensordict() or a load recorded one).
  [[nodiscard]] const TorchContainer& torch_container() const noexcept { return torch_container_; }
  /// Sets the torch container that to_value() rebuilds.
  void set_torch_container(TorchContainer container) { torch_container_ = std::move(container); }

  // ---- entries ------------------------------------------------------------------------------

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }  ///< number of keys (not leaves)
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }       ///< no keys
  [[nodiscard]] const std::vector<Item>& items() const noexcept { return items_.items(); }  ///< in insertion order
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }                      ///< first item
  [[nodiscard]] auto end() const noexcept { return items_.end(); }                          ///< past the last item
  /// The keys in insertion order (views into this TensorDict).
  [[nodiscard]] TENSORFILE_ENTRY std::vector<std::string_view> keys() const;

  /// The entry `key`, or null.
  [[nodiscard]] TENSORFILE_ENTRY const Entry* find(std::string_view key) const noexcept;
  /// The entry `key`, to change, or null.
  [[nodiscard]] TENSORFILE_ENTRY Entry* find(std::string_view key) noexcept;
  /// The entry at a nested key ({"nested", "e"}), or null when a key is missing or a step is not a TensorDict.
  [[nodiscard]] TENSORFILE_ENTRY const Entry* find(std::span<const std::string_view> key) const noexcept;
  /// The nested find() over a braced list: `td.find({"nested", "e"})`.
  [[nodiscard]] TENSORFILE_ENTRY const Entry* find(std::initializer_list<std::string_view> key) const;
  /// The nested find() over a key held as strings.
  [[nodiscard]] TENSORFILE_ENTRY const Entry* find(std::span<const std::string> key) const;
  /// The nested find(), to change the entry.
  [[nodiscard]] TENSORFILE_ENTRY Entry* find(std::span<const std::string_view> key) noexcept;
  /// The nested find() over a braced list, to change the entry.
  [[nodiscard]] TENSORFILE_ENTRY Entry* find(std::initializer_list<std::string_view> key);
  /// The nested find() over a key held as strings, to change the entry.
  [[nodiscard]] TENSORFILE_ENTRY Entry* find(std::span<const std::string> key);

  /// Whether `key` is present.
  [[nodiscard]] TENSORFILE_ENTRY bool contains(std::string_view key) const noexcept;
  /// Whether the nested key is present.
  [[nodiscard]] TENSORFILE_ENTRY bool contains(std::initializer_list<std::string_view> key) const;

  /// The entry `key`; throws ArgumentError when missing.
  [[nodiscard]] TENSORFILE_ENTRY const Entry& operator[](std::string_view key) const;
  /// The entry `key`, to change; throws ArgumentError when missing.
  [[nodiscard]] TENSORFILE_ENTRY Entry& operator[](std::string_view key);

  /// The entry `key`; throws ArgumentError when missing.
  [[nodiscard]] TENSORFILE_ENTRY const Entry& get(std::string_view key) const;
  /// The entry `key`, to change; throws ArgumentError when missing.
  [[nodiscard]] TENSORFILE_ENTRY Entry& get(std::string_view key);
  /// The entry at a nested key: `td.get({"nested", "e"})`; throws ArgumentError naming the missing step.
  [[nodiscard]] TENSORFILE_ENTRY const Entry& get(std::span<const std::string_view> key) const;
  /// The nested get(), to change the entry.
  [[nodiscard]] TENSORFILE_ENTRY Entry& get(std::span<const std::string_view> key);
  /// The nested get() over a braced list.
  [[nodiscard]] TENSORFILE_ENTRY const Entry& get(std::initializer_list<std::string_view> key) const;
  /// The nested get() over a braced list, to change the entry.
  [[nodiscard]] TENSORFILE_ENTRY Entry& get(std::initializer_list<std::string_view> key);
  /// The nested get() over a key held as strings.
  [[nodiscard]] TENSORFILE_ENTRY const Entry& get(std::span<const std::string> key) const;
  /// The nested get() over a key held as strings, to change the entry.
  [[nodiscard]] TENSORFILE_ENTRY Entry& get(std::span<const std::string> key);

  /// Inserts `value` at `key`, or replaces the value there (keeping its position); returns it. Throws
  /// ArgumentError when the value's leading dimensions (a sub-TensorDict's batch size) do not start with
  /// this batch size.
  TENSORFILE_ENTRY Entry& set(std::string key, Entry value);
  /// Sets a nested key, creating missing intermediate TensorDicts with this batch size.
  TENSORFILE_ENTRY Entry& set(std::span<const std::string_view> key, Entry value);
  /// The nested set() over a braced list: `td.set({"nested", "e"}, tensor)`.
  TENSORFILE_ENTRY Entry& set(std::initializer_list<std::string_view> key, Entry value);
  /// The nested set() over a key held as strings.
  TENSORFILE_ENTRY Entry& set(std::span<const std::string> key, Entry value);

  /// Removes `key`; returns whether it was present.
  TENSORFILE_ENTRY bool erase(std::string_view key);

  // ---- leaves -------------------------------------------------------------------------------

  /// One leaf and its nested key.
  struct Leaf {
    NestedKey key;       ///< keys from this TensorDict down to the leaf
    const Entry* value;  ///< the leaf (a tensor, nested tensor or non-tensor), owned by the TensorDict
  };

  /// Calls `fn(const NestedKey&, const Entry&)` for every leaf, depth first in insertion order.
  template <class Fn>
  void for_each_leaf(Fn&& fn) const {
    using Target = std::remove_reference_t<Fn>;  // const for a const callable: the cast below restores it
    visit_leaves(
        [](void* context, const NestedKey& key, const Entry& leaf) { (*static_cast<Target*>(context))(key, leaf); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  /// Every leaf with its nested key, depth first in insertion order.
  [[nodiscard]] TENSORFILE_ENTRY std::vector<Leaf> leaves() const;

  /// A copy whose tensors are new heap copies (detached from files and mappings).
  [[nodiscard]] TENSORFILE_ENTRY TensorDict clone() const;

  /// Same kind, `_type`, batch size, device, class fields, stack dim and torch container, and the same keys (in
  /// any order, as Python's dict equality) with equal entries.
  TENSORFILE_ENTRY friend bool operator==(const TensorDict& a, const TensorDict& b);

 private:
  friend struct detail::td::TensorDictAccess;
  // The key index's view of an item: its key, hashed with this process's key (keys come from files).
  struct ItemKeys {
    static std::size_t hash(std::string_view key) noexcept { return static_cast<std::size_t>(detail::keyed_hash(key)); }
    static std::size_t hash_item(const Item& item) noexcept { return hash(item.key); }
    static bool matches(const Item& item, std::string_view key) noexcept { return item.key == key; }
  };
  using Index = detail::OrderedIndex<Item, ItemKeys>;

  static std::string quoted(std::string_view key) { return std::string("\"").append(key).append("\""); }

  TENSORFILE_ENTRY std::string key_list() const;

  /// Why `value` cannot live under `batch`, or "" when it can.
  TENSORFILE_ENTRY std::string batch_problem(const Shape& batch, const Entry& value) const;

  TENSORFILE_ENTRY Entry& set_unchecked(std::string key, Entry value);
  TENSORFILE_ENTRY void reserve_items(std::size_t count);

  TENSORFILE_ENTRY Shape stacked_batch_size() const;

  // for_each_leaf's walk, out of line: `visit(context, key, leaf)` calls the caller's function.
  using LeafVisitor = void (*)(void* context, const NestedKey& key, const Entry& leaf);
  TENSORFILE_ENTRY void visit_leaves(LeafVisitor visit, void* context) const;
  void visit_leaves(NestedKey& path, LeafVisitor visit, void* context) const;

  TENSORFILE_ENTRY static void clone_entry(Entry& entry);

  Index items_;  // the items in insertion order, with their key index
  Shape batch_size_;
  std::optional<Device> device_;
  TensorDictKind kind_ = TensorDictKind::plain;
  std::string type_name_{tensordict_type};
  std::int64_t stack_dim_ = 0;
  Dict class_fields_;
  std::optional<Bytes> class_pickle_;
  std::string lazy_view_;
  TorchContainer torch_container_;
};

namespace detail::td {

/// The loader's door into TensorDict: insertion without the batch check (it reports its own errors).
struct TensorDictAccess {
  static Entry& set_unchecked(TensorDict& td, std::string key, Entry value) {
    return td.set_unchecked(std::move(key), std::move(value));
  }
  static std::string batch_problem(const TensorDict& td, const Entry& value) {
    return td.batch_problem(td.batch_size_, value);
  }
  static void reserve(TensorDict& td, std::size_t n) { td.reserve_items(n); }
  static void set_kind(TensorDict& td, TensorDictKind kind, std::int64_t stack_dim) {
    td.kind_ = kind;
    td.stack_dim_ = stack_dim;
  }
  static void set_batch_unchecked(TensorDict& td, Shape batch) { td.batch_size_ = std::move(batch); }
  static Shape stacked_batch_size(const TensorDict& td) { return td.stacked_batch_size(); }
};

}  // namespace detail::td

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_tensordict_tensordict)
#include <algorithm>

namespace tensorfile {

TENSORFILE_ENTRY const Value& NonTensorData::data() const {
  static const Value none;
  const Value* found = fields.find(std::string_view("data"));
  if (found == nullptr) return none;
  if (is_stack() && found->is_string() && found->as_string() == "pickle.pkl") return none;
  return *found;
}

TENSORFILE_ENTRY std::int64_t NonTensorData::stack_dim() const {
  const Value* found = fields.find(std::string_view("stack_dim"));
  return found != nullptr && found->is_int() ? found->as_int() : 0;
}

TENSORFILE_ENTRY NonTensorData non_tensor(Value data) {
  NonTensorData out;
  out.fields.set(Value("data"), std::move(data));
  out.fields.set(Value("_is_non_tensor"), Value(true));
  out.fields.set(Value("_metadata"), Value(None{}));
  return out;
}

TENSORFILE_ENTRY NonTensorData non_tensor_stack(List items, std::int64_t stack_dim) {
  NonTensorData out;
  out.type_name = non_tensor_stack_type;
  out.fields.set(Value("stack_dim"), Value(stack_dim));
  out.fields.set(Value("device"), Value(None{}));
  out.fields.set(Value("data"), Value(std::move(items)));
  return out;
}

TENSORFILE_ENTRY Shape NestedTensor::component_shape(std::int64_t i) const {
  check_index(i);
  const auto row = nested_sizes.select(0, i).contiguous();
  const auto* p = row.data<const std::int64_t>();
  return Shape(p, p + row.numel());
}

TENSORFILE_ENTRY Tensor NestedTensor::component(std::int64_t i) const {
  check_index(i);
  std::int64_t offset = 0;
  for (std::int64_t k = 0; k < i; ++k) offset += numel_of(component_shape(k));
  Shape shape = component_shape(i);
  const std::int64_t count = numel_of(shape);
  return values.narrow(0, offset, count).reshape(std::move(shape));
}

TENSORFILE_ENTRY NestedTensor NestedTensor::from_components(std::span<const Tensor> components) {
  if (components.empty()) throw ArgumentError("a nested tensor needs at least one component; got none");
  const DType dtype = components.front().dtype();
  const std::size_t rank = components.front().dim();
  std::int64_t total = 0;
  for (const Tensor& c : components) {
    if (c.dtype() != dtype || c.dim() != rank) {
      throw ArgumentError("nested tensor components differ; expected " + std::string(dtype_name(dtype)) + " of rank " +
                          std::to_string(rank) + ", got " + std::string(dtype_name(c.dtype())) + " of rank " +
                          std::to_string(c.dim()));
    }
    total += c.numel();
  }
  NestedTensor out;
  out.values = Tensor::zeros({total}, dtype);
  out.nested_sizes =
      Tensor::zeros({static_cast<std::int64_t>(components.size()), static_cast<std::int64_t>(rank)}, DType::Int64);
  std::byte* dst = out.values.mutable_raw_data();
  auto* sizes = out.nested_sizes.data<std::int64_t>();
  for (const Tensor& c : components) {
    c.copy_into(dst);
    dst += c.nbytes();
    for (const auto s : c.sizes()) *sizes++ = s;
  }
  return out;
}

TENSORFILE_ENTRY void NestedTensor::check_index(std::int64_t i) const {
  if (i < 0 || i >= size()) {
    throw ArgumentError("nested tensor component " + std::to_string(i) + " is out of range; expected below " +
                        std::to_string(size()));
  }
}

// ---- Entry members that need a complete TensorDict ---------------------------------------------

TENSORFILE_ENTRY Entry::Entry(TensorDict tensordict)
    : kind_(Kind::tensordict), boxed_(new TensorDict(std::move(tensordict))) {}

TENSORFILE_ENTRY Entry::Entry(const Entry& other) : kind_(other.kind_), tensor_(other.tensor_) {
  if (other.boxed_ == nullptr) return;  // a tensor, or a moved-from Entry
  switch (other.kind_) {
    case Kind::tensor: break;
    case Kind::nested_tensor: boxed_ = new NestedTensor(other.as_nested_tensor()); break;
    case Kind::tensordict: boxed_ = new TensorDict(other.as_tensordict()); break;
    case Kind::non_tensor: boxed_ = new NonTensorData(other.as_non_tensor()); break;
  }
}

TENSORFILE_ENTRY Entry& Entry::operator=(const Entry& other) {
  if (this != &other) Entry(other).swap(*this);
  return *this;
}

TENSORFILE_ENTRY Entry::~Entry() {
  switch (kind_) {
    case Kind::tensor: break;
    case Kind::nested_tensor: delete static_cast<NestedTensor*>(boxed_); break;
    case Kind::tensordict: delete static_cast<TensorDict*>(boxed_); break;
    case Kind::non_tensor: delete static_cast<NonTensorData*>(boxed_); break;
  }
}

TENSORFILE_ENTRY void Entry::wrong_kind(Kind wanted) const {
  throw ArgumentError("entry is a " + std::string(kind_name(kind_)) + "; expected a " + std::string(kind_name(wanted)));
}

TENSORFILE_ENTRY const Entry& Entry::operator[](std::string_view key) const { return as_tensordict().get(key); }
TENSORFILE_ENTRY Entry& Entry::operator[](std::string_view key) { return as_tensordict().get(key); }

TENSORFILE_ENTRY bool operator==(const Entry& a, const Entry& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Entry::Kind::tensor: return detail::td::same_tensor_values(a.as_tensor(), b.as_tensor());
    case Entry::Kind::nested_tensor: return a.as_nested_tensor().equal(b.as_nested_tensor());
    case Entry::Kind::tensordict: return a.as_tensordict() == b.as_tensordict();
    case Entry::Kind::non_tensor: return a.as_non_tensor() == b.as_non_tensor();
  }
  return false;
}

TENSORFILE_ENTRY bool operator==(const TorchContainer& a, const TorchContainer& b) {
  if (a.kind != b.kind || a.int_keys.size() != b.int_keys.size() || !(a.attributes == b.attributes)) return false;
  const auto sorted = [](std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  return sorted(a.int_keys) == sorted(b.int_keys);  // O(n log n): an optimizer may hold thousands
}

// ---- TensorDict members ----------------------------------------------------------------------

TENSORFILE_ENTRY std::vector<std::string_view> TensorDict::keys() const {
  std::vector<std::string_view> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.emplace_back(item.key);
  return out;
}

TENSORFILE_ENTRY const Entry* TensorDict::find(std::string_view key) const noexcept {
  const std::size_t i = items_.find(key);
  return i == Index::npos ? nullptr : &items_[i].value;
}

TENSORFILE_ENTRY const Entry* TensorDict::find(std::span<const std::string_view> key) const noexcept {
  const TensorDict* td = this;
  const Entry* entry = nullptr;
  for (const std::string_view step : key) {
    if (td == nullptr) return nullptr;
    entry = td->find(step);
    if (entry == nullptr) return nullptr;
    td = entry->is_tensordict() ? &entry->as_tensordict() : nullptr;
  }
  return entry;
}

TENSORFILE_ENTRY const Entry* TensorDict::find(std::span<const std::string> key) const {
  std::vector<std::string_view> views(key.begin(), key.end());
  return find(std::span<const std::string_view>(views));
}

TENSORFILE_ENTRY const Entry& TensorDict::get(std::string_view key) const {
  if (const Entry* entry = find(key)) return *entry;
  throw ArgumentError("key " + quoted(key) + " is not in the TensorDict; expected one of " + key_list());
}

TENSORFILE_ENTRY const Entry& TensorDict::get(std::span<const std::string> key) const {
  std::vector<std::string_view> views(key.begin(), key.end());
  return get(std::span<const std::string_view>(views));
}

TENSORFILE_ENTRY Entry& TensorDict::set(std::string key, Entry value) {
  if (auto problem = batch_problem(batch_size_, value); !problem.empty()) {
    throw ArgumentError("key " + quoted(key) + ": " + problem);
  }
  return set_unchecked(std::move(key), std::move(value));
}

TENSORFILE_ENTRY Entry& TensorDict::set(std::span<const std::string> key, Entry value) {
  std::vector<std::string_view> views(key.begin(), key.end());
  return set(std::span<const std::string_view>(views), std::move(value));
}

TENSORFILE_ENTRY bool TensorDict::erase(std::string_view key) {
  const std::size_t i = items_.find(key);
  if (i == Index::npos) return false;
  items_.erase(i);
  return true;
}

TENSORFILE_ENTRY void TensorDict::visit_leaves(LeafVisitor visit, void* context) const {
  NestedKey path;
  visit_leaves(path, visit, context);
}

TENSORFILE_ENTRY void TensorDict::visit_leaves(NestedKey& path, LeafVisitor visit, void* context) const {
  for (const auto& item : items_) {
    path.push_back(item.key);
    if (item.value.is_tensordict()) {
      item.value.as_tensordict().visit_leaves(path, visit, context);
    } else {
      visit(context, std::as_const(path), item.value);
    }
    path.pop_back();
  }
}

TENSORFILE_ENTRY std::vector<TensorDict::Leaf> TensorDict::leaves() const {
  std::vector<Leaf> out;
  for_each_leaf([&](const NestedKey& key, const Entry& value) { out.push_back({key, &value}); });
  return out;
}

TENSORFILE_ENTRY bool operator==(const TensorDict& a, const TensorDict& b) {
  if (a.kind_ != b.kind_ || a.type_name_ != b.type_name_ || a.batch_size_ != b.batch_size_ ||
      !(a.torch_container_ == b.torch_container_) || a.device_ != b.device_ || a.stack_dim_ != b.stack_dim_ ||
      a.items_.size() != b.items_.size() || !detail::td::same_dict(a.class_fields_, b.class_fields_) ||
      a.class_pickle_ != b.class_pickle_) {
    return false;
  }
  for (const auto& item : a.items_) {
    const Entry* other = b.find(item.key);
    if (other == nullptr || !(item.value == *other)) return false;
  }
  return true;
}

TENSORFILE_ENTRY void TensorDict::reserve_items(std::size_t count) { items_.reserve(count); }

TENSORFILE_ENTRY Entry& TensorDict::set_unchecked(std::string key, Entry value) {
  const std::string_view lookup = key;  // `key` moves into a new item only after the lookup
  auto [item, inserted] = items_.find_or_append(lookup, [&] { return Item{std::move(key), std::move(value)}; });
  if (!inserted) item.value = std::move(value);
  return item.value;
}

TENSORFILE_ENTRY TensorDict::TensorDict(std::initializer_list<std::pair<std::string_view, Entry>> items,
                                        Shape batch_size, std::optional<Device> device)
    : batch_size_(std::move(batch_size)), device_(device) {
  items_.reserve(items.size());
  for (const auto& [key, value] : items) set(std::string(key), value);
}

TENSORFILE_ENTRY TensorDict TensorDict::lazy_stack(std::vector<Entry> items, std::int64_t stack_dim) {
  TensorDict out;
  out.kind_ = TensorDictKind::lazy_stack;
  out.type_name_ = lazy_stacked_tensordict_type;
  out.stack_dim_ = stack_dim;
  for (std::size_t i = 0; i < items.size(); ++i) out.set(std::to_string(i), std::move(items[i]));
  out.batch_size_ = out.stacked_batch_size();
  return out;
}

TENSORFILE_ENTRY void TensorDict::set_batch_size(Shape batch_size) {
  for (const auto& item : items_) {
    if (auto problem = batch_problem(batch_size, item.value); !problem.empty()) {
      throw ArgumentError("key " + quoted(item.key) + ": " + problem);
    }
  }
  batch_size_ = std::move(batch_size);
}

TENSORFILE_ENTRY const Entry& TensorDict::get(std::span<const std::string_view> key) const {
  if (key.empty()) throw ArgumentError("nested key is empty; expected at least one key");
  const TensorDict* td = this;
  for (std::size_t i = 0;; ++i) {
    const Entry& entry = td->get(key[i]);
    if (i + 1 == key.size()) return entry;
    if (!entry.is_tensordict()) {
      throw ArgumentError("key " + quoted(key[i]) + " holds a " + std::string(Entry::kind_name(entry.kind())) +
                          "; expected a TensorDict to look up " + quoted(key[i + 1]) + " in");
    }
    td = &entry.as_tensordict();
  }
}

TENSORFILE_ENTRY Entry& TensorDict::set(std::span<const std::string_view> key, Entry value) {
  if (key.empty()) throw ArgumentError("nested key is empty; expected at least one key");
  TensorDict* td = this;
  for (std::size_t i = 0; i + 1 < key.size(); ++i) {
    Entry* entry = td->find(key[i]);
    if (entry == nullptr) entry = &td->set(std::string(key[i]), TensorDict(td->batch_size_, td->device_));
    if (!entry->is_tensordict()) {
      throw ArgumentError("key " + quoted(key[i]) + " holds a " + std::string(Entry::kind_name(entry->kind())) +
                          "; expected a TensorDict to set " + quoted(key[i + 1]) + " in");
    }
    td = &entry->as_tensordict();
  }
  return td->set(std::string(key.back()), std::move(value));
}

TENSORFILE_ENTRY TensorDict TensorDict::clone() const {
  TensorDict out = *this;
  for (auto& item : out.items_.mutable_items()) clone_entry(item.value);
  return out;
}

TENSORFILE_ENTRY std::string TensorDict::key_list() const {
  if (items_.empty()) return "no key (it is empty)";
  std::string out;
  for (std::size_t i = 0; i < items_.size() && i < 10; ++i) out.append(i ? ", " : "").append(quoted(items_[i].key));
  if (items_.size() > 10) out.append(", ... (").append(std::to_string(items_.size())).append(" keys)");
  return out;
}

TENSORFILE_ENTRY std::string TensorDict::batch_problem(const Shape& batch, const Entry& value) const {
  if (kind_ == TensorDictKind::lazy_stack || batch.empty()) return {};
  const auto starts_with_batch = [&](const Shape& shape) {
    return shape.size() >= batch.size() && std::equal(batch.begin(), batch.end(), shape.begin());
  };
  switch (value.kind()) {
    case Entry::Kind::tensor: {
      const Shape& shape = value.as_tensor().sizes();
      if (starts_with_batch(shape)) return {};
      return "tensor of shape " + detail::shape_string(shape) +
             " does not match the batch size; expected leading dimensions " + detail::shape_string(batch) + ", got " +
             detail::shape_string(shape);
    }
    case Entry::Kind::tensordict: {
      const Shape& shape = value.as_tensordict().batch_size();
      if (starts_with_batch(shape)) return {};
      return "TensorDict of batch size " + detail::shape_string(shape) +
             " does not match the batch size; expected leading dimensions " + detail::shape_string(batch) + ", got " +
             detail::shape_string(shape);
    }
    case Entry::Kind::nested_tensor: {
      const std::int64_t n = value.as_nested_tensor().size();
      if (batch.size() == 1 && batch[0] == n) return {};
      return "nested tensor of " + std::to_string(n) + " components does not match the batch size; expected " +
             detail::shape_string(batch) + ", got (" + std::to_string(n) + ", ...)";
    }
    case Entry::Kind::non_tensor: return {};
  }
  return {};
}

TENSORFILE_ENTRY Shape TensorDict::stacked_batch_size() const {
  Shape base;
  if (!items_.empty() && items_[0].value.is_tensordict()) base = items_[0].value.as_tensordict().batch_size();
  const auto count = static_cast<std::int64_t>(items_.size());
  const auto rank = static_cast<std::int64_t>(base.size());
  std::int64_t dim = stack_dim_ < 0 ? stack_dim_ + rank + 1 : stack_dim_;
  dim = std::clamp<std::int64_t>(dim, 0, rank);
  base.insert(base.begin() + dim, count);
  return base;
}

TENSORFILE_ENTRY void TensorDict::clone_entry(Entry& entry) {
  switch (entry.kind()) {
    case Entry::Kind::tensor: entry.as_tensor() = entry.as_tensor().clone(); break;
    case Entry::Kind::nested_tensor:
      entry.as_nested_tensor().values = entry.as_nested_tensor().values.clone();
      entry.as_nested_tensor().nested_sizes = entry.as_nested_tensor().nested_sizes.clone();
      break;
    case Entry::Kind::tensordict:
      for (auto& item : entry.as_tensordict().items_.mutable_items()) clone_entry(item.value);
      break;
    case Entry::Kind::non_tensor: break;
  }
}

// The forwarding overloads are out of line too: their bodies' overload resolution (string views against spans and
// initializer lists, whose range constraints GCC checks) cost every including TU more than all of TensorDict's
// other declarations.
TENSORFILE_ENTRY Entry* TensorDict::find(std::string_view key) noexcept {
  return const_cast<Entry*>(std::as_const(*this).find(key));
}
TENSORFILE_ENTRY const Entry* TensorDict::find(std::initializer_list<std::string_view> key) const {
  return find(std::span<const std::string_view>(key.begin(), key.size()));
}
TENSORFILE_ENTRY Entry* TensorDict::find(std::span<const std::string_view> key) noexcept {
  return const_cast<Entry*>(std::as_const(*this).find(key));
}
TENSORFILE_ENTRY Entry* TensorDict::find(std::initializer_list<std::string_view> key) {
  return const_cast<Entry*>(std::as_const(*this).find(key));
}
TENSORFILE_ENTRY Entry* TensorDict::find(std::span<const std::string> key) {
  return const_cast<Entry*>(std::as_const(*this).find(key));
}
TENSORFILE_ENTRY bool TensorDict::contains(std::string_view key) const noexcept { return find(key) != nullptr; }
TENSORFILE_ENTRY bool TensorDict::contains(std::initializer_list<std::string_view> key) const {
  return find(key) != nullptr;
}
TENSORFILE_ENTRY const Entry& TensorDict::operator[](std::string_view key) const { return get(key); }
TENSORFILE_ENTRY Entry& TensorDict::operator[](std::string_view key) { return get(key); }
TENSORFILE_ENTRY Entry& TensorDict::get(std::string_view key) {
  return const_cast<Entry&>(std::as_const(*this).get(key));
}
TENSORFILE_ENTRY Entry& TensorDict::get(std::span<const std::string_view> key) {
  return const_cast<Entry&>(std::as_const(*this).get(key));
}
TENSORFILE_ENTRY const Entry& TensorDict::get(std::initializer_list<std::string_view> key) const {
  return get(std::span<const std::string_view>(key.begin(), key.size()));
}
TENSORFILE_ENTRY Entry& TensorDict::get(std::initializer_list<std::string_view> key) {
  return get(std::span<const std::string_view>(key.begin(), key.size()));
}
TENSORFILE_ENTRY Entry& TensorDict::get(std::span<const std::string> key) {
  return const_cast<Entry&>(std::as_const(*this).get(key));
}
TENSORFILE_ENTRY Entry& TensorDict::set(std::initializer_list<std::string_view> key, Entry value) {
  return set(std::span<const std::string_view>(key.begin(), key.size()), std::move(value));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_tensordict_tensordict)
