// SPDX-License-Identifier: MIT
// The safetensors header parser: the length prefix, the JSON object (on the one JSON reader), the
// tensor entries, and the tiling of the data section. Every refusal names the file, the tensor and
// the byte offset in the file.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/text/json_reader.hpp"
#include "tensorfile/detail/text/utf8.hpp"
#include "tensorfile/formats/safetensors/detail/dtypes.hpp"

namespace tensorfile::detail {

/// The header length N from the first 8 bytes, checked against the limit and the file's size before
/// anything is allocated for it.
inline std::uint64_t safetensors_header_length(std::span<const std::byte> head, std::uint64_t file_size,
                                               const std::filesystem::path& file, std::uint64_t max_header_bytes) {
  if (file_size < 8 || head.size() < 8) {
    throw FormatError("file is too short for a safetensors header length; expected at least 8 bytes, got " +
                          std::to_string(std::min<std::uint64_t>(file_size, head.size())),
                      {.file = file, .offset = 0});
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(head[static_cast<std::size_t>(i)]);
  if (n > max_header_bytes) {
    throw FormatError("header length of " + std::to_string(n) + " bytes exceeds the limit; expected at most " +
                          std::to_string(max_header_bytes),
                      {.file = file, .offset = 0});
  }
  if (n > file_size - 8) {
    throw FormatError("header length of " + std::to_string(n) +
                          " bytes runs past the end of the file; expected at most " + std::to_string(file_size - 8),
                      {.file = file, .offset = 0});
  }
  return n;
}

/// Reads the length prefix and the header it announces (never more) from `file`.
inline std::vector<std::byte> read_safetensors_head(const FileHandle& file, std::uint64_t file_size,
                                                    std::uint64_t max_header_bytes) {
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 8)));
  file.read_exact(0, head);
  const std::uint64_t n = safetensors_header_length(head, file_size, file.path(), max_header_bytes);
  head.resize(static_cast<std::size_t>(8 + n));
  file.read_exact(8, std::span<std::byte>(head).subspan(8));
  return head;
}

/// One tensor entry as parsed, before the tiling check.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::UInt8;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t at = 0;  // offset of the entry's key in the file
};

/// Walks the header object; the JSON reader runs over the whole prefix + header, so its offsets are file offsets.
class SafetensorsHeaderParser {
 public:
  SafetensorsHeaderParser(std::span<const std::byte> prefix_and_header, const std::filesystem::path& file)
      : text_(reinterpret_cast<const char*>(prefix_and_header.data()), prefix_and_header.size()), file_(file),
        reader_(text_, file_) {}

  /// Calls `on_tensor(SafetensorsEntry&&)` per tensor and `on_metadata(vector<pair<string, string>>&&)`
  /// for `__metadata__`, in header order.
  template <class OnTensor, class OnMetadata>
  void parse(OnTensor&& on_tensor, OnMetadata&& on_metadata) {
    check_utf8();
    reader_.seek(8);
    reader_.expect('{', "'{' opening the header object");
    std::unordered_set<std::string, KeyedStringHash> names;
    bool seen_metadata = false;
    if (!reader_.consume('}')) {
      while (true) {
        const std::uint64_t key_at = (reader_.skip_ws(), reader_.position());
        std::string scratch;
        std::string name(reader_.parse_string(scratch));
        reader_.expect(':', "':'");
        if (name == "__metadata__") {
          if (seen_metadata) fail("duplicate __metadata__ entry", name, key_at);
          seen_metadata = true;
          if (reader_.peek() == 'n') {  // null: no metadata, as the reference reads it
            (void)reader_.scan_scalar();
          } else {
            on_metadata(in_member(name, [&] { return parse_metadata(); }));
          }
        } else {
          check_name(name, key_at);
          SafetensorsEntry entry = in_member(name, [&] { return parse_entry(); });
          entry.at = key_at;
          if (!names.insert(name).second) fail("duplicate tensor name", name, key_at);
          entry.name = std::move(name);
          on_tensor(std::move(entry));
        }
        if (reader_.consume(',')) continue;
        reader_.expect('}', "',' or '}'");
        break;
      }
    }
    reader_.finish();
  }

