// SPDX-License-Identifier: MIT
// Describing object trees and TensorDicts for inspect, with the JSON rules of tests/interop/torch_reference.py.
#include "describe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <compare>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <openssl/evp.h>

#include "python_text.hpp"

namespace tensorfile::cli {

namespace {

// ---- unsupported values: the type name Python would report ----------------------------------

bool is_layout_name(std::string_view name) {
  return name == "strided" || name == "sparse_coo" || name == "sparse_csr" || name == "sparse_csc" ||
         name == "sparse_bsr" || name == "sparse_bsc" || name == "_mkldnn";
}

/// numpy's scalar type for a dtype code ("f4" -> "float32"), or empty.
std::string numpy_scalar_name(std::string_view code) {
  static const std::map<std::string_view, std::string_view> names{
      {"b1", "bool_"},   {"i1", "int8"},    {"i2", "int16"},     {"i4", "int32"},       {"i8", "int64"},
      {"u1", "uint8"},   {"u2", "uint16"},  {"u4", "uint32"},    {"u8", "uint64"},      {"f2", "float16"},
      {"f4", "float32"}, {"f8", "float64"}, {"c8", "complex64"}, {"c16", "complex128"},
  };
  auto it = names.find(code);
  return it == names.end() ? std::string() : std::string(it->second);
}

/// What `type(x).__module__ + "." + type(x).__qualname__` (or "tensor:<layout>") says for an opaque object.
std::string object_type_name(const Object& object) {
  const std::string full = object.module + "." + object.name;
  if (object.newobj) return full;  // cls.__new__(cls, ...): an instance of cls
  const List* args = object.args.is_tuple() ? &object.args.as_tuple() : nullptr;
  if (full == "torch._utils._rebuild_qtensor") return "tensor:quantized";
  if ((full == "torch._utils._rebuild_sparse_tensor" || full == "torch._utils._rebuild_sparse_csr_tensor") && args &&
      !args->empty() && (*args)[0].is_global()) {
    return "tensor:" + (*args)[0].as_global().name;
  }
  // Reconstructors whose first argument is the class of the result.
  if ((full == "numpy.core.multiarray._reconstruct" || full == "copyreg._reconstructor") && args && !args->empty() &&
      (*args)[0].is_global()) {
    return (*args)[0].as_global().module + "." + (*args)[0].as_global().name;
  }
  // numpy scalars: scalar(dtype(code, ...), bytes) is an instance of numpy.<scalar type>.
  if (full == "numpy.core.multiarray.scalar" && args && !args->empty() && (*args)[0].is_object()) {
    const Object& dtype = (*args)[0].as_object();
    if (dtype.module == "numpy" && dtype.name == "dtype" && dtype.args.is_tuple() && !dtype.args.as_tuple().empty() &&
        dtype.args.as_tuple()[0].is_string()) {
      const std::string scalar = numpy_scalar_name(dtype.args.as_tuple()[0].as_string());
      if (!scalar.empty()) return "numpy." + scalar;
    }
  }
  return full;  // a class called with arguments: an instance of it
}

// ---- set ordering (torch_reference.py's sort_key) --------------------------------------------

/// Python's type name of a set element with a defined order, or nullopt.
std::optional<std::string_view> sortable_type(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::none: return "none";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer:
    case Value::Kind::big_integer: return "int";
    case Value::Kind::floating: return "float";
    case Value::Kind::complex: return "complex";
    case Value::Kind::string: return "str";
    case Value::Kind::bytes: return "bytes";
    case Value::Kind::device: return "device";
    case Value::Kind::dtype: return "dtype";
    case Value::Kind::tuple: {
      for (const auto& item : v.as_tuple()) {
        if (!sortable_type(item)) return std::nullopt;
      }
      return "tuple";
    }
    default: return std::nullopt;
  }
}

/// Signed comparison of two ints, either of which may be a BigInt.
std::strong_ordering compare_ints(const Value& a, const Value& b) {
  const auto sign_and_magnitude = [](const Value& v) -> std::pair<int, std::string> {
    std::string text = v.is_int() ? std::to_string(v.as_int()) : v.as_big_int().str();
    const int sign = text.front() == '-' ? -1 : text == "0" ? 0 : 1;
    if (sign < 0) text.erase(0, 1);
    return {sign, text};
  };
  if (a.is_int() && b.is_int()) return a.as_int() <=> b.as_int();
  auto [sa, ma] = sign_and_magnitude(a);
  auto [sb, mb] = sign_and_magnitude(b);
  if (sa != sb) return sa <=> sb;
  auto by_magnitude = ma.size() != mb.size() ? ma.size() <=> mb.size() : ma.compare(mb) <=> 0;
  return sa < 0 ? 0 <=> by_magnitude : by_magnitude;
}

/// Orders two sortable values as Python sorts their sort_key tuples (NaN compares as unordered: equal).
std::weak_ordering compare_keys(const Value& a, const Value& b) {
  const std::string_view ta = *sortable_type(a);
  const std::string_view tb = *sortable_type(b);
  if (ta != tb) return ta.compare(tb) <=> 0;
  const auto doubles = [](double x, double y) {
    return x < y ? std::weak_ordering::less : y < x ? std::weak_ordering::greater : std::weak_ordering::equivalent;
  };
  switch (a.kind()) {
    case Value::Kind::boolean: return a.as_bool() <=> b.as_bool();
    case Value::Kind::integer:
    case Value::Kind::big_integer: return compare_ints(a, b);
    case Value::Kind::floating: return doubles(a.as_float(), b.as_float());
    case Value::Kind::complex: {
      const auto ordering = doubles(a.as_complex().real(), b.as_complex().real());
      return ordering != 0 ? ordering : doubles(a.as_complex().imag(), b.as_complex().imag());
    }
    case Value::Kind::string: return a.as_string().compare(b.as_string()) <=> 0;  // UTF-8 order is code point order
    case Value::Kind::bytes: {
      const auto& x = a.as_bytes().data;
      const auto& y = b.as_bytes().data;
      return std::lexicographical_compare_three_way(x.begin(), x.end(), y.begin(), y.end());
    }
    case Value::Kind::device: return a.as_device().str().compare(b.as_device().str()) <=> 0;
    case Value::Kind::dtype: return dtype_name(a.as_dtype()).compare(dtype_name(b.as_dtype())) <=> 0;
    case Value::Kind::tuple: {
      const auto& x = a.as_tuple();
      const auto& y = b.as_tuple();
      for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
        if (const auto ordering = compare_keys(x[i], y[i]); ordering != 0) return ordering;
      }
      return x.size() <=> y.size();
    }
    default: return std::weak_ordering::equivalent;  // none
  }
}

