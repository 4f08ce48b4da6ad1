// SPDX-License-Identifier: MIT
// Tests of load_memmap.hpp: tensordict 0.14's samples, every 0.4-0.14 layout (crafted here), mapping modes, errors.
#include <tensorfile/formats/tensordict/load_memmap.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <complex>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile_test::sample;
namespace fs = std::filesystem;

namespace {
void put(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}
template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}
template <class T>
std::vector<T> values_of(const Tensor& t) {
  std::vector<T> out;
  const Tensor dense = t.contiguous();  // kept alive: a view of a temporary would dangle in the loop
  for (const T& v : dense.view<const T>()) out.push_back(v);
  return out;
}
std::string leaf(const std::string& shape, const std::string& dtype, bool nested = false) {
  return R"({"device": "cpu", "shape": )" + shape + R"(, "dtype": "torch.)" + dtype + R"(", "is_nested": )" +
         (nested ? "true" : "false") + "}";
}
/// A TensorDict meta.json: `members` then shape, device and _type, as tensordict writes them.
std::string td_meta(const std::string& members, const std::string& batch = "[]") {
  return "{" + members + (members.empty() ? "" : ", ") + R"("shape": )" + batch +
         R"(, "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})";
}
void copy_tree(const fs::path& from, const fs::path& to) { fs::copy(from, to, fs::copy_options::recursive); }
}  // namespace

// ---- the real samples --------------------------------------------------------------------------