 private:
  [[noreturn]] void fail(const std::string& reason, const std::string& member, std::uint64_t at) const {
    throw FormatError(reason, {.file = file_, .member = member, .offset = at});
  }

  // JSON errors from the reader carry no member: add the entry's name.
  template <class F>
  auto in_member(const std::string& member, F&& f) {
    try {
      return f();
    } catch (const LimitError& error) {
      if (!error.member().empty()) throw;
      throw LimitError(error.reason(), {.file = file_, .member = member, .offset = error.offset()});
    } catch (const UnsupportedError& error) {
      if (!error.member().empty()) throw;
      throw UnsupportedError(error.reason(), {.file = file_, .member = member, .offset = error.offset()});
    } catch (const FormatError& error) {
      if (!error.member().empty()) throw;
      throw FormatError(error.reason(), {.file = file_, .member = member, .offset = error.offset()});
    }
  }

  // The reference reads the header as strict UTF-8 before parsing it: encoded surrogates are invalid too.
  void check_utf8() const {
    std::size_t i = 8;
    while (i < text_.size()) {
      const std::size_t at = i;
      const std::int32_t cp = decode_wtf8(text_, i);
      if (cp < 0 || (cp >= 0xD800 && cp < 0xE000)) {
        throw FormatError("header is not valid UTF-8", {.file = file_, .offset = at});
      }
    }
  }

  // Escapes can still make a lone surrogate (\ud800), which no UTF-8 string holds.
  static bool has_surrogate(std::string_view text) noexcept {
    std::size_t i = 0;
    while (i < text.size()) {
      const std::int32_t cp = decode_wtf8(text, i);
      if (cp < 0 || (cp >= 0xD800 && cp < 0xE000)) return true;
    }
    return false;
  }

  void check_name(const std::string& name, std::uint64_t at) const {
    if (name.find('\0') != std::string::npos) fail("tensor name holds a NUL character", "", at);
    if (has_surrogate(name)) fail("tensor name is not valid UTF-8 (a lone surrogate escape)", "", at);
  }

  std::string parse_plain_string(const char* what) {
    const std::uint64_t at = (reader_.skip_ws(), reader_.position());
    std::string scratch;
    std::string value(reader_.parse_string(scratch));
    if (has_surrogate(value)) {
      throw FormatError(std::string(what) + " is not valid UTF-8 (a lone surrogate escape)",
                        {.file = file_, .offset = at});
    }
    return value;
  }

  std::vector<std::pair<std::string, std::string>> parse_metadata() {
    std::vector<std::pair<std::string, std::string>> out;
    reader_.expect('{', "'{' opening the __metadata__ object");
    if (reader_.consume('}')) return out;
    std::unordered_set<std::string, KeyedStringHash> keys;
    while (true) {
      const std::uint64_t key_at = (reader_.skip_ws(), reader_.position());
      std::string key = parse_plain_string("a __metadata__ key");
      reader_.expect(':', "':'");
      if (!keys.insert(key).second) {
        throw FormatError("duplicate key \"" + key + "\" in __metadata__", {.file = file_, .offset = key_at});
      }
      if (reader_.peek() != '"') {
        throw FormatError("value of \"" + key + "\" is not a string; expected a string, got " +
                              reader_.snippet_at(reader_.position()),
                          {.file = file_, .offset = reader_.position()});
      }
      std::string value = parse_plain_string("a __metadata__ value");
      out.emplace_back(std::move(key), std::move(value));
      if (reader_.consume(',')) continue;
      reader_.expect('}', "',' or '}'");
      return out;
    }
  }

