// SPDX-License-Identifier: MIT
// Tests of LoadOptions::into (issue 17): named tensors loaded into buffers the caller owns, read straight into
// them where the file's tensor is a whole record, copied otherwise, and refused on any mismatch.
#include <tensorfile/backends/borrowed.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::sample;

namespace {

/// Caller-owned memory for tensors shaped like the ones a test loads; each buffer starts as 0xEE bytes, so a
/// buffer the load did not fill shows.
class Buffers {
 public:
  Tensor like(const Tensor& t) { return like(t.dtype(), t.sizes()); }
  Tensor like(DType dtype, const Shape& sizes) {
    std::size_t bytes = element_size(dtype);
    for (const std::int64_t size : sizes) bytes *= static_cast<std::size_t>(size);
    std::vector<std::byte>& memory = memory_.emplace_back(bytes, std::byte{0xEE});
    return Tensor(Storage(BorrowedBackend(std::span<std::byte>(memory))), dtype, sizes);
  }

 private:
  std::list<std::vector<std::byte>> memory_;  // a list: buffers never move
};

/// The tensor at `path` of a loaded value ("a/b" for nested dicts), by the paths `into` takes.
Tensor at(const Value& v, const std::string& path) {
  std::optional<Tensor> found;
  auto find = [&](const std::string& p, const Tensor& t) {
    if (p == path && !found) found = t;
  };
  detail::walk_tensors(v, "", find);
  REQUIRE(found.has_value());
  return *found;
}

}  // namespace

TEST_CASE("into fills the caller's buffers with a torch state dict's tensors and the result holds them",
          "[load][into]") {
  const auto file = sample("torch", "state_dict_linear_bn.pt");  // written by torch 1.13
  const Value plain = load_torch(file);
  const std::vector<std::string> paths = {"0.weight", "1.running_var", "1.num_batches_tracked"};
  {
    Buffers buffers;
    LoadOptions options;
    for (const std::string& path : paths) options.into.emplace(path, buffers.like(at(plain, path)));
    const Value loaded = load_torch(file, options);
    CHECK(loaded == plain);
    for (const std::string& path : paths) {
      INFO(path);
      const Tensor& buffer = options.into.at(path);
      CHECK(buffer.equal(at(plain, path)));
      CHECK(at(loaded, path).raw_data() == buffer.raw_data());  // the result's tensor is the caller's memory
    }
  }
}

TEST_CASE("into a large file's records reads them into the buffers, with select and several threads", "[load][into]") {
  const tensorfile_test::ScratchDir dir;
  Dict dict;
  for (int n = 0; n < 6; ++n) {
    const std::int64_t numel = n % 2 == 0 ? 70000 : 9;  // records deferred into the arena, and small ones
    Tensor t(heap_storage(static_cast<std::size_t>(numel) * 4), DType::Float32, {numel});
    for (std::int64_t i = 0; i < numel; ++i) t.data<float>()[i] = static_cast<float>(n * 1000003 + i);
    dict.set(Value("w" + std::to_string(n)), Value(t));
  }
  const Value expected(dict);
  save_torch(expected, dir / "big.pt");
  for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
    Buffers buffers;
    LoadOptions options{.threads = threads};
    options.into.emplace("w2", buffers.like(expected["w2"].as_tensor()));
    options.into.emplace("w3", buffers.like(expected["w3"].as_tensor()));
    const Value all = load_torch(dir / "big.pt", options);
    CHECK(all == expected);
    CHECK(options.into.at("w2").equal(expected["w2"].as_tensor()));
    CHECK(options.into.at("w3").equal(expected["w3"].as_tensor()));

    // select keeps none of them; the paths into names are read all the same, the others are meta.
    Buffers more;
    LoadOptions picked{.select = select_paths({"w4"}), .threads = threads};
    picked.into.emplace("w2", more.like(expected["w2"].as_tensor()));
    const Value some = load_torch(dir / "big.pt", picked);
    CHECK(picked.into.at("w2").equal(expected["w2"].as_tensor()));
    CHECK(some["w2"].as_tensor().raw_data() == picked.into.at("w2").raw_data());
    CHECK(some["w4"].as_tensor().equal(expected["w4"].as_tensor()));
    CHECK(some["w0"].as_tensor().device().is_meta());
  }
}

