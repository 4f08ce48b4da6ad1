// SPDX-License-Identifier: MIT
// convert's tree mapping between torch object trees and TensorDicts.
#include "tree_convert.hpp"

#include <fmt/format.h>

#include <set>
#include <unordered_map>

#include "describe.hpp"
#include "python_text.hpp"

namespace tensorfile::cli {

namespace {

std::string child_path(const std::string& path, std::string_view step) { return path + "/" + path_step(step); }

class Cleaner {
 public:
  explicit Cleaner(std::vector<Dropped>& dropped) : dropped_(dropped) {}

  /// The cleaned value, or nullopt when `v` itself is code.
  std::optional<Value> clean(const Value& v, const std::string& path) {
    if (v.is_object() || v.is_global()) {
      dropped_.push_back({path, unsupported_name(v)});
      return std::nullopt;
    }
    const void* identity = v.identity();
    if (identity == nullptr || v.is_tensor() || v.is_storage()) return v;
    if (const auto it = done_.find(identity); it != done_.end()) return it->second;
    Value out = rebuilt(v, path);
    done_.emplace(identity, out);
    return out;
  }

 private:
  Value rebuilt(const Value& v, const std::string& path) {
    bool changed = false;
    const auto items = [&](const List& in, bool keep_places) {
      List out;
      out.reserve(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) {
        std::optional<Value> item = clean(in[i], path + "/" + std::to_string(i));
        changed = changed || !item || item->identity() != in[i].identity();
        if (item) {
          out.push_back(std::move(*item));
        } else if (keep_places) {
          out.emplace_back();
        }
      }
      return out;
    };
    switch (v.kind()) {
      case Value::Kind::list: {
        List out = items(v.as_list(), true);
        return changed ? Value(std::move(out)) : v;
      }
      case Value::Kind::tuple: {
        List out = items(v.as_tuple(), true);
        return changed ? Value::tuple(std::move(out)) : v;
      }
      case Value::Kind::set: {
        List out = items(v.as_set().items, false);
        return changed ? Value(Set{std::move(out), v.as_set().frozen}) : v;
      }
      case Value::Kind::dict: {
        const Dict& dict = v.as_dict();
        Dict out;
        out.ordered = dict.ordered;
        std::optional<Value> attributes = clean(dict.attributes, path + "/(attributes)");
        out.attributes = attributes ? *attributes : Value();
        changed = !attributes || attributes->identity() != dict.attributes.identity();
        for (const auto& [key, item] : dict) {
          std::optional<Value> cleaned = clean(item, child_path(path, key_text(key)));
          changed = changed || !cleaned || cleaned->identity() != item.identity();
          if (cleaned) out.set(key, std::move(*cleaned));
        }
        return changed ? Value(std::move(out)) : v;
      }
      default: return v;
    }
  }