TEST_CASE("load_memmap reads nested TensorDicts written by tensordict (s01_basic)", "[load_memmap]") {
  const TensorDict td = load_memmap(sample("tensordict", "s01_basic"));
  CHECK(td.batch_size() == Shape{2});
  CHECK(td.device() == Device::cpu());
  CHECK(td.type_name() == tensordict_type);
  CHECK(td.keys() == std::vector<std::string_view>{"a", "nested"});
  const Tensor& a = td["a"].as_tensor();
  CHECK(a.dtype() == DType::Float32);
  CHECK(a.sizes() == Shape{2, 3});
  CHECK(values_of<float>(a) == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(td["nested"].as_tensordict().batch_size() == Shape{2});
  CHECK(values_of<BFloat16>(td["nested"]["b"].as_tensor()) == std::vector<BFloat16>{BFloat16(1.0f), BFloat16(1.0f)});
  CHECK(values_of<std::int64_t>(td.get({"nested", "deeper", "c"}).as_tensor()) == std::vector<std::int64_t>{1, 2});
  CHECK(td.leaves().size() == 3);
  CHECK(a.storage().kind() == StorageKind::mmap);
  CHECK(a.storage().size_bytes() == 24);
}

TEST_CASE("load_memmap reads every dtype tensordict names (s02_dtypes)", "[load_memmap]") {
  const TensorDict td = load_memmap(sample("tensordict", "s02_dtypes"));
  CHECK(td.size() == 12);
  CHECK(values_of<Half>(td["float16"].as_tensor()) == std::vector<Half>{Half(1.5f), Half(-2.25f), Half(3.0f)});
  CHECK(values_of<BFloat16>(td["bfloat16"].as_tensor()) ==
        std::vector<BFloat16>{BFloat16(1.5f), BFloat16(-2.25f), BFloat16(3.0f)});
  CHECK(values_of<float>(td["float32"].as_tensor()) == std::vector<float>{1.5f, -2.25f, 3.0f});
  CHECK(values_of<double>(td["float64"].as_tensor()) == std::vector<double>{1.5, -2.25, 3.0});
  CHECK(values_of<std::int8_t>(td["int8"].as_tensor()) == std::vector<std::int8_t>{1, -2, 3});
  CHECK(values_of<std::int16_t>(td["int16"].as_tensor()) == std::vector<std::int16_t>{1, -2, 3});
  CHECK(values_of<std::int32_t>(td["int32"].as_tensor()) == std::vector<std::int32_t>{1, -2, 3});
  CHECK(values_of<std::int64_t>(td["int64"].as_tensor()) == std::vector<std::int64_t>{1, -2, 3});
  CHECK(values_of<std::uint8_t>(td["uint8"].as_tensor()) == std::vector<std::uint8_t>{1, 254, 3});
  CHECK(values_of<bool>(td["bool"].as_tensor()) == std::vector<bool>{true, false, true});
  CHECK(values_of<std::complex<float>>(td["complex64"].as_tensor()) ==
        std::vector<std::complex<float>>{{1, 2}, {-3.5f, 0.5f}, {0, 0}});
  CHECK(values_of<std::complex<double>>(td["complex128"].as_tensor()) ==
        std::vector<std::complex<double>>{{1, 2}, {-3.5, 0.5}, {0, 0}});
}

TEST_CASE("load_memmap reads 0-d, zero-element and once-strided leaves (s03_shapes)", "[load_memmap]") {
  const TensorDict td = load_memmap(sample("tensordict", "s03_shapes"));
  CHECK(td.batch_size().empty());
  CHECK(td["scalar0d"].as_tensor().dim() == 0);
  CHECK(td["scalar0d"].as_tensor().item<float>() == 7.0f);
  const Tensor& empty = td["empty_0x4"].as_tensor();  // no file on disk
  CHECK(empty.sizes() == Shape{0, 4});
  CHECK(empty.dtype() == DType::Float32);
  CHECK(td["empty_1d"].as_tensor().sizes() == Shape{0});
  CHECK(td["empty_1d"].as_tensor().dtype() == DType::Int64);
  CHECK(values_of<std::int32_t>(td["transposed"].as_tensor()) ==
        std::vector<std::int32_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(values_of<std::int32_t>(td["expanded"].as_tensor()) ==
        std::vector<std::int32_t>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  CHECK(values_of<std::int32_t>(td["sliced"].as_tensor()) == std::vector<std::int32_t>{1, 3, 5, 7, 9, 11});
  CHECK(td["sliced"].as_tensor().sizes() == Shape{3, 2});
}

TEST_CASE("load_memmap reads NonTensorData, pickles as opaque bytes (s05_nontensor)", "[load_memmap]") {
  const TensorDict td = load_memmap(sample("tensordict", "s05_nontensor"));
  CHECK(td.keys() == std::vector<std::string_view>{"t", "s", "i", "dct", "obj"});
  CHECK(values_of<float>(td["t"].as_tensor()) == std::vector<float>{0, 0, 0});
  const NonTensorData& s = td["s"].as_non_tensor();
  CHECK(s.type_name == non_tensor_data_type);
  CHECK(s.data().as_string() == "a string!");
  CHECK(s.fields.size() == 3);
  CHECK(s.fields.find(std::string_view("_is_non_tensor"))->as_bool());
  CHECK_FALSE(s.pickle);
  CHECK(td["i"].as_non_tensor().data().as_int() == 42);
  const Value& dct = td["dct"].as_non_tensor().data();
  CHECK(dct["k"].size() == 4);
  CHECK(dct["k"][1].as_float() == 2.5);
  CHECK(dct["k"][2].is_none());
  CHECK(dct["k"][3].as_bool());
  const NonTensorData& obj = td["obj"].as_non_tensor();
  CHECK(obj.data().is_none());  // pickled into other.pickle
  REQUIRE(obj.pickle);
  CHECK(obj.pickle->data.size() == 57);
  CHECK(obj.pickle->data[0] == std::byte{0x80});  // PROTO, never unpickled
  CHECK(obj.pickle->data[1] == std::byte{0x04});
}

TEST_CASE("load_memmap reads tensorclasses (s07_tensorclass)", "[load_memmap]") {
  const TensorDict td = load_memmap(sample("tensordict", "s07_tensorclass"));
  CHECK(td.keys() == std::vector<std::string_view>{"tc", "y"});
  const TensorDict& tc = td["tc"].as_tensordict();
  CHECK(tc.kind() == TensorDictKind::tensorclass);
  CHECK(tc.type_name() == "<class '__main__.MyTC'>");
  CHECK(tc.class_name() == "MyTC");
  CHECK(tc.batch_size() == Shape{2});
  CHECK(tc.class_fields().empty());
  CHECK_FALSE(tc.class_pickle());
  CHECK(values_of<float>(tc["x"].as_tensor()) == std::vector<float>{1, 1, 1, 1});
  CHECK(tc["label"].as_non_tensor().data().as_string() == "hello");
  CHECK(tc["extra"].as_non_tensor().pickle.has_value());
  CHECK(values_of<float>(td["y"].as_tensor()) == std::vector<float>{0, 0});
}

TEST_CASE("load_memmap loads any subdirectory on its own", "[load_memmap]") {
  const TensorDict nested = load_memmap(sample("tensordict", "s01_basic") / "nested");
  CHECK(nested.keys() == std::vector<std::string_view>{"b", "deeper"});
  CHECK(load_memmap(sample("tensordict", "s01_basic") / "nested" / "deeper" / "")["c"].as_tensor().sizes() == Shape{2});
  CHECK(load_memmap(sample("tensordict", "s07_tensorclass") / "tc").kind() == TensorDictKind::tensorclass);
  CHECK(load_memmap(sample("tensordict", "s07_tensorclass") / "tc" / "_tensordict").kind() == TensorDictKind::plain);
  const Entry s = load_memmap_entry(sample("tensordict", "s05_nontensor") / "s");
  CHECK(s.as_non_tensor().data().as_string() == "a string!");
  CHECK(load_memmap_entry(sample("tensordict", "s01_basic")).is_tensordict());
  REQUIRE_THROWS_WITH(
      load_memmap(sample("tensordict", "s05_nontensor") / "s"),
      "tensorfile: " + (sample("tensordict", "s05_nontensor") / "s").string() +
          ": holds a NonTensorData; expected a TensorDict directory (load_memmap_entry reads any node)");
}

// ---- options ---------------------------------------------------------------------------------

TEST_CASE("load_memmap to meta reads shapes and dtypes and opens no data file", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  copy_tree(sample("tensordict", "s02_dtypes"), dir / "td");
  copy_tree(sample("tensordict", "s02_dtypes"), dir / "td" / "sub");
  put(dir / "td" / "meta.json", tensorfile_test::read_text(sample("tensordict", "s02_dtypes") / "meta.json")
                                    .insert(1, R"("sub": {"type": "TensorDict"}, )"));
  for (const auto& entry : fs::recursive_directory_iterator(dir / "td")) {
    if (entry.path().extension() == ".memmap") fs::remove(entry.path());  // would fail any open
  }
  const TensorDict td = load_memmap(dir / "td", {.map_location = Device::meta()});
  CHECK(td.device() == Device::meta());
  CHECK(td.size() == 13);
  td.for_each_leaf([](const NestedKey&, const Entry& e) { CHECK(e.as_tensor().device().is_meta()); });
  CHECK(td["complex128"].as_tensor().dtype() == DType::Complex128);
  CHECK(td.get({"sub", "int16"}).as_tensor().sizes() == Shape{3});
  CHECK(td["sub"].as_tensordict().device() == Device::meta());
  CHECK(load_memmap(sample("tensordict", "s01_basic"), {.map_location = Device::meta()}) ==
        load_memmap(sample("tensordict", "s01_basic"), {.map_location = Device::meta()}));
}

TEST_CASE("load_memmap to cuda copies each leaf there (DeviceError without CUDA)", "[load_memmap]") {
  if (detail::device_copy_hook().copy != nullptr) return;  // built with CUDA: covered by the cuda tests
  REQUIRE_THROWS_WITH(load_memmap(sample("tensordict", "s01_basic"),
                                  {.map_location = Device::cuda(0), .tensordict = {.non_blocking = true}}),
                      "tensorfile: cannot move a tensor to cuda:0: tensorfile was built without CUDA (include "
                      "<tensorfile/cuda.hpp> and link tensorfile::cuda)");
  REQUIRE_THROWS_AS(load_memmap(sample("tensordict", "s01_basic"), {.map_location = Device::parse("cuda:1")}),
                    DeviceError);
}

TEST_CASE("load_memmap with out fills an existing TensorDict", "[load_memmap]") {
  TensorDict out({{"a", Tensor::zeros({2, 3}, DType::Int64)},
                  {"keep", Tensor::zeros({2}, DType::Int8)},
                  {"nested", TensorDict({{"extra", Tensor::zeros({2}, DType::Bool)}}, {2})}},
                 {2});
  TensorDict* nested_before = &out["nested"].as_tensordict();
  const TensorDict result = load_memmap(sample("tensordict", "s01_basic"), {.tensordict = {.out = &out}});
  CHECK(result == out);
  CHECK(out["a"].as_tensor().dtype() == DType::Float32);  // replaced
  CHECK(out.contains("keep"));
  CHECK(&out["nested"].as_tensordict() == nested_before);  // filled in place
  CHECK(out["nested"].as_tensordict().keys() == std::vector<std::string_view>{"extra", "b", "deeper"});
  CHECK(out["a"].as_tensor().storage().kind() == StorageKind::mmap);

  TensorDict empty;
  CHECK(load_memmap(sample("tensordict", "s01_basic"), {.tensordict = {.out = &empty}}).batch_size() == Shape{2});
  CHECK(empty.batch_size() == Shape{2});

  TensorDict wrong({{"q", Tensor::zeros({3}, DType::Int8)}}, {3});
  REQUIRE_THROWS_WITH(load_memmap(sample("tensordict", "s01_basic"), {.tensordict = {.out = &wrong}}),
                      "tensorfile: " + sample("tensordict", "s01_basic").string() +
                          ": out has another batch size; expected (2,) as in the file, got (3,)");
  CHECK(wrong.keys() == std::vector<std::string_view>{"q"});  // untouched
}

TEST_CASE("load_memmap maps writable files shared and read-only files privately, as tensordict", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  copy_tree(sample("tensordict", "s01_basic"), dir / "td");
  const fs::path file = dir / "td" / "a.memmap";
  const std::string original = tensorfile_test::read_text(file);

  SECTION("access unset (as tensordict) on a writable file: MAP_SHARED, writes reach the file") {
    CHECK_FALSE(LoadOptions{}.mmap.has_value());
    TensorDict td = load_memmap(dir / "td");
    CHECK(td["a"].as_tensor().storage().kind() == StorageKind::mmap);
    CHECK(td["a"].as_tensor().storage().backend<MmapBackend>()->mode() == MapMode::shared);
    Tensor& a = td["a"].as_tensor();
    CHECK(a.storage().name() == "mmap_shared");
    a.data<float>()[0] = 42.0f;
    CHECK(tensorfile_test::read_text(file).substr(0, 4) == bytes_of<float>({42.0f}));
  }
  SECTION("copy_on_write: writes stay in memory") {
    TensorDict td = load_memmap(dir / "td", {.mmap = MapMode::copy_on_write});
    CHECK(td["a"].as_tensor().storage().name() == "mmap_private");
    td["a"].as_tensor().data<float>()[0] = 42.0f;
    CHECK(tensorfile_test::read_text(file) == original);
  }
  SECTION("read_only: tensors refuse writes") {
    const TensorDict td = load_memmap(dir / "td", {.mmap = MapMode::read_only});
    CHECK(td["a"].as_tensor().storage().name() == "mmap_read_only");
    CHECK_FALSE(td["a"].as_tensor().is_writable());
    REQUIRE_THROWS_AS(td["a"].as_tensor().data<float>(), ArgumentError);
  }
  SECTION("shared") {
    CHECK(load_memmap(dir / "td", {.mmap = MapMode::shared})["a"].as_tensor().storage().name() == "mmap_shared");
  }
  SECTION("access unset on a file this user cannot write: MAP_PRIVATE (checked as an unprivileged user)") {
    fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    if (::geteuid() != 0) {
      TensorDict td = load_memmap(dir / "td");
      CHECK(td["a"].as_tensor().storage().name() == "mmap_private");
      td["a"].as_tensor().data<float>()[0] = 42.0f;
      CHECK(tensorfile_test::read_text(file) == original);
      REQUIRE_THROWS_AS(load_memmap(dir / "td", {.mmap = MapMode::shared}), IoError);
    } else {
      // Root may write anything (tensordict then maps shared too); check the rule as "nobody" in a child.
      fs::permissions(dir.path(), fs::perms::all);
      const pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        int code = 0;
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
        try {
          TensorDict td = load_memmap(dir / "td");
          if (td["a"].as_tensor().storage().name() != "mmap_private") code = 1;
          td["a"].as_tensor().data<float>()[0] = 42.0f;
          if (tensorfile_test::read_text(file) != original) code = 2;
          try {
            (void)load_memmap(dir / "td", {.mmap = MapMode::shared});
            code = 3;
          } catch (const IoError&) {
          }
        } catch (...) {
          code = 4;
        }
        ::_exit(code);
      }
      int status = 0;
      REQUIRE(::waitpid(child, &status, 0) == child);
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
  }
}

// ---- layouts of tensordict 0.4 to 0.14 ---------------------------------------------------------

TEST_CASE("load_memmap reads every layout variant", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = dir / "td";

  SECTION("legacy raw file and directory names (tensordict <= 0.12)") {
    put(td_dir / "meta.json",
        td_meta(R"("sp ace": )" + leaf("[1]", "float32") + R"(, "my dir": {"type": "TensorDict"})"));
    put(td_dir / "sp ace.memmap", bytes_of<float>({3}));
    put(td_dir / "my dir" / "meta.json", td_meta(R"("key:b": )" + leaf("[]", "int64")));
    put(td_dir / "my dir" / "key:b.memmap", bytes_of<std::int64_t>({5}));
    const TensorDict td = load_memmap(td_dir);
    CHECK(td["sp ace"].as_tensor().item<float>() == 3);
    CHECK(td.get({"my dir", "key:b"}).as_tensor().item<std::int64_t>() == 5);
    SECTION("the encoded name wins when both exist") {
      put(td_dir / "sp%20ace.memmap", bytes_of<float>({4}));
      CHECK(load_memmap(td_dir)["sp ace"].as_tensor().item<float>() == 4);
    }
  }
  SECTION("encoded names of 0.14: %, %2E, %XX, sub-collection directories") {
    put(td_dir / "meta.json",
        td_meta(R"("": )" + leaf("[1]", "int8") + R"(, ".": )" + leaf("[1]", "int8") + R"(, "a/b": )" +
                leaf("[1]", "int8") + R"(, "pct%41": )" + leaf("[1]", "int8") + R"(, "\u00e9-unicode": )" +
                leaf("[1]", "int8") + R"(, "sub/dir": {"type": "TensorDict"})"));
    for (const char* name : {"%", "%2E", "a%2Fb", "pct%2541", "\xc3\xa9-unicode"}) {
      put(td_dir / (std::string(name) + ".memmap"), "\x07");
    }
    put(td_dir / "sub%2Fdir" / "meta.json", td_meta(""));
    const TensorDict td = load_memmap(td_dir);
    CHECK(td.keys() == std::vector<std::string_view>{"", ".", "a/b", "pct%41", "\xc3\xa9-unicode", "sub/dir"});
    CHECK(td[""].as_tensor().item<std::int8_t>() == 7);
  }
  SECTION("compact (orjson) meta.json, NaN and Infinity tokens, trailing bytes after the data") {
    put(td_dir / "meta.json",
        R"({"x":{"device":"cpu","shape":[2],"dtype":"torch.float32","is_nested":false},"n":{"type":"NonTensorData"},)"
        R"("shape":[2],"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"})");
    put(td_dir / "x.memmap", bytes_of<float>({1, 2}) + "\n" + std::string(1, '\0'));
    put(td_dir / "n" / "meta.json",
        R"({"_type":"<class 'tensordict.tensorclass.NonTensorData'>","data":[NaN,Infinity,-Infinity,1e-05],"_is_non_tensor":true,"_metadata":null})");
    const TensorDict td = load_memmap(td_dir);
    CHECK(values_of<float>(td["x"].as_tensor()) == std::vector<float>{1, 2});
    CHECK(td["x"].as_tensor().storage().size_bytes() == 8);
    const Value& data = td["n"].as_non_tensor().data();
    CHECK(std::isnan(data[0].as_float()));
    CHECK(data[1].as_float() == HUGE_VAL);
    CHECK(data[2].as_float() == -HUGE_VAL);
    CHECK(data[3].as_float() == 1e-05);
  }
  SECTION("reserved keys: a key named shape, device or _type is lost, its file ignored, as in tensordict") {
    // The member order tensordict leaves after update() overwrote the entries of "shape" and "_type".
    put(td_dir / "meta.json", R"({"": )" + leaf("[]", "float32") +
                                  R"(, "shape": [], "_type": "<class 'tensordict._td.TensorDict'>", )"
                                  R"("sub/dir": {"type": "TensorDict"}, "device": "cpu"})");
    put(td_dir / "%.memmap", bytes_of<float>({1}));
    put(td_dir / "shape.memmap", bytes_of<float>({2}));
    put(td_dir / "_type.memmap", bytes_of<float>({3}));
    put(td_dir / "sub%2Fdir" / "meta.json", td_meta(""));
    const TensorDict td = load_memmap(td_dir);
    CHECK(td.keys() == std::vector<std::string_view>{"", "sub/dir"});
    CHECK(td.batch_size().empty());
  }
  SECTION("online edition order (shape, device, _type first), duplicates, ignored members, v0.4 leaves") {
    put(td_dir / "meta.json",
        R"({"shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>", )"
        R"("a": {"device": "cpu", "shape": [2], "dtype": "torch.int16"}, "skip": 3, "odd": {"foo": 1}, )"
        R"("b": )" +
            leaf("[2]", "int16") + R"(, "a": )" + leaf("[2]", "int32") + "}");
    put(td_dir / "a.memmap", bytes_of<std::int32_t>({1, 2}));
    put(td_dir / "b.memmap", bytes_of<std::int16_t>({3, 4}));
    const TensorDict td = load_memmap(td_dir);
    CHECK(td.keys() == std::vector<std::string_view>{"a", "b"});  // first position, last value, as Python
    CHECK(td["a"].as_tensor().dtype() == DType::Int32);
    CHECK(td.batch_size() == Shape{2});
  }
  SECTION("missing shape and device, device \"None\" or null") {
    put(td_dir / "meta.json",
        R"({"x": )" + leaf("[1]", "uint8") + R"(, "_type": "<class 'tensordict._td.TensorDict'>"})");
    put(td_dir / "x.memmap", "\x01");
    TensorDict td = load_memmap(td_dir);
    CHECK(td.batch_size().empty());
    CHECK_FALSE(td.device());
    put(td_dir / "meta.json", R"({"device": "None", "_type": "<class 'tensordict._td.TensorDict'>"})");
    CHECK_FALSE(load_memmap(td_dir).device());
    put(td_dir / "meta.json", R"({"device": null, "_type": "<class 'tensordict._td.TensorDict'>"})");
    CHECK_FALSE(load_memmap(td_dir).device());
    put(td_dir / "meta.json", R"({"device": "cuda:1", "_type": "<class 'tensordict._td.TensorDict'>"})");
    CHECK(load_memmap(td_dir).device() == Device::cuda(1));  // recorded only; the leaves stay mapped
  }
  SECTION("nested (jagged) tensors with a .shape.memmap table") {
    put(td_dir / "meta.json", td_meta(R"("nt": )" + leaf("[2, 2]", "float32", true), "[2]"));
    put(td_dir / "nt.shape.memmap", bytes_of<std::int64_t>({2, 3, 4, 3}));
    std::initializer_list<float> values{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    put(td_dir / "nt.memmap", bytes_of<float>(values));
    const TensorDict td = load_memmap(td_dir);
    const NestedTensor& nt = td["nt"].as_nested_tensor();
    CHECK(nt.size() == 2);
    CHECK(nt.component_shape(0) == Shape{2, 3});
    CHECK(nt.component_shape(1) == Shape{4, 3});
    CHECK(values_of<float>(nt.component(1))[0] == 6);
    CHECK(nt.values.sizes() == Shape{18});
    const TensorDict meta = load_memmap(td_dir, {.map_location = Device::meta()});
    CHECK(meta["nt"].as_tensor().sizes() == Shape{2, 2});  // as tensordict: the size table's shape
    SECTION("a corrupt size table") {
      put(td_dir / "nt.shape.memmap", bytes_of<std::int64_t>({2, -3, 4, 3}));
      REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "nt.shape.memmap").string() +
                                                   ": nt: nested size table holds an invalid size; expected "
                                                   "non-negative sizes, got -3 (at byte 8)");
      put(td_dir / "meta.json", td_meta(R"("nt": )" + leaf("[2]", "float32", true), "[2]"));
      REQUIRE_THROWS_WITH(load_memmap(td_dir), Catch::Contains("nt: nested tensor shape is not a size table; expected "
                                                               "[components, rank], got (2,)"));
    }
  }
  SECTION("lazy stacks (LazyStackedTensorDict) of heterogeneous TensorDicts") {
    put(td_dir / "meta.json", td_meta(R"("st": {"type": "LazyStackedTensorDict"})", "[3]"));
    put(td_dir / "st" / "meta.json",
        R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0})");
    for (int i = 0; i < 3; ++i) {
      const fs::path child = td_dir / "st" / std::to_string(i);
      put(child / "meta.json", td_meta(R"("a": )" + leaf("[" + std::to_string(i + 1) + "]", "float32")));
      put(child / "a.memmap", std::string(static_cast<std::size_t>(4 * (i + 1)), '\0'));
    }
    const TensorDict td = load_memmap(td_dir);
    const TensorDict& st = td["st"].as_tensordict();
    CHECK(st.kind() == TensorDictKind::lazy_stack);
    CHECK(st.stack_dim() == 0);
    CHECK(st.batch_size() == Shape{3});
    CHECK(st.keys() == std::vector<std::string_view>{"0", "1", "2"});
    CHECK(st.get({"2", "a"}).as_tensor().sizes() == Shape{3});
  }
  SECTION("NonTensorStack: compact JSON data, a pickle.pkl, and the pre-0.4 layout") {
    put(td_dir / "meta.json", td_meta(R"("ns": {"type": "NonTensorStack"}, "np": {"type": "NonTensorStack"}, )"
                                      R"("old": {"type": "NonTensorStack"})",
                                      "[3]"));
    put(td_dir / "ns" / "meta.json",
        R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,"data":["s0","s1","s2"]})");
    put(td_dir / "np" / "meta.json",
        R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,"data":"pickle.pkl"})");
    put(td_dir / "np" / "pickle.pkl", "\x80\x04N.");
    put(td_dir / "old" / "meta.json",
        R"({"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": 0})");
    for (int i = 0; i < 3; ++i) {
      put(td_dir / "old" / std::to_string(i) / "meta.json",
          R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": )" + std::to_string(i) + "}");
    }
    const TensorDict td = load_memmap(td_dir);
    const NonTensorData& ns = td["ns"].as_non_tensor();
    CHECK(ns.is_stack());
    CHECK(ns.data().size() == 3);
    CHECK(ns.data()[2].as_string() == "s2");
    const NonTensorData& np = td["np"].as_non_tensor();
    CHECK(np.data().is_none());
    REQUIRE(np.pickle);
    CHECK(np.pickle->data.size() == 4);
    const TensorDict& old = td["old"].as_tensordict();
    CHECK(old.kind() == TensorDictKind::lazy_stack);
    CHECK(old["1"].as_non_tensor().data().as_int() == 1);
    SECTION("a stack whose data is another string") {
      put(td_dir / "np" / "meta.json",
          R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,"data":"evil.pkl"})");
      REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "np" / "meta.json").string() +
                                                   ": data: NonTensorStack data is a string; expected a list or "
                                                   "\"pickle.pkl\", got \"evil.pkl\"");
    }
  }
  SECTION("NonTensorData variants: v0.5 members, a _tensordict/ subdirectory") {
    put(td_dir / "meta.json", td_meta(R"("s": {"type": "NonTensorData"})"));
    put(td_dir / "s" / "meta.json", R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": "x"})");
    put(td_dir / "s" / "_tensordict" / "meta.json", td_meta(""));
    CHECK(load_memmap(td_dir)["s"].as_non_tensor().data().as_string() == "x");
  }
  SECTION("a tensorclass at the root, with JSON attributes and other.pickle") {
    put(td_dir / "meta.json", R"({"_type": "<class 'mymod.Point'>", "extra": null, "tag": "p"})");
    put(td_dir / "other.pickle", "\x80\x04}.");
    put(td_dir / "_tensordict" / "meta.json", td_meta(R"("x": )" + leaf("[2]", "float64"), "[2]"));
    put(td_dir / "_tensordict" / "x.memmap", bytes_of<double>({1, 2}));
    const TensorDict td = load_memmap(td_dir);
    CHECK(td.kind() == TensorDictKind::tensorclass);
    CHECK(td.class_name() == "Point");
    CHECK(td.class_fields().size() == 2);
    CHECK(td.class_fields().find(std::string_view("tag"))->as_string() == "p");
    CHECK(td.class_pickle()->data.size() == 4);
    CHECK(td.batch_size() == Shape{2});
  }
  SECTION("other TensorDict-like classes stored as a TensorDict") {
    put(td_dir / "meta.json",
        R"({"x": )" + leaf("[1]", "bool") +
            R"(, "shape": [1], "device": "cpu", "_type": "<class 'tensordict.persistent.PersistentTensorDict'>"})");
    put(td_dir / "x.memmap", std::string(1, '\x01'));
    const TensorDict td = load_memmap(td_dir);
    CHECK(td.kind() == TensorDictKind::plain);
    CHECK(td.class_name() == "PersistentTensorDict");
    CHECK(td["x"].as_tensor().item<bool>());
  }
  SECTION("symbolic links that stay inside the tree are followed") {
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[1]", "float32") + R"(, "s": {"type": "TensorDict"})"));
    put(td_dir / "data" / "real.bin", bytes_of<float>({9}));
    fs::create_symlink("data/real.bin", td_dir / "a.memmap");
    put(td_dir / "real_sub" / "meta.json", td_meta(""));
    fs::create_directory_symlink("real_sub", td_dir / "s");
    const TensorDict td = load_memmap(td_dir, {.tensordict = {.skip_undeclared = true}});
    CHECK(td["a"].as_tensor().item<float>() == 9);
    CHECK(td["s"].is_tensordict());
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST_CASE("load_memmap refuses bad trees with clear errors", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = dir / "td";
  const std::string meta_path = (td_dir / "meta.json").string();

  SECTION("no directory, a file, no meta.json, an empty or corrupt meta.json") {
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        "tensorfile: " + td_dir.string() + ": cannot open directory: No such file or directory");
    put(dir / "file.tdz", "PK");
    REQUIRE_THROWS_WITH(load_memmap(dir / "file.tdz"),
                        "tensorfile: " + (dir / "file.tdz").string() +
                            ": is a file; expected a tensordict memmap directory (.tdz archives are not supported)");
    fs::create_directories(td_dir);
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": file is missing; expected the meta.json of a tensordict memmap "
                                                 "directory, got no file");
    put(td_dir / "meta.json", "");  // a torn write
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": invalid JSON; expected a JSON object, got end of file (at byte 0)");
    put(td_dir / "meta.json", R"({"a": {"device": "cpu", "sha)");
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir),
        "tensorfile: " + meta_path + ": invalid JSON; expected a closing '\"', got end of file (at byte 28)");
    put(td_dir / "meta.json", R"({"shape": [1]})");
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir),
        "tensorfile: " + meta_path + ": meta.json has no \"_type\"; expected the class of the collection, got none");
    put(td_dir / "meta.json", R"({"_type": 3})");
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir),
        "tensorfile: " + meta_path +
            ": \"_type\" is not a string; expected a class such as \"<class 'tensordict._td.TensorDict'>\", "
            "got 3 (at byte 10)");
  }
  SECTION("bad members: dtype, shape, batch size, device, is_nested, batch mismatch") {
    put(td_dir / "meta.json",
        td_meta(R"("a": {"device": "cpu", "shape": [1], "dtype": "float32", "is_nested": false})"));
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": a: unknown dtype; expected a torch dtype name such as "
                                                 "\"torch.float32\", got \"float32\" (at byte 47)");
    REQUIRE_THROWS_AS(load_memmap(td_dir), DTypeError);
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[2, -1]", "float32")));
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": a: invalid shape; expected a list of non-negative integers, got "
                                                 "[2, -1] (at byte 33)");
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[4611686018427387904, 4]", "float32")));
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir),
        "tensorfile: " + meta_path +
            ": a: shape (4611686018427387904, 4) is too large; expected at most 2^63 bytes, each 0 in the shape "
            "counted as 1 (at byte 33)");
    // Empty, but its strides would pass int64 (issue 39: signed overflow in contiguous_strides); numpy's bound.
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[0, 4294967296, 4294967296]", "float32")));
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": a: shape (0, 4294967296, 4294967296) is too large; expected at "
                                                 "most 2^63 bytes, each 0 in the shape counted as 1 (at byte 33)");
    REQUIRE_THROWS_AS(load_memmap(td_dir), FormatError);
    put(td_dir / "meta.json", td_meta("", R"("x")"));
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        "tensorfile: " + meta_path +
                            ": shape: invalid batch size; expected a list of non-negative integers, "
                            "got \"x\" (at byte 10)");
    put(td_dir / "meta.json", R"({"device": "tpu", "_type": "<class 'tensordict._td.TensorDict'>"})");
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": device: invalid device; expected a device such as \"cpu\" or "
                                                 "\"cuda:0\", got \"tpu\" (at byte 11)");
    put(td_dir / "meta.json",
        td_meta(R"("a": {"device": "cpu", "shape": [1], "dtype": "torch.int8", "is_nested": "no"})"));
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir),
        "tensorfile: " + meta_path + ": a: invalid is_nested; expected true or false, got \"no\" (at byte 74)");
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[3]", "int8"), "[2]"));
    put(td_dir / "a.memmap", "abc");
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + meta_path +
                                                 ": a: tensor of shape (3,) does not match the batch size; expected "
                                                 "leading dimensions (2,), got (3,) (at byte 6)");
  }
  SECTION("a data file shorter than its shape needs: an error, and the file is left as it was") {
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[2, 3]", "float32")));
    put(td_dir / "a.memmap", std::string(20, '\x11'));
    struct stat before {};
    REQUIRE(::stat((td_dir / "a.memmap").c_str(), &before) == 0);
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "a.memmap").string() +
                                                 ": a: data file is too short; expected at least 24 bytes, got 20");
    struct stat after {};
    REQUIRE(::stat((td_dir / "a.memmap").c_str(), &after) == 0);
    CHECK(after.st_size == 20);
    CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
    CHECK(tensorfile_test::read_text(td_dir / "a.memmap") == std::string(20, '\x11'));
    put(td_dir / "a.memmap", "");
    fs::remove(td_dir / "a.memmap");
    fs::create_directory(td_dir / "a.memmap");
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        "tensorfile: " + (td_dir / "a.memmap").string() + ": is a directory; expected a data file");
  }
  SECTION("missing leaf files and sub-collections: errors by default, skipped and reported on request") {
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[2]", "float32") + R"(, "b": )" + leaf("[0]", "float32") +
                                      R"(, "gone": {"type": "TensorDict"}, "c": )" + leaf("[1]", "int8")));
    put(td_dir / "c.memmap", "c");
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "a.memmap").string() +
                                                 ": a: data file is missing; expected at least 8 bytes, got no file");
    put(td_dir / "a.memmap", bytes_of<float>({1, 2}));
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "gone").string() +
                                                 ": gone: sub-collection directory is missing; expected a directory "
                                                 "with a meta.json, got no directory");
    fs::remove(td_dir / "a.memmap");
    std::vector<fs::path> skipped;
    const TensorDict td = load_memmap(td_dir, {.tensordict = {.skip_missing = true, .skipped = &skipped}});
    CHECK(td.keys() == std::vector<std::string_view>{"b", "c"});
    CHECK(skipped == std::vector<fs::path>{td_dir / "a.memmap", td_dir / "gone"});
    fs::create_directories(td_dir / "gone");
    REQUIRE_THROWS_WITH(load_memmap(td_dir, {.tensordict = {.skip_missing = true}}),
                        "tensorfile: " + (td_dir / "gone" / "meta.json").string() +
                            ": file is missing; expected the meta.json of a tensordict memmap directory, got no file");
  }
  SECTION("undeclared subdirectories: an error by default, skipped and reported on request") {
    put(td_dir / "meta.json", td_meta(R"("n": {"type": "TensorDict"})"));
    put(td_dir / "n" / "meta.json", td_meta(""));
    put(td_dir / "stale" / "meta.json", td_meta(""));
    put(td_dir / "orphan.memmap", "left by an earlier save");  // orphan files are fine
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        "tensorfile: " + (td_dir / "stale").string() +
                            ": subdirectory is not declared in meta.json; expected only the sub-collections meta.json "
                            "lists, got an undeclared directory (left by an earlier save, or a tensordict 0.3 tree? "
                            "skip_undeclared ignores it)");
    std::vector<fs::path> skipped;
    CHECK(load_memmap(td_dir, {.tensordict = {.skip_undeclared = true, .skipped = &skipped}}).keys() ==
          std::vector<std::string_view>{"n"});
    CHECK(skipped == std::vector<fs::path>{td_dir / "stale"});
    CHECK(load_memmap(td_dir, {.tensordict = {.skip_undeclared = true}}).size() == 1);
  }
  SECTION("keys that would leave the directory") {
    put(dir / "evil.memmap", bytes_of<float>({666}));
    put(dir / "meta.json", td_meta(""));
    put(td_dir / "meta.json", td_meta(R"("../evil": )" + leaf("[1]", "float32")));
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        "tensorfile: " + (td_dir / "..%2Fevil.memmap").string() +
                            ": ../evil: data file is missing; expected at least 4 bytes, got no "
                            "file (the raw key is not a safe file name, so no legacy name was tried)");
    put(td_dir / "meta.json", td_meta(R"(")" + (dir / "evil").string() + R"(": )" + leaf("[1]", "float32")));
    REQUIRE_THROWS_WITH(load_memmap(td_dir), Catch::Contains("the raw key is not a safe file name"));
    put(td_dir / "meta.json", td_meta(R"("..": {"type": "TensorDict"})"));
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "%2E%2E").string() +
                                                 ": ..: sub-collection directory is missing; expected a directory with "
                                                 "a meta.json, got no directory");
  }
  SECTION("symbolic links pointing outside the tree") {
    put(dir / "outside.bin", bytes_of<float>({666}));
    put(dir / "outside_dir" / "meta.json", td_meta(""));
    put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[1]", "float32")));
    fs::create_symlink(dir / "outside.bin", td_dir / "a.memmap");
    const std::string root = fs::canonical(td_dir).string();
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "a.memmap").string() +
                                                 ": symbolic link leaves the tree; expected a target under " + root +
                                                 ", got " + fs::canonical(dir / "outside.bin").string());
    fs::remove(td_dir / "a.memmap");
    fs::create_symlink("../outside.bin", td_dir / "a.memmap");
    REQUIRE_THROWS_AS(load_memmap(td_dir), FormatError);
    fs::remove(td_dir / "a.memmap");
    put(td_dir / "meta.json", td_meta(R"("s": {"type": "TensorDict"})"));
    fs::create_directory_symlink(dir / "outside_dir", td_dir / "s");
    REQUIRE_THROWS_WITH(load_memmap(td_dir), Catch::Contains("symbolic link leaves the tree"));
    fs::remove(td_dir / "s");
    fs::create_symlink("/etc/passwd", td_dir / "meta.json.tmp");
    fs::remove(td_dir / "meta.json");
    fs::rename(td_dir / "meta.json.tmp", td_dir / "meta.json");
    REQUIRE_THROWS_WITH(load_memmap(td_dir), Catch::Contains("symbolic link leaves the tree"));
  }
  SECTION("a tree nested deeper than 256 levels") {
    fs::path level = td_dir;
    for (int i = 0; i < 300; ++i) {
      put(level / "meta.json", td_meta(R"("d": {"type": "TensorDict"})"));
      level /= "d";
    }
    put(level / "meta.json", td_meta(""));
    REQUIRE_THROWS_AS(load_memmap(td_dir), LimitError);
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        Catch::EndsWith("/d: tree is nested too deeply; expected at most 256 levels"));
  }
  SECTION("view types tensorfile does not read") {  // the ones it reads: test_tensordict_lazy.cpp
    put(td_dir / "meta.json", R"({"_type": "<class 'tensordict._lazy._ExpandedTensorDict'>", "shape": [2]})");
    REQUIRE_THROWS_WITH(load_memmap(td_dir),
                        "tensorfile: " + meta_path +
                            ": collection type <class 'tensordict._lazy._ExpandedTensorDict'> is not supported; "
                            "expected a TensorDict, tensorclass, lazy stack, non-tensor data, _SubTensorDict or a "
                            "permuted, transposed, (un)squeezed or viewed TensorDict");
    put(td_dir / "meta.json", R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>"})");
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir),
        "tensorfile: " + meta_path + ": lazy stack has no integer \"stack_dim\"; expected an int, got none");
  }
}

