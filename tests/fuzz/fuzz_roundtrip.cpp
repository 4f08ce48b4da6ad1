// SPDX-License-Identifier: MIT
// libFuzzer harness, structure-aware: the input drives a generator of Values (containers, shared
// references, big ints, tensors of every plain dtype, views sharing storages, parameters, storages,
// devices, dtypes, opaque objects). Whatever save_to_bytes accepts must load back equal, in heap and in
// mmap mode; a save that fails must fail with a tensorfile::Error.
#include <tensorfile/tensorfile.hpp>

#include "fuzz_common.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tf = tensorfile;

namespace {
struct Gen {
  FuzzedDataProvider& in;
  std::vector<tf::Value> made;      // earlier values, reused to make shared references (memo)
  std::vector<tf::Tensor> tensors;  // earlier tensors, whose storages new views may share
  int budget = 256;

  tf::Value key(int depth) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: return tf::Value(in.ConsumeIntegral<std::int64_t>());
      case 1: return tf::Value(in.ConsumeBool());
      case 2: return tf::Value(in.ConsumeFloatingPoint<double>());
      case 3:
        if (depth < 3) {
          tf::List items;
          for (int i = in.ConsumeIntegralInRange<int>(0, 3); i > 0; --i) items.push_back(key(depth + 1));
          return tf::Value::tuple(std::move(items));
        }
        [[fallthrough]];
      default: return tf::Value(in.ConsumeRandomLengthString(32));
    }
  }

  tf::Tensor tensor() {
    if (!tensors.empty() && in.ConsumeBool()) {  // a view of an earlier tensor's storage
      const tf::Tensor& base = tensors[in.ConsumeIntegralInRange<std::size_t>(0, tensors.size() - 1)];
      const std::int64_t elements = static_cast<std::int64_t>(base.storage().size_bytes() / base.element_size());
      if (elements > 0) {
        const std::int64_t offset = in.ConsumeIntegralInRange<std::int64_t>(0, elements - 1);
        const std::int64_t count = in.ConsumeIntegralInRange<std::int64_t>(0, elements - offset);
        return tf::Tensor(base.storage(), base.dtype(), {count}, {1}, offset);
      }
    }
    const auto dtype = static_cast<tf::DType>(in.ConsumeIntegralInRange<int>(0, 20));
    tf::Shape shape;
    for (int r = in.ConsumeIntegralInRange<int>(0, 3); r > 0; --r)
      shape.push_back(in.ConsumeIntegralInRange<int>(0, 4));
    tf::Tensor t = tf::Tensor::zeros(shape, dtype);
    if (t.nbytes() > 0) {
      const auto bytes = in.ConsumeBytes<std::uint8_t>(t.nbytes());
      if (!bytes.empty()) std::memcpy(t.mutable_raw_data(), bytes.data(), bytes.size());
    }
    if (t.dim() >= 2 && in.ConsumeBool()) t = t.transpose(0, 1);
    if (t.dim() >= 1 && t.size(0) > 1 && in.ConsumeBool()) t = t.slice(0, 1, t.size(0), 2);
    if (in.ConsumeBool()) t.set_requires_grad(true);
    tensors.push_back(t);
    return t;
  }

  tf::Value value(int depth) {
    if (--budget < 0 || in.remaining_bytes() == 0) return {};
    tf::Value v = make(depth);
    made.push_back(v);
    return v;
  }

  tf::Value make(int depth) {
    const bool leaf = depth >= 6;
    switch (in.ConsumeIntegralInRange<int>(0, leaf ? 12 : 19)) {
      case 0: return {};
      case 1: return tf::Value(in.ConsumeBool());
      case 2: return tf::Value(in.ConsumeIntegral<std::int64_t>());
      case 3: return tf::Value(in.ConsumeFloatingPoint<double>());
      case 4:
        return tf::Value(std::complex<double>(in.ConsumeFloatingPoint<double>(), in.ConsumeFloatingPoint<double>()));
      case 5: return tf::Value(in.ConsumeRandomLengthString(64));
      case 6: {
        tf::Bytes b;
        for (auto c : in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, 64)))
          b.data.push_back(std::byte{c});
        return tf::Value(std::move(b));
      }
      case 7: {  // an int beyond 64 bits, in its minimal two's-complement form
        tf::BigInt big;
        big.bytes = in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(9, 40));
        while (big.bytes.size() < 9) big.bytes.push_back(0x5A);
        const std::uint8_t last = big.bytes.back();
        const bool top = (big.bytes[big.bytes.size() - 2] & 0x80u) != 0;
        if ((last == 0x00 && !top) || (last == 0xFF && top)) big.bytes.back() = last == 0 ? 0x01 : 0xFE;
        return tf::Value(std::move(big));
      }
      case 8: {
        switch (in.ConsumeIntegralInRange<int>(0, 2)) {
          case 0: return tf::Value(tf::Device::cpu());
          case 1: return tf::Value(tf::Device::cuda(in.ConsumeIntegralInRange<int>(0, 7)));
          default: return tf::Value(tf::Device::meta());
        }
      }
      case 9: return tf::Value(static_cast<tf::DType>(in.ConsumeIntegralInRange<int>(0, 20)));
      case 10: return tf::Value(tf::Global{"fuzzmod", "Thing" + std::to_string(in.ConsumeIntegralInRange<int>(0, 9))});
      case 11: return in.ConsumeBool() ? tf::Value(tensor()) : tf::Value::parameter(tensor());
      case 12:
        if (!made.empty()) return made[in.ConsumeIntegralInRange<std::size_t>(0, made.size() - 1)];  // shared reference
        return {};
      case 13: {
        // Only dtypes with a legacy storage class (torch.FloatStorage...): the others are saved, as torch
        // does, as torch.UntypedStorage and come back as uint8 (by design; see the report).
        constexpr tf::DType legacy[] = {tf::DType::Bool,    tf::DType::UInt8,     tf::DType::Int8,
                                        tf::DType::Int16,   tf::DType::Int32,     tf::DType::Int64,
                                        tf::DType::Float16, tf::DType::BFloat16,  tf::DType::Float32,
                                        tf::DType::Float64, tf::DType::Complex64, tf::DType::Complex128};
        tf::Tensor t =
            tf::Tensor::zeros({in.ConsumeIntegralInRange<int>(0, 16)}, legacy[in.ConsumeIntegralInRange<int>(0, 11)]);
        const auto bytes = in.ConsumeBytes<std::uint8_t>(t.nbytes());
        if (!bytes.empty()) std::memcpy(t.mutable_raw_data(), bytes.data(), bytes.size());
        return tf::Value(tf::StorageValue{t, "cpu"});
      }
      case 14:
      case 15: {
        tf::List items;
        for (int i = in.ConsumeIntegralInRange<int>(0, 6); i > 0; --i) items.push_back(value(depth + 1));
        return in.ConsumeBool() ? tf::Value::tuple(std::move(items)) : tf::Value(std::move(items));
      }
      case 16:
      case 17: {
        tf::Dict d;
        d.ordered = in.ConsumeBool();
        for (int i = in.ConsumeIntegralInRange<int>(0, 6); i > 0; --i) {
          tf::Value k = key(0);
          d.set(std::move(k), value(depth + 1));
        }
        return tf::Value(std::move(d));
      }
      case 18: {
        tf::Set s;
        s.frozen = in.ConsumeBool();
        for (int i = in.ConsumeIntegralInRange<int>(0, 4); i > 0; --i) s.items.push_back(key(0));
        return tf::Value(std::move(s));
      }
      default: {
        tf::Object o;
        o.module = "fuzzmod";
        o.name = "Obj" + std::to_string(in.ConsumeIntegralInRange<int>(0, 9));
        tf::List args;
        for (int i = in.ConsumeIntegralInRange<int>(0, 3); i > 0; --i) args.push_back(value(depth + 1));
        o.args = tf::Value::tuple(std::move(args));
        if (in.ConsumeBool()) o.state = value(depth + 1);
        o.newobj = in.ConsumeBool();
        return tf::Value(std::move(o));
      }
    }
  }
};

