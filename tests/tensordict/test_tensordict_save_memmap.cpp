// SPDX-License-Identifier: MIT
// Tests of save_memmap.hpp: tensordict 0.14's trees byte for byte, round trips, refusals, safe replacement.
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile_test::sample;
namespace fs = std::filesystem;

namespace {
/// Every file of a tree (relative path -> bytes); directories as "<path>/".
std::map<std::string, std::string> tree_of(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(entry.path(), root).string();
    if (entry.is_directory()) {
      out[rel + "/"] = "";
    } else if (rel != "PROVENANCE.md" && rel != ".gitattributes") {
      out[rel] = tensorfile_test::read_text(entry.path());
    }
  }
  return out;
}
/// Names in `dir` other than the expected ones (leftover temporary directories).
std::vector<std::string> extra_names(const fs::path& dir, std::initializer_list<std::string> expected) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (std::find(expected.begin(), expected.end(), name) == expected.end()) out.push_back(name);
  }
  return out;
}
Bytes file_as_bytes(const fs::path& path) {
  const std::string text = tensorfile_test::read_text(path);
  Bytes out;
  out.data.resize(text.size());
  std::memcpy(out.data.data(), text.data(), text.size());
  return out;
}
template <class T>
Tensor values(std::initializer_list<T> v, Shape shape = {}) {
  return Tensor::from_values<T>(v, std::move(shape));
}
Tensor arange_i32(std::int32_t n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return Tensor::from_values<std::int32_t>(std::span<const std::int32_t>(v));
}
/// `td` with every (sub-)TensorDict's device set to cpu: tensordict records "cpu" for every saved level.
TensorDict on_cpu(TensorDict td) {
  if (td.kind() != TensorDictKind::lazy_stack) td.set_device(Device::cpu());
  for (const auto& item : td.items()) {
    Entry& entry = td[item.key];
    if (entry.is_tensordict()) entry = on_cpu(entry.as_tensordict());
  }
  return td;
}
Value parse_json(const std::string& text) {
  const fs::path file = "meta.json";
  detail::JsonReader reader(text, file);
  return detail::td::parse_json_document(reader);
}
}  // namespace

// ---- the trees of tensordict 0.14 ---------------------------------------------------------------

