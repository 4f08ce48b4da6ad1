// SPDX-License-Identifier: MIT
/// @file
/// Conversion between torch object trees (Value, e.g. a state_dict or a checkpoint) and TensorDict trees.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/tensordict/tensordict.hpp"

namespace tensorfile {

/// Something to_value() left out of its result, and what it was.
struct LeftOut {
  std::string path{};  ///< where it was, as named_tensors() spells paths ("key/0/..."), "" for the root
  std::string what{};  ///< e.g. "pickled NonTensorData"
};

/// Options of to_tensordict() and to_value().
struct ValueTreeOptions {
  std::filesystem::path file{};  ///< the file the tree came from, named in error messages
  /// Receives what the conversion leaves out or changes (to_tensordict: keys that are neither str nor int, attributes
  /// that are not JSON; to_value: pickled non-tensor data); null: any of them is an error.
  std::vector<LeftOut>* left_out = nullptr;
};

/// `root` as a TensorDict tree: dicts become TensorDicts (keys as text: key_text()), tensors and bare storages
/// tensor leaves, lists and tuples that hold tensors TensorDicts keyed "0", "1"..., and other values
/// NonTensorData holding them as JSON. Tensors are shared, not copied. Throws UnsupportedError, naming
/// `options.file` and the path, for a root that is neither a dict nor a list holding tensors and for values JSON
/// cannot hold (bytes, complex, device, dtype, set, objects), ArgumentError for two keys with one text (1 and "1").
[[nodiscard]] TENSORFILE_ENTRY TensorDict to_tensordict(const Value& root, const ValueTreeOptions& options = {});

/// `td` as a torch object tree (a state_dict for a flat TensorDict of tensors): TensorDicts and tensorclasses
/// become dicts (a tensorclass's JSON attributes included), lazy stacks lists, NonTensorData its value. Tensors are
/// shared, not copied. Pickled non-tensor data is never unpickled: it is listed in `options.left_out` and left out,
/// or, with no list given, UnsupportedError. Throws UnsupportedError, naming `options.file`, for nested tensors.
[[nodiscard]] TENSORFILE_ENTRY Value to_value(const TensorDict& td, const ValueTreeOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_tensordict_value_tree)
#include <charconv>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/value_print.hpp"

namespace tensorfile {

namespace detail::td {

inline std::string tree_child(const std::string& path, std::string_view step) { return child_path(path, step); }
inline std::string tree_member(const std::string& path) { return path.empty() ? "(root)" : path; }

inline bool holds_tensor(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::tensor:
    case Value::Kind::storage: return true;
    case Value::Kind::list:
    case Value::Kind::tuple:
      for (const Value& item : v.elements()) {
        if (holds_tensor(item)) return true;
      }
      return false;
    case Value::Kind::dict:
      for (const auto& [key, item] : v.as_dict()) {
        if (holds_tensor(item)) return true;
      }
      return false;
    case Value::Kind::set:
      for (const Value& item : v.as_set().items) {
        if (holds_tensor(item)) return true;
      }
      return false;
    default: return false;
  }
}

/// Reports a change to `options.left_out`, or throws when there is no list to take it.
inline void report_change(const ValueTreeOptions& options, std::string path, std::string what) {
  if (options.left_out == nullptr) {
    throw UnsupportedError(what + "; expected a tree that converts unchanged (or a left_out list to collect changes)",
                           {.file = options.file, .member = tree_member(path)});
  }
  options.left_out->push_back({std::move(path), std::move(what)});
}

class ValueToTensorDict {
 public:
  explicit ValueToTensorDict(const ValueTreeOptions& options) : options_(options), file_(options.file) {}

  TensorDict collection(const std::vector<std::pair<std::string, const Value*>>& items, const std::string& path) {
    TensorDict td;
    std::set<std::string, std::less<>> seen;
    for (const auto& [key, item] : items) {
      if (!seen.insert(key).second) {
        throw ArgumentError("two keys read \"" + key + "\" as text; expected distinct keys for a TensorDict",
                            {.file = file_, .member = tree_member(path)});
      }
      td.set(key, entry(*item, tree_child(path, key)));
    }
    return td;
  }