// ---- hashing ---------------------------------------------------------------------------------

/// SHA-256 of the values in C order (OpenSSL's), streamed through byte runs of the view: the tensor is not copied.
std::string tensor_sha256(const Tensor& t) {
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL cannot start a SHA-256 digest");
  }
  t.for_each_byte_run([&](std::span<const std::byte> bytes) {
    if (EVP_DigestUpdate(context.get(), bytes.data(), bytes.size()) != 1) {
      throw std::runtime_error("OpenSSL's SHA-256 digest failed");
    }
  });
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest.data(), &length) != 1) {
    throw std::runtime_error("OpenSSL's SHA-256 digest failed");
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string items_text(std::size_t n, std::string_view noun = "item") {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// ---- the walk ---------------------------------------------------------------------------------

class Describer {
 public:
  Describer(const StorageTags& tags, bool hashes) : tags_(tags), hashes_(hashes) {}

  void walk(const Value& v, const std::string& path, std::size_t depth, const std::string& label) {
    switch (v.kind()) {
      case Value::Kind::none: return value(path, depth, label, "none", "null", "None");
      case Value::Kind::boolean: {
        const bool b = v.as_bool();
        return value(path, depth, label, "bool", b ? "true" : "false", b ? "True" : "False");
      }
      case Value::Kind::integer:
      case Value::Kind::big_integer: {
        const std::string text = python_repr(v);
        return value(path, depth, label, "int", text, text);
      }
      case Value::Kind::floating: return value(path, depth, label, "float", json_float(v.as_float()), python_repr(v));
      case Value::Kind::complex:
        return value(path, depth, label, "complex",
                     "[" + json_float(v.as_complex().real()) + ", " + json_float(v.as_complex().imag()) + "]",
                     python_repr(v));
      case Value::Kind::string: return value(path, depth, label, "str", json_string(v.as_string()), python_repr(v));
      case Value::Kind::bytes:
        return value(path, depth, label, "bytes", json_string(hex_bytes(v.as_bytes().data)),
                     fmt::format("{} byte{}", v.as_bytes().data.size(), v.as_bytes().data.size() == 1 ? "" : "s"));
      case Value::Kind::device:
        return value(path, depth, label, "device", json_string(v.as_device().str()), python_repr(v));
      case Value::Kind::dtype:
        return value(path, depth, label, "dtype", json_string(dtype_name(v.as_dtype())), python_repr(v));
      case Value::Kind::tensor: return tensor(path, depth, label, v.as_tensor(), v.is_parameter());
      case Value::Kind::storage: {
        // A 1-d view of all of it. (Ancient legacy files may name a sub-range of a storage: that range is
        // then a storage of its own, as in torch.)
        const Tensor& whole = v.as_storage().tensor;
        Storage storage = whole.storage();
        if (whole.storage_offset() != 0) {
          storage =
              storage.slice(static_cast<std::size_t>(whole.storage_offset()) * whole.element_size(), whole.nbytes());
        }
        return tensor(path, depth, label, Tensor(storage, whole.dtype(), {whole.numel()}, {1}), false);
      }
      case Value::Kind::dict: {
        const Dict& dict = v.as_dict();
        container(depth, label,
                  fmt::format("{}, {}{}", dict.ordered ? "OrderedDict" : "dict", items_text(dict.size()),
                              dict.metadata() != nullptr ? ", with _metadata" : ""));
        for (const auto& [key, item] : dict) {
          const std::string text = key_text(key);
          walk(item, child_path(path, text), depth + 1, text);
        }
        return;
      }
      case Value::Kind::list:
      case Value::Kind::tuple: {
        const auto& items = v.elements();
        container(depth, label, fmt::format("{}, {}", v.is_list() ? "list" : "tuple", items_text(items.size())));
        for (std::size_t i = 0; i < items.size(); ++i) {
          walk(items[i], child_path(path, std::to_string(i)), depth + 1, fmt::format("[{}]", i));
        }
        return;
      }
      case Value::Kind::set: {
        std::vector<const Value*> items;
        for (const auto& item : v.as_set().items) {
          if (!sortable_type(item)) return value(path, depth, label, "unsupported", json_string("builtins.set"), "set");
          items.push_back(&item);
        }
        std::stable_sort(items.begin(), items.end(),
                         [](const Value* a, const Value* b) { return compare_keys(*a, *b) < 0; });
        container(depth, label,
                  fmt::format("{}, {} (sorted)", v.as_set().frozen ? "frozenset" : "set", items_text(items.size())));
        for (std::size_t i = 0; i < items.size(); ++i) {
          walk(*items[i], child_path(path, std::to_string(i)), depth + 1, fmt::format("[{}]", i));
        }
        return;
      }
      case Value::Kind::global:
      case Value::Kind::object: {
        const std::string name = unsupported_name(v);
        return value(path, depth, label, "unsupported", json_string(name), "<" + name + ", not read>");
      }
    }
  }

  void walk(const TensorDict& td, const std::string& path, std::size_t depth, const std::string& label) {
    std::string batch = to_string(td.batch_size());
    if (!td.lazy_view().empty()) batch += " (" + td.lazy_view() + ")";  // read from a lazy layout: say how
    switch (td.kind()) {
      case TensorDictKind::plain:
        container(depth, label,
                  fmt::format("{}, batch size {}, {}", td.class_name(), batch, items_text(td.size(), "key")));
        break;
      case TensorDictKind::tensorclass:
        container(depth, label,
                  fmt::format("{} (tensorclass), batch size {}, {}", td.class_name(), batch,
                              items_text(td.size() + td.class_fields().size(), "field")));
        break;
      case TensorDictKind::lazy_stack:
        container(depth, label,
                  fmt::format("{}, stacked on dim {}, batch size {}, {}", td.class_name(), td.stack_dim(), batch,
                              items_text(td.size())));
        break;
    }
    for (const auto& item : td) walk(item.value, child_path(path, item.key), depth + 1, item.key);
    for (const auto& [key, field] : td.class_fields()) {
      const std::string text = key_text(key);
      walk(field, child_path(path, text), depth + 1, text);
    }
  }

  Description take() { return std::move(out_); }

 private:
  void walk(const Entry& entry, const std::string& path, std::size_t depth, const std::string& label) {
    switch (entry.kind()) {
      case Entry::Kind::tensor: return tensor(path, depth, label, entry.as_tensor(), false);
      case Entry::Kind::tensordict: return walk(entry.as_tensordict(), path, depth, label);
      case Entry::Kind::nested_tensor: {
        const NestedTensor& nested = entry.as_nested_tensor();
        const std::int64_t rank = nested.nested_sizes.dim() == 2 ? nested.nested_sizes.size(1) : 0;
        return value(path, depth, label, "unsupported", json_string("nested_tensor"),
                     fmt::format("NestedTensor {}, {} of rank {}", dtype_name(nested.values.dtype()),
                                 items_text(static_cast<std::size_t>(nested.size()), "component"), rank));
      }
      case Entry::Kind::non_tensor: {
        const NonTensorData& data = entry.as_non_tensor();
        if (data.data().is_none() && data.pickle) {
          return value(path, depth, label, "unsupported", json_string("pickle"),
                       fmt::format("<{} kept as a pickle, not read>", data.class_name()));
        }
        return walk(data.data(), path, depth, label);
      }
    }
  }

  void container(std::size_t depth, const std::string& label, std::string text) {
    out_.tree.push_back({TreeNode::Kind::container, depth, label, std::move(text), 0});
  }

  void value(const std::string& path, std::size_t depth, const std::string& label, std::string_view type,
             std::string json, std::string text) {
    out_.tree.push_back({TreeNode::Kind::value, depth, label, {}, out_.values.size()});
    out_.values.push_back({path, std::string(type), std::move(json), std::move(text)});
  }

  void tensor(const std::string& path, std::size_t depth, const std::string& label, const Tensor& t, bool parameter) {
    TensorRecord record{.path = path, .tensor = t, .parameter = parameter};
    std::optional<std::string> tag = tags_.find(t.storage());
    // A meta tensor that no record backs was saved on meta; a copy made while loading (a resolved conj/neg
    // view) backs no record either but has data, so it keeps a storage of its own.
    record.has_record = tag.has_value() || !t.device().is_meta();
    record.tag = tag ? *tag : record.has_record ? "?" : "meta";
    if (record.has_record) {
      const auto key = std::make_pair(t.storage().data(), t.storage().owner());
      const auto [it, added] = storage_ids_.try_emplace(key, out_.storage_bytes.size());
      if (added) out_.storage_bytes.push_back(t.storage().size_bytes());
      record.storage = it->second;
    }
    if (hashes_ && t.device().is_cpu()) record.sha256 = tensor_sha256(t);
    out_.tree.push_back({TreeNode::Kind::tensor, depth, label, {}, out_.tensors.size()});
    out_.tensors.push_back(std::move(record));
  }

  const StorageTags& tags_;
  bool hashes_;
  Description out_;
  std::map<std::pair<const std::byte*, const void*>, std::size_t> storage_ids_;
};

std::string json_ints(const Shape& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

void StorageTags::add(const Storage& storage, std::string_view tag) {
  tags_.insert_or_assign(std::make_pair(storage.data(), storage.owner()), std::string(tag));
}

std::optional<std::string> StorageTags::find(const Storage& storage) const {
  const auto it = tags_.find(std::make_pair(storage.data(), storage.owner()));
  if (it != tags_.end()) return it->second;
  return fallback;
}

std::string unsupported_name(const Value& v) {
  if (v.is_object()) return object_type_name(v.as_object());
  if (v.is_global()) {
    const auto& g = v.as_global();
    if (g.module == "torch" && is_layout_name(g.name)) return "torch.layout";
    return g.module + "." + g.name;
  }
  return "builtins." + std::string(Value::kind_name(v.kind()));
}

Description describe_value(const Value& root, const StorageTags& tags, bool hashes) {
  Describer describer(tags, hashes);
  describer.walk(root, "", 0, "");
  return describer.take();
}

Description describe_tensordict(const TensorDict& root, bool hashes) {
  StorageTags tags;
  tags.fallback = "cpu";  // every leaf is a file of its own, mapped on the host
  Describer describer(tags, hashes);
  describer.walk(root, "", 0, "");
  return describer.take();
}

std::string description_json(const Description& description, std::string_view format, bool hashes) {
  std::string out = "{\"format\": " + json_string(format) + ", \"tensors\": [";
  for (std::size_t i = 0; i < description.tensors.size(); ++i) {
    const TensorRecord& r = description.tensors[i];
    const Tensor& t = r.tensor;
    out += fmt::format(
        "{}{{\"path\": {}, \"dtype\": {}, \"shape\": {}, \"stride\": {}, \"storage_offset\": {}, "
        "\"requires_grad\": {}, \"device\": \"{}\", \"storage\": {}",
        i ? ", " : "", json_string(r.path), json_string(dtype_name(t.dtype())), json_ints(t.sizes()),
        json_ints(t.strides()), t.storage_offset(), t.requires_grad() ? "true" : "false", r.has_record ? "cpu" : "meta",
        r.storage ? std::to_string(*r.storage) : "null");
    if (hashes) out += ", \"sha256\": " + (r.sha256 ? json_string(*r.sha256) : std::string("null"));
    out += "}";
  }
  out += "], \"values\": [";
  for (std::size_t i = 0; i < description.values.size(); ++i) {
    const ValueRecord& r = description.values[i];
    out += fmt::format("{}{{\"path\": {}, \"type\": \"{}\", \"value\": {}}}", i ? ", " : "", json_string(r.path),
                       r.type, r.json);
  }
  return out + "]}";
}

}  // namespace tensorfile::cli
