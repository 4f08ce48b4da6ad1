// SPDX-License-Identifier: MIT
/// @file
/// GlobalVerdict and classify_global's declaration: what scan()'s report names, without the lists behind the verdicts.
#pragma once

#include <cstdint>
#include <string_view>

#include "tensorfile/config.hpp"

namespace tensorfile {

/// The verdict on one global a pickle references, from harmless to dangerous (ordered: worst is largest).
enum class GlobalVerdict : std::uint8_t {
  tensor_rebuild,  ///< torch's own tensor rebuild functions and storage classes
  allowed,         ///< on torch 1.13's weights_only allow-list (OrderedDict, torch.Size, ten dtypes, tensor classes)
  unknown,         ///< neither: torch.load(weights_only=True) refuses it; plain torch.load imports and may call it
  dangerous,       ///< calls code or touches the system (os.system, builtins.eval, subprocess, torch.load...)
};

/// "tensor-rebuild", "allowed", "unknown" or "dangerous".
[[nodiscard]] constexpr std::string_view verdict_name(GlobalVerdict verdict) noexcept {
  switch (verdict) {
    case GlobalVerdict::tensor_rebuild: return "tensor-rebuild";
    case GlobalVerdict::allowed: return "allowed";
    case GlobalVerdict::unknown: return "unknown";
    case GlobalVerdict::dangerous: return "dangerous";
  }
  return "unknown";
}

/// The verdict on the global `module`.`name` (`full` is the two joined by a dot): tensor_rebuild or allowed when
/// `full` is on torch 1.13's weights_only allow-list, exactly; dangerous when the name as written, as Python's
/// _compat_pickle renames it (`cPickle.loads` is pickle.loads, `thread` is _thread), or as a dotted attribute path
/// (`torch` + `serialization.os.system`) reaches code or the system; unknown otherwise.
[[nodiscard]] TENSORFILE_ENTRY GlobalVerdict classify_global(std::string_view module, std::string_view name,
                                                             std::string_view full);

}  // namespace tensorfile
