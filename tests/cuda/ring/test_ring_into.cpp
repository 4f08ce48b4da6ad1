// SPDX-License-Identifier: MIT
// Tests of LoadOptions::into with device buffers (issue 17): a streamed load reads whole records straight into
// the caller's (fake) device memory, copies views and ties device to device, and refuses a mismatch before
// reading anything.
#include <tensorfile/cuda/detail/ring_load.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include <cstring>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "cuda/ring/fake_copy_engine.hpp"
#include "cuda/ring/value_map.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
using namespace tensorfile::detail;
using tensorfile_test::FakeCopyEngine;
using tensorfile_test::FakeDeviceBackend;

namespace {

const RingOptions small_ring{.ring_bytes = 48 * 1024, .slot_bytes = 16 * 1024, .threads = 2, .direct_io = false};

/// A fresh fake device buffer shaped like `t` (0xCD garbage until written).
Tensor device_buffer(const Tensor& t, Device device = Device::cuda(0)) {
  return {Storage(FakeDeviceBackend(t.nbytes(), device)), t.dtype(), t.sizes()};
}

/// The tensor at `path` of a loaded value, by the paths `into` takes.
Tensor at(const Value& v, const std::string& path) {
  std::optional<Tensor> found;
  auto find = [&](const std::string& p, const Tensor& t) {
    if (p == path && !found) found = t;
  };
  walk_tensors(v, "", find);
  REQUIRE(found.has_value());
  return *found;
}

/// Whether the fake device tensor `t` holds the values of the host tensor `expected`.
bool holds(const Tensor& t, const Tensor& expected) {
  return tensorfile_test::fake_device_copy(t, Device::cpu()).equal(expected);
}

/// Device bytes the fake engine has allocated so far.
std::uint64_t allocated() {
  const auto& tracker = FakeCopyEngine::default_tracker();
  const std::lock_guard lock(tracker->mutex);
  return tracker->device_bytes;
}

}  // namespace

TEST_CASE("into streams whole records straight into the caller's device buffers, nothing allocated for them",
          "[ring][into]") {
  const auto file = tensorfile_test::data_dir() / "torch" / "state_dict_linear_bn.pt";  // written by torch 1.13
  const Value plain = load_torch(file);
  std::vector<std::string> every;
  for (const auto& named : named_tensors(plain)) every.push_back(named.first);
  REQUIRE(every.size() >= 5);
  for (const bool single : {true, false}) {
    INFO("single allocation " << single);
    RingOptions ring = small_ring;
    ring.single_allocation = single;
    const std::uint64_t before = allocated();
    (void)ring_load_torch<FakeCopyEngine>(file, LoadOptions{.map_location = "cuda:0"}, ring);
    const std::uint64_t without_into = allocated() - before;
    REQUIRE(without_into > 0);

    for (const std::size_t count : {std::size_t{2}, every.size()}) {
      INFO(count << " paths into the caller's buffers");
      LoadOptions options{.map_location = "cuda:0"};
      std::uint64_t buffer_bytes = 0;
      for (std::size_t i = 0; i < count; ++i) {
        options.into.emplace(every[i], device_buffer(at(plain, every[i])));
        buffer_bytes += at(plain, every[i]).nbytes();
      }
      const std::uint64_t start = allocated();
      const Value loaded = ring_load_torch<FakeCopyEngine>(file, options, ring);
      const std::uint64_t with_into = allocated() - start;
      CHECK(tensorfile_test::to_host(loaded) == plain);
      for (const auto& [path, buffer] : options.into) {
        INFO(path);
        CHECK(holds(buffer, at(plain, path)));
        CHECK(at(loaded, path).storage().data() == buffer.storage().data());  // the result's tensor is the buffer
        CHECK(at(loaded, path).device() == Device::cuda(0));
      }
      if (count == every.size()) {
        CHECK(with_into == 0);  // every record read into a buffer: no device memory of the load's own
      } else if (!single) {
        CHECK(with_into == without_into - buffer_bytes);  // one allocation per record: exactly theirs saved
      } else {
        CHECK(with_into < without_into);
      }
    }
  }
}

