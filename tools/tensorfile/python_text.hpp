// SPDX-License-Identifier: MIT
// The tool's own text forms for inspect's JSON: floats that stay JSON. Python's
// reprs, JSON strings, key texts and paths come from <tensorfile/core/text.hpp> and <tensorfile/core/value_print.hpp>.
#pragma once

#include <string>
#include <string_view>

#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>

namespace tensorfile::cli {

/// A float as JSON: Python's repr when finite, else the strings "nan", "inf", "-inf".
[[nodiscard]] std::string json_float(double x);

}  // namespace tensorfile::cli
