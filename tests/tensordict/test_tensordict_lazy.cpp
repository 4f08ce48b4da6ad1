// SPDX-License-Identifier: MIT
// Tests of load_memmap on tensordict's lazy layouts (detail/lazy_views.hpp): _SubTensorDict and the
// _CustomOpTensorDict family, as views of their _source/, nested, on meta, into out=, and hostile variants.
//
// Provenance (pytorch/tensordict at a1a061e3d, read with git show; tensordict is not installed here): the trees
// are written as these writers do, with orjson's compact JSON.
// - _SubTensorDict: `_td.py` `_SubTensorDict._memmap_` writes meta.json {"_type", "index": _index_to_str(idx)}
//   and the source in `_source/`; `_index_to_str` tags tuple/list/slice/range/tensor/ellipsis, ints and None pass
//   through; `_SubTensorDict._load_memmap` + `__init__` (a top-level list becomes a tuple; Ellipsis expanded).
// - _CustomOpTensorDict: `_lazy.py` `_CustomOpTensorDict._memmap_` writes {"shape", "device", "_type",
//   "custom_op", "inv_op", "custom_op_kwargs", "inv_op_kwargs"} and `_source/`; the kwargs are those of
//   `base.py` `_legacy_permute` ({"dims": [...]}), `_legacy_transpose` ({"dim0", "dim1"}), `_legacy_unsqueeze`
//   and `_legacy_squeeze` ({"dim"}) and `view` ({"size": [...]}, inv {"size": source batch}).
// - LazyStackedTensorDict: `_lazy.py` `LazyStackedTensorDict._memmap_` ({"_type", "stack_dim"}, members 0/, 1/).
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

using namespace tensorfile;
namespace fs = std::filesystem;

namespace {
void put(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}
std::vector<float> values_of(const Tensor& t) {
  std::vector<float> out;
  const Tensor dense = t.contiguous();  // kept alive for the loop (a temporary's view() would dangle)
  for (const float v : dense.view<const float>()) out.push_back(v);
  return out;
}
/// A TensorDict of batch `batch` with leaf "a": float32 of `shape` holding 0, 1, 2...
void write_source(const fs::path& dir, const std::string& batch, const std::string& shape, std::size_t count) {
  std::vector<float> values(count);
  std::iota(values.begin(), values.end(), 0.0F);
  std::string bytes(count * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  put(dir / "a.memmap", bytes);
  put(dir / "meta.json", R"({"a":{"device":"cpu","shape":)" + shape +
                             R"(,"dtype":"torch.float32","is_nested":false},"shape":)" + batch +
                             R"(,"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"})");
}
/// A _SubTensorDict of a [4, 3] source whose "a" is float32 [4, 3, 2] (0..23), with `index` as meta.json holds it.
void write_sub(const fs::path& dir, const std::string& index) {
  write_source(dir / "_source", "[4,3]", "[4,3,2]", 24);
  put(dir / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":)" + index + "}");
}
/// A _CustomOpTensorDict of class `cls` over a source of batch `batch` ("a" float32 `shape`, 0...).
void write_custom(const fs::path& dir, const std::string& cls, const std::string& op, const std::string& kwargs,
                  const std::string& inv_kwargs, const std::string& shape_after, const std::string& batch = "[4,3]",
                  const std::string& shape = "[4,3,2]", std::size_t count = 24) {
  write_source(dir / "_source", batch, shape, count);
  put(dir / "meta.json", R"({"shape":)" + shape_after + R"(,"device":"cpu","_type":"<class 'tensordict._lazy.)" + cls +
                             R"('>","custom_op":")" + op + R"(","inv_op":")" +
                             (op == "squeeze"     ? "unsqueeze"
                              : op == "unsqueeze" ? "squeeze"
                                                  : op) +
                             R"(","custom_op_kwargs":)" + kwargs + R"(,"inv_op_kwargs":)" + inv_kwargs + "}");
}
float at(const std::vector<float>& v, std::int64_t i, std::int64_t j, std::int64_t k) {  // source a[i][j][k]
  return v[static_cast<std::size_t>((i * 3 + j) * 2 + k)];
}
std::vector<float> source_values() {
  std::vector<float> v(24);
  std::iota(v.begin(), v.end(), 0.0F);
  return v;
}
}  // namespace