TEST_CASE("save_memmap writes the same files, bytes and meta.json as tensordict 0.14", "[save_memmap]") {
  const tensorfile_test::ScratchDir dir;
  // tensordict's memmap() moves the TensorDict to cpu before it writes (a device-less one saves "None" here).
  const auto same_tree = [&](const TensorDict& built, const std::string& name) {
    INFO(name);
    const TensorDict td = on_cpu(built);
    save_memmap(td, dir / name);
    CHECK(tree_of(dir / name) == tree_of(sample("tensordict", name)));
    CHECK(load_memmap(dir / name) == load_memmap(sample("tensordict", name)));
    // orjson style: the same members, order and values, compact spacing.
    save_memmap(td, dir / (name + "_orjson"), {.tensordict = {.json = MetaJsonStyle::orjson}});
    for (const auto& [rel, bytes] : tree_of(sample("tensordict", name))) {
      if (!rel.ends_with("meta.json")) continue;
      INFO(rel);
      const std::string compact = tensorfile_test::read_text(dir / (name + "_orjson") / rel);
      CHECK(compact.find(", ") == std::string::npos);
      CHECK(parse_json(compact) == parse_json(bytes));
    }
  };

  SECTION("s01_basic: nested TensorDicts") {
    const TensorDict td({{"a", values<float>({0, 1, 2, 3, 4, 5}, {2, 3})},
                         {"nested", TensorDict({{"b", values<BFloat16>({BFloat16(1.0f), BFloat16(1.0f)})},
                                                {"deeper", TensorDict({{"c", values<std::int64_t>({1, 2})}}, {2})}},
                                               {2})}},
                        {2});
    same_tree(td, "s01_basic");
  }
  SECTION("s02_dtypes: one leaf per dtype") {
    const TensorDict td({{"float16", values<Half>({Half(1.5f), Half(-2.25f), Half(3.0f)})},
                         {"bfloat16", values<BFloat16>({BFloat16(1.5f), BFloat16(-2.25f), BFloat16(3.0f)})},
                         {"float32", values<float>({1.5f, -2.25f, 3.0f})},
                         {"float64", values<double>({1.5, -2.25, 3.0})},
                         {"int8", values<std::int8_t>({1, -2, 3})},
                         {"int16", values<std::int16_t>({1, -2, 3})},
                         {"int32", values<std::int32_t>({1, -2, 3})},
                         {"int64", values<std::int64_t>({1, -2, 3})},
                         {"uint8", values<std::uint8_t>({1, 254, 3})},
                         {"bool", values<bool>({true, false, true})},
                         {"complex64", values<std::complex<float>>({{1, 2}, {-3.5f, 0.5f}, {0, 0}})},
                         {"complex128", values<std::complex<double>>({{1, 2}, {-3.5, 0.5}, {0, 0}})}},
                        {3});
    same_tree(td, "s02_dtypes");
  }
  SECTION("s03_shapes: 0-d, zero-element (no file), transposed, expanded and sliced sources") {
    const Tensor grid = arange_i32(12).reshape({3, 4});
    const TensorDict td({{"scalar0d", values<float>({7.0f}).reshape({})},
                         {"empty_0x4", Tensor::zeros({0, 4}, DType::Float32)},
                         {"empty_1d", Tensor::zeros({0}, DType::Int64)},
                         {"transposed", grid.transpose(0, 1)},
                         {"expanded", values<std::int32_t>({1, 2, 3, 4}).expand({3, 4})},
                         {"sliced", grid.slice(1, 1, 4, 2)}});
    REQUIRE_FALSE(td["transposed"].as_tensor().is_contiguous());
    same_tree(td, "s03_shapes");
  }
  SECTION("s05_nontensor: NonTensorData as JSON, a pickle sidecar written back verbatim") {
    Dict dct;
    dct.set(Value("k"), Value(List{Value(1), Value(2.5), Value(None{}), Value(true)}));
    NonTensorData obj;
    obj.fields.set(Value("_is_non_tensor"), Value(true));
    obj.fields.set(Value("_metadata"), Value(None{}));
    obj.pickle = file_as_bytes(sample("tensordict", "s05_nontensor") / "obj" / "other.pickle");
    const TensorDict td({{"t", Tensor::zeros({3}, DType::Float32)},
                         {"s", non_tensor("a string!")},
                         {"i", non_tensor(42)},
                         {"dct", non_tensor(Value(dct))},
                         {"obj", obj}},
                        {3});
    same_tree(td, "s05_nontensor");
  }
  SECTION("s07_tensorclass: a tensorclass under _tensordict/") {
    NonTensorData extra;
    extra.fields.set(Value("_is_non_tensor"), Value(true));
    extra.fields.set(Value("_metadata"), Value(None{}));
    extra.pickle =
        file_as_bytes(sample("tensordict", "s07_tensorclass") / "tc" / "_tensordict" / "extra" / "other.pickle");
    const TensorDict fields(
        {{"x", values<float>({1, 1, 1, 1}, {2, 2})}, {"label", non_tensor("hello")}, {"extra", extra}}, {2});
    const TensorDict td(
        {{"tc", TensorDict::tensorclass("<class '__main__.MyTC'>", fields)}, {"y", Tensor::zeros({2}, DType::Float32)}},
        {2});
    same_tree(td, "s07_tensorclass");
  }
}

// ---- round trips -------------------------------------------------------------------------------

