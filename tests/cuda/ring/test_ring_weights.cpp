// SPDX-License-Identifier: MIT
// Tests of the streamed safetensors and state-dict loads of <tensorfile/cuda/detail/ring_load.hpp>: safetensors
// files, sharded safetensors and torch checkpoints streamed through the ring to fake CUDA devices, compared with
// the CPU loads, as cuda::load_safetensors and cuda::load_state_dict compose them.
#include <fcntl.h>
#include <unistd.h>

#include <tensorfile/cuda/detail/ring_load.hpp>
#include <tensorfile/cuda/detail/ring_reader.hpp>
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/formats/safetensors/save_sharded.hpp>
#include <tensorfile/state_dict.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda/ring/fake_copy_engine.hpp"
#include "cuda/ring/value_map.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
using namespace tensorfile::detail;
using tensorfile_test::FakeCopyEngine;

namespace {

std::vector<std::filesystem::path> safetensors_samples() {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(tensorfile_test::data_dir() / "safetensors")) {
    if (entry.path().extension() == ".safetensors") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The progress calls of one load: (done, total) pairs.
struct ProgressCalls {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  RingProgress callback() {
    return [this](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  }
};

/// cuda::load_state_dict's composition with the fake engine: every torch and safetensors file (or shard)
/// streamed through the ring, one shard at a time.
Value ring_load_state_dict(const std::filesystem::path& path, const LoadOptions& options, const RingOptions& ring,
                           const RingProgress& progress = {}) {
  LoadOptions one_at_a_time = options;
  one_at_a_time.threads = 1;
  return load_state_dict_with(
      path, one_at_a_time, [&](const FileHandle& file, const std::filesystem::path& name, FileFormat format) {
        return stream_load_weights(file, name, format, options, ring, progress, FakeCopyEngine::resolve,
                                   ring_streamer<FakeCopyEngine>(ring));
      });
}

}  // namespace

TEST_CASE("ring_load_safetensors streams every reference sample to a (fake) device and matches the CPU load",
          "[ring][safetensors]") {
  const RingOptions small{.ring_bytes = 96, .slot_bytes = 32, .threads = 3, .direct_io = false};
  const RingOptions separate{.ring_bytes = 1 << 20, .slot_bytes = 1 << 16, .threads = 2, .single_allocation = false};
  const auto samples = safetensors_samples();
  REQUIRE(samples.size() >= 10);
  for (const auto& path : samples) {
    for (const RingOptions* ring : {&small, &separate}) {
      INFO(path.filename().string() << ", single allocation " << ring->single_allocation);
      const Value on_cpu = load_safetensors(path);
      ProgressCalls progress;
      const Value on_device =
          ring_load_safetensors<FakeCopyEngine>(path, {.map_location = "cuda:1"}, *ring, progress.callback());
      const tensorfile_test::Placement placed = tensorfile_test::placement_of(on_device);
      CHECK((placed.devices.empty() || placed.devices == std::set<std::string>{"cuda:1"}));  // a sample may hold none
      if (ring->single_allocation) CHECK(placed.owners.size() <= 1);
      CHECK(tensorfile_test::to_host(on_device) == on_cpu);
      const Dict* cpu_metadata = safetensors_metadata(on_cpu);
      const Dict* device_metadata = safetensors_metadata(on_device);
      REQUIRE((cpu_metadata == nullptr) == (device_metadata == nullptr));
      if (cpu_metadata != nullptr) CHECK(Value(*device_metadata) == Value(*cpu_metadata));
      REQUIRE_FALSE(progress.calls.empty());
      CHECK(progress.calls.back().first == progress.calls.back().second);
      CHECK(progress.calls.back().second ==
            placed.bytes);  // safetensors tensors tile the data: no gap bytes ride along
    }
  }
}

TEST_CASE("ring_load_safetensors follows map_location's forms and refuses what load_safetensors refuses",
          "[ring][safetensors]") {
  const auto path = tensorfile_test::data_dir() / "safetensors" / "overall.safetensors";
  const RingOptions ring{.ring_bytes = 1 << 20};
  const Value on_cpu = load_safetensors(path);
  SECTION("a map of the saved tag \"cpu\" to a device") {
    const Value value = ring_load_safetensors<FakeCopyEngine>(
        path, {.map_location = MapLocation(std::map<std::string, std::string>{{"cpu", "cuda:1"}})}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device() == Device::cuda(1));
    CHECK(tensorfile_test::to_host(value) == on_cpu);
  }
  SECTION("cpu and meta targets load as load_safetensors does, without the ring") {
    ProgressCalls progress;
    const Value value = ring_load_safetensors<FakeCopyEngine>(path, {}, ring, progress.callback());
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device().is_cpu());
    CHECK(value == on_cpu);
    REQUIRE(progress.calls.size() == 1);
    CHECK(progress.calls.front() == std::pair<std::uint64_t, std::uint64_t>{0, 0});
    const Value meta = ring_load_safetensors<FakeCopyEngine>(path, {.map_location = "meta"}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(meta)) CHECK(t.device().is_meta());
  }
  SECTION("into buffers are refused, on the device and on the host, as load_safetensors refuses them") {
    const LoadOptions into{.map_location = "cuda:1", .into = {{"f", Tensor::zeros({6}, DType::Float32)}}};
    CHECK_THROWS_WITH(ring_load_safetensors<FakeCopyEngine>(path, into, ring),
                      Catch::Contains("cuda::load_safetensors() does not fill LoadOptions::into buffers"));
    LoadOptions host = into;
    host.map_location = "cpu";
    CHECK_THROWS_AS(ring_load_safetensors<FakeCopyEngine>(path, host, ring), ArgumentError);
  }
  SECTION("a missing device names the file") {
    CHECK_THROWS_AS(ring_load_safetensors<FakeCopyEngine>(path, {.map_location = "cuda:7"}, ring), DeviceError);
    CHECK_THROWS_WITH(ring_load_safetensors<FakeCopyEngine>(path, {.map_location = "cuda:7"}, ring),
                      Catch::Contains(path.string()));
  }
  SECTION("a truncated file is refused before anything reaches the device") {
    tensorfile_test::ScratchDir scratch;
    std::filesystem::copy_file(path, scratch / "cut.safetensors");
    std::filesystem::resize_file(scratch / "cut.safetensors", std::filesystem::file_size(path) - 3);
    CHECK_THROWS_AS(load_safetensors(scratch / "cut.safetensors"), FormatError);
    CHECK_THROWS_AS(
        ring_load_safetensors<FakeCopyEngine>(scratch / "cut.safetensors", {.map_location = "cuda:0"}, ring),
        FormatError);
  }
}

TEST_CASE("ring_load_safetensors with select streams only the kept tensors, the rest meta or dropped",
          "[ring][safetensors][select]") {
  const auto path = tensorfile_test::data_dir() / "safetensors" / "overall.safetensors";
  const RingOptions ring{.ring_bytes = 96, .slot_bytes = 32, .threads = 2, .direct_io = false};
  const Value on_cpu = load_safetensors(path);
  const std::string kept = on_cpu.as_dict().begin()->first.as_string();
  for (const bool drops : {false, true}) {
    INFO("drops " << drops);
    ProgressCalls progress;
    const Value value = ring_load_safetensors<FakeCopyEngine>(
        path, {.map_location = "cuda:1", .select = select_paths({kept}), .select_drops = drops}, ring,
        progress.callback());
    CHECK(value.as_dict().size() == (drops ? 1 : on_cpu.as_dict().size()));
    std::uint64_t kept_bytes = 0;
    for (const auto& [key, item] : value.as_dict()) {
      const Tensor& t = item.as_tensor();
      const Tensor& cpu = on_cpu.as_dict().find(key)->as_tensor();
      CHECK(t.dtype() == cpu.dtype());
      CHECK(t.sizes() == cpu.sizes());
      if (key.as_string() == kept) {
        CHECK(t.device() == Device::cuda(1));
        CHECK(t.to(Device::cpu()).equal(cpu));
        kept_bytes = t.storage().size_bytes();
      } else {
        CHECK(t.device().is_meta());
      }
    }
    REQUIRE_FALSE(progress.calls.empty());
    CHECK(progress.calls.back().second == kept_bytes);  // only the kept tensor went through the ring
    // nothing kept: an empty group goes through the ring, every tensor meta (or none at all)
    const Value none = ring_load_safetensors<FakeCopyEngine>(
        path, {.map_location = "cuda:1", .select = [](std::string_view) { return false; }, .select_drops = drops},
        ring);
    CHECK(none.as_dict().size() == (drops ? 0 : on_cpu.as_dict().size()));
    for (const auto& [key, item] : none.as_dict()) CHECK(item.as_tensor().device().is_meta());
  }
  // a sharded checkpoint: the shards holding nothing kept are never opened
  tensorfile_test::ScratchDir dir;
  NamedTensors named;
  for (const auto& [key, item] : on_cpu.as_dict()) named.emplace_back(key.as_string(), item.as_tensor());
  const SafetensorsShards shards =
      save_safetensors_sharded(named, dir.path(), {.sync = false, .sharded = {.max_shard_size = 1}});
  REQUIRE(shards.files.size() == named.size());
  for (std::size_t i = 1; i < shards.files.size(); ++i) std::filesystem::remove(shards.files[i]);
  const Value sharded = ring_load_state_dict(
      dir.path(), {.map_location = "cuda:1", .select = select_paths({named.front().first}), .select_drops = true},
      ring);
  REQUIRE(sharded.as_dict().size() == 1);
  CHECK(sharded.as_dict().begin()->second.as_tensor().to(Device::cpu()).equal(named.front().second));
}

TEST_CASE("a streamed state-dict load reads sharded safetensors and torch checkpoints to a (fake) device",
          "[ring][state_dict]") {
  const RingOptions ring{.ring_bytes = 4096, .slot_bytes = 1024, .threads = 2};
  SECTION("safetensors shards written by save_safetensors_sharded") {
    tensorfile_test::ScratchDir scratch;
    Dict tensors;
    tensors.ordered = true;
    for (int i = 0; i < 12; ++i) {
      std::vector<float> values(static_cast<std::size_t>(16 * (3 + i)));
      for (std::size_t k = 0; k < values.size(); ++k)
        values[k] = static_cast<float>(k * 7 + static_cast<std::size_t>(i));
      const Tensor t = Tensor::from_values<float>(values, {16, 3 + i});
      tensors.set("layer" + std::to_string(i) + ".weight", i % 2 == 0 ? t : t.to(DType::Int16));
    }
    const SafetensorsShards shards =
        save_safetensors_sharded(Value(tensors), scratch.path(), {.sharded = {.max_shard_size = 800}});
    REQUIRE(shards.files.size() >= 3);
    const Value on_cpu = load_state_dict(scratch.path());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    const Value on_device =
        ring_load_state_dict(shards.index, {.map_location = "cuda:0"}, ring,
                             [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
    std::set<const void*> owners;
    for (const Tensor& t : tensorfile_test::tensors_of(on_device)) {
      CHECK(t.device() == Device::cuda(0));
      owners.insert(t.storage().owner());
    }
    CHECK(owners.size() == shards.files.size());  // one device allocation per shard
    CHECK(tensorfile_test::to_host(on_device) == on_cpu);
    const Value host = tensorfile_test::to_host(on_device);
    REQUIRE(host.as_dict().size() == tensors.size());
    for (const auto& [name, tensor] : tensors) {  // the index orders names its own way: compare by name
      const Value* loaded = host.as_dict().find(name.as_string());
      REQUIRE(loaded != nullptr);
      CHECK(*loaded == tensor);
    }
    std::size_t finished = 0;  // each shard's progress ends at its own total
    for (const auto& [done, total] : calls) finished += done == total ? 1 : 0;
    CHECK(finished >= shards.files.size());
  }
  SECTION("torch .bin shards with an index, and the same state dict in one file") {
    const auto index = tensorfile_test::data_dir() / "sharded" / "torch_bin" / "pytorch_model.bin.index.json";
    const auto full = tensorfile_test::data_dir() / "sharded" / "torch_bin_full.pt";
    const Value on_cpu = load_state_dict(index);
    const Value on_device = ring_load_state_dict(index, {.map_location = "cuda:1"}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(on_device)) CHECK(t.device() == Device::cuda(1));
    CHECK(tensorfile_test::to_host(on_device) == on_cpu);
    const Value single = ring_load_state_dict(full, {.map_location = "cuda:1"}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(single)) CHECK(t.device() == Device::cuda(1));
    CHECK(tensorfile_test::to_host(single) == load_state_dict(full));
  }
  SECTION("the shard rules hold for streamed loads: a listed name missing from its shard") {
    tensorfile_test::ScratchDir scratch;
    for (const char* name : {"B.safetensors", "H.safetensors", "f.safetensors"}) {
      std::filesystem::copy_file(tensorfile_test::data_dir() / "safetensors" / name, scratch / name);
    }
    tensorfile_test::write_text(scratch / "model.safetensors.index.json",
                                R"({"weight_map": {"B": "B.safetensors", "H": "H.safetensors", "f": "f.safetensors",
                                   "absent": "f.safetensors"}})");
    CHECK_THROWS_AS(ring_load_state_dict(scratch.path(), {.map_location = "cuda:0"}, ring), FormatError);
    CHECK_THROWS_WITH(ring_load_state_dict(scratch.path(), {.map_location = "cuda:0"}, ring),
                      Catch::Contains("\"absent\" is listed in the index but missing from its shard"));
  }
}

TEST_CASE("PosixRangeReader reads an open file through its descriptor, buffered or direct", "[ring][reader]") {
  tensorfile_test::ScratchDir scratch;
  std::vector<std::byte> bytes(3 * direct_io_alignment + 100);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 13 + 5);
  {
    std::ofstream out(scratch / "data.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const FileHandle file = FileHandle::open(scratch / "data.bin", OpenMode::read);
  std::filesystem::remove(scratch / "data.bin");  // the reader must not open the path again
  // Whether this filesystem takes O_DIRECT at all (tmpfs may not): then the reader must use it, which it can
  // only do by reopening the open file, the path being gone.
  tensorfile_test::write_text(scratch / "probe.bin", "x");
  const int probe = ::open((scratch / "probe.bin").c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  const bool filesystem_takes_direct = probe >= 0;
  if (probe >= 0) ::close(probe);
  for (const bool direct : {false, true}) {
    INFO("direct " << direct);
    const PosixRangeReader reader(file, direct);
    if (direct && filesystem_takes_direct) CHECK(reader.alignment() == direct_io_alignment);
    std::vector<std::byte> out(2 * direct_io_alignment);
    auto* aligned = static_cast<std::byte*>(std::aligned_alloc(direct_io_alignment, out.size()));
    REQUIRE(aligned != nullptr);
    const std::size_t got = reader.read(direct_io_alignment, {aligned, out.size()});
    CHECK(got == out.size());
    CHECK(std::equal(aligned, aligned + got, bytes.begin() + static_cast<std::ptrdiff_t>(direct_io_alignment)));
    CHECK(reader.read(3 * direct_io_alignment, {aligned, out.size()}) == 100);  // short at the end
    std::free(aligned);
  }
}
