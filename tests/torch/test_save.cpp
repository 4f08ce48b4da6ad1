// SPDX-License-Identifier: MIT
// Tests of <tensorfile/formats/torch/save.hpp>: round trips, torch's record layout, crash-safe replace.
#include <tensorfile/detail/zip/reader.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <fstream>
#include <sstream>

#include "tensorfile_catch.hpp"

using namespace tensorfile;

using tensorfile_test::span_of;

namespace {
Value sample_value() {
  const Tensor base = Tensor::from_values<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Dict d;
  d.set("base", base);
  d.set("row", base.select(0, 1));
  d.set("t", base.transpose(0, 1));
  d.set("half", Tensor::from_values<Half>({Half(1.5f), Half(-2.0f)}));
  d.set("u16", Tensor::from_values<std::uint16_t>({1, 65535}));  // a torch 2.x dtype: _rebuild_tensor_v3
  d.set("meta", Tensor::zeros({4, 5}, DType::Float64, Device::meta()));
  d.set("param", Value::parameter(Tensor::from_values<double>({1, 2}).set_requires_grad(true)));
  d.set(3, List{Value(), true, -7, std::int64_t{1} << 50, 2.5, "text", Value::tuple({1, "x"})});
  d.set("bytes", Bytes{{std::byte{0}, std::byte{200}}});
  d.set("big", BigInt{{0, 0, 0, 0, 0, 0, 0, 0, 1}});
  d.set("set", Set{{1, 2}, true});
  d.set("complex", std::complex<double>(1, -1));
  d.set("device", Device::parse("cuda:2"));
  d.set("dtype", DType::BFloat16);
  d.set("storage", StorageValue{base.reshape({6}), "cpu"});
  return Value(std::move(d));
}
}  // namespace

TEST_CASE("load_torch(save_torch(x)) == x for Values built in C++", "[save]") {
  const Value v = sample_value();
  SECTION("bytes") { CHECK(load_torch(span_of(save_torch_to_bytes(v))) == v); }
  SECTION("stream") {
    std::ostringstream out;
    save_torch(v, out);
    std::istringstream in(out.str());
    CHECK(load_torch(in) == v);
  }
  SECTION("path, and views still share one storage") {
    const tensorfile_test::ScratchDir dir;
    save_torch(v, dir / "model.pt");
    const Value back = load_torch(dir / "model.pt");
    CHECK(back == v);
    CHECK(back["row"].as_tensor().storage().shares_owner_with(back["base"].as_tensor().storage()));
    CHECK(back["row"].as_tensor().storage_offset() == 3);
    CHECK(back["storage"].as_storage().tensor.storage().shares_owner_with(back["t"].as_tensor().storage()));
  }
  SECTION("a tensor reached twice is pickled once") {
    const Value t(Tensor::from_values<std::int32_t>({1}));
    const Value pair(List{t, t});
    const Value back = load_torch(span_of(save_torch_to_bytes(pair)));
    CHECK(back[0].identity() == back[1].identity());
  }
}

TEST_CASE("save lays records out as torch does", "[save]") {
  const auto bytes = save_torch_to_bytes(sample_value());
  const auto zip = detail::ZipReader::open(bytes, "saved");
  CHECK(zip.prefix() == "archive");
  std::vector<std::string> names;
  for (const auto& entry : zip.entries()) {
    names.emplace_back(entry.name);
    CHECK(entry.method == 0);
    CHECK(entry.data_offset % 64 == 0);
    CHECK_NOTHROW(zip.verify_crc(entry));
  }
  CHECK(names == std::vector<std::string>{"archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                                          "archive/byteorder", "archive/data/0", "archive/data/1", "archive/data/2",
                                          "archive/data/3", "archive/version", "archive/.data/serialization_id"});
  CHECK(zip.stored_bytes(*zip.find("version")).size() == 2);
  SECTION("a larger alignment for direct I/O") {
    const auto aligned = save_torch_to_bytes(sample_value(), {.torch = {.alignment = 4096}});
    const auto reader = detail::ZipReader::open(aligned, "saved");
    for (const auto& entry : reader.entries()) CHECK(entry.data_offset % 4096 == 0);
    REQUIRE_THROWS_WITH(save_torch_to_bytes(Value(1), {.torch = {.alignment = 48}}),
                        "tensorfile: alignment must be a power of two up to 32768; got 48");
  }
  SECTION("the prefix is the file stem") {
    const tensorfile_test::ScratchDir dir;
    save_torch(Value(1), dir / "weights.v2.pth", {.sync = false});
    std::ifstream in(dir / "weights.v2.pth", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto archive = detail::ZipReader::open(std::as_bytes(std::span(text.data(), text.size())), "x");
    CHECK(archive.prefix() == "weights.v2");
  }
}

TEST_CASE("make_state_dict keeps _metadata", "[save]") {
  Dict versions;
  versions.ordered = true;
  versions.set("", Value(Dict{{"version", 1}}));
  const Value sd = make_state_dict({{"w", Tensor::from_values<float>({1, 2})}}, Value(std::move(versions)));
  const Value back = load_torch(span_of(save_torch_to_bytes(sd)));
  CHECK(back == sd);
  REQUIRE(back.as_dict().metadata() != nullptr);
  CHECK((*back.as_dict().metadata())[""]["version"].as_int() == 1);
}

TEST_CASE("A failed save leaves the old file and no temporary behind", "[save][safety]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "model.pt";
  save_torch(Value(Dict{{"a", 1}}), path);
  const auto before = std::filesystem::file_size(path);
  const Tensor bytes = Tensor::from_values<std::uint8_t>({1, 2, 3, 4});
  const Tensor as_int = Tensor(bytes.storage(), DType::Int32, {1});  // one storage seen as two dtypes
  REQUIRE_THROWS_WITH(save_torch(Value(List{bytes, as_int}), path),
                      "tensorfile: cannot save tensors that view one storage as uint8 and as int32");
  CHECK(std::filesystem::file_size(path) == before);
  CHECK(load_torch(path) == Value(Dict{{"a", 1}}));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
  REQUIRE_THROWS_WITH(save_torch(Value(1), dir / "missing" / "x.pt"),
                      Catch::Matchers::Contains("cannot create a temporary file beside it: No such file or directory"));
}