TEST_CASE("load_memmap reads a _SubTensorDict of a slice as a view of the mapped source", "[load_memmap][lazy]") {
  tensorfile_test::ScratchDir dir;
  // What td[1:3] memmaps to (_index_to_str of (slice(1, 3, None),)).
  write_sub(dir.path(), R"(["tuple",[["slice",{"start":1,"stop":3,"step":null}]]])");
  const TensorDict td = load_memmap(dir.path());
  CHECK(td.batch_size() == Shape{2, 3});
  CHECK(td.type_name() == "<class 'tensordict._td.TensorDict'>");
  CHECK(td.lazy_view() == "indexed [1:3, :] of _source");
  const Tensor& a = td["a"].as_tensor();
  CHECK(a.sizes() == Shape{2, 3, 2});
  CHECK(a.storage().kind() == StorageKind::mmap);  // zero-copy: the source file's mapping
  CHECK(a.storage().size_bytes() == 24 * sizeof(float));
  CHECK(a.storage_offset() == 6);
  std::vector<float> want(12);
  std::iota(want.begin(), want.end(), 6.0F);
  CHECK(values_of(a) == want);
}

TEST_CASE("load_memmap applies ints, None, Ellipsis, steps and negative indices as torch does", "[load_memmap][lazy]") {
  const std::vector<float> src = source_values();
  SECTION("(Ellipsis, 1)") {
    tensorfile_test::ScratchDir dir;
    write_sub(dir.path(), R"(["tuple",[["ellipsis"],1]])");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{4});
    const Tensor& a = td["a"].as_tensor();
    REQUIRE(a.sizes() == Shape{4, 2});
    CHECK(values_of(a) == std::vector<float>{2, 3, 8, 9, 14, 15, 20, 21});
    CHECK(a.storage().kind() == StorageKind::mmap);
  }
  SECTION("(None, -1, slice(None, None, 2))") {
    tensorfile_test::ScratchDir dir;
    write_sub(dir.path(), R"(["tuple",[null,-1,["slice",{"start":null,"stop":null,"step":2}]]])");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{1, 2});
    CHECK(values_of(td["a"].as_tensor()) ==
          std::vector<float>{at(src, 3, 0, 0), at(src, 3, 0, 1), at(src, 3, 2, 0), at(src, 3, 2, 1)});
    CHECK(td.lazy_view() == "indexed [None, -1, ::2] of _source");
  }
  SECTION("a bare int index: td[2]") {
    tensorfile_test::ScratchDir dir;
    write_sub(dir.path(), "2");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{3});
    CHECK(values_of(td["a"].as_tensor())[0] == at(src, 2, 0, 0));
  }
  SECTION("a top-level list is a tuple of ints (_SubTensorDict.__init__)") {
    tensorfile_test::ScratchDir dir;
    write_sub(dir.path(), R"(["list",[1,2]])");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size().empty());
    CHECK(values_of(td["a"].as_tensor()) == std::vector<float>{at(src, 1, 2, 0), at(src, 1, 2, 1)});
  }
}

TEST_CASE("load_memmap copies where torch's advanced indexing copies (tensor, list, range, mask)",
          "[load_memmap][lazy]") {
  const std::vector<float> src = source_values();
  tensorfile_test::ScratchDir dir;
  SECTION("a tensor index on dim 0") {
    write_sub(dir.path(), R"(["tuple",[["tensor",[3,0],"cpu"]]])");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{2, 3});
    const Tensor& a = td["a"].as_tensor();
    CHECK(a.storage().kind() == StorageKind::heap);
    std::vector<float> want(src.begin() + 18, src.end());
    want.insert(want.end(), src.begin(), src.begin() + 6);
    CHECK(values_of(a) == want);
  }
  SECTION("a list index on dim 1 stays in place") {
    write_sub(dir.path(), R"(["tuple",[["slice",{"start":0,"stop":2,"step":null}],["list",[2,-3]]]])");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{2, 2});
    CHECK(values_of(td["a"].as_tensor()) == std::vector<float>{at(src, 0, 2, 0), at(src, 0, 2, 1), at(src, 0, 0, 0),
                                                               at(src, 0, 0, 1), at(src, 1, 2, 0), at(src, 1, 2, 1),
                                                               at(src, 1, 0, 0), at(src, 1, 0, 1)});
  }
  SECTION("a boolean mask and a range") {
    write_sub(dir.path(),
              R"(["tuple",[["tensor",[false,true,false,true],"cpu"],["range",{"start":1,"stop":3,"step":1}]]])");
    CHECK_THROWS_AS(load_memmap(dir.path()), UnsupportedError);  // two advanced indices: not guessed
    write_sub(dir.path(), R"(["tuple",[["tensor",[false,true,false,true],"cpu"]]])");
    CHECK(load_memmap(dir.path()).batch_size() == Shape{2, 3});
    write_sub(
        dir.path(),
        R"(["tuple",[["slice",{"start":null,"stop":null,"step":null}],["range",{"start":1,"stop":3,"step":1}]]])");
    CHECK(load_memmap(dir.path()).batch_size() == Shape{4, 2});
  }
}

