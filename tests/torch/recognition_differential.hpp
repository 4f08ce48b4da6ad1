// SPDX-License-Identifier: MIT
// Differential check of the pickle machine's call recognition: one torch pickle run as load_torch() runs it
// (tensor calls recognised and built directly) and with every opcode executed must give equal
// values with the same sharing, strides and offsets, or the very same error.
#pragma once

#include <tensorfile/core/meta_backend.hpp>
#include <tensorfile/formats/torch/detail/pickle_machine.hpp>
#include <tensorfile/formats/torch/detail/torch_hooks.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tensorfile_test {

/// TorchHooks without call recognition: the machine then executes every opcode.
class OpcodeHooks {
 public:
  explicit OpcodeHooks(tensorfile::detail::TorchHooks& inner) : inner_(inner) {}
  tensorfile::Value find_class(std::string_view m, std::string_view n, std::uint64_t at) {
    return inner_.find_class(m, n, at);
  }
  tensorfile::Value reduce(const tensorfile::Value& c, tensorfile::Value a, std::uint64_t at) {
    return inner_.reduce(c, std::move(a), at);
  }
  tensorfile::Value new_object(const tensorfile::Value& c, tensorfile::Value a, std::uint64_t at) {
    return inner_.new_object(c, std::move(a), at);
  }
  tensorfile::Value build(const tensorfile::Value& o, tensorfile::Value s, std::uint64_t at) {
    return inner_.build(o, std::move(s), at);
  }
  tensorfile::Value persistent_load(tensorfile::Value id, std::uint64_t at) {
    return inner_.persistent_load(std::move(id), at);
  }

 protected:
  tensorfile::detail::TorchHooks& inner_;
};

/// TorchHooks as load_torch() uses them, counting the calls that were recognised.
class RecognizingHooks : public OpcodeHooks {
 public:
  using OpcodeHooks::OpcodeHooks;
  using RecognizedCall = tensorfile::detail::TorchHooks::RecognizedCall;

  template <class Memo>
  std::optional<RecognizedCall> recognize_call(const tensorfile::Value& callable, std::span<const std::byte> bytes,
                                               std::size_t pos, std::uint64_t base, const Memo& memo) const {
    return inner_.recognize_call(callable, bytes, pos, base, memo);
  }
  tensorfile::Value finish_call(RecognizedCall& call) {
    ++recognized;
    return inner_.finish_call(call);
  }

  std::size_t recognized = 0;
};

struct PickleOutcome {
  std::optional<tensorfile::Value> value;
  std::string error;           ///< what() of the tensorfile::Error when the run failed
  std::size_t recognized = 0;  ///< calls built without running their opcodes
};

/// Runs a torch pickle with meta storages (any declared size, nothing allocated); with a `window`, the machine
/// reads the pickle through a PickleSource that many bytes at a time, as heap loads of files do.
inline PickleOutcome run_torch_pickle(std::span<const std::byte> pickle, bool recognize, bool strict = true,
                                      const tensorfile::detail::PickleLimits& limits = {}, std::size_t window = 0) {
  using namespace tensorfile;
  LoadOptions options;
  options.strict = strict;
  const auto load_storage = [](const std::string& key, DType dtype, std::int64_t numel, const std::string&,
                               std::uint64_t at) {
    std::int64_t bytes = 0;
    if (__builtin_mul_overflow(numel, static_cast<std::int64_t>(element_size(dtype)), &bytes)) {
      throw FormatError("storage " + key + " overflows", {"test.pt", "archive/data.pkl", at});
    }
    return meta_storage(static_cast<std::size_t>(bytes));
  };
  detail::TorchHooks torch(options, {"test.pt", "archive/data.pkl"}, load_storage);
  PickleOutcome out;
  const auto run = [&](auto& hooks) {
    using Machine = detail::PickleMachine<std::remove_reference_t<decltype(hooks)>>;
    const ErrorLocation where{"test.pt", "archive/data.pkl"};
    if (window == 0) return Machine(pickle, hooks, where, limits).run();
    // Reads from the pickle's own bytes, refusing anything past them as a file that ends would.
    detail::PickleSource source{pickle.size(), [pickle](std::uint64_t offset, std::span<std::byte> to) {
                                  if (offset > pickle.size() || to.size() > pickle.size() - offset) {
                                    throw std::logic_error("the machine read past the pickle");
                                  }
                                  std::memcpy(to.data(), pickle.data() + offset, to.size());
                                }};
    return Machine(std::move(source), hooks, where, limits, window).run();
  };
  try {
    if (recognize) {
      RecognizingHooks hooks(torch);
      out.value = run(hooks);
      out.recognized = hooks.recognized;
    } else {
      OpcodeHooks hooks(torch);
      out.value = run(hooks);
    }
  } catch (const Error& error) {
    out.value.reset();
    out.error = error.what();
  }
  return out;
}

/// Every tensor's storage (numbered by first appearance), offset and strides, in tree order.
inline void layout_of(const tensorfile::Value& v, std::map<const void*, std::size_t>& storages, std::string& out) {
  using K = tensorfile::Value::Kind;
  const auto tensor = [&](const tensorfile::Tensor& t) {
    const auto [it, fresh] = storages.try_emplace(t.storage().owner(), storages.size());
    out += "s" + std::to_string(it->second) + "+" + std::to_string(t.storage_offset()) + "/";
    for (auto s : t.strides()) out += std::to_string(s) + ",";
    out += ";";
  };
  switch (v.kind()) {
    case K::tuple:
    case K::list:
      for (const auto& e : v.elements()) layout_of(e, storages, out);
      break;
    case K::dict:
      for (const auto& [k, e] : v.as_dict()) layout_of(e, storages, out);
      break;
    case K::tensor: tensor(v.as_tensor()); break;
    case K::storage: tensor(v.as_storage().tensor); break;
    default: break;
  }
}

/// Empty when both runs agree; otherwise what differs.
inline std::string recognition_difference(const PickleOutcome& fast, const PickleOutcome& slow) {
  if (fast.value.has_value() != slow.value.has_value() || fast.error != slow.error) {
    return "recognized run: " + (fast.value ? std::string("a value") : fast.error) +
           "; opcode run: " + (slow.value ? std::string("a value") : slow.error);
  }
  if (!fast.value) return {};
  if (!(*fast.value == *slow.value)) return "the values differ";
  std::map<const void*, std::size_t> a_storages;
  std::map<const void*, std::size_t> b_storages;
  std::string a;
  std::string b;
  layout_of(*fast.value, a_storages, a);
  layout_of(*slow.value, b_storages, b);
  if (a != b) return "the tensor layouts differ: " + a + " vs " + b;
  return {};
}

}  // namespace tensorfile_test