TEST_CASE("into copies views and ties to device buffers, and legacy files and plain loads fill them too",
          "[ring][into]") {
  const auto views = tensorfile_test::data_dir() / "torch" / "shared_views.pt";  // base and again share a storage
  const Value plain = load_torch(views);
  const std::vector<std::string> paths = {"base", "again", "row1", "t"};
  {
    LoadOptions options{.map_location = "cuda:1"};
    for (const std::string& path : paths) options.into.emplace(path, device_buffer(at(plain, path), Device::cuda(1)));
    const Value loaded = ring_load_torch<FakeCopyEngine>(views, options, small_ring);
    CHECK(tensorfile_test::to_host(loaded) == plain);
    for (const std::string& path : paths) {
      INFO(path);
      CHECK(holds(options.into.at(path), at(plain, path)));
    }
    // The shared record is read into the first path's buffer (maps are ordered: "again"), base with it; "base"'s
    // own buffer is filled by a device copy, and views keep the storage they view.
    CHECK(at(loaded, "again").storage().data() == options.into.at("again").storage().data());
    CHECK(at(loaded, "base").storage().data() == options.into.at("again").storage().data());
    CHECK(at(loaded, "row1").storage().data() != options.into.at("row1").storage().data());
  }

  const auto legacy = tensorfile_test::data_dir() / "torch" / "legacy_format.pt";  // no zip records: not streamed
  const Value old = load_torch(legacy);
  LoadOptions legacy_into{.map_location = "cuda:0"};
  legacy_into.into.emplace("a", device_buffer(at(old, "a")));
  legacy_into.into.emplace("b", device_buffer(at(old, "b")));  // a view at offset 1
  CHECK(tensorfile_test::to_host(ring_load_torch<FakeCopyEngine>(legacy, legacy_into, small_ring)) == old);
  CHECK(holds(legacy_into.into.at("a"), at(old, "a")));
  CHECK(holds(legacy_into.into.at("b"), at(old, "b")));

  // load_torch() itself, with map_location to the (fake) device: Tensor::to, then a write into each buffer.
  LoadOptions plain_load{.map_location = "cuda:0"};
  for (const std::string& path : paths) plain_load.into.emplace(path, device_buffer(at(plain, path)));
  CHECK(tensorfile_test::to_host(load_torch(views, plain_load)) == plain);
  for (const std::string& path : paths) {
    INFO(path);
    CHECK(holds(plain_load.into.at(path), at(plain, path)));
  }
}

TEST_CASE("into refuses a buffer on another device, or of another dtype or shape, before reading", "[ring][into]") {
  const auto file = tensorfile_test::data_dir() / "torch" / "state_dict_linear_bn.pt";
  const Tensor weight = at(load_torch(file), "0.weight");  // float32 (2, 3)
  const Tensor host_buffer(heap_storage(weight.nbytes()), DType::Float32, {2, 3});
  const auto refused = [&](const std::string& path, const Tensor& buffer, const std::string& why,
                           const std::string& target = "cuda:0") {
    LoadOptions options{.map_location = target};
    options.into.emplace(path, buffer);
    INFO(why);
    const std::uint64_t start = allocated();
    CHECK_THROWS_WITH(ring_load_torch<FakeCopyEngine>(file, options, small_ring),
                      Catch::Matchers::Contains("into[\"" + path + "\"]: " + why) &&
                          Catch::Matchers::Contains("state_dict_linear_bn.pt"));
    CHECK(allocated() == start);                                // refused before anything was streamed
    CHECK_THROWS_AS(load_torch(file, options), ArgumentError);  // load_torch() refuses it too
  };
  refused("0.missing", device_buffer(weight), "the file holds no tensor at this path");
  refused("0.weight", host_buffer, "the file's tensor loads to cuda:0, the buffer is on cpu");
  refused("0.weight", device_buffer(weight, Device::cuda(1)),
          "the file's tensor loads to cuda:0, the buffer is on cuda:1");
  refused("0.weight", device_buffer(weight), "the file's tensor loads to cuda:1, the buffer is on cuda:0", "cuda:1");
  refused("0.weight", device_buffer(Tensor(heap_storage(48), DType::Float64, {2, 3})),
          "the file's tensor is float32, the buffer float64");
  refused("0.weight", device_buffer(Tensor(heap_storage(24), DType::Float32, {3, 2})),
          "the file's tensor has shape (2, 3), the buffer (3, 2)");
  refused("0.weight", device_buffer(Tensor(heap_storage(24), DType::Float32, {3, 2})).transpose(0, 1),
          "the buffer is not contiguous");

  // A device buffer in a load to the host: the tensor is not where the buffer is.
  LoadOptions to_host;
  to_host.into.emplace("0.weight", device_buffer(weight));
  CHECK_THROWS_WITH(load_torch(file, to_host),
                    Catch::Matchers::Contains("the file's tensor loads to cpu, the buffer is on cuda:0"));
}