  // A JSON integer in [0, max]: serde reads these fields as usize.
  std::uint64_t parse_count(const char* field, std::uint64_t max) {
    const std::uint64_t at = (reader_.skip_ws(), reader_.position());
    const int next = reader_.peek();
    if (next != '-' && (next < '0' || next > '9')) {
      throw FormatError(std::string(field) + " holds " + reader_.snippet_at(at) + "; expected a non-negative integer",
                        {.file = file_, .offset = at});
    }
    const JsonScalar scalar = reader_.scan_scalar();
    const std::string_view digits = text_.substr(scalar.start, scalar.end - scalar.start);
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (scalar.kind != JsonScalar::Kind::integer || digits.front() == '-' || end != digits.data() + digits.size()) {
      throw FormatError(std::string(field) + " holds " + std::string(digits) + "; expected a non-negative integer",
                        {.file = file_, .offset = at});
    }
    if (ec != std::errc{} || value > max) {
      throw FormatError(
          std::string(field) + " holds " + std::string(digits) + "; expected at most " + std::to_string(max),
          {.file = file_, .offset = at});
    }
    return value;
  }

  std::vector<std::uint64_t> parse_counts(const char* field, std::uint64_t max) {
    std::vector<std::uint64_t> out;
    reader_.expect('[', std::string("'[' opening ") + field);
    if (reader_.consume(']')) return out;
    while (true) {
      out.push_back(parse_count(field, max));
      if (reader_.consume(',')) continue;
      reader_.expect(']', "',' or ']'");
      return out;
    }
  }

