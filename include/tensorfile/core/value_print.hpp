// SPDX-License-Identifier: MIT
/// @file
/// Walking and printing Values: every tensor with its path, and a tree view with dtypes and shapes.
#pragma once

#include <fmt/format.h>

#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/print.hpp"
#include "tensorfile/core/value.hpp"

namespace tensorfile {

/// Python's repr() of the values that can be dict keys or plain leaves: None, bool, int, float, complex,
/// str, bytes, tuple, dtype ("torch.float32"), device, global ("module.name"); "<kind>" for the others.
[[nodiscard]] TENSORFILE_ENTRY std::string python_repr(const Value& v);

/// torch's repr of a tensor Value: to_string(tensor, options), after "Parameter containing:\n" for an
/// nn.Parameter. Throws ArgumentError when `v` holds no tensor.
[[nodiscard]] TENSORFILE_ENTRY std::string tensor_repr(const Value& v, const PrintOptions& options = {});

/// The text of a dict key as one path step, before any escaping: str keys as they are, ints in decimal,
/// other keys as python_repr() ("True", "2.5", "(1, 'a')").
[[nodiscard]] TENSORFILE_ENTRY std::string key_text(const Value& key);

/// Appends one step to a tensor path, as every path of the library and the tool is spelled: "optim" + "state" ->
/// "optim/state", "" (the root) + "optim" -> "optim". Steps are not escaped: a key holding "/" reads as two steps,
/// as in the names the flat formats save.
inline void append_path_step(std::string& path, std::string_view step) {
  if (!path.empty()) path += '/';
  path += step;
}

/// `path` with `step` appended as append_path_step() does.
[[nodiscard]] inline std::string child_path(std::string path, std::string_view step) {
  append_path_step(path, step);
  return path;
}

/// Every tensor (and bare storage) in `v` with its path: dict keys (key_text()) and list indices joined by
/// append_path_step(), e.g. "optim/state/0/exp_avg"; "" for a tensor at the root. A tensor reached twice is
/// listed twice. LoadOptions::select and Checkpoint::entries() name tensors so, and `tensorfile inspect` too.
[[nodiscard]] TENSORFILE_ENTRY NamedTensors named_tensors(const Value& v);

/// The tree of `v`, one item a line, tensors as "Tensor float32 [2, 3]" (no values).
[[nodiscard]] TENSORFILE_ENTRY std::string to_string(const Value& v);

/// Writes to_string(v).
TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const Value& v);

}  // namespace tensorfile

