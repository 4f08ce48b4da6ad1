// SPDX-License-Identifier: MIT
// Test helpers over loaded name -> Tensor dicts (state dicts, safetensors and npz loads).
#pragma once

#include <tensorfile/core/value.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "tensorfile_catch.hpp"

namespace tensorfile_test {

/// The dict's keys (strings) in its order.
inline std::vector<std::string> keys_of(const tensorfile::Value& v) {
  std::vector<std::string> out;
  for (const auto& [key, value] : v.as_dict()) out.push_back(key.as_string());
  return out;
}

/// The tensor named `name` of a loaded dict; the test fails when it is missing.
inline const tensorfile::Tensor& tensor_at(const tensorfile::Value& v, std::string_view name) {
  const tensorfile::Value* found = v.as_dict().find(name);
  REQUIRE(found != nullptr);
  return found->as_tensor();
}

}  // namespace tensorfile_test
