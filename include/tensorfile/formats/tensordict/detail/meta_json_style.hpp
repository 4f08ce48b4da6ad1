// SPDX-License-Identifier: MIT
// MetaJsonStyle on its own: MemmapSaveOptions names it without the meta.json schema and writer behind it.
#pragma once

#include <cstdint>

namespace tensorfile {

/// Which of tensordict's JSON backends save_memmap imitates when it writes meta.json.
enum class MetaJsonStyle : std::uint8_t {
  stdlib,  ///< Python's json module: ", " and ": " separators, \uXXXX escapes for non-ASCII, NaN/Infinity tokens
  orjson,  ///< orjson: compact separators, raw UTF-8, NaN and infinities written as null
};

}  // namespace tensorfile
