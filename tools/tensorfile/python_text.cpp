// SPDX-License-Identifier: MIT
// The tool's JSON floats and path steps (the rules of tests/interop/torch_reference.py).
#include "python_text.hpp"

#include <cmath>
#include <string>

namespace tensorfile::cli {

std::string json_float(double x) {
  const std::string text = python_float_repr(x);
  return std::isfinite(x) ? text : json_string(text);
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
