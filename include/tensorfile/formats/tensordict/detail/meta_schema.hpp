// SPDX-License-Identifier: MIT
// tensordict's meta.json: the members a TensorDict directory's file describes, read without building a value
// tree, and the JSON text written byte for byte as tensordict's json or orjson backend does.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/bytes/twos_complement.hpp"
#include "tensorfile/detail/text/json_reader.hpp"
#include "tensorfile/detail/text/json_writer.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/tensordict/detail/keys.hpp"
#include "tensorfile/formats/tensordict/tensordict.hpp"

namespace tensorfile::detail::td {

/// The dtype named by a tensordict dtype string: "torch." followed by a canonical torch name (no aliases,
/// as tensordict's loader); nullopt otherwise.
[[nodiscard]] constexpr std::optional<DType> parse_tensordict_dtype(std::string_view text) noexcept {
  if (!text.starts_with("torch.")) return std::nullopt;
  text.remove_prefix(6);
  for (const auto& info : tensorfile::detail::dtype_table) {
    if (info.name == text) return info.dtype;
  }
  return std::nullopt;
}

/// Parses the value at the cursor into a Value: objects become Dicts with str keys (a repeated key keeps
/// its first position and its last value, as Python), arrays Lists, integers int or BigInt, numbers with
/// a fraction or exponent float.
[[nodiscard]] inline Value parse_json_value(JsonReader& in, std::size_t depth = 0) {
  if (depth > json_max_depth) {
    throw LimitError("JSON nesting is too deep; expected at most " + std::to_string(json_max_depth) + " levels",
                     {.file = in.file(), .offset = in.position()});
  }
  switch (in.peek()) {
    case '{': {
      in.seek(in.position() + 1);
      Dict dict;
      if (in.consume('}')) return Value(std::move(dict));
      std::string scratch;
      while (true) {
        std::string key(in.parse_string(scratch));
        in.expect(':', "':'");
        // Parsed containers are new, so they cannot hold a cycle: the unchecked insertion skips walking each one.
        ValueAccess::set(dict, Value(std::move(key)), parse_json_value(in, depth + 1));
        if (in.consume(',')) continue;
        in.expect('}', "',' or '}'");
        return Value(std::move(dict));
      }
    }
    case '[': {
      in.seek(in.position() + 1);
      List list;
      if (in.consume(']')) return Value(std::move(list));
      while (true) {
        ValueAccess::items(list).push_back(parse_json_value(in, depth + 1));
        if (in.consume(',')) continue;
        in.expect(']', "',' or ']'");
        return Value(std::move(list));
      }
    }
    case '"': {
      std::string scratch;
      return Value(std::string(in.parse_string(scratch)));
    }
    default: break;
  }
  const JsonScalar s = in.scan_scalar();
  const std::string_view token = in.text().substr(s.start, s.end - s.start);
  switch (s.kind) {
    case JsonScalar::Kind::null: return Value(None{});
    case JsonScalar::Kind::true_: return Value(true);
    case JsonScalar::Kind::false_: return Value(false);
    case JsonScalar::Kind::nan: return Value(std::nan(""));
    case JsonScalar::Kind::pos_inf: return Value(HUGE_VAL);
    case JsonScalar::Kind::neg_inf: return Value(-HUGE_VAL);
    case JsonScalar::Kind::integer: {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (ec == std::errc{} && end == token.data() + token.size()) return Value(v);
      return Value(BigInt{twos_complement_from_decimal(token)});
    }
    case JsonScalar::Kind::real: return Value(JsonReader::real_value(token));
  }
  return Value(None{});
}

/// Parses a whole document into a Value (see parse_json_value); only blanks may follow it.
[[nodiscard]] inline Value parse_json_document(JsonReader& in) {
  if (in.peek() == -1) in.fail("a JSON value");
  Value v = parse_json_value(in);
  in.finish();
  return v;
}

// ---- the fast reader for TensorDict directories ------------------------------------------------

/// What one member of a TensorDict meta.json describes.
enum class MemberKind : std::uint8_t {
  reserved,    ///< "shape", "device" or "_type": the directory's own fields, never a key
  not_object,  ///< any other non-object value: ignored, as tensordict does
  other,       ///< an object that is neither a leaf nor a collection: ignored, as tensordict does
  leaf,        ///< {"dtype": ..., "shape": ...}: a tensor in <enc(key)>.memmap
  collection,  ///< {"type": ...}: a sub-collection in the subdirectory <enc(key)>
};

/// One member of a TensorDict meta.json, as the loader needs it.
struct MetaMember {
  std::string key;           ///< the raw key
  std::size_t value_at = 0;  ///< byte offset of the value
  MemberKind kind = MemberKind::other;
  std::optional<DType> dtype;    ///< leaf dtype, when it names one
  std::size_t dtype_at = 0;      ///< byte offset of the "dtype" value
  std::optional<Shape> shape;    ///< leaf shape, when it is a list of non-negative ints
  std::size_t shape_at = 0;      ///< byte offset of the "shape" value
  bool is_nested = false;        ///< "is_nested": true
  bool is_nested_valid = true;   ///< "is_nested" is absent or a bool
  std::size_t is_nested_at = 0;  ///< byte offset of the "is_nested" value
};

/// A TensorDict meta.json read by read_dir_meta: members in file order, and the reserved ones' offsets.
struct DirMeta {
  std::vector<MetaMember> members;                ///< each key once, in order (a repeat: first place, last value)
  std::optional<std::size_t> type_at;             ///< "_type" value offset (the last one wins, as in Python)
  std::optional<std::size_t> shape_at;            ///< "shape" value offset
  std::optional<std::size_t> device_at;           ///< "device" value offset
  std::optional<std::size_t> torch_container_at;  ///< torch_container_member's value offset, when it is not an entry
};

/// Reads one {"type"|"dtype"|"shape"|"is_nested"...} entry object at the cursor into `member`.
inline void read_entry_object(JsonReader& in, MetaMember& member, std::string& scratch) {
  in.expect('{', "'{'");
  bool has_type = false;
  bool has_dtype = false;
  bool has_shape = false;
  if (!in.consume('}')) {
    while (true) {
      const std::string_view name = in.parse_string(scratch);
      in.expect(':', "':'");
      const int c = in.peek();
      if (name == "type") {
        has_type = true;
        in.skip_value(1);
      } else if (name == "dtype") {
        has_dtype = true;
        member.dtype_at = in.position();
        member.dtype.reset();
        if (c == '"') {
          member.dtype = parse_tensordict_dtype(in.parse_string(scratch));
        } else {
          in.skip_value(1);
        }
      } else if (name == "shape") {
        has_shape = true;
        member.shape_at = in.position();
        member.shape = in.try_parse_shape();
        if (!member.shape) in.skip_value(1);
      } else if (name == "is_nested") {
        member.is_nested_at = in.position();
        member.is_nested_valid = true;
        if (c == 't' && in.text().substr(in.position(), 4) == "true") {
          member.is_nested = true;
          in.seek(in.position() + 4);
        } else if (c == 'f' && in.text().substr(in.position(), 5) == "false") {
          member.is_nested = false;
          in.seek(in.position() + 5);
        } else {
          member.is_nested_valid = false;
          in.skip_value(1);
        }
      } else {
        in.skip_value(1);
      }
      if (in.consume(',')) continue;
      in.expect('}', "',' or '}'");
      break;
    }
  }
  member.kind = has_type ? MemberKind::collection : (has_dtype && has_shape) ? MemberKind::leaf : MemberKind::other;
}

/// Reads a TensorDict meta.json: every member with what it describes, without building a value tree.
[[nodiscard]] inline DirMeta read_dir_meta(std::string_view text, const std::filesystem::path& file) {
  JsonReader in(text, file);
  DirMeta meta;
  if (in.peek() != '{') in.fail("a JSON object");
  in.expect('{', "'{'");
  if (!in.consume('}')) {
    meta.members.reserve(std::min<std::size_t>(text.size() / 64 + 1, 65536));  // a leaf entry takes > 64 bytes
    std::string scratch;
    // A key given twice keeps its first place and takes its last value, as Python's json does; resolved here, so
    // that building the TensorDict erases nothing per repeat (an O(n) shift each: 50,000 repeats took 43 s).
    std::unordered_map<std::string, std::size_t, KeyedStringHash> place_of_key;
    while (true) {
      MetaMember member;
      member.key.assign(in.parse_string(scratch));
      in.expect(':', "':'");
      member.value_at = (in.skip_ws(), in.position());
      if (member.key == "shape" || member.key == "device" || member.key == "_type") {
        member.kind = MemberKind::reserved;
        (member.key == "shape"    ? meta.shape_at
         : member.key == "device" ? meta.device_at
                                  : meta.type_at) = member.value_at;
        in.skip_value(1);
      } else if (in.peek() == '{') {
        read_entry_object(in, member, scratch);
        if (member.kind == MemberKind::other && member.key == torch_container_member) {
          meta.torch_container_at = member.value_at;
        }
      } else {
        member.kind = MemberKind::not_object;
        in.skip_value(1);
      }
      if (const auto [place, first] = place_of_key.try_emplace(member.key, meta.members.size()); first) {
        meta.members.push_back(std::move(member));
      } else {
        meta.members[place->second] = std::move(member);
      }
      if (in.consume(',')) continue;
      in.expect('}', "',' or '}'");
      break;
    }
  }
  in.finish();
  return meta;
}

// ---- writing ----------------------------------------------------------------------------------

/// Writes JSON text as tensordict's backends do: Python's json (`", "`/`": "` separators, or compact ones,
/// ASCII only with lower-case \uXXXX escapes, NaN/Infinity tokens) or orjson (compact, raw UTF-8).
class JsonWriter {
 public:
  /// Appends to `out`; `compact` selects "," and ":" separators (always on for orjson).
  JsonWriter(std::string& out, MetaJsonStyle style, bool compact) noexcept
      : out_(out), style_(style), compact_(compact || style == MetaJsonStyle::orjson) {}