  SafetensorsEntry parse_entry() {
    SafetensorsEntry entry;
    const std::uint64_t entry_at = (reader_.skip_ws(), reader_.position());
    reader_.expect('{', "'{' opening a tensor entry");
    bool has_dtype = false;
    bool has_shape = false;
    bool has_offsets = false;
    const auto once = [&](bool& seen, std::string_view key, std::uint64_t at) {
      if (seen) throw FormatError("duplicate key \"" + std::string(key) + "\"", {.file = file_, .offset = at});
      seen = true;
    };
    std::uint64_t dtype_at = 0;
    std::uint64_t shape_at = 0;
    std::string dtype_name;
    if (!reader_.consume('}')) {
      while (true) {
        const std::uint64_t key_at = (reader_.skip_ws(), reader_.position());
        std::string scratch;
        const std::string key(reader_.parse_string(scratch));
        reader_.expect(':', "':'");
        const std::uint64_t value_at = (reader_.skip_ws(), reader_.position());
        if (key == "dtype") {
          once(has_dtype, key, key_at);
          dtype_at = value_at;
          dtype_name = parse_plain_string("dtype");
        } else if (key == "shape") {
          once(has_shape, key, key_at);
          shape_at = value_at;
          for (const std::uint64_t extent :
               parse_counts("shape", static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
            entry.shape.push_back(static_cast<std::int64_t>(extent));
          }
        } else if (key == "data_offsets") {
          once(has_offsets, key, key_at);
          const std::vector<std::uint64_t> offsets =
              parse_counts("data_offsets", std::numeric_limits<std::uint64_t>::max());
          if (offsets.size() != 2) {
            throw FormatError(
                "data_offsets has " + std::to_string(offsets.size()) + " entries; expected 2 [begin, end]",
                {.file = file_, .offset = value_at});
          }
          entry.begin = offsets[0];
          entry.end = offsets[1];
          if (entry.end < entry.begin) {
            throw FormatError("data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                                  "] end before they begin",
                              {.file = file_, .offset = value_at});
          }
        } else {
          reader_.skip_value(1);  // the reference ignores other keys
        }
        if (reader_.consume(',')) continue;
        reader_.expect('}', "',' or '}'");
        break;
      }
    }
    for (const auto& [seen, key] :
         {std::pair{has_dtype, "dtype"}, {has_shape, "shape"}, {has_offsets, "data_offsets"}}) {
      if (!seen) {
        throw FormatError(std::string("tensor entry has no \"") + key + "\"", {.file = file_, .offset = entry_at});
      }
    }
    const SafetensorsDType* known = find_safetensors_dtype(dtype_name);
    if (known == nullptr) {
      throw FormatError("unknown dtype \"" + dtype_name + "\"; expected a safetensors dtype name such as \"F32\"",
                        {.file = file_, .offset = dtype_at});
    }
    if (!known->dtype) {
      throw UnsupportedError("dtype " + dtype_name + " packs elements below a byte, which tensorfile cannot represent",
                             {.file = file_, .offset = dtype_at});
    }
    entry.dtype = *known->dtype;
    // numpy's bound (each 0 counted as 1): an empty tensor's row-major strides must fit int64 too. The reference
    // accepts (0, 2^32, 2^32), whose first stride is 2^64 and which torch then lays out with wrapped strides.
    const auto elem = static_cast<std::int64_t>(element_size(entry.dtype));
    if (!checked_extent_bytes(entry.shape, elem)) {
      throw FormatError("shape " + shape_string(entry.shape) + " of " + dtype_name +
                            " overflows 64-bit byte counts (each 0 counted as 1, as numpy counts); expected at most "
                            "9223372036854775807 bytes",
                        {.file = file_, .offset = shape_at});
    }
    std::int64_t bytes = elem;
    for (const std::int64_t extent : entry.shape) bytes *= extent;  // fits: at most the bound just checked
    if (static_cast<std::uint64_t>(bytes) != entry.end - entry.begin) {
      throw FormatError("shape " + shape_string(entry.shape) + " of " + dtype_name + " takes " + std::to_string(bytes) +
                            " bytes; expected data_offsets [" + std::to_string(entry.begin) + ", " +
                            std::to_string(entry.end) + "] to hold as many, got " +
                            std::to_string(entry.end - entry.begin),
                        {.file = file_, .offset = entry_at});
    }
    return entry;
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  JsonReader reader_;
};

/// Checks that the tensors tile the data section in the order of their offsets (no hole, no overlap)
/// and that it ends where the file does; returns its length. `Info` has name, begin, end and entry_offset.
template <class Info>
std::uint64_t check_safetensors_tiling(const std::vector<Info>& tensors, std::uint64_t header_bytes,
                                       std::uint64_t file_size, const std::filesystem::path& file) {
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(tensors[a].begin, tensors[a].end) < std::pair(tensors[b].begin, tensors[b].end);
  });
  std::uint64_t covered = 0;
  const Info* previous = nullptr;
  for (const std::size_t index : order) {
    const Info& info = tensors[index];
    std::string range(1, '[');  // appended, not "[" + string: g++ 12 -O3 warns (-Wrestrict) on that in headers
    range += std::to_string(info.begin);
    range += ", ";
    range += std::to_string(info.end);
    range += ']';
    if (info.begin > covered) {
      throw FormatError("data_offsets " + range + " leave a hole; expected the tensor to start at byte " +
                            std::to_string(covered) + " of the data section",
                        {.file = file, .member = info.name, .offset = info.entry_offset});
    }
    if (info.begin < covered) {
      throw FormatError("data_offsets " + range + " overlap tensor \"" + previous->name +
                            "\"; expected it to start at byte " + std::to_string(covered) + " of the data section",
                        {.file = file, .member = info.name, .offset = info.entry_offset});
    }
    covered = info.end;
    previous = &info;
  }
  const std::uint64_t data_offset = 8 + header_bytes;  // the caller checked it lies inside the file
  if (file_size - data_offset != covered) {
    throw FormatError("the tensors cover " + std::to_string(covered) + " bytes of data; expected the " +
                          std::to_string(file_size - data_offset) + " bytes after the header",
                      {.file = file, .offset = data_offset + std::min(covered, file_size - data_offset)});
  }
  return covered;
}

}  // namespace tensorfile::detail
