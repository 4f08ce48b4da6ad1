// SPDX-License-Identifier: MIT
// The tensorfile program on NumPy files: inspect and verify of .npy and .npz, which each command calls when the
// library finds one.
#pragma once

#include <filesystem>

#include <tensorfile/core/value.hpp>
#include <tensorfile/formats/format.hpp>

#include "args.hpp"

namespace tensorfile::cli {

/// `inspect` of `file`, a .npy or .npz (`format`, as open() found it).
[[nodiscard]] int inspect_numpy(const Args& args, const std::filesystem::path& file, FileFormat format);
/// `inspect` of a NumPy file already loaded as a dict of name -> tensor (meta tensors without --hash): a URL's.
[[nodiscard]] int inspect_numpy_value(const Args& args, const Value& loaded, FileFormat format);
/// `verify` of `file`, a .npy or .npz (`format`, as resolve_state_dict() found it): every header, every CRC-32, all
/// data read.
[[nodiscard]] int verify_numpy(const Args& args, const std::filesystem::path& file, FileFormat format);

}  // namespace tensorfile::cli
