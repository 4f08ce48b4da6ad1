// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/torch/load.hpp> on files written by real torch 1.13 and on crafted ones.
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <tensorfile/formats/torch/save.hpp>
#include <tensorfile/verify.hpp>

#include <atomic>
#include <chrono>
#include <complex>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tensorfile_catch.hpp"
#include "torch/load_helpers.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile::detail::Op;
using tensorfile_test::PickleWriter;
using tensorfile_test::sample;

namespace {
std::span<const std::byte> as_span(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
std::vector<float> floats(const Tensor& t) {
  std::vector<float> out;
  for (float v : t.view<const float>()) out.push_back(v);
  return out;
}
std::string f32_bytes(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}
}  // namespace

TEST_CASE("load reads a tensor written by torch", "[load]") {
  const Value v = load_torch(sample("torch", "t_float32_2x3.pt"));
  REQUIRE(v.is_tensor());
  const Tensor& t = v.as_tensor();
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.sizes() == Shape{2, 3});
  CHECK(t.strides() == Shape{3, 1});
  CHECK(floats(t) == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(t.storage().kind() == StorageKind::heap);
  CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64 == 0);
  SECTION("the buffer-saved copy (prefix archive/) is the same tensor") {
    CHECK(load_torch(sample("torch", "t_float32_2x3_buffer.pt")) == v);
  }
}

TEST_CASE("load keeps views sharing one storage", "[load]") {
  const Value v = load_torch(sample("torch", "shared_views.pt"));
  const Tensor& base = v["base"].as_tensor();
  for (const char* key : {"row1", "tail", "t", "again"}) {
    INFO(key);
    CHECK(v[key].as_tensor().storage().shares_owner_with(base.storage()));
  }
  CHECK(v["row1"].as_tensor().storage_offset() == 4);
  CHECK(v["tail"].as_tensor().storage_offset() == 5);
  CHECK(v["t"].as_tensor().strides() == Shape{1, 4});
  CHECK(floats(v["tail"].as_tensor()) == std::vector<float>{5, 6, 7, 8});
}

TEST_CASE("load reads state_dicts and optimizer checkpoints", "[load]") {
  const Value sd = load_torch(sample("torch", "state_dict_linear_bn.pt"));
  REQUIRE(sd.is_dict());
  CHECK(sd.as_dict().ordered);
  CHECK(sd.size() == 7);
  CHECK(sd["1.num_batches_tracked"].as_tensor().dim() == 0);
  CHECK(sd["1.num_batches_tracked"].as_tensor().item<std::int64_t>() == 0);
  const Value* metadata = sd.as_dict().metadata();
  REQUIRE(metadata != nullptr);
  CHECK((*metadata)["1"]["version"].as_int() == 2);
  CHECK((*metadata)[""]["version"].as_int() == 1);
  const auto tensors = named_tensors(sd);
  REQUIRE(tensors.size() == 7);
  CHECK(tensors[0].first == "0.weight");

  const Value opt = load_torch(sample("torch", "optimizer_sgd.pt"));
  CHECK(opt["param_groups"][0]["lr"].as_float() == 0.1);
  CHECK(opt["param_groups"][0]["foreach"].is_none());
  CHECK(opt["state"][0]["momentum_buffer"].as_tensor().sizes() == Shape{1, 2});
  CHECK(named_tensors(opt)[1].first == "state/1/momentum_buffer");
}

TEST_CASE("load reads parameters, 0-d and empty tensors, bare storages, meta tensors", "[load]") {
  const Value p = load_torch(sample("torch", "parameter.pt"));
  CHECK(to_string(p).find("Parameter") != std::string::npos);
  const Value z = load_torch(sample("torch", "zero_dim_empty.pt"));
  for (const auto& [path, t] : named_tensors(z)) {
    INFO(path);
    CHECK((t.dim() == 0 || t.numel() == 0));
  }
  const Value s = load_torch(sample("torch", "storage_and_tensor.pt"));
  REQUIRE(s.is_list());
  CHECK(s[0].is_storage());
  CHECK(s[0].as_storage().tensor.storage().shares_owner_with(s[1].as_tensor().storage()));
  const Value m = load_torch(sample("torch", "meta.pt"));
  CHECK(m.as_tensor().device().is_meta());
}

TEST_CASE("load reads the legacy format and pickle protocol 4", "[load]") {
  const Value legacy = load_torch(sample("torch", "legacy_format.pt"));
  CHECK(legacy["a"].as_tensor().dtype() == DType::Float32);
  CHECK(legacy["b"].as_tensor().dtype() == DType::Int64);
  CHECK(load_torch(tensorfile_test::data_dir() / "torch_gen" / "pickle_protocol_4.pt") ==
        load_torch(tensorfile_test::data_dir() / "torch_gen" / "pickle_protocol_2.pt"));
  CHECK(load_torch(tensorfile_test::data_dir() / "torch_gen" / "zip_deflated.pt") ==
        load_torch(tensorfile_test::data_dir() / "torch_gen" / "version_record_first.pt"));
}