TEST_CASE("save_memmap round trips every kind of entry", "[save_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const auto round_trip = [&](const TensorDict& td) {
    save_memmap(td, dir / "rt");
    TensorDict back = load_memmap(dir / "rt");
    if (!td.contains("nan")) CHECK(back == td);
    return back;
  };

  SECTION("keys that need encoding, the empty key, unicode") {
    const TensorDict td({{"", values<float>({1})},
                         {".", values<float>({2})},
                         {"..", values<float>({3})},
                         {"a/b", values<float>({4})},
                         {"sp ace", values<float>({5})},
                         {"pct%41", values<float>({6})},
                         {"tab\tkey", values<float>({7})},
                         {"\xc3\xa9-unicode", values<float>({8})},
                         {"\xf0\x9f\x98\x80", values<float>({9})},
                         {"sub/dir", TensorDict({{"x", values<float>({10})}})},
                         {"..", TensorDict()}});
    round_trip(td);
    for (const char* file :
         {"%.memmap", "%2E.memmap", "a%2Fb.memmap", "sp%20ace.memmap", "pct%2541.memmap", "tab%09key.memmap",
          "\xc3\xa9-unicode.memmap", "sub%2Fdir/meta.json", "%2E%2E/meta.json"}) {
      INFO(file);
      CHECK(fs::exists(dir / "rt" / file));
    }
    const std::string meta = tensorfile_test::read_text(dir / "rt" / "meta.json");
    CHECK(meta.find(R"("\u00e9-unicode": )") != std::string::npos);
    CHECK(meta.find(R"("\ud83d\ude00": )") != std::string::npos);
    CHECK(meta.find(R"("tab\tkey": )") != std::string::npos);
  }
  SECTION("nested tensors with their .shape.memmap table") {
    const std::vector<Tensor> parts{values<float>({1, 2, 3, 4, 5, 6}, {2, 3}), values<float>({7, 8, 9}, {1, 3})};
    const TensorDict td({{"nt", NestedTensor::from_components(parts)}}, {2});
    const TensorDict back = round_trip(td);
    const std::int64_t table[] = {2, 3, 1, 3};
    CHECK(tensorfile_test::read_text(dir / "rt" / "nt.shape.memmap") ==
          std::string(reinterpret_cast<const char*>(table), sizeof table));
    CHECK(fs::file_size(dir / "rt" / "nt.shape.memmap") == 32);
    CHECK(fs::file_size(dir / "rt" / "nt.memmap") == 36);
    CHECK(tensorfile_test::read_text(dir / "rt" / "meta.json")
              .find(R"("nt": {"device": "cpu", "shape": [2, 2], "dtype": "torch.float32", "is_nested": true})") !=
          std::string::npos);
    CHECK(back["nt"].as_nested_tensor().component(1).equal(parts[1]));
  }
  SECTION("lazy stacks, NonTensorStacks (compact JSON, pickle.pkl), NaN in non-tensor data") {
    std::vector<Entry> items;
    items.emplace_back(TensorDict({{"a", values<float>({1})}}));
    items.emplace_back(TensorDict({{"a", values<float>({1, 2})}}));
    NonTensorData pickled = non_tensor_stack(List{});
    pickled.fields.set(Value("data"), Value("pickle.pkl"));
    pickled.pickle = Bytes{{std::byte{0x80}, std::byte{0x04}, std::byte{'N'}, std::byte{'.'}}};
    const TensorDict td({{"st", TensorDict::lazy_stack(std::move(items))},
                         {"ns", non_tensor_stack(List{Value("s0"), Value("s1")})},
                         {"np", pickled},
                         {"nan", non_tensor(Value(List{Value(std::nan("")), Value(HUGE_VAL), Value(1e-05)}))}},
                        {2});
    const TensorDict back = round_trip(td);  // false for "nan" alone: NaN != NaN, as in Python
    for (const char* key : {"st", "ns", "np"}) CHECK(back[key] == td[key]);
    CHECK(std::isnan(back["nan"].as_non_tensor().data()[0].as_float()));
    CHECK(
        tensorfile_test::read_text(dir / "rt" / "ns" / "meta.json") ==
        R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,"data":["s0","s1"]})");
    CHECK(tensorfile_test::read_text(dir / "rt" / "np" / "pickle.pkl") == std::string("\x80\x04N.", 4));
    CHECK(tensorfile_test::read_text(dir / "rt" / "st" / "meta.json") ==
          R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0})");
    CHECK(tensorfile_test::read_text(dir / "rt" / "meta.json")
              .starts_with(R"({"st": {"type": "LazyStackedTensorDict"}, "ns": {"type": "NonTensorStack"})"));
    CHECK(
        tensorfile_test::read_text(dir / "rt" / "nan" / "meta.json") ==
        R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": [NaN, Infinity, 1e-05], "_is_non_tensor": true, "_metadata": null})");
  }
  SECTION("a tensorclass with JSON attributes and a pickle, at the root") {
    Dict attrs;
    attrs.set(Value("extra"), Value(None{}));
    TensorDict tc =
        TensorDict::tensorclass("<class 'mymod.Point'>", TensorDict({{"x", values<double>({1, 2})}}, {2}), attrs);
    tc.class_pickle() = Bytes{{std::byte{0x80}}};
    round_trip(tc);
    CHECK(tensorfile_test::read_text(dir / "rt" / "meta.json") ==
          R"({"_type": "<class 'mymod.Point'>", "extra": null})");
    CHECK(tensorfile_test::read_text(dir / "rt" / "other.pickle") == "\x80");
  }
  SECTION("raw (legacy) names when encode_keys is off") {
    const TensorDict td({{"sp ace", values<float>({1})}, {"my dir", TensorDict()}});
    save_memmap(td, dir / "raw", {.tensordict = {.encode_keys = false}});
    CHECK(fs::exists(dir / "raw" / "sp ace.memmap"));
    CHECK(fs::exists(dir / "raw" / "my dir" / "meta.json"));
    CHECK(load_memmap(dir / "raw") == td);
    REQUIRE_THROWS_WITH(
        save_memmap(TensorDict({{"a/b", values<float>({1})}}), dir / "raw2", {.tensordict = {.encode_keys = false}}),
        "tensorfile: " + (dir / "raw2").string() +
            ": a/b: key is not a safe file name; expected no '/', '\\', NUL or drive prefix when "
            "encode_keys is off, got \"a/b\"");
    REQUIRE_THROWS_AS(
        save_memmap(TensorDict({{"..", TensorDict()}}), dir / "raw2", {.tensordict = {.encode_keys = false}}),
        ArgumentError);
  }
  SECTION("relative prefixes, trailing separators, sync") {
    const TensorDict td({{"a", values<float>({1, 2})}}, {2});
    save_memmap(td, (dir / "trailing").string() + "/", {.sync = true});
    CHECK(load_memmap(dir / "trailing") == td);
  }
}