  Entry entry(const Value& v, const std::string& path) {
    switch (v.kind()) {
      case Value::Kind::tensor: return v.as_tensor();
      case Value::Kind::storage: return v.as_storage().tensor;
      case Value::Kind::dict: {
        const Dict& dict = v.as_dict();
        TorchContainer container{.kind =
                                     dict.ordered ? TorchContainer::Kind::ordered_dict : TorchContainer::Kind::dict};
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& [key, item] : dict) {
          std::string text = key_text(key);
          if (key.is_int()) {
            container.int_keys.push_back(text);
          } else if (!key.is_string()) {
            report_change(options_, tree_child(path, text),
                          "the " + std::string(Value::kind_name(key.kind())) + " key " + python_repr(key) +
                              " becomes the str key " + python_repr(Value(text)));
          }
          items.emplace_back(std::move(text), &item);
        }
        if (!dict.attributes().is_none()) {
          if (is_json(dict.attributes(), path)) {
            container.attributes = dict.attributes();
          } else {
            report_change(options_, path, "the dict's attributes are left out (they are not JSON values)");
          }
        }
        TensorDict td = collection(items, path);
        td.set_torch_container(std::move(container));
        return td;
      }
      case Value::Kind::list:
      case Value::Kind::tuple: {
        if (!holds_tensor(v)) break;
        std::vector<std::pair<std::string, const Value*>> items;
        for (std::size_t i = 0; i < v.elements().size(); ++i) items.emplace_back(std::to_string(i), &v.elements()[i]);
        TensorDict td = collection(items, path);
        td.set_torch_container({.kind = v.is_list() ? TorchContainer::Kind::list : TorchContainer::Kind::tuple});
        return td;
      }
      default: break;
    }
    check_json(v, path);
    return non_tensor(v);
  }

 private:
  bool is_json(const Value& v, const std::string& path) const {
    try {
      check_json(v, path, false);
      return true;
    } catch (const UnsupportedError&) {
      return false;
    }
  }

  /// Throws UnsupportedError for what JSON cannot hold; reports tuples (they come back as lists) when `report`.
  void check_json(const Value& v, const std::string& path, bool report = true) const {
    switch (v.kind()) {
      case Value::Kind::none:
      case Value::Kind::boolean:
      case Value::Kind::integer:
      case Value::Kind::big_integer:
      case Value::Kind::floating:
      case Value::Kind::string: return;
      case Value::Kind::list:
      case Value::Kind::tuple:
        if (v.is_tuple() && report) report_change(options_, path, "the tuple becomes a list (JSON has no tuples)");
        for (std::size_t i = 0; i < v.elements().size(); ++i) {
          check_json(v.elements()[i], tree_child(path, std::to_string(i)), report);
        }
        return;
      case Value::Kind::dict:
        for (const auto& [key, item] : v.as_dict()) {
          if (!key.is_string()) {
            throw UnsupportedError("a dict with " + std::string(Value::kind_name(key.kind())) +
                                       " keys and no tensor has no tensordict form; expected str keys (JSON)",
                                   {.file = file_, .member = tree_member(path)});
          }
          check_json(item, tree_child(path, key.as_string()), report);
        }
        return;
      default:
        throw UnsupportedError("a value of type " + std::string(Value::kind_name(v.kind())) +
                                   " has no tensordict form; expected tensors, containers of them, or JSON values "
                                   "(None, bool, int, float, str, lists, str-keyed dicts)",
                               {.file = file_, .member = tree_member(path)});
    }
  }

  const ValueTreeOptions& options_;
  const std::filesystem::path& file_;
};

class TensorDictToValue {
 public:
  explicit TensorDictToValue(const ValueTreeOptions& options) : options_(options) {}

