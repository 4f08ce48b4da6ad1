// SPDX-License-Identifier: MIT
// convert's tree mapping: torch object trees to TensorDicts and back, and the cleaning of what is not data.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tensorfile/core/value.hpp>
#include <tensorfile/formats/tensordict/tensordict.hpp>
#include <tensorfile/formats/tensordict/value_tree.hpp>

namespace tensorfile::cli {

/// Something convert left out of its output, and what it was.
struct Dropped {
  std::string path{};  ///< inspect's path of it
  std::string what{};  ///< e.g. "numpy.ndarray", "pickled NonTensorData"
};

/// `v` without what is not data: opaque objects (which torch.load would build by calling code) and class or
/// function references. They leave dicts and sets; in lists and tuples they become None, so indices hold.
/// Containers that held none are shared, not copied. Each one left out is appended to `dropped`.
[[nodiscard]] Value without_code(const Value& v, std::vector<Dropped>& dropped);

/// tensorfile::to_tensordict() of `root`, naming `file` in its errors; what it changes (keys turned into text,
/// attributes left out) is appended to `changed`.
[[nodiscard]] TensorDict to_tensordict(const Value& root, const std::filesystem::path& file,
                                       std::vector<Dropped>& changed);

/// tensorfile::to_value() of `td`, naming `file` in its errors; the pickled non-tensor data it leaves out is
/// appended to `dropped`.
[[nodiscard]] Value to_value(const TensorDict& td, const std::filesystem::path& file, std::vector<Dropped>& dropped);

}  // namespace tensorfile::cli
