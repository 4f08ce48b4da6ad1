// SPDX-License-Identifier: MIT
// Python's text forms and Python-compatible JSON (the rules of tests/interop/torch_reference.py).
#include "python_text.hpp"

#include <charconv>
#include <cmath>
#include <string>

namespace tensorfile::cli {

namespace {

/// Code points of UTF-8 text; invalid bytes come through as themselves (latin-1), never lost.
std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80           ? 1
                               : (lead >> 5) == 0x6  ? 2
                               : (lead >> 4) == 0xE  ? 3
                               : (lead >> 3) == 0x1E ? 4
                                                     : 0;
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

void append_utf8(std::string& out, char32_t c) {
  const auto v = static_cast<unsigned>(c);
  if (v < 0x80) {
    out += static_cast<char>(v);
  } else if (v < 0x800) {
    out += static_cast<char>(0xC0u | (v >> 6));
    out += static_cast<char>(0x80u | (v & 0x3Fu));
  } else if (v < 0x10000) {
    out += static_cast<char>(0xE0u | (v >> 12));
    out += static_cast<char>(0x80u | ((v >> 6) & 0x3Fu));
    out += static_cast<char>(0x80u | (v & 0x3Fu));
  } else {
    out += static_cast<char>(0xF0u | (v >> 18));
    out += static_cast<char>(0x80u | ((v >> 12) & 0x3Fu));
    out += static_cast<char>(0x80u | ((v >> 6) & 0x3Fu));
    out += static_cast<char>(0x80u | (v & 0x3Fu));
  }
}

/// Python's repr() of a complex part: like float repr, without a trailing ".0".
std::string complex_part(double x) {
  std::string text = python_float(x);
  if (text.size() > 2 && text.ends_with(".0")) text.resize(text.size() - 2);
  return text;
}

}  // namespace

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

std::string json_float(double x) {
  const std::string text = python_float(x);
  return std::isfinite(x) ? text : json_string(text);
}

std::string hex_bytes(const std::vector<std::byte>& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::byte b : bytes) append_hex(out, std::to_integer<unsigned>(b), 2);
  return out;
}

namespace {

// The escapes str and bytes reprs share: the quote, backslash, \n \r \t and other ASCII controls as \xNN.
// False when `c` needs none of them.
bool append_ascii_escape(std::string& out, char32_t c, char quote) {
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
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::string python_str_repr(std::string_view text) {
  const bool double_quoted = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos;
  const char quote = double_quoted ? '"' : '\'';
  std::string out(1, quote);
  for (const char32_t c : code_points(text)) {
    if (!append_ascii_escape(out, c, quote)) append_utf8(out, c);  // Python shows printable non-ASCII as is
  }
  return out + quote;
}

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
        if (append_ascii_escape(out, c, '\'')) continue;
        if (c >= 0x80) {
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

std::string key_text(const Value& key) {
  if (key.is_string()) return key.as_string();
  if (key.is_int()) return std::to_string(key.as_int());
  if (key.is_big_int()) return key.as_big_int().str();
  return python_repr(key);
}

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

}  // namespace tensorfile::cli