// ---- memmap(): shared mappings of the new files -----------------------------------------------------

TEST_CASE("memmap returns a TensorDict of shared mappings of the new files", "[save_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const std::vector<Tensor> parts{values<float>({1, 2}, {2}), values<float>({3}, {1})};
  const TensorDict td(
      {{"a", values<float>({0, 1, 2, 3}, {2, 2})},
       {"e", Tensor::zeros({2, 0}, DType::Int64)},
       {"t", values<std::int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1).slice(0, 0, 2)},
       {"nt", NestedTensor::from_components(parts)},
       {"s", non_tensor("x")},
       {"tc", TensorDict::tensorclass("<class 'm.TC'>", TensorDict({{"x", values<float>({5, 6})}}, {2}))}},
      {2});
  TensorDict mapped = memmap(td, dir / "m");
  CHECK(mapped == td);
  CHECK(mapped == load_memmap(dir / "m"));
  CHECK(mapped["a"].as_tensor().storage().name() == "mmap_shared");
  CHECK(mapped["t"].as_tensor().is_contiguous());
  CHECK(mapped["nt"].as_nested_tensor().values.storage().name() == "mmap_shared");
  CHECK(mapped["tc"].as_tensordict().kind() == TensorDictKind::tensorclass);
  CHECK(mapped["tc"]["x"].as_tensor().storage().name() == "mmap_shared");
  mapped["a"].as_tensor().data<float>()[3] = 42.0f;  // writes go to disk
  float stored = 0;
  std::memcpy(&stored, tensorfile_test::read_text(dir / "m" / "a.memmap").data() + 12, 4);
  CHECK(stored == 42.0f);
  mapped.get({"tc", "x"}).as_tensor().data<float>()[0] = -1.0f;
  CHECK(load_memmap(dir / "m").get({"tc", "x"}).as_tensor().data<const float>()[0] == -1.0f);
}

// ---- refusals and replacement ------------------------------------------------------------------

