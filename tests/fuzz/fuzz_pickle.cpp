// SPDX-License-Identifier: MIT
// libFuzzer harness: the pickle machine alone, with hooks that build inert values (nothing executes);
// then with torch's hooks twice, recognising tensor calls and running every opcode, which must agree; and once
// more reading the pickle through a small window (as heap loads of files do), which must agree too.
#include <tensorfile/formats/torch/detail/pickle_machine.hpp>

#include "../torch/recognition_differential.hpp"
#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace {
struct InertHooks {
  tensorfile::Value find_class(std::string_view module, std::string_view name, std::uint64_t) {
    return tensorfile::Value(tensorfile::Global{std::string(module), std::string(name)});
  }
  tensorfile::Value reduce(const tensorfile::Value&, tensorfile::Value args, std::uint64_t) { return args; }
  tensorfile::Value new_object(const tensorfile::Value&, tensorfile::Value args, std::uint64_t) { return args; }
  tensorfile::Value build(const tensorfile::Value&, tensorfile::Value state, std::uint64_t) { return state; }
  tensorfile::Value persistent_load(tensorfile::Value id, std::uint64_t) { return id; }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  InertHooks hooks;
  const tensorfile::detail::PickleLimits limits{.max_depth = 200,
                                                .max_memo = 4096,
                                                .max_stack = 1u << 16,
                                                .max_container = 1u << 16,
                                                .max_int_bytes = 128,
                                                .max_tree_size = 1u << 16,
                                                .max_copied_text = 1u << 24};
  try {
    tensorfile::detail::PickleMachine<InertHooks> machine(bytes, hooks, tensorfile::ErrorLocation{.file = "fuzz.pkl"},
                                                          limits);
    const tensorfile::Value v = machine.run();
    if (machine.end() > size) __builtin_trap();
    tensorfile_fuzz::walk(v, limits.max_tree_size);
  } catch (const tensorfile::Error&) {
  }
  const bool strict = (size & 1) == 0;
  const auto fast = tensorfile_test::run_torch_pickle(bytes, true, strict, limits);
  const auto slow = tensorfile_test::run_torch_pickle(bytes, false, strict, limits);
  if (!tensorfile_test::recognition_difference(fast, slow).empty()) __builtin_trap();  // one meaning, two paths
  const std::size_t window = 1 + size % 61;
  const auto streamed = tensorfile_test::run_torch_pickle(bytes, true, strict, limits, window);
  if (!tensorfile_test::recognition_difference(streamed, fast).empty()) __builtin_trap();  // and in windows
  if (fast.value) tensorfile_fuzz::walk(*fast.value, limits.max_tree_size);
  return 0;
}
