// SPDX-License-Identifier: MIT
/// @file
/// Where a loaded safetensors file keeps its `__metadata__`: shared by the loader, which puts it there, and
/// the writer, which writes it back.
#pragma once

#include <string_view>

#include "tensorfile/core/value.hpp"

namespace tensorfile {

/// The `__metadata__` string map a load_safetensors() result keeps (in Dict::attributes, so that
/// named_tensors, printing and save() see only the tensors), or null when the file had none. A file with
/// `"__metadata__":{}` keeps an empty map, which save_safetensors() writes back.
[[nodiscard]] inline const Dict* safetensors_metadata(const Value& loaded) {
  if (!loaded.is_dict() || !loaded.as_dict().attributes().is_dict()) return nullptr;
  const Value* metadata = loaded.as_dict().attributes().as_dict().find(std::string_view("__metadata__"));
  return metadata != nullptr && metadata->is_dict() ? &metadata->as_dict() : nullptr;
}

}  // namespace tensorfile
