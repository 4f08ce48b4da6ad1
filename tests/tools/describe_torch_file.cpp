// SPDX-License-Identifier: MIT
// describe_torch_file: what tensorfile loads from .pt files, as the JSON tests/tools/torch_reference.py prints.
//
//   describe_torch_file [--no-hash] FILE...
//
// One JSON object per file and line (see torch_reference.py's docstring for every rule), so
// check_against_torch.py can compare both with compare_reference.py. Files load with
// map_location "cpu" and strict = false, so unsupported objects are described by their type name.
#include <tensorfile/detail/sha256.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using tensorfile::Value;

// ---- Python's text forms ------------------------------------------------------------------

/// Python's repr() of a finite or non-finite float ("0.1", "1e-05", "1e+16", "1.0", "nan").
std::string python_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));  // shortest round trip
  const std::size_t e = text.find('e');
  std::string_view mantissa = text.substr(0, e);
  const bool negative = mantissa.front() == '-';
  if (negative) mantissa.remove_prefix(1);
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  const std::string_view exponent_text = text.substr(e + 1);
  std::from_chars(exponent_text.data() + (exponent_text.front() == '+' ? 1 : 0),
                  exponent_text.data() + exponent_text.size(), exponent);
  // As CPython's float_repr: x = 0.DIGITS * 10^point; exponent form when point <= -4 or point > 16.
  const int point = exponent + 1;
  const auto count = static_cast<int>(digits.size());
  std::string out = negative ? "-" : "";
  if (point <= -4 || point > 16) {
    out += digits.substr(0, 1);
    if (count > 1) out += "." + digits.substr(1);
    const int shown = point - 1;
    out += shown < 0 ? "e-" : "e+";
    const std::string magnitude = std::to_string(shown < 0 ? -shown : shown);
    out += (magnitude.size() < 2 ? "0" : "") + magnitude;
  } else if (point <= 0) {
    out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= count) {
    out += digits + std::string(static_cast<std::size_t>(point - count), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
  }
  return out;
}

/// Code points of UTF-8 text; invalid bytes come through as themselves (latin-1), never lost.
std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    bool valid = length != 0 && i + length <= text.size();
    char32_t c = length == 1 ? lead : length == 2 ? lead & 0x1Fu : length == 3 ? lead & 0x0Fu : lead & 0x07u;
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next >> 6) == 0x2;
      c = (c << 6) | (next & 0x3Fu);
    }
    if (!valid) {
      out.push_back(lead);
      ++i;
      continue;
    }
    out.push_back(c);
    i += length;
  }
  return out;
}

void append_hex(std::string& out, unsigned value, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += hex[(value >> shift) & 15u];
}

/// A JSON string as Python's json.dumps writes it (ensure_ascii: \uXXXX, surrogate pairs).
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char32_t c : code_points(text)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else if (c < 0x10000) {
      out += "\\u";
      append_hex(out, static_cast<unsigned>(c), 4);
    } else {
      const auto v = static_cast<unsigned>(c) - 0x10000u;
      out += "\\u";
      append_hex(out, 0xD800u | (v >> 10), 4);
      out += "\\u";
      append_hex(out, 0xDC00u | (v & 0x3FFu), 4);
    }
  }
  return out + "\"";
}

std::string hex_bytes(const std::vector<std::byte>& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::byte b : bytes) append_hex(out, std::to_integer<unsigned>(b), 2);
  return out;
}

/// Python's repr() of a str: single quotes unless the text has ' and no ".
std::string python_str_repr(std::string_view text) {
  const bool double_quoted = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos;
  const char quote = double_quoted ? '"' : '\'';
  std::string out(1, quote);
  for (const char32_t c : code_points(text)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      append_hex(out, static_cast<unsigned>(c), 2);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {  // non-ASCII as UTF-8 (Python shows printable characters as they are)
      const auto v = static_cast<unsigned>(c);
      if (v < 0x800) {
        out += static_cast<char>(0xC0u | (v >> 6));
      } else {
        if (v < 0x10000) {
          out += static_cast<char>(0xE0u | (v >> 12));
        } else {
          out += static_cast<char>(0xF0u | (v >> 18));
          out += static_cast<char>(0x80u | ((v >> 12) & 0x3Fu));
        }
        out += static_cast<char>(0x80u | ((v >> 6) & 0x3Fu));
      }
      out += static_cast<char>(0x80u | (v & 0x3Fu));
    }
  }
  return out + quote;
}

