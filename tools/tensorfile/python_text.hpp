// SPDX-License-Identifier: MIT
// Python's text forms (repr of floats, str, keys) and JSON as Python's json.dumps writes it, for inspect's output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <tensorfile/core/value.hpp>

namespace tensorfile::cli {

/// Python's repr() of a float: "0.1", "1e-05", "1e+16", "1.0", "nan", "inf", "-inf".
[[nodiscard]] std::string python_float(double x);

/// A JSON string as json.dumps writes it (ensure_ascii: \uXXXX escapes, surrogate pairs); invalid UTF-8
/// bytes come through as the code points of their latin-1 reading, never lost.
[[nodiscard]] std::string json_string(std::string_view text);

/// A float as JSON: Python's repr when finite, else the strings "nan", "inf", "-inf".
[[nodiscard]] std::string json_float(double x);

/// Lowercase hex of bytes.
[[nodiscard]] std::string hex_bytes(const std::vector<std::byte>& bytes);

/// Python's repr() of a str: single quotes unless the text has ' and no ".
[[nodiscard]] std::string python_str_repr(std::string_view text);

/// Python's repr() of the values that can be dict keys or plain leaves (str, int, float, tuple, ...).
[[nodiscard]] std::string python_repr(const Value& v);

/// The text of a dict key as a path step before escaping: str as is, ints in decimal, others as repr().
[[nodiscard]] std::string key_text(const Value& key);

/// A path step escaped as in JSON Pointer: "~" -> "~0", "/" -> "~1".
[[nodiscard]] std::string path_step(std::string_view text);

}  // namespace tensorfile::cli
