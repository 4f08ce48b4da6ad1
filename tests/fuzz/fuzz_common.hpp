// SPDX-License-Identifier: MIT
// Shared helpers of the libFuzzer harnesses: walk a loaded Value and read every byte it exposes.
#pragma once

#include <tensorfile/tensorfile.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

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

/// Visits what `v` reaches, a shared container at each place (as a user's walk would), touching every tensor.
inline void walk_from(const tensorfile::Value& v, int depth, std::uint64_t& visits, std::uint64_t max_values) {
  using K = tensorfile::Value::Kind;
  if (depth > 2000) std::abort();           // the loader promised max_depth
  if (++visits > max_values) std::abort();  // and max_tree_size
  const auto inside = [&](const tensorfile::Value& item) { walk_from(item, depth + 1, visits, max_values); };
  switch (v.kind()) {
    case K::tuple:
    case K::list:
      for (const auto& e : v.elements()) inside(e);
      break;
    case K::dict:
      for (const auto& [k, e] : v.as_dict()) {
        inside(k);
        inside(e);
      }
      break;
    case K::set:
      for (const auto& e : v.as_set().items) inside(e);
      break;
    case K::tensor: touch(v.as_tensor()); break;
    case K::storage: touch(v.as_storage().tensor); break;
    case K::object:
      inside(v.as_object().args);
      inside(v.as_object().state);
      break;
    default: break;
  }
}

/// walk_from() the root; `max_values`: the max_tree_size the loader was given.
inline void walk(const tensorfile::Value& v, std::uint64_t max_values = std::uint64_t{1} << 27) {
  std::uint64_t visits = 0;
  walk_from(v, 0, visits, max_values);
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

/// The input as a file, for the loaders' pread paths (a select load reads only what it keeps): a memfd
/// reached by its /proc/self/fd path. Empty path() when the kernel gives no memfd.
class InputFile {
 public:
  explicit InputFile(std::span<const std::byte> bytes) : fd_(::memfd_create("fuzz_input", MFD_CLOEXEC)) {
    for (std::size_t done = 0; fd_ >= 0 && done < bytes.size();) {
      const ssize_t wrote = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (wrote <= 0) std::abort();
      done += static_cast<std::size_t>(wrote);
    }
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] std::filesystem::path path() const {
    if (fd_ < 0) return {};
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

/// Keeps about half the tensor paths, which half chosen by `seed` (the input's size, say).
inline std::function<bool(std::string_view)> half_select(std::size_t seed) {
  return [seed](std::string_view path) { return ((std::hash<std::string_view>{}(path) ^ seed) & 1) == 0; };
}

/// Traps unless `selected`, the same load as `full` with `select` (its unselected tensors meta, not dropped),
/// has the same tensor paths in the same order, the same tensor at each path `select` keeps, and at the others
/// the same tensor (its storage shared with a kept one) or a meta tensor of its dtype and shape.
inline void check_selected(const tensorfile::Value& full, const tensorfile::Value& selected,
                           const std::function<bool(std::string_view)>& select) {
  const auto all = tensorfile::named_tensors(full);
  const auto some = tensorfile::named_tensors(selected);
  if (all.size() != some.size()) __builtin_trap();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& [path, tensor] = all[i];
    const tensorfile::Tensor& got = some[i].second;
    if (some[i].first != path) __builtin_trap();
    if (tensorfile::Value(got) == tensorfile::Value(tensor)) continue;
    const bool meta_stand_in = !select(path) && got.device().is_meta() && got.dtype() == tensor.dtype() &&
                               std::ranges::equal(got.sizes(), tensor.sizes());
    if (!meta_stand_in) __builtin_trap();
  }
}

}  // namespace tensorfile_fuzz