// ---- links, cycles and races -------------------------------------------------------------------

TEST_CASE("load_memmap never maps a file outside the tree, whatever a concurrent link swap does",
          "[load_memmap][race]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = dir / "td";
  put(dir / "outside.bin", bytes_of<float>({666}));
  put(td_dir / "real.bin", bytes_of<float>({1}));
  put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[1]", "float32")));
  fs::create_symlink("real.bin", td_dir / "a.memmap");
  const std::string inside_link = (td_dir / ".inside").string();
  const std::string outside_link = (td_dir / ".outside").string();
  const std::string leaf_name = (td_dir / "a.memmap").string();
  const std::string outside_target = fs::canonical(dir / "outside.bin").string();

  // The swapper alternates a.memmap between a link that stays inside and one that leads out, each put in
  // place by one rename, so a.memmap always exists; a load must map real.bin or refuse, never outside.bin.
  std::atomic<bool> stop{false};
  std::atomic<long> swaps{0};
  std::thread swapper([&] {
    while (!stop.load()) {
      const bool out = (swaps.load() % 2) == 0;
      const std::string& link = out ? outside_link : inside_link;
      if (::symlink(out ? outside_target.c_str() : "real.bin", link.c_str()) != 0) continue;
      if (std::rename(link.c_str(), leaf_name.c_str()) == 0) ++swaps;
    }
  });
  long mapped_inside = 0;
  long refused = 0;
  long mapped_outside = 0;
  std::string unexpected;
  for (int i = 0; i < 2500 && mapped_outside == 0; ++i) {
    for (const std::optional<MapMode> access : {std::optional<MapMode>{}, std::optional<MapMode>{MapMode::read_only}}) {
      try {
        const TensorDict td = load_memmap(td_dir, {.mmap = access});
        (td["a"].as_tensor().item<float>() == 666 ? mapped_outside : mapped_inside) += 1;
      } catch (const FormatError& e) {
        if (std::string(e.what()).find("symbolic link leaves the tree") == std::string::npos) unexpected = e.what();
        ++refused;
      } catch (const std::exception& e) {
        unexpected = e.what();
      }
    }
  }
  stop = true;
  swapper.join();
  INFO("swaps " << swaps.load() << ", mapped inside " << mapped_inside << ", refused " << refused);
  CHECK(mapped_outside == 0);
  CHECK(unexpected.empty());
  CHECK(mapped_inside > 0);
}

