// SPDX-License-Identifier: MIT
// convert's tree mapping: torch object trees to TensorDicts and back, and the cleaning of what is not data.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tensorfile/core/value.hpp>
#include <tensorfile/formats/tensordict/tensordict.hpp>

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

/// `root` as a TensorDict tree: dicts become TensorDicts (keys as text), tensors and bare storages tensor
/// leaves, lists and tuples that hold tensors TensorDicts keyed "0", "1"..., and other values NonTensorData
/// holding them as JSON. Throws UnsupportedError, naming `file` and the path, for a root that is neither a dict
/// nor a list holding tensors, and for values JSON cannot hold (bytes, complex, device, dtype, set),
/// ArgumentError for two keys with one text.
[[nodiscard]] TensorDict to_tensordict(const Value& root, const std::filesystem::path& file);

/// `td` as a torch object tree: TensorDicts and tensorclasses become dicts (a tensorclass's JSON attributes
/// included), lazy stacks lists, NonTensorData its value. Pickled non-tensor data is never unpickled: it is left
/// out and appended to `dropped`. Throws UnsupportedError, naming `file`, for nested tensors.
[[nodiscard]] Value to_value(const TensorDict& td, const std::filesystem::path& file, std::vector<Dropped>& dropped);

}  // namespace tensorfile::cli