TEST_CASE("load_memmap reads permuted, transposed, unsqueezed, squeezed and viewed TensorDicts as views",
          "[load_memmap][lazy]") {
  const std::vector<float> src = source_values();
  tensorfile_test::ScratchDir dir;
  SECTION("permute (1, 0)") {
    write_custom(dir.path(), "_PermutedTensorDict", "permute", R"({"dims":[1,0]})", R"({"dims":[1,0]})", "[3,4]");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{3, 4});
    CHECK(td.lazy_view() == "permuted (1, 0) of _source");
    const Tensor& a = td["a"].as_tensor();
    REQUIRE(a.sizes() == Shape{3, 4, 2});
    CHECK(a.storage().kind() == StorageKind::mmap);
    const std::vector<float> got = values_of(a);
    CHECK(got[static_cast<std::size_t>((2 * 4 + 1) * 2 + 1)] == at(src, 1, 2, 1));  // a[2][1][1] == src[1][2][1]
  }
  SECTION("transpose (0, 1), written with a negative dim") {
    write_custom(dir.path(), "_TransposedTensorDict", "transpose", R"({"dim0":-1,"dim1":0})", R"({"dim0":-1,"dim1":0})",
                 "[3,4]");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{3, 4});
    CHECK(values_of(td["a"].as_tensor())[2] == at(src, 1, 0, 0));
  }
  SECTION("unsqueeze 1") {
    write_custom(dir.path(), "_UnsqueezedTensorDict", "unsqueeze", R"({"dim":1})", R"({"dim":1})", "[4,1,3]");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{4, 1, 3});
    CHECK(td["a"].as_tensor().sizes() == Shape{4, 1, 3, 2});
  }
  SECTION("squeeze 1 of a [4, 1] source") {
    write_custom(dir.path(), "_SqueezedTensorDict", "squeeze", R"({"dim":1})", R"({"dim":1})", "[4]", "[4,1]",
                 "[4,1,6]");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{4});
    CHECK(td["a"].as_tensor().sizes() == Shape{4, 6});
    CHECK(values_of(td["a"].as_tensor()) == src);
  }
  SECTION("view (12,): the leaf's own dims follow") {
    write_custom(dir.path(), "_ViewedTensorDict", "view", R"({"size":[12]})", R"({"size":[4,3]})", "[12]");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{12});
    CHECK(td["a"].as_tensor().sizes() == Shape{12, 2});
    CHECK(td["a"].as_tensor().storage().kind() == StorageKind::mmap);
    CHECK(values_of(td["a"].as_tensor()) == src);
  }
}