  Value collection(const TensorDict& td, const std::string& path) {
    if (td.kind() == TensorDictKind::lazy_stack) {
      List items;
      for (const auto& item : td) {
        if (auto value = entry(item.value, tree_child(path, item.key))) items.push_back(std::move(*value));
      }
      return Value(std::move(items));
    }
    const TorchContainer& container = td.torch_container();
    const bool sequence = container.kind == TorchContainer::Kind::list || container.kind == TorchContainer::Kind::tuple;
    if (sequence && td.kind() == TensorDictKind::plain && keys_count_up(td)) {
      List items;
      for (const auto& item : td) {
        std::optional<Value> value = entry(item.value, tree_child(path, item.key));
        items.push_back(value ? std::move(*value) : Value());  // None keeps the later items' indices
      }
      return container.kind == TorchContainer::Kind::list ? Value(std::move(items)) : Value::tuple(std::move(items));
    }
    if (sequence) {
      report_change(options_, path,
                    "the " + std::string(TorchContainer::kind_name(container.kind)) +
                        " becomes a dict (its keys are no longer \"0\", \"1\"... in order)");
    }
    Dict dict;
    dict.ordered = container.kind == TorchContainer::Kind::ordered_dict;
    const std::set<std::string_view> int_keys(container.int_keys.begin(), container.int_keys.end());
    for (const auto& item : td) {
      if (auto value = entry(item.value, tree_child(path, item.key)))
        dict.set(key_value(item.key, int_keys), std::move(*value));
    }
    for (const auto& [key, field] : td.class_fields()) dict.set(key, field);
    if (!container.attributes.is_none()) dict.set_attributes(container.attributes);
    return Value(std::move(dict));
  }

 private:
  static bool keys_count_up(const TensorDict& td) {
    std::size_t i = 0;
    for (const auto& item : td) {
      if (item.key != std::to_string(i++)) return false;
    }
    return true;
  }

  /// The dict key for `key`: an int when the container recorded it as one (and it reads as one), else the str.
  static Value key_value(const std::string& key, const std::set<std::string_view>& int_keys) {
    if (int_keys.contains(key)) {
      std::int64_t n = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), n);
      if (ec == std::errc{} && end == key.data() + key.size()) return Value(n);
    }
    return Value(key);
  }

  std::optional<Value> entry(const Entry& e, const std::string& path) {
    switch (e.kind()) {
      case Entry::Kind::tensor: return Value(e.as_tensor());
      case Entry::Kind::tensordict: return collection(e.as_tensordict(), path);
      case Entry::Kind::nested_tensor:
        throw UnsupportedError("a nested tensor has no torch.save form that tensorfile writes",
                               {.file = options_.file, .member = path});
      case Entry::Kind::non_tensor: {
        const NonTensorData& data = e.as_non_tensor();
        if (data.data().is_none() && data.pickle) {
          report_change(options_, path, "pickled " + std::string(data.class_name()));  // never unpickled
          return std::nullopt;
        }
        return data.data();
      }
    }
    return std::nullopt;
  }

  const ValueTreeOptions& options_;
};

}  // namespace detail::td

TENSORFILE_ENTRY TensorDict to_tensordict(const Value& root, const ValueTreeOptions& options) {
  if (!root.is_dict() && !((root.is_list() || root.is_tuple()) && detail::td::holds_tensor(root))) {
    throw UnsupportedError("the root is of type " + std::string(Value::kind_name(root.kind())) +
                               "; expected a dict, or a list of tensors (a tensordict tree is a dict of tensors)",
                           {.file = options.file});
  }
  detail::td::ValueToTensorDict convert(options);
  Entry tree = convert.entry(root, "");
  return std::move(tree.as_tensordict());
}

TENSORFILE_ENTRY Value to_value(const TensorDict& td, const ValueTreeOptions& options) {
  detail::td::TensorDictToValue convert(options);
  return convert.collection(td, "");
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_tensordict_value_tree)
