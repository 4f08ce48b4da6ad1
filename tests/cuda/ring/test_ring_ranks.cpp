// SPDX-License-Identifier: MIT
// Tests of <tensorfile/cuda/detail/ring_ranks.hpp>: every rank of a tensor-parallel group loaded at once, each rank's
// part streamed through the ring to its own (fake) CUDA device, as cuda::load_ranks composes it; the parts compared
// with those torch itself cut (tests/data/ranks, tests/interop/make_rank_fixtures.py).
#include <tensorfile/checkpoint.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/cuda/detail/ring_ranks.hpp>
#include <tensorfile/cuda/detail/ring_reader.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/gguf/save.hpp>
#include <tensorfile/formats/safetensors/save.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuda/ring/fake_copy_engine.hpp"
#include "cuda/ring/value_map.hpp"
#include "tensorfile_catch.hpp"

namespace ring_ranks_test {

using namespace tensorfile;
using namespace tensorfile::detail;
using tensorfile_test::FakeCopyEngine;

/// Four fake devices, each with its own tracker, for the test's duration.
struct FourDevices {
  tensorfile_test::FakeEngineConfig saved = FakeCopyEngine::defaults();
  FourDevices() {
    FakeCopyEngine::defaults().devices = 4;
    FakeCopyEngine::defaults().tracker_per_device = true;
    FakeCopyEngine::reset_device_trackers();
  }
  FourDevices(const FourDevices&) = delete;
  FourDevices& operator=(const FourDevices&) = delete;
  ~FourDevices() {
    FakeCopyEngine::defaults() = saved;
    FakeCopyEngine::reset_device_trackers();
  }
};

/// The rules make_rank_fixtures.py cuts its parts by, for a group of `world`.
std::string rules_for(std::int64_t world) {
  std::string sizes = world == 2 ? "5/3" : "8";
  for (std::int64_t r = 1; world != 2 && r < world; ++r) sizes += "/0";
  return "q.weight=0,o.weight=1,bias=0,norm=replicate,tiny=0,int=1,half=-1,transposed=0,scalar=replicate,sizes=0:" +
         sizes + ",wide=1";
}

ParallelDevices group_of(std::int64_t world, EvenSplit even) {
  ParallelDevices group{.plan = {.world = world, .rules = parse_parallel_rules(rules_for(world)), .even = even}};
  for (std::int64_t r = 0; r < world; ++r) group.devices.push_back("cuda:" + std::to_string(r));
  return group;
}

/// A tensor's elements in C order, on the host.
std::vector<std::byte> host_bytes(const Tensor& t) {
  const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  std::vector<std::byte> out(host.nbytes());
  host.copy_into(out.data());
  return out;
}

const RingOptions small_ring{.ring_bytes = 16 * 1024, .slot_bytes = 4096, .threads = 2, .direct_io = false};
const RingOptions direct_ring{.ring_bytes = 32 * 1024, .slot_bytes = 8192, .threads = 3, .direct_io = true};

/// Checks the ranks of `file` loaded with `group` against torch's parts; `ring_paths` are the tensors the ring streams
/// (their bytes are what each device's tracker must have received, and nothing more).
void check_against_torch(const std::filesystem::path& file, std::int64_t world, EvenSplit even, const RingOptions& ring,
                         const std::vector<std::string>& ring_paths) {
  static const Value parts = load_torch(tensorfile_test::data_dir() / "ranks" / "parts.pt");
  const FourDevices devices;
  const std::vector<Value> ranks = ring_load_ranks<FakeCopyEngine>(file, group_of(world, even), {}, ring);
  REQUIRE(ranks.size() == static_cast<std::size_t>(world));
  const std::string even_name = even == EvenSplit::chunk ? "chunk" : "tensor_split";
  for (std::int64_t r = 0; r < world; ++r) {
    INFO("world " << world << ", " << even_name << ", rank " << r);
    const NamedTensors got = named_tensors(ranks[static_cast<std::size_t>(r)]);
    CHECK(got.size() == 11);
    std::uint64_t streamed = 0;
    for (const auto& [path, tensor] : got) {
      INFO(path);
      const Tensor& expected =
          parts[std::to_string(world) + "/" + even_name + "/" + std::to_string(r) + "/" + path].as_tensor();
      CHECK(tensor.device() == Device::cuda(static_cast<int>(r)));
      CHECK(tensor.is_contiguous());
      CHECK(tensor.dtype() == expected.dtype());
      CHECK(std::vector<std::int64_t>(tensor.sizes().begin(), tensor.sizes().end()) ==
            std::vector<std::int64_t>(expected.sizes().begin(), expected.sizes().end()));
      CHECK(host_bytes(tensor) == host_bytes(expected));
      if (std::find(ring_paths.begin(), ring_paths.end(), path) != ring_paths.end()) streamed += tensor.nbytes();
    }
    const auto tracker = FakeCopyEngine::device_tracker(static_cast<int>(r));
    CHECK(tracker->copied_bytes == streamed);  // exactly its parts' bytes reached the device
    CHECK(tracker->violations == 0);
    CHECK(tracker->live_pinned == 0);
  }
}

TEST_CASE("ring_load_ranks puts each rank's part of a torch file on its own device, as torch cuts it",
          "[ring][ranks]") {
  const std::filesystem::path file = tensorfile_test::data_dir() / "ranks" / "weights.pt";
  // `transposed` has strides of its own in the file: read on the host, each part copied with Tensor::to.
  const std::vector<std::string> ring_paths = {"q.weight", "o.weight", "bias",   "norm",  "tiny",
                                               "int",      "half",     "scalar", "sizes", "wide"};
  for (const std::int64_t world : {1, 2, 3, 4}) {
    for (const EvenSplit even : {EvenSplit::tensor_split, EvenSplit::chunk}) {
      check_against_torch(file, world, even, small_ring, ring_paths);
    }
  }
  check_against_torch(file, 3, EvenSplit::tensor_split, direct_ring, ring_paths);
}

TEST_CASE("ring_load_ranks streams every tensor of a safetensors file to its rank's device", "[ring][ranks]") {
  const tensorfile_test::ScratchDir dir;
  const std::filesystem::path file = dir / "weights.safetensors";
  NamedTensors weights;
  for (const auto& [path, tensor] : named_tensors(load_torch(tensorfile_test::data_dir() / "ranks" / "weights.pt"))) {
    weights.emplace_back(path, tensor.contiguous());
  }
  save_safetensors(weights, file);
  std::vector<std::string> every;
  for (const auto& [path, tensor] : weights) every.push_back(path);
  for (const std::int64_t world : {2, 3, 4}) {
    for (const EvenSplit even : {EvenSplit::tensor_split, EvenSplit::chunk}) {
      check_against_torch(file, world, even, small_ring, every);
    }
  }
}

TEST_CASE("ring_load_ranks: replicated tensors whole on every device, empty parts, select and progress",
          "[ring][ranks]") {
  const FourDevices devices;
  const std::filesystem::path file = tensorfile_test::data_dir() / "ranks" / "weights.pt";
  const Value on_cpu = load_torch(file);

  SECTION("a plan without rules replicates everything") {
    const ParallelDevices group{.plan = {.world = 3}, .devices = {"cuda:2", "cuda:0", "cuda"}};
    const std::vector<Value> ranks = ring_load_ranks<FakeCopyEngine>(file, group, {}, small_ring);
    REQUIRE(ranks.size() == 3);
    const int ordinals[] = {2, 0, 0};  // "cuda" is the current device, cuda:0 here
    for (std::size_t r = 0; r < 3; ++r) {
      for (const auto& [path, tensor] : named_tensors(ranks[r])) {
        INFO("rank " << r << ", " << path);
        CHECK(tensor.device() == Device::cuda(ordinals[r]));
        CHECK(host_bytes(tensor) == host_bytes(on_cpu[path].as_tensor()));
      }
    }
  }
  SECTION("ranks that chunk gives no rows get empty parts, on their devices") {
    const std::vector<Value> ranks =
        ring_load_ranks<FakeCopyEngine>(file, group_of(4, EvenSplit::chunk), {}, small_ring);
    for (std::size_t r = 2; r < 4; ++r) {
      const Tensor& tiny = ranks[r]["tiny"].as_tensor();
      CHECK(tiny.sizes() == Shape{0, 5});
      CHECK(tiny.numel() == 0);
      CHECK(tiny.device() == Device::cuda(static_cast<int>(r)));
      CHECK(ranks[r]["sizes"].as_tensor().sizes() == Shape{0, 3});
    }
  }
  SECTION("select keeps some tensors; select_drops leaves the others out, else meta stand-ins") {
    LoadOptions options{.select = select_paths({"q.weight", "transposed"})};
    std::vector<Value> ranks =
        ring_load_ranks<FakeCopyEngine>(file, group_of(2, EvenSplit::tensor_split), options, small_ring);
    CHECK(ranks[1].size() == 11);
    CHECK(ranks[1]["norm"].as_tensor().device().is_meta());
    CHECK(ranks[1]["o.weight"].as_tensor().sizes() == Shape{6, 10});  // the file's shape: not read
    CHECK(ranks[1]["q.weight"].as_tensor().device() == Device::cuda(1));
    CHECK(ranks[1]["transposed"].as_tensor().device() == Device::cuda(1));
    options.select_drops = true;
    ranks = ring_load_ranks<FakeCopyEngine>(file, group_of(2, EvenSplit::tensor_split), options, small_ring);
    CHECK(ranks[0].size() == 2);
    CHECK(host_bytes(ranks[0]["q.weight"].as_tensor()) ==
          host_bytes(on_cpu["q.weight"].as_tensor().narrow(0, 0, 5).contiguous()));
  }
  SECTION("progress counts every device's bytes, one call at a time, up to the total") {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    const std::vector<Value> ranks = ring_load_ranks<FakeCopyEngine>(
        file, group_of(4, EvenSplit::tensor_split), {}, small_ring,
        [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
    REQUIRE_FALSE(calls.empty());
    for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first >= calls[i - 1].first);
    CHECK(calls.back().first == calls.back().second);
    std::uint64_t copied = 0;
    for (int r = 0; r < 4; ++r) copied += FakeCopyEngine::device_tracker(r)->copied_bytes;
    CHECK(calls.back().second == copied);
  }
}

/// Checks each rank of `file` loaded with `group` against the slices the front door reads of it (Checkpoint::tensor
/// with that rank's parallel_slices()), its metadata and ggml types, and the bytes each device received.
void check_gguf_ranks(const std::filesystem::path& file, const ParallelDevices& group) {
  FakeCopyEngine::reset_device_trackers();  // counted from here
  const Checkpoint checkpoint = open(file);
  const std::vector<Value> ranks = ring_load_ranks<FakeCopyEngine>(file, group, {}, small_ring);
  REQUIRE(ranks.size() == static_cast<std::size_t>(group.plan.world));
  for (std::int64_t r = 0; r < group.plan.world; ++r) {
    INFO("rank " << r);
    ParallelPlan plan = group.plan;
    plan.rank = r;
    const SliceRule rule = parallel_slices(plan);
    const Value& rank = ranks[static_cast<std::size_t>(r)];
    REQUIRE(rank.size() == checkpoint.entries().size());
    std::uint64_t streamed = 0;
    for (const CheckpointEntry& entry : checkpoint.entries()) {
      INFO(entry.path);
      const std::optional<TensorSlice> slice = rule(entry.path, entry.shape);  // asked in elements
      const Tensor expected = slice ? checkpoint.tensor(entry.path, *slice) : checkpoint.tensor(entry.path);
      const Tensor& got = rank[entry.path].as_tensor();
      CHECK(got.device() == Device::cuda(static_cast<int>(r)));
      CHECK(got.dtype() == expected.dtype());
      CHECK(got.sizes() == expected.sizes());
      CHECK(host_bytes(got) == host_bytes(expected));
      CHECK(gguf_tensor_type(rank, entry.path) == entry.ggml_type);
      streamed += got.nbytes();
    }
    CHECK(rank.as_dict().attributes() == checkpoint.load_all().as_dict().attributes());  // metadata, ggml types
    const auto tracker = FakeCopyEngine::device_tracker(static_cast<int>(r));
    CHECK(tracker->copied_bytes == streamed);
    CHECK(tracker->violations == 0);
  }
}

TEST_CASE("ring_load_ranks cuts a GGUF file's tensors as the front door slices them, blocks kept whole",
          "[ring][ranks][gguf]") {
  // ggml_small.gguf, written by the real ggml: token_embd.weight f32 [2, 4], blk.0.attn_norm.weight f16 [8],
  // blk.0.ffn_down.weight q8_0 [2, 32], blk.0.ffn_up.weight q4_K [256], h.i32 [3] (shapes in elements).
  const std::filesystem::path fixture = tensorfile_test::data_dir() / "gguf" / "ggml_small.gguf";
  const auto group = [](std::int64_t world, const std::string& rules) {
    ParallelDevices out{.plan = {.world = world, .rules = parse_parallel_rules(rules)}};
    for (std::int64_t r = 0; r < world; ++r) out.devices.push_back("cuda:" + std::to_string(r));
    return out;
  };
  SECTION("plain tensors on any dimension, a block tensor's rows, the others replicated") {
    const FourDevices devices;
    for (const std::int64_t world : {2, 3}) {
      check_gguf_ranks(fixture, group(world,
                                      "token_embd.weight=1,blk.0.attn_norm.weight=0,"
                                      "blk.0.ffn_down.weight=0,h.i32=0"));
    }
  }
  SECTION("a block tensor's last dimension on block boundaries") {
    const FourDevices devices;
    const tensorfile_test::ScratchDir dir;
    NamedTensors tensors;
    const Tensor wide = Tensor::zeros({3, 128}, DType::Float32);
    for (std::int64_t i = 0; i < wide.numel(); ++i) wide.data<float>()[i] = static_cast<float>(i % 97) - 40.0f;
    tensors.emplace_back("wide", wide);
    save_gguf(tensors, dir / "q8.gguf", {.gguf = {.quantize = "q8_0"}});
    REQUIRE(open(dir / "q8.gguf").entries()[0].ggml_type == GgmlType::Q8_0);
    check_gguf_ranks(dir / "q8.gguf", group(4, "wide=1"));  // 32 elements, one block, a rank
    check_gguf_ranks(dir / "q8.gguf", group(2, "wide=1"));
  }
  SECTION("a cut inside blocks is an ArgumentError naming the tensor and the file") {
    const FourDevices devices;
    CHECK_THROWS_WITH(
        ring_load_ranks<FakeCopyEngine>(fixture, group(2, "blk.0.ffn_up.weight=0"), {}, small_ring),
        Catch::Matchers::Contains("ggml_small.gguf") && Catch::Matchers::Contains("blk.0.ffn_up.weight") &&
            Catch::Matchers::Contains("the slice [0, 128) of the last dimension of \"blk.0.ffn_up.weight\" cuts its "
                                      "q4_K blocks; expected a begin and an end that are multiples of its block size "
                                      "256"));
  }
}

TEST_CASE("ring_load_ranks refuses devices, plans, options and files it cannot load", "[ring][ranks]") {
  const FourDevices devices;
  const std::filesystem::path file = tensorfile_test::data_dir() / "ranks" / "weights.pt";
  const auto refused = [&](const ParallelDevices& group, const LoadOptions& options, const std::string& why) {
    INFO(why);
    CHECK_THROWS_AS(ring_load_ranks<FakeCopyEngine>(file, group, options, small_ring), ArgumentError);
    CHECK_THROWS_WITH(ring_load_ranks<FakeCopyEngine>(file, group, options, small_ring),
                      Catch::Matchers::Contains(why) && Catch::Matchers::Contains("weights.pt"));
  };
  ParallelDevices group = group_of(3, EvenSplit::tensor_split);
  group.devices.pop_back();
  refused(group, {}, "ParallelDevices gives 2 devices for a world of 3; expected one device per rank");
  group.devices = {"cuda:0", "gpu:1", "cuda:2"};
  refused(group, {}, "the device of rank 1, \"gpu:1\", is no device (unknown device \"gpu:1\"");
  group.devices = {"cuda:0", "cuda:1", "cuda:x"};
  refused(group, {}, "the device of rank 2, \"cuda:x\", is no device (invalid device index");
  group.devices = {"cuda:0", "cpu", "cuda:2"};
  refused(group, {}, "the device of rank 1, \"cpu\", is not a CUDA device; expected \"cuda\" or \"cuda:N\"");
  group.devices = {"cuda:0", "cuda:1", "cuda:2"};
  refused(group, {.map_location = "cuda:0"}, "LoadOptions::map_location is set");
  refused(group, {.slice = parallel_slices({.world = 3, .rank = 0})}, "LoadOptions::slice is set");
  refused({.plan = {.world = 0}, .devices = {}}, {}, "expected world >= 1");
  refused({.plan = {.world = 2, .rules = parse_parallel_rules("bias=1")}, .devices = {"cuda:0", "cuda:1"}}, {},
          "the rule \"bias\" splits dimension 1 of \"bias\", which has 1");

  group.devices = {"cuda:0", "cuda:7", "cuda:2"};  // four fake devices
  CHECK_THROWS_WITH(ring_load_ranks<FakeCopyEngine>(file, group, {}, small_ring),
                    Catch::Matchers::Contains("the device of rank 1, \"cuda:7\": device cuda:7 does not exist"));
  CHECK_THROWS_AS(ring_load_ranks<FakeCopyEngine>(file, group, {}, small_ring), DeviceError);

  const std::filesystem::path legacy = tensorfile_test::data_dir() / "torch_gen" / "legacy_format.pt";
  CHECK_THROWS_WITH(
      ring_load_ranks<FakeCopyEngine>(legacy, group_of(2, EvenSplit::chunk), {}, small_ring),
      Catch::Matchers::Contains(
          "the file is torch-legacy data; cuda::load_ranks() expects a torch zip, safetensors or GGUF file"));
}

}  // namespace ring_ranks_test