/// fmt support: `fmt::format("{}", value)`.
template <>
struct fmt::formatter<tensorfile::Value> : fmt::formatter<std::string_view> {
  /// Writes to_string(v) under the spec, as a string is written.
  template <class Context>
  auto format(const tensorfile::Value& v, Context& ctx) const {
    const std::string text = tensorfile::to_string(v);
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include <cmath>
#include <ostream>
#include <string_view>

#include "tensorfile/core/text.hpp"

namespace tensorfile {

namespace detail {

// Calls fn(path, tensor) for each tensor below `v`, `path` one buffer that each level appends its step to and cuts
// back: a path built afresh at each level costs its whole length per node, depth times key length, which a
// kilobyte key memoized once and repeated 4,000 levels down turned into 37 s and 7.7 GB.
template <class Fn>
void walk_tensors_at(const Value& v, std::string& path, Fn& fn) {
  const auto child = [&](std::string_view step, const Value& item) {
    const std::size_t length = path.size();
    append_path_step(path, step);
    walk_tensors_at(item, path, fn);
    path.resize(length);
  };
  switch (v.kind()) {
    case Value::Kind::tensor: fn(std::as_const(path), v.as_tensor()); return;
    case Value::Kind::storage: fn(std::as_const(path), v.as_storage().tensor); return;
    case Value::Kind::list:
    case Value::Kind::tuple:
      for (std::size_t i = 0; i < v.elements().size(); ++i) child(std::to_string(i), v.elements()[i]);
      return;
    case Value::Kind::dict:
      for (const auto& [key, item] : v.as_dict()) child(key_text(key), item);
      return;
    case Value::Kind::set:
      for (std::size_t i = 0; i < v.as_set().items.size(); ++i) child(std::to_string(i), v.as_set().items[i]);
      return;
    case Value::Kind::object:
      child("args", v.as_object().args);
      child("state", v.as_object().state);
      return;
    default: return;
  }
}
template <class Fn>
void walk_tensors(const Value& v, std::string path, Fn& fn) {
  walk_tensors_at(v, path, fn);
}

inline std::string scalar_text(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::none:
    case Value::Kind::boolean:
    case Value::Kind::integer:
    case Value::Kind::big_integer:
    case Value::Kind::floating:
    case Value::Kind::complex:
    case Value::Kind::string:
    case Value::Kind::device:
    case Value::Kind::dtype:
    case Value::Kind::global: return python_repr(v);  // 1.0, 1e-05, inf, (1-2j), "it's": as inspect shows them
    case Value::Kind::bytes: return "bytes[" + std::to_string(v.as_bytes().data.size()) + "]";
    case Value::Kind::tensor: {
      const Tensor& t = v.as_tensor();
      return std::string(v.is_parameter() ? "Parameter" : "Tensor") + " " + std::string(dtype_name(t.dtype())) + " " +
             to_string(t.sizes()) + (t.device().is_cpu() ? "" : " " + t.device().str()) +
             (t.requires_grad() ? " requires_grad" : "");
    }
    case Value::Kind::storage: {
      const Tensor& t = v.as_storage().tensor;
      return "Storage " + std::string(dtype_name(t.dtype())) + " [" + std::to_string(t.numel()) + "] '" +
             v.as_storage().location + "'";
    }
    default: return {};
  }
}

// Indentation stops growing 64 levels down: a line's indent costs its depth, and a deep chain shared k times
// printed as 4.8 GB of spaces from an 11 KB file.
inline std::string indent_more(const std::string& indent) {
  constexpr std::size_t widest = 2 * 64;
  return indent.size() < widest ? indent + "  " : indent;
}

inline void print_tree(std::string& out, const Value& v, const std::string& indent) {
  const bool nested = v.is_list() || v.is_tuple() || v.is_set() || v.is_dict() || v.is_object();
  const std::string inner = nested ? indent_more(indent) : std::string();  // leaves make no indent
  const auto items = [&](const std::string& open, const std::string& close, const List& list) {
    if (list.empty()) {
      out += open + close;
      return;
    }
    out += open + "\n";
    for (const auto& item : list) {
      out += inner;
      print_tree(out, item, inner);
      out += "\n";
    }
    out += indent + close;
  };
  switch (v.kind()) {
    case Value::Kind::list: items("[", "]", v.as_list()); return;
    case Value::Kind::tuple: items("(", ")", v.as_tuple()); return;
    case Value::Kind::set: items(v.as_set().frozen ? "frozenset{" : "{", "}", v.as_set().items); return;
    case Value::Kind::dict: {
      const Dict& dict = v.as_dict();
      const std::string open = dict.ordered ? "OrderedDict{" : "{";
      if (dict.empty()) {
        out += open + "}";
      } else {
        out += open + "\n";
        for (const auto& [key, item] : dict) {
          out += inner + python_repr(key) + ": ";
          print_tree(out, item, inner);
          out += "\n";
        }
        out += indent + "}";
      }
      if (dict.metadata() != nullptr) out += " with _metadata";
      return;
    }
    case Value::Kind::object: {
      const Object& o = v.as_object();
      out += "<object " + o.module + "." + o.name + "> args=";
      print_tree(out, o.args, inner);
      if (!o.state.is_none()) {
        out += " state=";
        print_tree(out, o.state, inner);
      }
      return;
    }
    default: out += scalar_text(v); return;
  }
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(core_value_print)
namespace tensorfile {

TENSORFILE_ENTRY std::string python_repr(const Value& v) {
  // repr(complex) writes its parts as floats without a trailing ".0".
  const auto complex_part = [](double x) {
    std::string text = python_float_repr(x);
    if (text.size() > 2 && text.ends_with(".0")) text.resize(text.size() - 2);
    return text;
  };
  switch (v.kind()) {
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.as_bool() ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.as_int());
    case Value::Kind::big_integer: return v.as_big_int().str();
    case Value::Kind::floating: return python_float_repr(v.as_float());
    case Value::Kind::complex: {
      const auto c = v.as_complex();
      const std::string imag = complex_part(c.imag()) + "j";
      if (c.real() == 0 && !std::signbit(c.real())) return imag;
      return "(" + complex_part(c.real()) + (imag.front() == '-' ? "" : "+") + imag + ")";
    }
    case Value::Kind::string: return python_str_repr(v.as_string());
    case Value::Kind::bytes: return python_bytes_repr(v.as_bytes().data);
    case Value::Kind::tuple: {
      const auto& items = v.as_tuple();
      std::string out = "(";
      for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + python_repr(items[i]);
      return out + (items.size() == 1 ? ",)" : ")");
    }
    case Value::Kind::dtype: return "torch." + std::string(dtype_name(v.as_dtype()));
    case Value::Kind::device: {
      const auto device = v.as_device();
      const std::string type = device.is_cpu() ? "cpu" : device.is_cuda() ? "cuda" : "meta";
      return "device(type='" + type + "'" + (device.index >= 0 ? ", index=" + std::to_string(device.index) : "") + ")";
    }
    case Value::Kind::global: return v.as_global().module + "." + v.as_global().name;
    default: return "<" + std::string(Value::kind_name(v.kind())) + ">";
  }
}

TENSORFILE_ENTRY std::string tensor_repr(const Value& v, const PrintOptions& options) {
  if (!v.is_tensor()) throw ArgumentError("tensor_repr needs a tensor, got " + std::string(Value::kind_name(v.kind())));
  std::string out = v.is_parameter() ? "Parameter containing:\n" : "";
  return out.append(to_string(v.as_tensor(), options));
}

TENSORFILE_ENTRY std::string key_text(const Value& key) {
  if (key.is_string()) return key.as_string();
  if (key.is_int()) return std::to_string(key.as_int());
  if (key.is_big_int()) return key.as_big_int().str();
  return python_repr(key);
}

TENSORFILE_ENTRY NamedTensors named_tensors(const Value& v) {
  NamedTensors out;
  auto collect = [&](const std::string& path, const Tensor& t) { out.emplace_back(path, t); };
  detail::walk_tensors(v, "", collect);
  return out;
}

TENSORFILE_ENTRY std::string to_string(const Value& v) {
  std::string out;
  detail::print_tree(out, v, "");
  return out;
}

TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const Value& v) { return out << to_string(v); }

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(core_value_print)