TEST_CASE("load_memmap reads lazy views nested in trees and over lazy stacks", "[load_memmap][lazy]") {
  const std::vector<float> src = source_values();
  tensorfile_test::ScratchDir dir;
  SECTION("a permuted TensorDict inside a TensorDict") {
    write_custom(dir / "p", "_PermutedTensorDict", "permute", R"({"dims":[1,0]})", R"({"dims":[1,0]})", "[3,4]");
    put(dir / "meta.json",
        R"({"p":{"type":"_PermutedTensorDict"},"shape":[3],"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"})");
    const TensorDict td = load_memmap(dir.path());
    const TensorDict& p = td["p"].as_tensordict();
    CHECK(p.batch_size() == Shape{3, 4});
    CHECK(p.lazy_view() == "permuted (1, 0) of _source");
  }
  // A lazy stack on dim 1 of two [4] members with heterogeneous leaves ("a": [4, 1] and [4, 3]): batch [4, 2].
  const auto write_stack = [&](const fs::path& at) {
    write_source(at / "0", "[4]", "[4,1]", 4);
    write_source(at / "1", "[4]", "[4,3]", 12);
    put(at / "meta.json", R"({"_type":"<class 'tensordict._lazy.LazyStackedTensorDict'>","stack_dim":1})");
  };
  const auto sub_of_stack = [&](const std::string& index) {
    write_stack(dir / "_source");
    put(dir / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":)" + index + "}");
    return load_memmap(dir.path());
  };
  SECTION("a lazy stack on dim 1 with heterogeneous members") {
    write_stack(dir.path());
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.kind() == TensorDictKind::lazy_stack);
    CHECK(td.batch_size() == Shape{4, 2});
    CHECK(td["1"]["a"].as_tensor().sizes() == Shape{4, 3});
  }
  SECTION("a sub-tensordict of a lazy stack: an int on the stack dim picks a member") {
    const TensorDict td = sub_of_stack(R"(["tuple",[["slice",{"start":1,"stop":3,"step":null}],1]])");
    CHECK(td.kind() == TensorDictKind::plain);
    CHECK(td.batch_size() == Shape{2});
    CHECK(values_of(td["a"].as_tensor()) == std::vector<float>{3, 4, 5, 6, 7, 8});
  }
  SECTION("a sub-tensordict of a lazy stack: a slice on the stack dim keeps a stack") {
    const TensorDict td = sub_of_stack(R"(["tuple",[2,["slice",{"start":-1,"stop":null,"step":null}]]])");
    CHECK(td.kind() == TensorDictKind::lazy_stack);
    CHECK(td.stack_dim() == 0);
    CHECK(td.batch_size() == Shape{1});
    CHECK(values_of(td["0"]["a"].as_tensor()) == std::vector<float>{6, 7, 8});
  }
  SECTION("a sub-tensordict whose index stops before a nested lazy stack's stack dim") {
    write_stack(dir / "_source" / "s");
    put(dir / "_source" / "meta.json",
        R"({"s":{"type":"LazyStackedTensorDict"},"shape":[4],"device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"})");
    put(dir / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":1})");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size().empty());
    const TensorDict& stack = td["s"].as_tensordict();
    CHECK(stack.kind() == TensorDictKind::lazy_stack);
    CHECK(stack.stack_dim() == 0);
    CHECK(stack.batch_size() == Shape{2});
    CHECK(values_of(stack["0"]["a"].as_tensor()) == std::vector<float>{1});
    CHECK(values_of(stack["1"]["a"].as_tensor()) == std::vector<float>{3, 4, 5});
  }
  SECTION("a sub-tensordict of a permuted tensordict") {
    write_custom(dir / "_source", "_PermutedTensorDict", "permute", R"({"dims":[1,0]})", R"({"dims":[1,0]})", "[3,4]");
    put(dir / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":["tuple",[2]]})");
    const TensorDict td = load_memmap(dir.path());
    CHECK(td.batch_size() == Shape{4});
    CHECK(values_of(td["a"].as_tensor())[2] == at(src, 1, 2, 0));
  }
}

TEST_CASE("load_memmap of lazy views honours device=meta and out=", "[load_memmap][lazy]") {
  tensorfile_test::ScratchDir dir;
  write_sub(dir.path(), R"(["tuple",[["tensor",[3,0,1],"cpu"],["slice",{"start":1,"stop":null,"step":null}]]])");
  LoadOptions meta;
  meta.map_location = Device::meta();
  const TensorDict on_meta = load_memmap(dir.path(), meta);
  CHECK(on_meta.batch_size() == Shape{3, 2});
  CHECK(on_meta["a"].as_tensor().device().is_meta());
  CHECK(on_meta["a"].as_tensor().sizes() == Shape{3, 2, 2});

  TensorDict out;
  LoadOptions into;
  into.tensordict.out = &out;
  const TensorDict result = load_memmap(dir.path(), into);
  CHECK(out.batch_size() == Shape{3, 2});
  CHECK(out.lazy_view() == result.lazy_view());
  CHECK(values_of(out["a"].as_tensor()) == values_of(result["a"].as_tensor()));
  TensorDict wrong({}, Shape{5});
  wrong.set("x", Tensor::zeros({5}, DType::Float32));
  into.tensordict.out = &wrong;
  CHECK_THROWS_AS(load_memmap(dir.path(), into), ArgumentError);
}