TEST_CASE("load_memmap follows links that stay inside the tree, through the root descriptor", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = dir / "td";
  put(td_dir / "meta.json", td_meta(R"("s": {"type": "TensorDict"})"));
  put(td_dir / "s" / "meta.json", td_meta(R"("a": )" + leaf("[1]", "float32") + R"(, "b": )" + leaf("[1]", "float32")));
  put(td_dir / "data" / "real.bin", bytes_of<float>({7}));
  fs::create_symlink("../data/real.bin", td_dir / "s" / "a.memmap");  // up and down again: still inside
  fs::create_symlink("../s/./a.memmap", td_dir / "s" / "b.memmap");   // a chain of links
  fs::create_symlink(fs::canonical(td_dir) / "data" / "real.bin", td_dir / "data" / "abs.bin");

  SECTION("relative links up and across, and chains") {
    const TensorDict td = load_memmap(td_dir, {.tensordict = {.skip_undeclared = true}});
    CHECK(td.get({"s", "a"}).as_tensor().item<float>() == 7);
    CHECK(td.get({"s", "b"}).as_tensor().item<float>() == 7);
  }
  SECTION("an absolute link naming a file inside the tree") {
    fs::remove(td_dir / "s" / "a.memmap");
    fs::create_symlink("../data/abs.bin", td_dir / "s" / "a.memmap");
    CHECK(load_memmap(td_dir, {.tensordict = {.skip_undeclared = true}}).get({"s", "a"}).as_tensor().item<float>() ==
          7);
  }
  SECTION("a subdirectory loaded alone may not reach its parent") {
    REQUIRE_THROWS_WITH(load_memmap(td_dir / "s"), Catch::Contains("symbolic link leaves the tree"));
  }
  SECTION("a link to a missing file inside or outside is a missing file") {
    fs::remove(td_dir / "data" / "real.bin");
    REQUIRE_THROWS_WITH(load_memmap(td_dir, {.tensordict = {.skip_undeclared = true}}),
                        Catch::Contains("data file is missing"));
    fs::remove(td_dir / "s" / "a.memmap");
    fs::create_symlink("../../nowhere.bin", td_dir / "s" / "a.memmap");
    REQUIRE_THROWS_WITH(load_memmap(td_dir, {.tensordict = {.skip_undeclared = true}}),
                        Catch::Contains("data file is missing"));
  }
  SECTION("the walk without openat2 agrees with the kernel") {
    const detail::FileHandle root = detail::FileHandle::try_open_at(AT_FDCWD, td_dir.c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(root.valid());
    const std::string root_path = fs::canonical(td_dir).string();
    const auto walk = [&](const std::string& relative, int flags = O_RDONLY) {
      const detail::FileHandle file = detail::open_beneath_by_walking(root.fd(), relative, flags, root_path);
      return file.valid() ? 0 : errno;
    };
    CHECK(walk("s/a.memmap") == 0);
    CHECK(walk("s/b.memmap") == 0);
    CHECK(walk("data/abs.bin") == 0);
    CHECK(walk("s/../data/real.bin") == 0);
    CHECK(walk("s", O_RDONLY | O_DIRECTORY) == 0);
    CHECK(walk("..") == EXDEV);
    CHECK(walk("s/../../td/meta.json") == EXDEV);
    CHECK(walk("missing") == ENOENT);
    CHECK(walk("meta.json/x") == ENOTDIR);
    CHECK(walk("s/meta.json", O_RDONLY | O_DIRECTORY) == ENOTDIR);
    fs::create_symlink("loop", td_dir / "loop");
    CHECK(walk("loop") == ELOOP);
    fs::create_symlink(dir / "outside", td_dir / "out");
    CHECK(walk("out") == EXDEV);
    CHECK(detail::open_beneath_by_walking(root.fd(), "data/abs.bin", O_RDONLY, "").valid() == false);
  }
}

TEST_CASE("load_memmap maps hard-linked data files shared only when asked", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = dir / "td";
  put(dir / "outside.bin", bytes_of<float>({5}));
  put(td_dir / "meta.json", td_meta(R"("a": )" + leaf("[1]", "float32")));
  fs::create_hard_link(dir / "outside.bin", td_dir / "a.memmap");

  SECTION("access unset: copy-on-write, writes never reach the other name") {
    TensorDict td = load_memmap(td_dir);
    CHECK(td["a"].as_tensor().storage().name() == "mmap_private");
    td["a"].as_tensor().data<float>()[0] = 42.0f;
    CHECK(tensorfile_test::read_text(dir / "outside.bin") == bytes_of<float>({5}));
  }
  SECTION("access shared: refused") {
    REQUIRE_THROWS_WITH(load_memmap(td_dir, {.mmap = MapMode::shared}),
                        "tensorfile: " + (td_dir / "a.memmap").string() +
                            ": a: data file has 2 hard links; expected 1 for a shared writable mapping (another name "
                            "of the file may lie outside the tree; allow_shared_hard_links maps it anyway)");
  }
  SECTION("allow_shared_hard_links: shared") {
    for (const std::optional<MapMode> access : {std::optional<MapMode>{}, std::optional<MapMode>{MapMode::shared}}) {
      TensorDict td = load_memmap(td_dir, {.mmap = access, .tensordict = {.allow_shared_hard_links = true}});
      CHECK(td["a"].as_tensor().storage().name() == "mmap_shared");
    }
  }
  SECTION("read-only and copy-on-write mappings need no permission") {
    CHECK(load_memmap(td_dir, {.mmap = MapMode::read_only})["a"].as_tensor().item<float>() == 5);
    CHECK(load_memmap(td_dir, {.mmap = MapMode::copy_on_write})["a"].as_tensor().item<float>() == 5);
  }
}

TEST_CASE("load_memmap refuses sub-collections that lead back to their ancestors", "[load_memmap]") {
  const tensorfile_test::ScratchDir dir;
  const fs::path td_dir = dir / "td";
  const std::string cycle = ": directory cycle: the sub-collection directory is its own ancestor ";
  const std::string tail = " (a symbolic link leads back up); expected a tree, got a directory inside itself";

  SECTION("a -> . and b -> . (exponential work before), with every option") {
    put(td_dir / "meta.json",
        td_meta(R"("x": )" + leaf("[1]", "float32") + R"(, "a": {"type": "TensorDict"}, "b": {"type": "TensorDict"})"));
    put(td_dir / "x.memmap", bytes_of<float>({1}));
    fs::create_directory_symlink(".", td_dir / "a");
    fs::create_directory_symlink(".", td_dir / "b");
    const std::string expected = "tensorfile: " + (td_dir / "a").string() + cycle + td_dir.string() + tail;
    REQUIRE_THROWS_WITH(load_memmap(td_dir), expected);
    for (const Device device : {Device::meta(), Device::cpu()}) {
      REQUIRE_THROWS_WITH(load_memmap(td_dir, {.map_location = device, .tensordict = {.skip_missing = true}}),
                          expected);
      REQUIRE_THROWS_WITH(
          load_memmap(td_dir, {.map_location = device, .tensordict = {.skip_missing = true, .skip_undeclared = true}}),
          expected);
    }
  }
  SECTION("a link two levels down to the root, and a lazy stack item") {
    put(td_dir / "meta.json", td_meta(R"("s": {"type": "TensorDict"})"));
    put(td_dir / "s" / "meta.json", td_meta(R"("up": {"type": "TensorDict"})"));
    fs::create_directory_symlink("..", td_dir / "s" / "up");
    REQUIRE_THROWS_WITH(load_memmap(td_dir, {.map_location = Device::meta()}),
                        "tensorfile: " + (td_dir / "s" / "up").string() + cycle + td_dir.string() + tail);
    fs::remove_all(td_dir);
    put(td_dir / "meta.json", R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0})");
    fs::create_directory_symlink(".", td_dir / "0");
    REQUIRE_THROWS_WITH(load_memmap(td_dir), "tensorfile: " + (td_dir / "0").string() + cycle + td_dir.string() + tail);
  }
  SECTION("links that double the tree at every level: bounded by max_collections") {
    // Level k declares sub-collections a and b, both links to level k + 1: 2^12 - 1 collections from 12
    // directories, all inside the root (links out of the tree are refused), the levels undeclared there.
    constexpr int levels = 12;
    const auto level = [&](int k) { return k == 0 ? td_dir : td_dir / ("level" + std::to_string(k)); };
    for (int k = 0; k < levels; ++k) {
      if (k + 1 == levels) {
        put(level(k) / "meta.json", td_meta(R"("x": )" + leaf("[1]", "float32")));
        put(level(k) / "x.memmap", bytes_of<float>({7}));
        continue;
      }
      put(level(k) / "meta.json", td_meta(R"("a": {"type": "TensorDict"}, "b": {"type": "TensorDict"})"));
      const std::string next = (k == 0 ? "level" : "../level") + std::to_string(k + 1);
      fs::create_directory_symlink(next, level(k) / "a");
      fs::create_directory_symlink(next, level(k) / "b");
    }
    std::size_t leaves = 0;
    load_memmap(td_dir, {.map_location = Device::meta(), .tensordict = {.skip_undeclared = true}})
        .for_each_leaf([&](const auto&, const auto&) { ++leaves; });
    CHECK(leaves == std::size_t{1} << (levels - 1));
    REQUIRE_THROWS_AS(load_memmap(td_dir, {.map_location = Device::meta(),
                                           .limits = {.max_collections = 1000},
                                           .tensordict = {.skip_undeclared = true}}),
                      LimitError);
    REQUIRE_THROWS_WITH(
        load_memmap(td_dir, {.limits = {.max_collections = 1000}, .tensordict = {.skip_undeclared = true}}),
        Catch::Contains("tree holds more than 1000 collections"));
  }
  SECTION("the same directory twice, side by side, is no cycle") {
    put(td_dir / "meta.json", td_meta(R"("s": {"type": "TensorDict"}, "t": {"type": "TensorDict"})"));
    put(td_dir / "s" / "meta.json", td_meta(""));
    fs::create_directory_symlink("s", td_dir / "t");
    const TensorDict td = load_memmap(td_dir);
    CHECK(td["t"].is_tensordict());
  }
}
