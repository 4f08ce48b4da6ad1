// SPDX-License-Identifier: MIT
// Writes torch files with tensorfile's save_torch(), for real torch to check (tests/interop/check_saved_with_torch.py).
//
//   save_corpus built DIR             a corpus built in C++: every dtype, views, 0-d, empty, containers, a state_dict
//   save_corpus resave DIR FILE...    load_torch(FILE) then save_torch() again, for every fixture
//   save_corpus big DIR               a > 4 GiB file (zip64 entry, and a record past 4 GiB)
// Files whose name contains "floats" hold Python floats and other objects torch 1.13's weights_only
// cannot read (complex, set, bytes, torch.device); torch checks those with weights_only=False.
#include <tensorfile/formats/torch/save.hpp>
#include <tensorfile/tensorfile.hpp>

#include <iostream>
#include <numeric>
#include <string>
#include <vector>

using namespace tensorfile;

namespace {

template <class T>
Tensor ramp(std::int64_t n, Shape sizes, double scale = 1.0) {
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> holds no bools: build bytes of 0 and 1
    std::vector<std::uint8_t> bits(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = i % 3 == 0;
    const Tensor bytes = Tensor::from_values(std::span<const std::uint8_t>(bits), sizes);
    return Tensor(bytes.storage(), DType::Bool, std::move(sizes));
  } else {
    std::vector<T> values(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x = static_cast<double>(i);
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        values[i] = T(static_cast<float>(x * scale - 3.5));
      } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        values[i] = T(static_cast<typename T::value_type>(x), -static_cast<typename T::value_type>(x / 2));
      } else {
        values[i] = static_cast<T>(x * scale - (std::is_signed_v<T> ? 3.0 : 0.0));
      }
    }
    return Tensor::from_values(std::span<const T>(values), std::move(sizes));
  }
}