TEST_CASE("map_location takes every form torch.load takes", "[load][map_location]") {
  const auto path = sample("torch", "fake_cuda0.pt");  // storages tagged cuda:0, written on a CPU machine
  SECTION("nothing: restore the saved tag, which needs CUDA") { CHECK_THROWS_AS(load_torch(path), DeviceError); }
  SECTION("a device string or Device") {
    const Value v = load_torch(path, {.map_location = "cpu"});
    for (const auto& [name, t] : named_tensors(v)) CHECK(t.device().is_cpu());
    CHECK(load_torch(path, {.map_location = Device::cpu()}) == v);
    const Value meta = load_torch(path, {.map_location = "meta"});
    for (const auto& [name, t] : named_tensors(meta)) CHECK(t.device().is_meta());
  }
  SECTION("a tag map: exact remap, others keep their tag") {
    CHECK_NOTHROW(load_torch(path, {.map_location = std::map<std::string, std::string>{{"cuda:0", "cpu"}}}));
    CHECK_THROWS_AS(load_torch(path, {.map_location = std::map<std::string, std::string>{{"cuda:1", "cpu"}}}),
                    DeviceError);
  }
  SECTION("a callable, once per storage, with CPU bytes and the saved tag") {
    std::vector<std::string> seen;
    const MapLocation keep_on_host = MapLocation::Function([&](const Storage& s, std::string_view tag) {
      seen.emplace_back(tag);
      CHECK(s.device().is_cpu());
      return std::optional<Storage>(s);
    });
    const Value v = load_torch(path, {.map_location = keep_on_host});
    CHECK(!seen.empty());
    for (const auto& tag : seen) CHECK(tag == "cuda:0");
    const MapLocation decline =
        MapLocation::Function([](const Storage&, std::string_view) { return std::optional<Storage>(); });
    CHECK_THROWS_AS(load_torch(path, {.map_location = decline}), DeviceError);  // nullopt: the saved tag, cuda:0
    for (const std::size_t wrong : {std::size_t{1}, std::size_t{1} << 20}) {
      const MapLocation resize = MapLocation::Function(
          [wrong](const Storage&, std::string_view) { return std::optional<Storage>(heap_storage(wrong)); });
      REQUIRE_THROWS_WITH(load_torch(path, {.map_location = resize}),
                          Catch::Matchers::Contains("the map_location function returned a storage of " +
                                                    std::to_string(wrong) + " bytes for one of "));
    }
  }
  SECTION("an unknown tag") {
    REQUIRE_THROWS_WITH(load_torch(path, {.map_location = std::map<std::string, std::string>{{"cuda:0", "mps"}}}),
                        Catch::Matchers::Contains("don't know how to restore a storage tagged \"mps\""));
  }
}

TEST_CASE("mmap loads are views into one mapping of the file", "[load][mmap]") {
  const Value heap = load_torch(sample("torch", "shared_views.pt"));
  const Value mapped = load_torch(sample("torch", "shared_views.pt"), {.mmap = MapMode::copy_on_write});
  CHECK(mapped == heap);
  const Tensor& base = mapped["base"].as_tensor();
  CHECK(base.storage().backend<MmapBackend>()->mode() == MapMode::copy_on_write);
  CHECK(reinterpret_cast<std::uintptr_t>(base.raw_data()) % 64 == 0);  // records are 64-byte aligned
  // Every tensor points into the same mapping: same owner, pointers inside one file-sized range.
  for (const auto& [path, t] : named_tensors(mapped)) CHECK(t.storage().shares_owner_with(base.storage()));
  SECTION("MAP_SHARED writes reach the file") {
    const tensorfile_test::ScratchDir dir;
    const auto copy = dir / "t.pt";
    std::filesystem::copy_file(sample("torch", "t_float32_2x3.pt"), copy);
    {
      const Value v = load_torch(copy, {.mmap = MapMode::shared});
      v.as_tensor().data<float>()[0] = 42.0f;
    }
    CHECK(floats(load_torch(copy).as_tensor())[0] == 42.0f);
    {
      const Value v = load_torch(copy, {.mmap = MapMode::copy_on_write});  // private: copy-on-write
      v.as_tensor().data<float>()[0] = 7.0f;
    }
    CHECK(floats(load_torch(copy).as_tensor())[0] == 42.0f);
  }
}

TEST_CASE("load's .mmap takes the MapMode of the mapping, unset loads into the heap", "[load][mmap]") {
  const auto path = sample("torch", "t_float32_2x3.pt");
  CHECK_FALSE(LoadOptions{}.mmap.has_value());
  CHECK(load_torch(path).as_tensor().storage().kind() == StorageKind::heap);
  for (const MapMode mode : {MapMode::read_only, MapMode::copy_on_write}) {
    const Value mapped = load_torch(path, {.mmap = mode});
    const Tensor& t = mapped.as_tensor();
    CHECK(t.storage().kind() == StorageKind::mmap);
    CHECK(t.storage().backend<MmapBackend>()->mode() == mode);
    CHECK(t.is_writable() == (mode != MapMode::read_only));
    CHECK(mapped == load_torch(path));
  }
  SECTION("read_only refuses writes") {
    const Value mapped = load_torch(path, {.mmap = MapMode::read_only});
    REQUIRE_THROWS_WITH(mapped.as_tensor().data<float>(),
                        "tensorfile: storage (mmap_read_only) is read-only; expected a writable storage");
  }
  SECTION("a span gives read-only views of the caller's bytes whatever the mode") {
    const std::string bytes = tensorfile_test::read_text(path);
    for (const MapMode mode : {MapMode::read_only, MapMode::copy_on_write, MapMode::shared}) {
      const Value borrowed = load_torch(as_span(bytes), {.mmap = mode});
      CHECK(borrowed.as_tensor().storage().kind() == StorageKind::borrowed);
      CHECK_FALSE(borrowed.as_tensor().is_writable());
    }
  }
}