[[noreturn]] void fail(const char* what, const tf::Value& saved, const std::string& detail) {
  std::fprintf(stderr, "round trip: %s\nsaved:  %s\n%s\n", what, tf::to_string(saved).c_str(), detail.c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Gen gen{in};
  const tf::Value root = gen.value(0);
  std::vector<std::byte> bytes;
  try {
    bytes = tf::save_torch_to_bytes(
        root, {.torch = {.alignment = std::uint64_t{1} << in.ConsumeIntegralInRange<int>(6, 12)}});
  } catch (const tf::Error&) {
    return 0;  // refused cleanly (e.g. a set holding an unhashable value)
  }
  for (const bool mmap : {false, true}) {
    try {
      const tf::Value back =
          tf::load_torch(std::span<const std::byte>(bytes),
                         {.mmap = mmap ? std::optional<tf::MapMode>(tf::MapMode::read_only) : std::nullopt,
                          .strict = false,
                          .verify_crc = true});
      tensorfile_fuzz::walk(back);
      if (!(back == root))
        fail(mmap ? "loaded (mmap) != saved" : "loaded != saved", root, "loaded: " + tf::to_string(back));
    } catch (const tf::Error& e) {
      fail("a saved file does not load", root, e.what());
    }
  }
  return 0;
}
