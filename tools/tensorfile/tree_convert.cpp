// SPDX-License-Identifier: MIT
// convert's tree mapping between torch object trees and TensorDicts (the library's, with the tool's report).
#include "tree_convert.hpp"

#include <optional>
#include <unordered_map>

#include "describe.hpp"
#include "python_text.hpp"

namespace tensorfile::cli {

namespace {

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
        std::optional<Value> item = clean(in[i], child_path(path, std::to_string(i)));
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
        std::optional<Value> attributes = clean(dict.attributes(), path + "/(attributes)");
        out.set_attributes(attributes ? *attributes : Value());
        changed = !attributes || attributes->identity() != dict.attributes().identity();
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

}  // namespace

Value without_code(const Value& v, std::vector<Dropped>& dropped) {
  Cleaner cleaner(dropped);
  std::optional<Value> out = cleaner.clean(v, "");
  return out ? *out : Value();
}

TensorDict to_tensordict(const Value& root, const std::filesystem::path& file, std::vector<Dropped>& changed) {
  std::vector<LeftOut> changes;
  TensorDict td = tensorfile::to_tensordict(root, {.file = file, .left_out = &changes});
  for (auto& item : changes) changed.push_back({std::move(item.path), std::move(item.what)});
  return td;
}

Value to_value(const TensorDict& td, const std::filesystem::path& file, std::vector<Dropped>& dropped) {
  std::vector<LeftOut> left_out;
  Value v = tensorfile::to_value(td, {.file = file, .left_out = &left_out});
  for (auto& item : left_out) dropped.push_back({std::move(item.path), std::move(item.what)});
  return v;
}

}  // namespace tensorfile::cli