TEST_CASE("load funnels paths, byte spans and streams into one reader", "[load]") {
  const std::string bytes = tensorfile_test::read_text(sample("torch", "state_dict_linear_bn.pt"));
  const Value from_path = load_torch(sample("torch", "state_dict_linear_bn.pt"));
  CHECK(load_torch(as_span(bytes)) == from_path);
  std::istringstream stream(bytes);
  CHECK(load_torch(stream) == from_path);
  const Value borrowed = load_torch(as_span(bytes), {.mmap = MapMode::read_only});
  const Tensor& w = borrowed["0.weight"].as_tensor();
  CHECK(w.raw_data() >= reinterpret_cast<const std::byte*>(bytes.data()));
  CHECK(w.raw_data() < reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
  CHECK_FALSE(w.is_writable());
}

TEST_CASE("dict keys: frozensets and complex numbers are keys as in Python, lists are not", "[load][value]") {
  // {frozenset([1, 2]): 'fs', complex(1, 2): 'c', (1, frozenset([1, 2])): 't'}, the calls as protocol 2 writes them.
  const auto frozenset = [](PickleWriter& p) -> PickleWriter& {
    return p.global("builtins", "frozenset")
        .mark()
        .empty_list()
        .mark()
        .integer(1)
        .integer(2)
        .op(Op::appends)
        .tuple()
        .reduce();
  };
  PickleWriter p;
  p.proto().empty_dict().mark();
  frozenset(p).string("fs");
  p.global("builtins", "complex").mark().integer(1).integer(2).tuple().reduce().string("c");
  frozenset(p.mark().integer(1)).tuple().string("t");
  const Value v = load_torch(as_span(tensorfile_test::torch_file(p.setitems().stop().bytes(), "")));
  REQUIRE(v.size() == 3);
  const Value set_key = v.as_dict().items()[0].first;
  REQUIRE(set_key.is_set());
  CHECK(set_key.as_set().frozen);
  CHECK(v.as_dict().find(set_key)->as_string() == "fs");
  CHECK(v.as_dict().find(Value(std::complex<double>(1, 2)))->as_string() == "c");
  CHECK(v.as_dict().find(Value::tuple(List{Value(1), set_key}))->as_string() == "t");

  // A set that is not frozen is unhashable, as in Python.
  PickleWriter mutable_key;
  mutable_key.proto().empty_dict().global("builtins", "set").mark().empty_list().tuple().reduce().none().setitem();
  REQUIRE_THROWS_WITH(load_torch(as_span(tensorfile_test::torch_file(mutable_key.stop().bytes(), ""))),
                      Catch::Matchers::Contains("dict key is an unhashable set"));
}

TEST_CASE("dict keys: opaque objects are keys by identity, as in Python", "[load][value]") {
  // {K(1): 'a', K(1): 'b'} then the first K again (a memo GET) for 'c', as a pickler writes two instances of a class
  // without __eq__: torch.load gives two entries, the first holding 'c'.
  const auto instance = [](PickleWriter& p) -> PickleWriter& {
    return p.global("__main__", "K").mark().integer(1).tuple().reduce();
  };
  PickleWriter p;
  p.proto().empty_dict().mark();
  instance(p).put(0).string("a");
  instance(p).string("b");
  p.get(0).string("c");
  const std::string file = tensorfile_test::torch_file(p.setitems().stop().bytes(), "");
  const Value v = load_torch(as_span(file), {.strict = false});
  REQUIRE(v.size() == 2);
  CHECK(v.as_dict().items()[0].second.as_string() == "c");
  CHECK(v.as_dict().items()[1].second.as_string() == "b");
  CHECK(v.as_dict().items()[0].first == v.as_dict().items()[1].first);  // equal by what they hold, two keys
  const std::vector<std::byte> saved = save_torch_to_bytes(v);          // saved back as two instances
  CHECK(load_torch(std::span<const std::byte>(saved), {.strict = false}).size() == 2);
}

TEST_CASE("strict mode refuses code, permissive mode keeps opaque records", "[load][safety]") {
  REQUIRE_THROWS_WITH(
      load_torch(sample("torch", "whole_module.pt")),
      "tensorfile: " + sample("torch", "whole_module.pt").string() +
          ": whole_module/data.pkl: global torch.nn.modules.linear.Linear is not allowed; only tensors, "
          "containers and plain values load in strict mode (set .strict = false to keep it as an "
          "opaque object) (at byte 2)");
  const Value module = load_torch(sample("torch", "whole_module.pt"), {.strict = false});
  REQUIRE(module.is_object());
  CHECK(module.as_object().name == "Linear");
  CHECK(module.as_object().newobj);
  CHECK(module.as_object().state["_parameters"]["weight"].is_parameter());
  REQUIRE_THROWS_WITH(load_torch(sample("torch", "quantized.pt")),
                      Catch::Matchers::Contains("quantized tensors (torch._utils._rebuild_qtensor) are not supported"));
  REQUIRE_THROWS_WITH(
      load_torch(sample("torch", "sparse.pt")),
      Catch::Matchers::Contains("sparse tensors (torch._utils._rebuild_sparse_tensor) are not supported"));
  CHECK(load_torch(sample("torch", "sparse.pt"), {.strict = false}).is_dict());
  CHECK_THROWS_AS(load_torch(sample("torch", "numpy_objects.pt")), UnsupportedError);
}

TEST_CASE("crafted files fail cleanly with the file, member and offset", "[load][safety]") {
  const tensorfile_test::ScratchDir dir;
  const auto write = [&](const std::string& name, const std::string& bytes) {
    const auto path = dir / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  const auto one_tensor = [](std::int32_t numel, std::int32_t offset, std::vector<std::int32_t> size,
                             std::vector<std::int32_t> stride) {
    return PickleWriter().proto().tensor("FloatStorage", "0", numel, offset, size, stride).stop().bytes();
  };
  const std::string six = f32_bytes({0, 1, 2, 3, 4, 5});

  SECTION("a crafted file that is valid loads") {
    const Value v = load_torch(as_span(tensorfile_test::torch_file(one_tensor(6, 0, {2, 3}, {3, 1}), six)));
    CHECK(floats(v.as_tensor()) == std::vector<float>{0, 1, 2, 3, 4, 5});
  }
  SECTION("numel must match the record size exactly (CVE-2026-24747)") {
    const auto path = write("big.pt", tensorfile_test::torch_file(one_tensor(1000, 0, {1000}, {1}), six));
    REQUIRE_THROWS_WITH(load_torch(path),
                        "tensorfile: " + path.string() +
                            ": archive/data.pkl: storage 0 declares 1000 float32 elements; expected 4000 "
                            "bytes in its record, got 24 (at byte 89)");
  }
  SECTION("views must stay inside their storage") {
    const auto path = write("stride.pt", tensorfile_test::torch_file(one_tensor(6, 0, {3, 3}, {500, 1}), six));
    REQUIRE_THROWS_WITH(load_torch(path),
                        "tensorfile: " + path.string() +
                            ": archive/data.pkl: _rebuild_tensor_v2: view with sizes (3, 3), strides "
                            "(500, 1) and offset 0 leaves its storage; expected at most 24 bytes, got "
                            "4012 (at byte 148)");
    CHECK_THROWS_AS(load_torch(as_span(tensorfile_test::torch_file(one_tensor(6, 7, {1}, {1}), six))), FormatError);
    CHECK_THROWS_AS(load_torch(as_span(tensorfile_test::torch_file(one_tensor(6, 0, {-1}, {1}), six))), FormatError);
    CHECK_THROWS_AS(load_torch(as_span(tensorfile_test::torch_file(one_tensor(6, -1, {1}, {1}), six))), FormatError);
  }
  SECTION("missing records and version") {
    const std::string pickle = one_tensor(6, 0, {6}, {1});
    const auto no_data =
        write("nodata.pt", tensorfile_test::torch_zip("archive", {{"data.pkl", pickle}, {"version", "3\n"}}));
    REQUIRE_THROWS_WITH(load_torch(no_data),
                        "tensorfile: " + no_data.string() +
                            ": archive/data.pkl: storage record archive/data/0 is missing (at byte 89)");
    const auto no_version =
        write("noversion.pt", tensorfile_test::torch_zip("archive", {{"data.pkl", pickle}, {"data/0", six}}));
    REQUIRE_THROWS_WITH(load_torch(no_version),
                        "tensorfile: " + no_version.string() + ": archive/version: the archive has no version record");
    const auto bad_version = write(
        "v11.pt", tensorfile_test::torch_zip("archive", {{"data.pkl", pickle}, {"data/0", six}, {"version", "11\n"}}));
    REQUIRE_THROWS_WITH(load_torch(bad_version),
                        Catch::Matchers::Contains("unsupported file format version \"11\"; expected 1 to 10"));
  }
  SECTION("malformed pickles") {
    const auto run = [&](const std::string& pickle) {
      return load_torch(as_span(tensorfile_test::torch_file(pickle, six)));
    };
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().integer(1).bytes()),
                        "tensorfile: archive/data.pkl: pickle ends before its STOP opcode (at byte 7)");
    REQUIRE_THROWS_WITH(
        run(PickleWriter().proto().integer(1).integer(2).stop().bytes()),
        "tensorfile: archive/data.pkl: STOP needs exactly one value on the stack; expected 1, got 2 (at byte 12)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().get(3).stop().bytes()),
                        "tensorfile: archive/data.pkl: memo index 3 was never stored (at byte 2)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().append().stop().bytes()),
                        "tensorfile: archive/data.pkl: pickle stack underflow (at byte 2)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().mark().integer(1).stop().bytes()),
                        "tensorfile: archive/data.pkl: MARK without a matching end at STOP (at byte 8)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().op(0xFF).bytes()),
                        "tensorfile: archive/data.pkl: unsupported pickle opcode 0xff (at byte 2)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().op(Op::binunicode).raw(std::string("\xff\xff\xff\x7f", 4)).bytes()),
                        "tensorfile: archive/data.pkl: pickle ends inside an opcode argument; expected 2147483647 "
                        "bytes, got 0 (at byte 2)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().integer(1).empty_dict().setitem().stop().bytes()),
                        "tensorfile: archive/data.pkl: pickle stack underflow (at byte 8)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().integer(1).integer(2).integer(3).setitem().stop().bytes()),
                        "tensorfile: archive/data.pkl: SETITEM on a int; expected a dict (at byte 17)");
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().global("os", "system").string("ls").tuple().reduce().stop().bytes()),
                        Catch::Matchers::Contains("global os.system is not allowed"));
  }
  SECTION("a container may not hold itself, and nesting is bounded") {
    const auto run = [&](const std::string& pickle, LoadOptions options = {}) {
      return load_torch(as_span(tensorfile_test::torch_file(pickle, six)), options);
    };
    REQUIRE_THROWS_WITH(run(PickleWriter().proto().empty_list().put(0).get(0).append().stop().bytes()),
                        "tensorfile: archive/data.pkl: pickle puts a list inside itself (at byte 7)");
    // x = []; y = [x]; x.append(y): x is sealed once inside y.
    REQUIRE_THROWS_WITH(
        run(PickleWriter()
                .proto()
                .empty_list()
                .put(0)
                .empty_list()
                .get(0)
                .append()
                .put(1)
                .op(Op::pop)
                .get(0)
                .get(1)
                .append()
                .stop()
                .bytes()),
        "tensorfile: archive/data.pkl: pickle modifies a list after placing it in another container (at byte 16)");
    PickleWriter deep;
    deep.proto();
    for (int i = 0; i < 20; ++i) deep.empty_list();
    for (int i = 0; i < 19; ++i) deep.append();
    deep.stop();
    CHECK_NOTHROW(run(deep.bytes()));
    REQUIRE_THROWS_WITH(run(deep.bytes(), {.limits = {.max_depth = 10}}),
                        "tensorfile: archive/data.pkl: nesting exceeds 10 levels (at byte 31)");
  }
  SECTION("not a torch file, TorchScript, tar, empty") {
    const auto text = write("notes.txt", "hello world");
    REQUIRE_THROWS_WITH(
        load_torch(text),
        "tensorfile: " + text.string() +
            ": not a torch file; expected a zip archive or a pickle, got bytes 68 65 6c 6c (at byte 0)");
    const auto empty = write("empty.pt", "");
    REQUIRE_THROWS_WITH(load_torch(empty), "tensorfile: " + empty.string() + ": file is empty; expected a torch file");
    const auto script =
        write("script.pt", tensorfile_test::torch_zip(
                               "m", {{"data.pkl", "\x80\x02N."}, {"constants.pkl", "\x80\x02N."}, {"version", "3"}}));
    REQUIRE_THROWS_WITH(load_torch(script), Catch::Matchers::Contains("TorchScript archive"));
    std::string tar(512, '\0');
    tar.replace(257, 5, "ustar");
    REQUIRE_THROWS_WITH(load_torch(as_span(tar)), Catch::Matchers::Contains("pre-2017 tar format"));
    REQUIRE_THROWS_WITH(load_torch(as_span(std::string("\x80\x02K\x01.", 5))),
                        "tensorfile: not a torch file: a pickle without torch's legacy magic number (at byte 0)");
  }
}

