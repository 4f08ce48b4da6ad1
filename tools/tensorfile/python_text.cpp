// SPDX-License-Identifier: MIT
// The tool's JSON floats (the rules of tests/interop/torch_reference.py).
#include "python_text.hpp"

#include <cmath>
#include <string>

namespace tensorfile::cli {

std::string json_float(double x) {
  const std::string text = python_float_repr(x);
  return std::isfinite(x) ? text : json_string(text);
}

}  // namespace tensorfile::cli
