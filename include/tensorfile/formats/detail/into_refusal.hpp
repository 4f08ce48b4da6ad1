// SPDX-License-Identifier: MIT
// The refusals of the options only the front door applies: LoadOptions::into by the loaders that do not fill caller
// buffers themselves, LoadOptions::slice by every per-format loader.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "tensorfile/core/error.hpp"
#include "tensorfile/formats/options.hpp"

namespace tensorfile::detail {

/// Throws an ArgumentError when `options.into` names buffers and `loader` ("load_safetensors()") cannot fill them:
/// a silently unfilled buffer would look loaded. The front door (load(), Checkpoint::read_into) fills them for
/// every format.
inline void refuse_into_buffers(const LoadOptions& options, std::string_view loader,
                                const std::filesystem::path& file = {}) {
  if (options.into.empty()) return;
  throw ArgumentError(std::string(loader) +
                          " does not fill LoadOptions::into buffers; expected an empty into (load(path, options) and "
                          "open(path).read_into(name, buffer) fill them for every format)",
                      {.file = file});
}

/// Throws an ArgumentError when `options.slice` is set: `loader` would read whole tensors the caller asked parts of.
inline void refuse_slice_rule(const LoadOptions& options, std::string_view loader,
                              const std::filesystem::path& file = {}) {
  if (!options.slice) return;
  throw ArgumentError(std::string(loader) +
                          " does not read slices; expected LoadOptions::slice unset (load(source, options) and "
                          "open(source) read slices of every format)",
                      {.file = file});
}

}  // namespace tensorfile::detail