TEST_CASE("Values print as a tree with dtypes and shapes", "[load][print]") {
  const Value v = load_torch(sample("torch", "state_dict_linear_bn.pt"));
  CHECK(to_string(v).starts_with("OrderedDict{\n  '0.weight': Tensor float32 [2, 3]\n"));
  CHECK(fmt::format("{}", v).ends_with("} with _metadata"));
}

// torch 2.x forms, crafted opcode by opcode as ../shared/formats/torch-save.md describes them
// (no torch 2.x is installed where the tests run).
TEST_CASE("load reads torch 2.x forms", "[load][torch2]") {
  const auto v3 = [](const std::string& dtype, std::int32_t bytes, std::vector<std::int32_t> size,
                     const std::string& metadata_key = "") {
    PickleWriter p;
    p.proto().global("torch._utils", "_rebuild_tensor_v3").mark();
    p.mark()
        .string("storage")
        .global("torch", "UntypedStorage")
        .string("0")
        .string("cpu")
        .integer(bytes)
        .tuple()
        .persid();
    p.integer(0).int_tuple(size).int_tuple({1}).boolean(false);
    p.global("collections", "OrderedDict").empty_tuple().reduce();
    p.global("torch", dtype);
    if (!metadata_key.empty()) p.empty_dict().string(metadata_key).boolean(true).setitem();
    return p.tuple().reduce().stop().bytes();
  };
  const auto zip = [](const std::string& pickle, const std::string& record, const std::string& order = "little") {
    return tensorfile_test::torch_zip("archive", {{"data.pkl", pickle},
                                                  {".format_version", "1"},
                                                  {".storage_alignment", "64"},
                                                  {"byteorder", order},
                                                  {"data/0", record},
                                                  {"version", "3\n"},
                                                  {".data/serialization_id", std::string(40, '0')}});
  };
  SECTION("_rebuild_tensor_v3 over an UntypedStorage with the new dtypes") {
    const std::string u16("\x01\x00\x02\x00\xff\xff", 6);
    const Value a = load_torch(as_span(zip(v3("uint16", 6, {3}), u16)));
    CHECK(a.as_tensor().dtype() == DType::UInt16);
    CHECK(a.as_tensor().data<const std::uint16_t>()[2] == 0xFFFF);
    const Value b = load_torch(as_span(zip(v3("float8_e4m3fn", 2, {2}), std::string("\x38\x7e", 2))));
    CHECK(b.as_tensor().dtype() == DType::Float8_e4m3fn);
    CHECK(to_string(b.as_tensor()) == "tensor([  1., 448.], dtype=torch.float8_e4m3fn)");
    REQUIRE_THROWS_WITH(load_torch(as_span(zip(v3("uint32", 6, {2}), u16))),
                        Catch::Matchers::Contains("leaves its storage; expected at most 6 bytes, got 8"));
  }
  SECTION("conj and neg metadata are applied") {
    const std::string c64 = f32_bytes({1, 2});  // 1+2j
    const Value conj = load_torch(as_span(zip(v3("complex64", 8, {1}, "conj"), c64)));
    CHECK(conj.as_tensor().data<const std::complex<float>>()[0] == std::complex<float>(1, -2));
    const Value neg = load_torch(as_span(zip(v3("float32", 4, {1}, "neg"), f32_bytes({3}))));
    CHECK(neg.as_tensor().item<float>() == -3.0f);
  }
  SECTION("byteorder big is honoured by swapping each element") {
    const Value be =
        load_torch(as_span(zip(PickleWriter().proto().tensor("IntStorage", "0", 2, 0, {2}, {1}).stop().bytes(),
                               std::string("\x00\x00\x00\x01\x00\x00\x01\x00", 8), "big")));
    CHECK(be.as_tensor().data<const std::int32_t>()[0] == 1);
    CHECK(be.as_tensor().data<const std::int32_t>()[1] == 256);
    REQUIRE_THROWS_WITH(
        load_torch(as_span(zip(PickleWriter().proto().none().stop().bytes(), "", "middle"))),
        "tensorfile: archive/byteorder: byteorder is \"middle\"; expected \"little\" or \"big\" (at byte 0)");
  }
  SECTION("_rebuild_parameter_with_state and _rebuild_from_type_v2") {
    PickleWriter p;
    p.proto().global("torch._utils", "_rebuild_parameter_with_state").mark();
    p.tensor("FloatStorage", "0", 1, 0, {1}, {1}).boolean(true);
    p.global("collections", "OrderedDict").empty_tuple().reduce().empty_dict().tuple().reduce().stop();
    const Value param = load_torch(as_span(zip(p.bytes(), f32_bytes({5}))));
    CHECK(param.is_parameter());
    CHECK(param.as_tensor().requires_grad());
    PickleWriter q;
    q.proto().global("torch._tensor", "_rebuild_from_type_v2").mark();
    q.global("torch._utils", "_rebuild_tensor_v2").global("torch", "Tensor").mark();
    q.storage("FloatStorage", "0", 1).integer(0).int_tuple({1}).int_tuple({1}).boolean(false);
    q.global("collections", "OrderedDict").empty_tuple().reduce().tuple();
    q.empty_dict().tuple().reduce().stop();
    CHECK(load_torch(as_span(zip(q.bytes(), f32_bytes({5})))).as_tensor().item<float>() == 5.0f);
  }
}