TEST_CASE("save_memmap refuses what would lose data, and leaves nothing behind", "[save_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path prefix = dir / "td";
  const auto nothing_left = [&] {
    CHECK_FALSE(fs::exists(prefix));
    CHECK(extra_names(dir.path(), {}).empty());
  };

  SECTION("keys colliding with meta.json's reserved members") {
    for (const char* key : {"shape", "device", "_type"}) {
      INFO(key);
      const TensorDict td({{"ok", values<float>({1})}, {key, values<float>({1})}});
      REQUIRE_THROWS_WITH(save_memmap(td, prefix),
                          "tensorfile: " + prefix.string() + ": " + key +
                              ": key collides with a reserved meta.json member (tensordict would lose it); expected a "
                              "key other than \"shape\", \"device\" and \"_type\", got \"" +
                              key + "\"");
      nothing_left();
    }
    const TensorDict nested({{"n", TensorDict({{"shape", values<float>({1})}})}});
    REQUIRE_THROWS_WITH(save_memmap(nested, prefix),
                        Catch::Contains((prefix / "n").string() + ": shape: key collides"));
    nothing_left();
  }
  SECTION("two keys mapping to one file") {
    const TensorDict td({{"x", NestedTensor::from_components(std::vector<Tensor>{values<float>({1})})},
                         {"x.shape", values<std::int64_t>({1})}});
    REQUIRE_THROWS_WITH(save_memmap(td, prefix), "tensorfile: " + (prefix / "x.shape.memmap").string() +
                                                     ": x.shape: file name is already used by another key; expected "
                                                     "distinct file names, got a collision");
    nothing_left();
    REQUIRE_THROWS_AS(save_memmap(TensorDict({{"meta.json", TensorDict()}}), prefix), ArgumentError);
    nothing_left();
  }
  SECTION("data tensordict cannot read back, or that has no bytes") {
    REQUIRE_THROWS_WITH(save_memmap(TensorDict({{"f8", Tensor::zeros({2}, DType::Float8_e4m3fn)}}), prefix),
                        "tensorfile: " + (prefix / "f8.memmap").string() +
                            ": f8: dtype float8_e4m3fn cannot be read back by tensordict; expected a dtype of its "
                            "loader's table");
    REQUIRE_THROWS_WITH(save_memmap(TensorDict({{"m", Tensor::zeros({2}, DType::Float32, Device::meta())}}), prefix),
                        "tensorfile: " + (prefix / "m.memmap").string() +
                            ": m: tensor is on meta and has no data; expected a tensor with data");
    REQUIRE_THROWS_AS(save_memmap(TensorDict({{"u", Tensor()}}), prefix), ArgumentError);
    nothing_left();
  }
  SECTION("non-JSON non-tensor data (tensordict would pickle it), after some files were written") {
    const TensorDict td({{"a", values<float>({1})}, {"b", non_tensor(Value(Bytes{}))}});
    REQUIRE_THROWS_WITH(save_memmap(td, prefix),
                        "tensorfile: " + (prefix / "b" / "meta.json").string() +
                            ": data: value is bytes; expected JSON data (None, bool, int, float, str, list, tuple or "
                            "dict): tensordict would pickle it, and tensorfile writes no pickles");
    nothing_left();
    REQUIRE_THROWS_AS(save_memmap(TensorDict({{"\xff", values<float>({1})}}), prefix), ArgumentError);
    nothing_left();
  }
  SECTION("a lazy stack whose keys are not 0, 1, ...") {
    std::vector<Entry> items;
    items.emplace_back(TensorDict());
    TensorDict stack = TensorDict::lazy_stack(std::move(items));
    stack.set("x", TensorDict());
    REQUIRE_THROWS_WITH(
        save_memmap(stack, prefix),
        "tensorfile: " + prefix.string() + ": x: lazy stack key is out of sequence; expected \"1\", got \"x\"");
    nothing_left();
  }
}

TEST_CASE("save_memmap replaces an existing tree safely", "[save_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path prefix = dir / "td";
  const TensorDict first({{"a", values<float>({1, 2})}, {"old", values<float>({3, 4})}}, {2});
  const TensorDict second({{"a", values<float>({5})}}, {1});
  save_memmap(first, prefix);
  const TensorDict mapped = load_memmap(prefix);  // shared mappings of the first tree's files

  SECTION("the new tree replaces the old one; mappings of the old files stay valid") {
    save_memmap(second, prefix);
    CHECK(load_memmap(prefix) == second);
    CHECK_FALSE(fs::exists(prefix / "old.memmap"));  // no stale files from the earlier save
    CHECK(mapped == first);
    CHECK(extra_names(dir.path(), {"td"}).empty());
  }
  SECTION("a failed save keeps the old tree") {
    REQUIRE_THROWS_AS(save_memmap(TensorDict({{"shape", values<float>({1})}}), prefix), ArgumentError);
    CHECK(load_memmap(prefix) == first);
    CHECK(extra_names(dir.path(), {"td"}).empty());
  }
  SECTION("refusals: overwrite off, a directory that is not a tree, a file, a symlink") {
    REQUIRE_THROWS_WITH(save_memmap(second, prefix, {.tensordict = {.overwrite = false}}),
                        "tensorfile: " + prefix.string() + ": exists; expected a new path (overwrite is off)");
    fs::create_directories(dir / "home" / "docs");
    REQUIRE_THROWS_WITH(
        save_memmap(second, dir / "home"),
        "tensorfile: " + (dir / "home").string() +
            ": exists and is not a tensordict tree; expected an empty directory or one holding meta.json");
    CHECK(fs::exists(dir / "home" / "docs"));
    std::ofstream(dir / "file") << "x";
    REQUIRE_THROWS_WITH(save_memmap(second, dir / "file"),
                        "tensorfile: " + (dir / "file").string() +
                            ": exists and is not a directory; expected a new path or a tensordict tree");
    fs::create_directory_symlink(prefix, dir / "link");
    REQUIRE_THROWS_WITH(save_memmap(second, dir / "link"),
                        "tensorfile: " + (dir / "link").string() +
                            ": is a symbolic link; expected a directory to replace or a new path");
    fs::create_directory(dir / "empty");
    save_memmap(second, dir / "empty");
    CHECK(load_memmap(dir / "empty") == second);
    CHECK(load_memmap(prefix) == first);
  }
}