std::string python_repr(const Value& v);

/// Python's repr() of a complex part: like float repr, without a trailing ".0".
std::string complex_part(double x) {
  std::string text = python_float(x);
  if (text.size() > 2 && text.ends_with(".0")) text.resize(text.size() - 2);
  return text;
}

/// Python's repr() of the values that can be dict keys (str, int, float, tuple, ...).
std::string python_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.as_bool() ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.as_int());
    case Value::Kind::big_integer: return v.as_big_int().str();
    case Value::Kind::floating: return python_float(v.as_float());
    case Value::Kind::complex: {
      const auto c = v.as_complex();
      const std::string imag = complex_part(c.imag()) + "j";
      if (c.real() == 0 && !std::signbit(c.real())) return imag;
      return "(" + complex_part(c.real()) + (imag.front() == '-' ? "" : "+") + imag + ")";
    }
    case Value::Kind::string: return python_str_repr(v.as_string());
    case Value::Kind::bytes: {
      std::string out = "b'";
      for (const std::byte b : v.as_bytes().data) {
        const auto c = std::to_integer<unsigned>(b);
        if (c == '\'' || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\r') {
          out += "\\r";
        } else if (c == '\t') {
          out += "\\t";
        } else if (c < 0x20 || c >= 0x7F) {
          out += "\\x";
          append_hex(out, c, 2);
        } else {
          out += static_cast<char>(c);
        }
      }
      return out + "'";
    }
    case Value::Kind::tuple: {
      const auto& items = v.as_tuple();
      std::string out = "(";
      for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + python_repr(items[i]);
      return out + (items.size() == 1 ? ",)" : ")");
    }
    case Value::Kind::dtype: return "torch." + std::string(tensorfile::dtype_name(v.as_dtype()));
    case Value::Kind::device: {
      const auto device = v.as_device();
      const std::string type = device.is_cpu() ? "cpu" : device.is_cuda() ? "cuda" : "meta";
      return "device(type='" + type + "'" + (device.index >= 0 ? ", index=" + std::to_string(device.index) : "") + ")";
    }
    case Value::Kind::global: return v.as_global().module + "." + v.as_global().name;
    default: return "<" + std::string(Value::kind_name(v.kind())) + ">";
  }
}