TEST_CASE("memo entries: overwritten, memoized and read back in any order, with or without a finished memo scan",
          "[load][memo]") {
  // Indices 0-199 written (BINPUT, every seventh by MEMOIZE, one twice), a scattered few read back (across a
  // 64-index word), and one sparse index; a GET of an index at 2^24 or more ends the memo scan early, so that every
  // entry is kept instead of those read back.
  const auto pickle = [](bool scan_ends_early) {
    PickleWriter w;
    w.proto(4).empty_list().mark();
    for (int i = 0; i < 200; ++i) {
      w.integer(i);
      if (i % 7 == 3) {
        w.op(0x94);  // MEMOIZE: index i
      } else {
        w.put(static_cast<std::uint8_t>(i));
      }
      if (i == 150) w.integer(-150).put(150).op(Op::pop);  // written again: its GET sees -150
    }
    w.op(Op::appends);
    w.mark().get(0).get(63).get(64).get(150).get(199).get(3).op(Op::appends);
    const std::uint32_t sparse = scan_ends_early ? (1u << 24) + 5 : 250;
    const std::string index(reinterpret_cast<const char*>(&sparse), 4);
    w.string("sparse").op(0x72).raw(index).op(Op::pop);  // LONG_BINPUT
    w.op(0x6a).raw(index).op(Op::append);                // LONG_BINGET
    return w.stop().bytes();
  };
  for (const bool scan_ends_early : {false, true}) {
    CAPTURE(scan_ends_early);
    const Value v = load_torch(as_span(tensorfile_test::torch_file(pickle(scan_ends_early), "")));
    const List& items = v.as_list();
    REQUIRE(items.size() == 207);
    for (std::size_t i = 0; i < 200; ++i) CHECK(items[i].as_int() == static_cast<std::int64_t>(i));
    const std::vector<std::int64_t> read_back{0, 63, 64, -150, 199, 3};
    for (std::size_t i = 0; i < read_back.size(); ++i) CHECK(items[200 + i].as_int() == read_back[i]);
    CHECK(items[206].as_string() == "sparse");
  }
}

