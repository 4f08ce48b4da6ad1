// SPDX-License-Identifier: MIT
// Shell-style wildcard matching of key paths ('*' any run of characters, '?' one character).
#pragma once

#include <cstddef>
#include <string_view>

namespace tensorfile::detail {

/// Whether `text` matches `pattern`, where '*' matches any run of characters (including '/' and none)
/// and '?' any one character; every other character matches itself. Linear in practice: the last '*'
/// is the only one retried.
[[nodiscard]] inline bool glob_match(std::string_view pattern, std::string_view text) noexcept {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;  // the last '*' seen, and where in text it started matching
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;  // let the last '*' swallow one more character
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace tensorfile::detail
