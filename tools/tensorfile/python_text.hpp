// SPDX-License-Identifier: MIT
// The tool's own text forms for inspect's JSON: floats that stay JSON, and path steps. Python's
// reprs, JSON strings and key texts come from <tensorfile/core/text.hpp> and <tensorfile/core/value_print.hpp>.
#pragma once

#include <string>
#include <string_view>

#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>

namespace tensorfile::cli {

/// A float as JSON: Python's repr when finite, else the strings "nan", "inf", "-inf".
[[nodiscard]] std::string json_float(double x);

/// A path step escaped as in JSON Pointer (the library's json_pointer_step).
[[nodiscard]] inline std::string path_step(std::string_view text) { return json_pointer_step(text); }

}  // namespace tensorfile::cli