TEST_CASE("Resource limits hold with safe defaults", "[load][safety][limits]") {
  const std::string six = f32_bytes({0, 1, 2, 3, 4, 5});
  const auto run = [&](const std::string& pickle, LoadOptions options = {}) {
    return load_torch(as_span(tensorfile_test::torch_file(pickle, six)), options);
  };
  PickleWriter memo;
  memo.proto().none();
  for (int i = 0; i < 5; ++i) memo.put(static_cast<std::uint8_t>(i));
  memo.stop();
  CHECK_NOTHROW(run(memo.bytes(), {.limits = {.max_memo = 5}}));
  REQUIRE_THROWS_WITH(run(memo.bytes(), {.limits = {.max_memo = 4}}),
                      "tensorfile: archive/data.pkl: pickle memo exceeds 4 entries (at byte 11)");
  PickleWriter wide;
  wide.proto().empty_list().mark();
  for (int i = 0; i < 5; ++i) wide.integer(i);
  wide.op(Op::appends).stop();
  CHECK_NOTHROW(run(wide.bytes(), {.limits = {.max_container = 5}}));
  REQUIRE_THROWS_WITH(run(wide.bytes(), {.limits = {.max_container = 4}}),
                      "tensorfile: archive/data.pkl: container exceeds 4 items (at byte 29)");
  const std::string big = PickleWriter().proto().tensor("FloatStorage", "0", 6, 0, {6}, {1}).stop().bytes();
  REQUIRE_THROWS_WITH(run(big, {.limits = {.max_total_bytes = 16}}),
                      "tensorfile: archive/data.pkl: storages exceed 16 bytes (at byte 89)");
  REQUIRE_THROWS_WITH(run(PickleWriter()
                              .proto()
                              .op(Op::long1)
                              .raw(std::string(1, '\xc8'))
                              .raw(std::string(200, '\x01'))
                              .stop()
                              .bytes()),
                      "tensorfile: archive/data.pkl: integer of 200 bytes exceeds 128 (at byte 2)");
  const LoadOptions defaults;
  CHECK(defaults.limits.max_depth == 5000);
  CHECK(defaults.strict);
}