void built(const std::filesystem::path& dir) {
  Dict dtypes;
  dtypes.set("bool", ramp<bool>(6, {2, 3}));
  dtypes.set("uint8", ramp<std::uint8_t>(6, {2, 3}));
  dtypes.set("int8", ramp<std::int8_t>(6, {2, 3}));
  dtypes.set("int16", ramp<std::int16_t>(6, {2, 3}));
  dtypes.set("int32", ramp<std::int32_t>(6, {2, 3}));
  dtypes.set("int64", ramp<std::int64_t>(6, {2, 3}, 1e12));
  dtypes.set("float16", ramp<Half>(6, {2, 3}, 0.25));
  dtypes.set("bfloat16", ramp<BFloat16>(6, {2, 3}, 0.25));
  dtypes.set("float32", ramp<float>(6, {2, 3}, 0.1));
  dtypes.set("float64", ramp<double>(6, {2, 3}, 0.1));
  dtypes.set("complex64", ramp<std::complex<float>>(6, {2, 3}));
  dtypes.set("complex128", ramp<std::complex<double>>(6, {2, 3}));
  save_torch(Value(std::move(dtypes)), dir / "all_dtypes.pt", {.sync = false});

  const Tensor base = ramp<float>(12, {3, 4});
  Dict views;
  views.set("base", base);
  views.set("row", base.select(0, 1));
  views.set("cols", base.slice(1, 1, 4, 2));
  views.set("t", base.transpose(0, 1));
  views.set("again", base);
  views.set("broadcast", base.select(0, 2).unsqueeze(0).expand({5, 4}));
  views.set("scalar", base.select(0, 2).select(0, 3));
  save_torch(Value(std::move(views)), dir / "views.pt", {.sync = false});

  Dict edges;
  edges.set("zero_d", ramp<std::int64_t>(1, {1}).reshape({}));
  edges.set("empty", Tensor::zeros({0}, DType::Float32));
  edges.set("empty_2d", Tensor::zeros({2, 0}, DType::Int16));
  edges.set("param", Value::parameter(ramp<float>(4, {4}).set_requires_grad(true)));
  edges.set("grad", ramp<double>(3, {3}).set_requires_grad(true));
  save_torch(Value(std::move(edges)), dir / "zero_dim_empty_params.pt", {.sync = false});

  Dict nested;
  nested.set("list", List{1, -2, std::int64_t{1} << 40, "text", Value(), true, ramp<std::int32_t>(3, {3})});
  nested.set("tuple", Value::tuple({1, Value::tuple({2, "x"}), List{}}));
  nested.set(7, "int key");
  nested.set("dict", Value(Dict{{"a", List{Dict{{"b", ramp<std::uint8_t>(2, {2})}}}}}));
  nested.set("dtype", DType::Float16);
  save_torch(Value(std::move(nested)), dir / "nested_containers.pt", {.sync = false});

  // torch 1.13's weights_only reads none of these: floats, complex, sets, bytes, devices, newer dtype objects.
  Dict with_floats;
  with_floats.set("bytes", Bytes{{std::byte{0}, std::byte{0x7F}, std::byte{0x80}, std::byte{0xFF}}});
  with_floats.set("device", Device::parse("cuda:1"));
  with_floats.set("dtype", DType::BFloat16);
  with_floats.set("lr", 0.001);
  with_floats.set("betas", Value::tuple({0.9, 0.999}));
  with_floats.set("complex", std::complex<double>(1.5, -2));
  with_floats.set("set", Set{{1, 2, 3}, false});
  save_torch(Value(std::move(with_floats)), dir / "floats_and_python_objects.pt", {.sync = false});

  Dict versions;
  versions.ordered = true;
  versions.set("", Value(Dict{{"version", 1}}));
  versions.set("0", Value(Dict{{"version", 1}}));
  versions.set("1", Value(Dict{{"version", 2}}));
  const Value sd = make_state_dict({{"0.weight", ramp<float>(6, {2, 3}, 0.5)},
                                    {"0.bias", ramp<float>(2, {2})},
                                    {"1.num_batches_tracked", ramp<std::int64_t>(1, {1}).reshape({})}},
                                   Value(std::move(versions)));
  save_torch(sd, dir / "state_dict_metadata.pt", {.sync = false});

  List many;
  for (int i = 0; i < 1500; ++i) many.emplace_back(ramp<std::int16_t>(i % 7, {i % 7}));
  save_torch(Value(std::move(many)), dir / "many_tensors.pt", {.sync = false});
}

void big(const std::filesystem::path& dir) {
  const std::int64_t n = (std::int64_t{1} << 32) + 100;  // past 4 GiB: a zip64 entry
  Tensor huge = Tensor::zeros({n}, DType::UInt8);
  auto* bytes = huge.data<std::uint8_t>();
  for (std::int64_t i = 0; i < n; i += 4093) bytes[i] = static_cast<std::uint8_t>(i % 251);
  Dict d;
  d.set("huge", huge);
  d.set("after", ramp<float>(3, {3}));  // its record starts past 4 GiB
  save_torch(Value(std::move(d)), dir / "big_zip64.pt", {.sync = false});
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "built") {
      built(args[1]);
      return 0;
    }
    if (args.size() == 2 && args[0] == "big") {
      big(args[1]);
      return 0;
    }
    if (args.size() >= 2 && args[0] == "resave") {
      for (std::size_t i = 2; i < args.size(); ++i) {
        const std::filesystem::path in = args[i];
        const Value v = load_torch(in, {.map_location = "cpu"});
        save_torch(v, std::filesystem::path(args[1]) / in.filename(), {.sync = false});
        if (!(load_torch(std::filesystem::path(args[1]) / in.filename(), {.map_location = "cpu"}) == v)) {
          std::cerr << "load_torch(save_torch(load_torch(" << in.string() << "))) differs\n";
          return 1;
        }
      }
      return 0;
    }
  } catch (const Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  std::cerr << "usage: save_corpus built DIR | save_corpus resave DIR FILE... | save_corpus big DIR\n";
  return 2;
}