TEST_CASE("load_memmap concurrent with save_memmap sees the old or the new tree whole", "[save_memmap][race]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path prefix = dir / "td";
  // Version v: every leaf holds v, and the shape of the tree depends on v, so that a load mixing two
  // versions, or missing part of one, shows.
  const auto version = [](std::int64_t v) {
    const auto filled = [v](std::size_t n) { return Tensor::from_values<std::int64_t>(std::vector(n, v)); };
    TensorDict nested;
    for (std::int64_t k = 0; k <= v % 3; ++k) nested.set("k" + std::to_string(k), filled(2));
    std::vector<Entry> items;
    for (std::int64_t k = 0; k <= v % 2; ++k) items.emplace_back(TensorDict({{"s", filled(1)}}));
    return TensorDict({{"a", filled(4)},
                       {"nested", std::move(nested)},
                       {"stack", TensorDict::lazy_stack(std::move(items))},
                       {"z", filled(3)}});
  };
  // The version a loaded tree holds, or a description of what is wrong with it.
  const auto check = [](const TensorDict& td) -> std::string {
    if (td.size() != 4 || !td.contains("a")) return "top level has " + std::to_string(td.size()) + " keys";
    const std::int64_t v = td["a"].as_tensor().data<const std::int64_t>()[0];
    const TensorDict& nested = td["nested"].as_tensordict();
    const TensorDict& stack = td["stack"].as_tensordict();
    if (nested.size() != static_cast<std::size_t>(v % 3 + 1)) return "nested keys do not match version";
    if (stack.size() != static_cast<std::size_t>(v % 2 + 1)) return "stack items do not match version";
    std::size_t seen = 0;
    for (const TensorDict::Leaf& leaf : td.leaves()) {
      ++seen;
      const Tensor dense = leaf.value->as_tensor().contiguous();  // alive for the loop below
      for (const std::int64_t x : dense.view<const std::int64_t>()) {
        if (x != v) return "leaf of another version";
      }
    }
    return seen == 2 + nested.size() + stack.size() ? "" : "leaves missing";
  };
  save_memmap(version(0), prefix, {.sync = false});

  constexpr int writers = 2;
  constexpr int saves_each = 100;
  std::atomic<std::int64_t> next_version{1};
  std::atomic<int> writers_done{0};
  std::atomic<long> loads{0};
  std::atomic<long> failures{0};
  std::mutex first_failure_mutex;
  std::string first_failure;
  const auto fail = [&](const std::string& what) {
    ++failures;
    const std::lock_guard lock(first_failure_mutex);
    if (first_failure.empty()) first_failure = what;
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < saves_each; ++i) {
        try {
          save_memmap(version(next_version++), prefix, {.sync = false});
        } catch (const std::exception& e) {
          fail(std::string("save: ") + e.what());
        }
      }
      ++writers_done;
    });
  }
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const LoadOptions options{.map_location = r == 2 ? MapLocation(Device::meta()) : MapLocation(),
                                .tensordict = {.skip_missing = r == 1}};
      while (writers_done.load() < writers) {
        try {
          const TensorDict td = load_memmap(prefix, options);
          ++loads;
          if (r == 2) continue;  // meta: no values to compare; the structure is checked by loading at all
          if (std::string problem = check(td); !problem.empty()) fail(problem);
        } catch (const std::exception& e) {
          fail(std::string("load: ") + e.what());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  INFO("loads " << loads.load() << ", first failure: " << first_failure);
  CHECK(failures.load() == 0);
  CHECK(loads.load() > 0);
  CHECK(check(load_memmap(prefix)).empty());
  CHECK(extra_names(dir.path(), {"td"}).empty());
}