TEST_CASE("storage keys that are decimal numbers, numbers with a leading zero and far-off numbers stay distinct") {
  // Plain decimal keys take a fast path (vectors indexed by the number); "07" and a key far
  // beyond the storages seen so far go through the general lookup. All must find their own record.
  PickleWriter w;
  w.proto().mark();
  w.tensor("FloatStorage", "7", 1, 0, {1}, {1});
  w.tensor("FloatStorage", "07", 1, 0, {1}, {1});
  w.tensor("FloatStorage", "123456789", 1, 0, {1}, {1});
  w.tensor("FloatStorage", "7", 1, 0, {1}, {1});
  w.tuple().stop();
  const std::string file = tensorfile_test::torch_zip("archive", {{"data.pkl", w.bytes()},
                                                                  {"data/7", f32_bytes({7})},
                                                                  {"data/07", f32_bytes({70})},
                                                                  {"data/123456789", f32_bytes({9})},
                                                                  {"version", "3\n"}});
  const Value v = load_torch(as_span(file));
  CHECK(floats(v.at(0).as_tensor()) == std::vector<float>{7});
  CHECK(floats(v.at(1).as_tensor()) == std::vector<float>{70});
  CHECK(floats(v.at(2).as_tensor()) == std::vector<float>{9});
  CHECK(v.at(3).as_tensor().storage().shares_owner_with(v.at(0).as_tensor().storage()));
  CHECK_FALSE(v.at(1).as_tensor().storage().shares_owner_with(v.at(0).as_tensor().storage()));

  // A decimal key first seen beyond the fast path's reach ("64" before any storage) and seen again
  // once in reach is still one storage.
  PickleWriter again;
  again.proto().mark();
  again.tensor("FloatStorage", "64", 1, 0, {1}, {1});
  again.tensor("FloatStorage", "0", 1, 0, {1}, {1});
  again.tensor("FloatStorage", "64", 1, 0, {1}, {1});
  again.tuple().stop();
  const Value u = load_torch(as_span(tensorfile_test::torch_zip(
      "archive",
      {{"data.pkl", again.bytes()}, {"data/64", f32_bytes({64})}, {"data/0", f32_bytes({0})}, {"version", "3\n"}})));
  CHECK(u.at(2).as_tensor().storage().shares_owner_with(u.at(0).as_tensor().storage()));
  CHECK(floats(u.at(2).as_tensor()) == std::vector<float>{64});
}

