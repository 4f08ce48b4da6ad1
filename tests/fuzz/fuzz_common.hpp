// SPDX-License-Identifier: MIT
// Shared helpers of the libFuzzer harnesses: walk a loaded Value and read every byte it exposes.
#pragma once

#include <tensorfile/tensorfile.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace tensorfile_fuzz {

/// Reads every element of a CPU tensor through its strides (clone() walks the view), so a view that
/// leaves its storage shows up under ASan. Large tensors are sampled through their first and last bytes.
inline void touch(const tensorfile::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu()) return;
  if (t.numel() == 0) return;
  if (t.nbytes() <= (std::size_t{1} << 20)) {
    const tensorfile::Tensor c = t.clone();
    volatile std::byte sink{};
    const std::byte* p = c.raw_data();
    for (std::size_t i = 0; i < c.nbytes(); ++i) sink = sink ^ p[i];
    (void)sink;
  } else {
    const auto& s = t.storage();
    volatile std::byte sink = s.data()[0] ^ s.data()[s.size_bytes() - 1];
    (void)sink;
  }
}

inline void walk(const tensorfile::Value& v, int depth = 0) {
  using K = tensorfile::Value::Kind;
  if (depth > 2000) std::abort();  // the loader promised max_depth
  switch (v.kind()) {
    case K::tuple:
    case K::list:
      for (const auto& e : v.elements()) walk(e, depth + 1);
      break;
    case K::dict:
      for (const auto& [k, e] : v.as_dict()) {
        walk(k, depth + 1);
        walk(e, depth + 1);
      }
      break;
    case K::set:
      for (const auto& e : v.as_set().items) walk(e, depth + 1);
      break;
    case K::tensor: touch(v.as_tensor()); break;
    case K::storage: touch(v.as_storage().tensor); break;
    case K::object:
      walk(v.as_object().args, depth + 1);
      walk(v.as_object().state, depth + 1);
      break;
    default: break;
  }
}

/// Runs one loader (a callable taking the bytes) and walks what it returns; a tensorfile::Error is an accepted
/// outcome (null), anything else (a crash, a sanitizer report, another exception) is a finding.
template <class Load>
std::optional<tensorfile::Value> try_load(Load&& load) {
  try {
    tensorfile::Value v = load();
    walk(v);
    return v;
  } catch (const tensorfile::Error&) {
    return std::nullopt;
  }
}

}  // namespace tensorfile_fuzz
