// SPDX-License-Identifier: MIT
// Walking a loaded Value's tensors: map them (to the host, to a device) and list them, for the device tests.
#pragma once

#include <tensorfile/core/tensor.hpp>
#include <tensorfile/core/value.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tensorfile_test {

/// `value` with every tensor (and every bare storage's tensor) replaced by fn(tensor).
inline tensorfile::Value map_tensors(const tensorfile::Value& value,
                                     const std::function<tensorfile::Tensor(const tensorfile::Tensor&)>& fn) {
  using namespace tensorfile;
  const auto& apply = fn;
  std::function<Value(const Value&)> walk = [&](const Value& v) -> Value {
    switch (v.kind()) {
      case Value::Kind::tensor:
        return v.is_parameter() ? Value::parameter(apply(v.as_tensor())) : Value(apply(v.as_tensor()));
      case Value::Kind::storage: return Value(StorageValue{apply(v.as_storage().tensor), v.as_storage().location});
      case Value::Kind::list: {
        List items;
        for (const auto& item : v.as_list()) items.push_back(walk(item));
        return Value(std::move(items));
      }
      case Value::Kind::tuple: {
        List items;
        for (const auto& item : v.as_tuple()) items.push_back(walk(item));
        return Value::tuple(std::move(items));
      }
      case Value::Kind::dict: {
        Dict out;
        out.ordered = v.as_dict().ordered;
        out.set_attributes(walk(v.as_dict().attributes()));
        for (const auto& [key, item] : v.as_dict()) out.set(key, walk(item));
        return Value(std::move(out));
      }
      case Value::Kind::set: {
        Set out{{}, v.as_set().frozen};
        for (const auto& item : v.as_set().items) out.items.push_back(walk(item));
        return Value(std::move(out));
      }
      case Value::Kind::object: {
        const Object& o = v.as_object();
        return Value(Object{o.module, o.name, walk(o.args), walk(o.state), o.newobj});
      }
      default: return v;
    }
  };
  return walk(value);
}

/// Every tensor of `value` (bare storages as their tensor), depth first.
inline std::vector<tensorfile::Tensor> tensors_of(const tensorfile::Value& value) {
  std::vector<tensorfile::Tensor> out;
  (void)map_tensors(value, [&](const tensorfile::Tensor& t) {
    out.push_back(t);
    return t;
  });
  return out;
}

/// `value` with every storage brought whole to `device` through Tensor::to (each distinct storage
/// once, so views of one storage stay views of one), strides and offsets kept.
inline tensorfile::Value storages_to(const tensorfile::Value& value, tensorfile::Device device) {
  using namespace tensorfile;
  std::map<std::tuple<const void*, const std::byte*, std::size_t>, Storage> moved;
  return map_tensors(value, [&](const Tensor& t) {
    const Storage& s = t.storage();
    if (!s.defined() || s.device() == device || s.device().is_meta()) return t;  // meta tensors (torch's too) stay meta
    const auto key = std::make_tuple(s.owner(), s.data(), s.size_bytes());
    auto it = moved.find(key);
    if (it == moved.end()) {
      const Tensor bytes(s, DType::UInt8, {static_cast<std::int64_t>(s.size_bytes())});
      it = moved.emplace(key, bytes.to(device).storage()).first;
    }
    return Tensor(it->second, t.dtype(), t.sizes(), t.strides(), t.storage_offset(), t.requires_grad());
  });
}

/// What a load's tensors lie on: the devices, the owners of their non-empty storages (one per device allocation),
/// and their storages' bytes in all.
struct Placement {
  std::set<std::string> devices;  ///< Device::str()
  std::set<const void*> owners;
  std::uint64_t bytes = 0;
};
inline Placement placement_of(const tensorfile::Value& value) {
  Placement out;
  for (const tensorfile::Tensor& t : tensors_of(value)) {
    out.devices.insert(t.device().str());
    if (t.storage().size_bytes() != 0) out.owners.insert(t.storage().owner());
    out.bytes += t.storage().size_bytes();
  }
  return out;
}

/// `value` with every storage on the host.
inline tensorfile::Value to_host(const tensorfile::Value& value) {
  return storages_to(value, tensorfile::Device::cpu());
}

}  // namespace tensorfile_test