/// A path step escaped as in JSON Pointer: "~" -> "~0", "/" -> "~1".
std::string path_step(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string key_step(const Value& key) {
  if (key.is_string()) return path_step(key.as_string());
  if (key.is_int()) return std::to_string(key.as_int());
  if (key.is_big_int()) return key.as_big_int().str();
  return path_step(python_repr(key));
}

// ---- unsupported values: the type name Python would report ----------------------------------

bool is_layout_name(std::string_view name) {
  return name == "strided" || name == "sparse_coo" || name == "sparse_csr" || name == "sparse_csc" ||
         name == "sparse_bsr" || name == "sparse_bsc" || name == "_mkldnn";
}

/// numpy's scalar type for a dtype code ("f4" -> "float32"), or empty.
std::string numpy_scalar_name(std::string_view code) {
  static const std::map<std::string_view, std::string_view> names{
      {"b1", "bool_"},    {"i1", "int8"},     {"i2", "int16"},    {"i4", "int32"},     {"i8", "int64"},
      {"u1", "uint8"},    {"u2", "uint16"},   {"u4", "uint32"},   {"u8", "uint64"},    {"f2", "float16"},
      {"f4", "float32"},  {"f8", "float64"},  {"c8", "complex64"}, {"c16", "complex128"},
  };
  auto it = names.find(code);
  return it == names.end() ? std::string() : std::string(it->second);
}

/// What `type(x).__module__ + "." + type(x).__qualname__` (or "tensor:<layout>") says for an opaque object.
std::string object_type_name(const tensorfile::Object& object) {
  const std::string full = object.module + "." + object.name;
  if (object.newobj) return full;  // cls.__new__(cls, ...): an instance of cls
  const tensorfile::List* args = object.args.is_tuple() ? &object.args.as_tuple() : nullptr;
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
    const tensorfile::Object& dtype = (*args)[0].as_object();
    if (dtype.module == "numpy" && dtype.name == "dtype" && dtype.args.is_tuple() && !dtype.args.as_tuple().empty() &&
        dtype.args.as_tuple()[0].is_string()) {
      const std::string scalar = numpy_scalar_name(dtype.args.as_tuple()[0].as_string());
      if (!scalar.empty()) return "numpy." + scalar;
    }
  }
  return full;  // a class called with arguments: an instance of it
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
    case Value::Kind::string: {  // UTF-8 byte order is code point order
      return a.as_string().compare(b.as_string()) <=> 0;
    }
    case Value::Kind::bytes: {
      const auto& x = a.as_bytes().data;
      const auto& y = b.as_bytes().data;
      return std::lexicographical_compare_three_way(x.begin(), x.end(), y.begin(), y.end());
    }
    case Value::Kind::device: return a.as_device().str().compare(b.as_device().str()) <=> 0;
    case Value::Kind::dtype:
      return tensorfile::dtype_name(a.as_dtype()).compare(tensorfile::dtype_name(b.as_dtype())) <=> 0;
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

// ---- the walk ---------------------------------------------------------------------------------

class Describer {
 public:
  explicit Describer(bool hashes) : hashes_(hashes) {}

  void walk(const Value& v, const std::string& path) {
    switch (v.kind()) {
      case Value::Kind::none: return value(path, "none", "null");
      case Value::Kind::boolean: return value(path, "bool", v.as_bool() ? "true" : "false");
      case Value::Kind::integer: return value(path, "int", std::to_string(v.as_int()));
      case Value::Kind::big_integer: return value(path, "int", v.as_big_int().str());
      case Value::Kind::floating: return value(path, "float", json_float(v.as_float()));
      case Value::Kind::complex:
        return value(path, "complex", "[" + json_float(v.as_complex().real()) + ", " + json_float(v.as_complex().imag()) + "]");
      case Value::Kind::string: return value(path, "str", json_string(v.as_string()));
      case Value::Kind::bytes: return value(path, "bytes", json_string(hex_bytes(v.as_bytes().data)));
      case Value::Kind::device: return value(path, "device", json_string(v.as_device().str()));
      case Value::Kind::dtype: return value(path, "dtype", json_string(tensorfile::dtype_name(v.as_dtype())));
      case Value::Kind::tensor: return tensor(path, v.as_tensor());
      case Value::Kind::storage: {
        // A 1-d view of all of it. (Ancient legacy files may name a sub-range of a storage: that
        // range is then a storage of its own, as in torch.)
        const tensorfile::Tensor& whole = v.as_storage().tensor;
        tensorfile::Storage storage = whole.storage();
        if (whole.storage_offset() != 0) {
          storage = storage.slice(static_cast<std::size_t>(whole.storage_offset()) * whole.element_size(), whole.nbytes());
        }
        return tensor(path, tensorfile::Tensor(storage, whole.dtype(), {whole.numel()}, {1}));
      }
      case Value::Kind::dict:
        for (const auto& [key, item] : v.as_dict()) walk(item, path + "/" + key_step(key));
        return;
      case Value::Kind::list:
      case Value::Kind::tuple: {
        const auto& items = v.elements();
        for (std::size_t i = 0; i < items.size(); ++i) walk(items[i], path + "/" + std::to_string(i));
        return;
      }
      case Value::Kind::set: {
        std::vector<const Value*> items;
        for (const auto& item : v.as_set().items) {
          if (!sortable_type(item)) return value(path, "unsupported", json_string("builtins.set"));
          items.push_back(&item);
        }
        std::stable_sort(items.begin(), items.end(), [](const Value* a, const Value* b) { return compare_keys(*a, *b) < 0; });
        for (std::size_t i = 0; i < items.size(); ++i) walk(*items[i], path + "/" + std::to_string(i));
        return;
      }
      case Value::Kind::global:
      case Value::Kind::object: return value(path, "unsupported", json_string(unsupported_name(v)));
    }
  }

  [[nodiscard]] std::string json(const std::string& format) const {
    std::string out = "{\"format\": " + json_string(format) + ", \"tensors\": [";
    for (std::size_t i = 0; i < tensors_.size(); ++i) out += (i ? ", " : "") + tensors_[i];
    out += "], \"values\": [";
    for (std::size_t i = 0; i < values_.size(); ++i) out += (i ? ", " : "") + values_[i];
    return out + "]}";
  }

 private:
  static std::string json_float(double x) {
    const std::string text = python_float(x);
    return std::isfinite(x) ? text : json_string(text);
  }

  static std::string json_ints(const tensorfile::Shape& values) {
    std::string out = "[";
    for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
    return out + "]";
  }

  void value(const std::string& path, std::string_view type, const std::string& json) {
    values_.push_back("{\"path\": " + json_string(path) + ", \"type\": \"" + std::string(type) + "\", \"value\": " + json + "}");
  }

  /// First-visit number of the storage a tensor views: the same owner and the same first byte.
  std::size_t storage_id(const tensorfile::Storage& storage) {
    auto& candidates = storages_[storage.data()];
    for (const auto& [seen, id] : candidates) {
      if (seen.shares_owner_with(storage)) return id;
    }
    candidates.emplace_back(storage, next_storage_id_);
    return next_storage_id_++;
  }

  void tensor(const std::string& path, const tensorfile::Tensor& t) {
    const bool meta = t.device().is_meta();
    std::string entry = "{\"path\": " + json_string(path) + ", \"dtype\": " +
                        json_string(tensorfile::dtype_name(t.dtype())) + ", \"shape\": " + json_ints(t.sizes()) +
                        ", \"stride\": " + json_ints(t.strides()) +
                        ", \"storage_offset\": " + std::to_string(t.storage_offset()) +
                        ", \"requires_grad\": " + (t.requires_grad() ? "true" : "false") +
                        ", \"device\": " + json_string(t.device().str()) +
                        ", \"storage\": " + (meta ? std::string("null") : std::to_string(storage_id(t.storage())));
    if (hashes_) {
      std::string digest = "null";
      if (t.device().is_cpu()) {
        const tensorfile::Tensor dense = t.contiguous();
        digest = json_string(tensorfile::detail::sha256_hex({dense.raw_data(), dense.nbytes()}));
      }
      entry += ", \"sha256\": " + digest;
    }
    tensors_.push_back(entry + "}");
  }

  bool hashes_;
  std::vector<std::string> tensors_;
  std::vector<std::string> values_;
  std::map<const std::byte*, std::vector<std::pair<tensorfile::Storage, std::size_t>>> storages_;
  std::size_t next_storage_id_ = 0;
};

std::string sniff_format(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  return in.gcount() == 4 && std::memcmp(head, "PK\x03\x04", 4) == 0 ? "torch-zip" : "torch-legacy";
}

}  // namespace

int main(int argc, char** argv) {
  bool hashes = true;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--no-hash") {
      hashes = false;
    } else if (arg == "-h" || arg == "--help") {
      std::puts("usage: describe_torch_file [--no-hash] FILE...");
      return 0;
    } else {
      files.emplace_back(arg);
    }
  }
  if (files.empty()) {
    std::fputs("usage: describe_torch_file [--no-hash] FILE...\n", stderr);
    return 2;
  }
  int status = 0;
  for (const auto& file : files) {
    const std::string format = sniff_format(file);
    std::string line;
    try {
      const Value root = tensorfile::load(file, {.map_location = "cpu", .strict = false});
      Describer describer(hashes);
      describer.walk(root, "");
      line = describer.json(format);
    } catch (const std::exception& error) {
      line = "{\"format\": " + json_string(format) + ", \"error\": " + json_string(error.what()) + "}";
      status = 1;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  return std::fflush(stdout) == 0 ? status : 1;
}