TEST_CASE("save_memmap writes a loaded lazy view as the plain TensorDict it materialises", "[load_memmap][lazy]") {
  tensorfile_test::ScratchDir dir;
  write_custom(dir / "in", "_PermutedTensorDict", "permute", R"({"dims":[1,0]})", R"({"dims":[1,0]})", "[3,4]");
  const TensorDict td = load_memmap(dir / "in");
  save_memmap(td, dir / "out");
  CHECK(tensorfile_test::read_text(dir / "out" / "meta.json").find("_PermutedTensorDict") == std::string::npos);
  CHECK(!fs::exists(dir / "out" / "_source"));
  const TensorDict back = load_memmap(dir / "out");
  CHECK(back.batch_size() == Shape{3, 4});
  CHECK(back.lazy_view().empty());
  CHECK(values_of(back["a"].as_tensor()) == values_of(td["a"].as_tensor()));
}

TEST_CASE("load_memmap refuses hostile lazy layouts with clear errors", "[load_memmap][lazy]") {
  tensorfile_test::ScratchDir dir;
  const auto message = [&] {
    try {
      (void)load_memmap(dir.path());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SECTION("an index out of the source's range") {
    write_sub(dir.path(), R"(["tuple",[7]])");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    CHECK(message().find("index 7 is out of range for a source dim of size 4") != std::string::npos);
    write_sub(dir.path(), R"(["tuple",[["list",[0,9]]]])");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    write_sub(dir.path(), R"(["tuple",[0,0,0]])");
    CHECK(message().find("3 items for a source of batch rank 2") != std::string::npos);
    write_sub(dir.path(), R"(["tuple",[["ellipsis"],["ellipsis"]]])");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    write_sub(dir.path(), R"(["tuple",[["slice",{"start":0,"stop":2,"step":-1}]]])");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    write_sub(dir.path(), R"(["tuple",[["frozenset",[1]]]])");
    CHECK_THROWS_AS(load_memmap(dir.path()), UnsupportedError);
  }
  SECTION("a permutation that is not one") {
    write_custom(dir.path(), "_PermutedTensorDict", "permute", R"({"dims":[0,0]})", R"({"dims":[0,0]})", "[4,3]");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    CHECK(message().find("not a permutation") != std::string::npos);
    write_custom(dir.path(), "_PermutedTensorDict", "permute", R"({"dims":[1]})", R"({"dims":[1]})", "[3]");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
  }
  SECTION("a view size that does not match") {
    write_custom(dir.path(), "_ViewedTensorDict", "view", R"({"size":[5]})", R"({"size":[4,3]})", "[5]");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    CHECK(message().find("does not match the source batch size") != std::string::npos);
  }
  SECTION("a transpose or squeeze dim out of range") {
    write_custom(dir.path(), "_TransposedTensorDict", "transpose", R"({"dim0":0,"dim1":2})", R"({"dim0":0,"dim1":2})",
                 "[3,4]");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    write_custom(dir.path(), "_SqueezedTensorDict", "squeeze", R"({"dim":-3})", R"({"dim":-3})", "[4,3]");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
  }
  SECTION("an op or class tensorfile does not know") {
    write_custom(dir.path(), "_PermutedTensorDict", "flip", R"({"dims":[0]})", R"({"dims":[0]})", "[4,3]");
    CHECK_THROWS_AS(load_memmap(dir.path()), UnsupportedError);
    const std::string what = message();
    CHECK(what.find("_PermutedTensorDict with custom_op flip") != std::string::npos);
    CHECK(what.find("meta.json") != std::string::npos);
    write_custom(dir.path(), "_ExpandedTensorDict", "expand", R"({"size":[2]})", R"({})", "[2]");
    CHECK_THROWS_AS(load_memmap(dir.path()), UnsupportedError);
  }
  SECTION("a missing _source") {
    put(dir / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":0})");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    CHECK(message().find("_source") != std::string::npos);
  }
  SECTION("a _source that escapes the tree") {
    tensorfile_test::ScratchDir outside;
    write_source(outside.path(), "[4,3]", "[4,3,2]", 24);
    put(dir / "meta.json", R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":0})");
    fs::create_directory_symlink(outside.path(), dir / "_source");
    CHECK_THROWS_AS(load_memmap(dir.path()), FormatError);
    CHECK(message().find("leaves the tree") != std::string::npos);
  }
}
