// SPDX-License-Identifier: MIT
// The tensorfile program on NumPy files: inspect and verify of .npy and .npz, hooked first into each command.
#pragma once

#include <filesystem>
#include <optional>

#include <tensorfile/core/value.hpp>
#include <tensorfile/formats/numpy/npy.hpp>

#include "args.hpp"

namespace tensorfile::cli {

/// What kind of NumPy file `path` is, from its contents: a .npy by its magic, a .npz by a zip signature
/// and the ".npz" suffix (np.load tells them the same way); nullopt for anything else.
enum class NumpyFile { npy, npz };
[[nodiscard]] std::optional<NumpyFile> numpy_file(const std::filesystem::path& path);

/// `inspect` of a .npy/.npz file; nullopt when PATH is not one (the caller goes on).
[[nodiscard]] std::optional<int> inspect_numpy(const Args& args);
/// `verify` of a .npy/.npz file (every header, every CRC-32, all data read); nullopt when PATH is not one.
[[nodiscard]] std::optional<int> verify_numpy(const Args& args);
/// A NumPy file as a dict of name -> tensor (a .npy gives one entry named after the file's stem; `options.select`
/// is asked that name).
[[nodiscard]] Value load_numpy(const std::filesystem::path& path, NumpyFile kind, const LoadOptions& options);

}  // namespace tensorfile::cli
