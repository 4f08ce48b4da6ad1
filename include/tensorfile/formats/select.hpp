// SPDX-License-Identifier: MIT
/// @file
/// Which tensors a load reads: the `select` option every format's loader takes, and select_paths() to build one.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/config.hpp"

namespace tensorfile {

/// Asked with each tensor's path ("layers.0.weight") before its bytes are read: true keeps it; the loader's
/// options say what becomes of the others (meta tensors, or left out).
using TensorSelect = std::function<bool(std::string_view path)>;

/// A TensorSelect that keeps the tensors whose path equals one of `patterns` or matches it as a glob ('*' any
/// run of characters, '?' one): select_paths({"encoder.*", "lm_head.weight"}).
[[nodiscard]] TENSORFILE_ENTRY TensorSelect select_paths(std::vector<std::string> patterns);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_select)
#include <utility>

#include "tensorfile/detail/text/glob.hpp"

namespace tensorfile {

TENSORFILE_ENTRY TensorSelect select_paths(std::vector<std::string> patterns) {
  return [patterns = std::move(patterns)](std::string_view path) {
    for (const std::string& pattern : patterns) {
      if (detail::glob_match(pattern, path)) return true;
    }
    return false;
  };
}

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(formats_select)