namespace {
/// What a load gives: the loaded Value printed with the bytes of every storage, or the error's message.
std::string load_outcome(const std::filesystem::path& path, const LoadOptions& options = {}) {
  try {
    const Value value = load_torch(path, options);
    std::string text = to_string(value);
    for (const auto& [name, tensor] : named_tensors(value)) {
      const Storage& storage = tensor.storage();
      text += "\n" + name + ": ";
      if (storage.device().is_cpu() && storage.size_bytes() != 0) {
        text.append(reinterpret_cast<const char*>(storage.data()), storage.size_bytes());
      }
    }
    return text;
  } catch (const Error& error) {
    return std::string("error: ") + error.what();
  }
}
}  // namespace

TEST_CASE("heap loads (records by pread into an arena) give what mapped loads give", "[load][heap]") {
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    INFO(path.filename().string());
    for (const bool crc : {false, true}) {
      const std::string mapped = load_outcome(path, {.mmap = MapMode::copy_on_write, .verify_crc = crc});
      CHECK(load_outcome(path, {.verify_crc = crc}) == mapped);
    }
  }
  SECTION("small records share one arena that holds the records alone; the values are right") {
    const tensorfile_test::ScratchDir dir;
    Dict dict;
    for (int i = 0; i < 300; ++i) {
      Tensor t(heap_storage(8), DType::Float32, {2});
      t.data<float>()[0] = static_cast<float>(i);
      t.data<float>()[1] = static_cast<float>(-i);
      dict.set(Value("t" + std::to_string(i)), Value(t));
    }
    save_torch(Value(dict), dir / "many.pt");
    const Value loaded = load_torch(dir / "many.pt");
    CHECK(loaded == Value(dict));
    const Storage& first = loaded["t0"].as_tensor().storage();
    CHECK(first.shares_owner_with(loaded["t299"].as_tensor().storage()));
    CHECK(first.kind() == StorageKind::heap);
    // The arena holds 300 records of 8 bytes, each at a 64-byte boundary: not the file's headers and pickle.
    CHECK(first.backend<HeapBackend>()->size_bytes() == 300 * HeapBackend::alignment);
  }
}

TEST_CASE("a heap load of a file truncated meanwhile throws or loads, never dies of SIGBUS", "[load][heap][safety]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "shrinking.pt";
  Dict dict;
  for (int i = 0; i < 3000; ++i)
    dict.set(Value("tensor." + std::to_string(i)), Value(Tensor(heap_storage(64), DType::Float32, {16})));
  save_torch(Value(dict), path);
  const std::string original = tensorfile_test::file_bytes(path);
  // The loads run in a child, so that a fault ends the child, not this program. Meanwhile a thread
  // keeps cutting the file to a random length and writing it back whole.
  const int status = tensorfile_test::exit_status_in_child(
      [&] {
        std::atomic<bool> done{false};
        std::thread churn([&] {
          std::mt19937 random(20);
          const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
          while (!done) {
            if (::ftruncate(fd, static_cast<off_t>(random() % original.size())) != 0) ::_exit(3);
            std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
            if (::pwrite(fd, original.data(), original.size(), 0) != static_cast<ssize_t>(original.size())) ::_exit(4);
            std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
          }
          ::close(fd);
        });
        const auto start = std::chrono::steady_clock::now();
        for (int round = 0; round < 2000 && std::chrono::steady_clock::now() - start < std::chrono::seconds(2);
             ++round) {
          try {
            (void)load_torch(path);
          } catch (const Error&) {  // FormatError or IoError: what a shrinking file must give
          }
        }
        done = true;
        churn.join();
        return 0;
      },
      60);
  CHECK(status == 0);
}

TEST_CASE("load refuses a FIFO without waiting for a writer", "[load][safety]") {
  const tensorfile_test::ScratchDir dir;
  const auto fifo = dir / "pipe.pt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string refused = "tensorfile: " + fifo.string() + ": is not a regular file; expected a regular file";
  // In a child: before the fix, open() waited forever; the alarm ends the child instead.
  const auto refuses = [&](auto&& call) {
    return tensorfile_test::exit_status_in_child(
        [&] {
          try {
            call();
          } catch (const ArgumentError& error) {
            return std::string(error.what()) == refused ? 0 : 1;
          }
          return 2;
        },
        10);
  };
  CHECK(refuses([&] { (void)load_torch(fifo); }) == 0);
  CHECK(refuses([&] { (void)load_torch(fifo, {.mmap = MapMode::read_only}); }) == 0);
  CHECK(tensorfile_test::exit_status_in_child([&] { return detect_format(fifo) == FileFormat::unknown ? 0 : 1; }, 10) ==
        0);
  CHECK(tensorfile_test::exit_status_in_child(
            [&] {
              const VerifyReport report = verify(fifo);
              return report.errors == std::vector<std::string>{refused} ? 0 : 1;
            },
            10) == 0);
}