TEST_CASE("into copies views and tied tensors, and works for mapped, legacy and in-memory loads", "[load][into]") {
  const auto views = sample("torch", "shared_views.pt");  // base and again share a storage; row1, tail, t are views
  const Value plain = load_torch(views);
  {
    Buffers buffers;
    LoadOptions options;
    for (const char* path : {"base", "again", "row1", "t"}) options.into.emplace(path, buffers.like(at(plain, path)));
    const Value loaded = load_torch(views, options);
    CHECK(loaded == plain);
    for (const char* path : {"base", "again", "row1", "t"}) {
      INFO(path);
      CHECK(options.into.at(path).equal(at(plain, path)));
    }
    // The shared storage goes to the first path's buffer (maps are ordered: "again"), the base tensor with it;
    // views keep a storage of their own.
    CHECK(at(loaded, "again").raw_data() == options.into.at("again").raw_data());
    CHECK(at(loaded, "base").raw_data() == options.into.at("again").raw_data());
    CHECK(at(loaded, "row1").raw_data() != options.into.at("row1").raw_data());
  }

  Buffers buffers;
  LoadOptions mapped{.mmap = MapMode::copy_on_write};
  mapped.into.emplace("base", buffers.like(at(plain, "base")));
  const Value from_mapping = load_torch(views, mapped);
  CHECK(mapped.into.at("base").equal(at(plain, "base")));
  CHECK(at(from_mapping, "base").raw_data() == mapped.into.at("base").raw_data());

  const auto legacy = sample("torch", "legacy_format.pt");
  const Value old = load_torch(legacy);
  LoadOptions legacy_into;
  legacy_into.into.emplace("a", buffers.like(at(old, "a")));
  legacy_into.into.emplace("b", buffers.like(at(old, "b")));  // a view at offset 1
  CHECK(load_torch(legacy, legacy_into) == old);
  CHECK(legacy_into.into.at("a").equal(at(old, "a")));
  CHECK(legacy_into.into.at("b").equal(at(old, "b")));

  const std::string bytes = tensorfile_test::file_bytes(views);
  LoadOptions in_memory;
  in_memory.into.emplace("t", buffers.like(at(plain, "t")));
  CHECK(load_torch(tensorfile_test::byte_span(bytes), in_memory) == plain);
  CHECK(in_memory.into.at("t").equal(at(plain, "t")));
}

TEST_CASE("into refuses a path the file lacks, a mismatch, and buffers it cannot fill", "[load][into]") {
  const auto file = sample("torch", "state_dict_linear_bn.pt");
  const Tensor weight = at(load_torch(file), "0.weight");  // float32 (2, 3)
  const auto refused = [&](const std::string& path, const Tensor& buffer, const std::string& why,
                           LoadOptions options = {}) {
    options.into.emplace(path, buffer);
    INFO(why);
    CHECK_THROWS_AS(load_torch(file, options), ArgumentError);
    CHECK_THROWS_WITH(load_torch(file, options), Catch::Matchers::Contains("into[\"" + path + "\"]: " + why) &&
                                                     Catch::Matchers::Contains("state_dict_linear_bn.pt"));
  };
  Buffers buffers;
  refused("0.missing", buffers.like(weight), "the file holds no tensor at this path");
  refused("0.weight", buffers.like(DType::Float64, {2, 3}), "the file's tensor is float32, the buffer float64");
  refused("0.weight", buffers.like(DType::Float32, {3, 2}), "the file's tensor has shape (2, 3), the buffer (3, 2)");
  refused("0.weight", buffers.like(DType::Float32, {3, 2}).transpose(0, 1), "the buffer is not contiguous");
  refused("0.weight", Tensor(), "expected a tensor over the caller's memory, got an undefined tensor");
  refused("0.weight", Tensor::zeros({2, 3}, DType::Float32, Device::meta()),
          "the file's tensor loads to cpu, the buffer is on meta");
  const std::vector<std::byte> constant(24);
  refused("0.weight", Tensor(Storage(BorrowedBackend(std::span<const std::byte>(constant))), DType::Float32, {2, 3}),
          "the buffer is read-only");
  refused("0.weight", buffers.like(weight), "this load places the tensor on meta, where it has no values",
          {.map_location = Device::meta()});
}