  /// Where the text goes, for errors (file and member).
  ErrorLocation where{};

  void raw(std::string_view text) { out_ += text; }
  void item_separator() { out_ += compact_ ? "," : ", "; }
  void key(std::string_view name) {
    string(name);
    out_ += compact_ ? ":" : ": ";
  }
  void integer(std::int64_t v) { out_ += std::to_string(v); }
  void boolean(bool v) { out_ += v ? "true" : "false"; }

  /// A list of ints: "[2, 3]", "[]".
  void shape(const Shape& shape) {
    out_ += '[';
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (d != 0) item_separator();
      integer(shape[d]);
    }
    out_ += ']';
  }

  /// A string; throws ArgumentError when it is not valid UTF-8.
  void string(std::string_view text) {
    const std::size_t invalid = append_json_string(
        out_, text, style_ == MetaJsonStyle::orjson ? JsonCharset::utf8 : JsonCharset::ascii, OnInvalidUtf8::stop);
    if (invalid != std::string_view::npos) {
      throw ArgumentError("string is not valid UTF-8; expected UTF-8 text, got byte " +
                              std::to_string(static_cast<unsigned char>(text[invalid])) + " at index " +
                              std::to_string(invalid),
                          where);
    }
  }

  /// Any JSON-like Value: None, bool, int (any size), float, str, list, tuple (as a list), dict with
  /// str keys. Anything else throws UnsupportedError (tensordict would pickle it).
  void value(const Value& v, std::size_t depth = 0) {
    if (depth > json_max_depth) {
      throw LimitError(
          "value nesting is too deep for JSON; expected at most " + std::to_string(json_max_depth) + " levels", where);
    }
    switch (v.kind()) {
      case Value::Kind::none: out_ += "null"; return;
      case Value::Kind::boolean: boolean(v.as_bool()); return;
      case Value::Kind::integer: integer(v.as_int()); return;
      case Value::Kind::big_integer: out_ += v.as_big_int().str(); return;
      case Value::Kind::floating:
        append_json_float(out_, v.as_float(),
                          style_ == MetaJsonStyle::stdlib ? JsonNonFinite::python_tokens : JsonNonFinite::null);
        return;
      case Value::Kind::string: string(v.as_string()); return;
      case Value::Kind::list:
      case Value::Kind::tuple: {
        out_ += '[';
        bool first = true;
        for (const Value& item : v.elements()) {
          if (!first) item_separator();
          first = false;
          value(item, depth + 1);
        }
        out_ += ']';
        return;
      }
      case Value::Kind::dict: {
        out_ += '{';
        bool first = true;
        for (const auto& [k, item] : v.as_dict()) {
          if (!k.is_string()) {
            throw UnsupportedError("dict key is " + std::string(Value::kind_name(k.kind())) +
                                       "; expected str keys only (tensordict pickles other dicts)",
                                   where);
          }
          if (!first) item_separator();
          first = false;
          key(k.as_string());
          value(item, depth + 1);
        }
        out_ += '}';
        return;
      }
      default:
        throw UnsupportedError("value is " + std::string(Value::kind_name(v.kind())) +
                                   "; expected JSON data (None, bool, int, float, str, list, tuple or dict): "
                                   "tensordict would pickle it, and tensorfile writes no pickles",
                               where);
    }
  }

 private:
  std::string& out_;
  MetaJsonStyle style_;
  bool compact_;
};

}  // namespace tensorfile::detail::td