  std::vector<Dropped>& dropped_;
  std::unordered_map<const void*, Value> done_;
};

bool holds_tensor(const Value& v) {
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

class ToTensorDict {
 public:
  explicit ToTensorDict(const std::filesystem::path& file) : file_(file) {}

  TensorDict collection(const std::vector<std::pair<std::string, const Value*>>& items, const std::string& path) {
    TensorDict td;
    std::set<std::string, std::less<>> seen;
    for (const auto& [key, item] : items) {
      if (!seen.insert(key).second) {
        throw ArgumentError("two keys read \"" + key + "\" as text; expected distinct keys for a TensorDict",
                            {.file = file_, .member = shown(path)});
      }
      td.set(key, entry(*item, child_path(path, key)));
    }
    return td;
  }

  Entry entry(const Value& v, const std::string& path) {
    switch (v.kind()) {
      case Value::Kind::tensor: return v.as_tensor();
      case Value::Kind::storage: return v.as_storage().tensor;
      case Value::Kind::dict: {
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& [key, item] : v.as_dict()) items.emplace_back(key_text(key), &item);
        return collection(items, path);
      }
      case Value::Kind::list:
      case Value::Kind::tuple: {
        if (!holds_tensor(v)) break;
        std::vector<std::pair<std::string, const Value*>> items;
        for (std::size_t i = 0; i < v.elements().size(); ++i) items.emplace_back(std::to_string(i), &v.elements()[i]);
        return collection(items, path);
      }
      default: break;
    }
    check_json(v, path);
    return non_tensor(v);
  }

  static std::string shown(const std::string& path) { return path.empty() ? "(root)" : path; }

 private:
  void check_json(const Value& v, const std::string& path) const {
    switch (v.kind()) {
      case Value::Kind::none:
      case Value::Kind::boolean:
      case Value::Kind::integer:
      case Value::Kind::big_integer:
      case Value::Kind::floating:
      case Value::Kind::string: return;
      case Value::Kind::list:
      case Value::Kind::tuple:
        for (std::size_t i = 0; i < v.elements().size(); ++i)
          check_json(v.elements()[i], path + "/" + std::to_string(i));
        return;
      case Value::Kind::dict:
        for (const auto& [key, item] : v.as_dict()) {
          if (!key.is_string()) {
            throw UnsupportedError("a dict with " + std::string(Value::kind_name(key.kind())) +
                                       " keys and no tensor has no tensordict form; expected str keys (JSON)",
                                   {.file = file_, .member = shown(path)});
          }
          check_json(item, child_path(path, key.as_string()));
        }
        return;
      default:
        throw UnsupportedError("a value of type " + std::string(Value::kind_name(v.kind())) +
                                   " has no tensordict form; expected tensors, containers of them, or JSON values "
                                   "(None, bool, int, float, str, lists, str-keyed dicts)",
                               {.file = file_, .member = shown(path)});
    }
  }

  const std::filesystem::path& file_;
};

class ToValue {
 public:
  ToValue(const std::filesystem::path& file, std::vector<Dropped>& dropped) : file_(file), dropped_(dropped) {}

  Value collection(const TensorDict& td, const std::string& path) {
    if (td.kind() == TensorDictKind::lazy_stack) {
      List items;
      for (const auto& item : td) {
        if (auto value = entry(item.value, child_path(path, item.key))) items.push_back(std::move(*value));
      }
      return Value(std::move(items));
    }
    Dict dict;
    for (const auto& item : td) {
      if (auto value = entry(item.value, child_path(path, item.key))) dict.set(item.key, std::move(*value));
    }
    for (const auto& [key, field] : td.class_fields()) dict.set(key, field);
    return Value(std::move(dict));
  }

 private:
  std::optional<Value> entry(const Entry& e, const std::string& path) {
    switch (e.kind()) {
      case Entry::Kind::tensor: return Value(e.as_tensor());
      case Entry::Kind::tensordict: return collection(e.as_tensordict(), path);
      case Entry::Kind::nested_tensor:
        throw UnsupportedError("a nested tensor has no torch.save form that tensorfile writes",
                               {.file = file_, .member = path});
      case Entry::Kind::non_tensor: {
        const NonTensorData& data = e.as_non_tensor();
        if (data.data().is_none() && data.pickle) {
          dropped_.push_back({path, "pickled " + std::string(data.class_name())});
          return std::nullopt;
        }
        return data.data();
      }
    }
    return std::nullopt;
  }

  const std::filesystem::path& file_;
  std::vector<Dropped>& dropped_;
};

}  // namespace

Value without_code(const Value& v, std::vector<Dropped>& dropped) {
  Cleaner cleaner(dropped);
  std::optional<Value> out = cleaner.clean(v, "");
  return out ? *out : Value();
}

TensorDict to_tensordict(const Value& root, const std::filesystem::path& file) {
  ToTensorDict convert(file);
  if (!root.is_dict() && !((root.is_list() || root.is_tuple()) && holds_tensor(root))) {
    throw UnsupportedError("the root is of type " + std::string(Value::kind_name(root.kind())) +
                               "; expected a dict, or a list of tensors (a tensordict tree is a dict of tensors)",
                           {.file = file});
  }
  Entry tree = convert.entry(root, "");
  return std::move(tree.as_tensordict());
}

Value to_value(const TensorDict& td, const std::filesystem::path& file, std::vector<Dropped>& dropped) {
  ToValue convert(file, dropped);
  return convert.collection(td, "");
}

}  // namespace tensorfile::cli
