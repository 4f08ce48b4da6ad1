// SPDX-License-Identifier: MIT
// Tests of the streamed GGUF loads of <tensorfile/cuda/detail/ring_load.hpp>: a ggml-written file of every ggml type
// and a split model streamed through the ring to fake CUDA devices, compared with the CPU loads, as cuda::load_gguf
// and cuda::load_state_dict compose them; what load_gguf refuses, refused the same way.
#include <tensorfile/cuda/detail/ring_load.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/gguf/save.hpp>
#include <tensorfile/formats/slice.hpp>
#include <tensorfile/state_dict.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cuda/ring/fake_copy_engine.hpp"
#include "cuda/ring/value_map.hpp"
#include "tensorfile_catch.hpp"

namespace ring_gguf_test {

using namespace tensorfile;
using namespace tensorfile::detail;
using tensorfile_test::FakeCopyEngine;

std::filesystem::path ggml_fixture() { return tensorfile_test::data_dir() / "gguf" / "ggml_small.gguf"; }

/// The (done, total) pairs of one load's progress calls.
struct Progress {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  RingProgress callback() {
    return [this](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  }
};

/// The attributes of a loaded dict (metadata, its types, the ggml types).
const Value& attributes_of(const Value& loaded) { return loaded.as_dict().attributes(); }

/// cuda::load_state_dict's composition with the fake engine.
Value ring_state_dict(const std::filesystem::path& path, const LoadOptions& options, const RingOptions& ring) {
  LoadOptions one_at_a_time = options;
  one_at_a_time.threads = 1;
  return load_state_dict_with(
      path, one_at_a_time, [&](const FileHandle& file, const std::filesystem::path& name, FileFormat format) {
        return stream_load_weights(file, name, format, options, ring, {}, FakeCopyEngine::resolve,
                                   ring_streamer<FakeCopyEngine>(ring));
      });
}

/// The message of the Error `fn` throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    (void)fn();
  } catch (const Error& error) {
    return error.what();
  }
  return {};
}

TEST_CASE("ring_load_gguf streams a ggml-written file of every type to a (fake) device, as load_gguf loads it",
          "[ring][gguf]") {
  const Value on_cpu = load_gguf(ggml_fixture());
  REQUIRE(on_cpu.as_dict().size() == 5);
  const RingOptions small{.ring_bytes = 96, .slot_bytes = 32, .threads = 3, .direct_io = false};
  const RingOptions separate{.ring_bytes = 1 << 20, .slot_bytes = 1 << 16, .threads = 2, .single_allocation = false};
  for (const RingOptions* ring : {&small, &separate}) {
    INFO("single allocation " << ring->single_allocation);
    Progress progress;
    const Value on_device =
        ring_load_gguf<FakeCopyEngine>(ggml_fixture(), {.map_location = "cuda:1"}, *ring, progress.callback());
    const tensorfile_test::Placement placed = tensorfile_test::placement_of(on_device);
    CHECK(placed.devices == std::set<std::string>{"cuda:1"});
    CHECK(placed.owners.size() == (ring->single_allocation ? 1u : 5u));
    const Value back = tensorfile_test::to_host(on_device);
    CHECK(back == on_cpu);
    CHECK(attributes_of(back) == attributes_of(on_cpu));  // metadata, its types and every ggml type
    for (const char* name : {"blk.0.ffn_down.weight", "blk.0.ffn_up.weight"}) {  // q8_0, q4_K
      INFO(name);
      REQUIRE(gguf_tensor_type(on_device, name) == gguf_tensor_type(on_cpu, name));
      CHECK(dequantize(back, name).equal(dequantize(on_cpu, name)));
    }
    REQUIRE_FALSE(progress.calls.empty());
    CHECK(progress.calls.back().first == progress.calls.back().second);
    CHECK(progress.calls.back().second >= placed.bytes);  // padding between tensors may ride along in a merged read
  }
}

TEST_CASE("ring_load_gguf: select, host and meta targets, and refusals as load_gguf has them", "[ring][gguf]") {
  const RingOptions ring{.ring_bytes = 1 << 20};
  const Value on_cpu = load_gguf(ggml_fixture());
  SECTION("select streams only the kept tensors; the rest are meta, or left out with select_drops") {
    const TensorSelect kept = [](std::string_view name) {
      return name == "blk.0.attn_norm.weight" || name == "blk.0.ffn_up.weight";
    };
    const RingOptions apart{.ring_bytes = 1 << 20, .single_allocation = false};  // no reads merged across a gap
    Progress progress;
    const Value value = ring_load_gguf<FakeCopyEngine>(ggml_fixture(), {.map_location = "cuda:0", .select = kept},
                                                       apart, progress.callback());
    REQUIRE(value.as_dict().size() == 5);
    std::uint64_t kept_bytes = 0;
    for (const auto& [key, item] : value.as_dict()) {
      const std::string name = key.as_string();
      INFO(name);
      const Tensor& t = item.as_tensor();
      if (kept(name)) {
        CHECK(t.device() == Device::cuda(0));
        kept_bytes += t.nbytes();
        CHECK(tensorfile_test::to_host(item) == *on_cpu.as_dict().find(name));
      } else {
        CHECK(t.device().is_meta());
      }
    }
    REQUIRE_FALSE(progress.calls.empty());
    CHECK(progress.calls.back().second == kept_bytes);  // the kept tensors' bytes alone
    const Value dropped = ring_load_gguf<FakeCopyEngine>(
        ggml_fixture(), {.map_location = "cuda:0", .select = kept, .select_drops = true}, ring);
    CHECK(dropped.as_dict().size() == 2);
  }
  SECTION("host and meta targets load as load_gguf does, without the ring") {
    Progress progress;
    const Value value = ring_load_gguf<FakeCopyEngine>(ggml_fixture(), {}, ring, progress.callback());
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device().is_cpu());
    CHECK(value == on_cpu);
    REQUIRE(progress.calls.size() == 1);
    CHECK(progress.calls.front() == std::pair<std::uint64_t, std::uint64_t>{0, 0});
    const Value meta = ring_load_gguf<FakeCopyEngine>(ggml_fixture(), {.map_location = "meta"}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(meta)) CHECK(t.device().is_meta());
  }
  SECTION("a cut file is the FormatError load_gguf gives, naming the file, before any device memory") {
    tensorfile_test::ScratchDir dir;
    const std::string whole = tensorfile_test::read_text(ggml_fixture());
    for (const std::size_t keep :
         {std::size_t{3}, std::size_t{100}, std::size_t{700}, std::size_t{1290}}) {  // 1290: in h.i32
      INFO("the first " << keep << " bytes");
      const std::filesystem::path cut = dir / "cut.gguf";
      std::ofstream(cut, std::ios::binary).write(whole.data(), static_cast<std::streamsize>(keep));
      const std::string expected = error_of([&] { return load_gguf(cut); });
      REQUIRE_FALSE(expected.empty());
      CHECK(expected.find(cut.string()) != std::string::npos);
      CHECK(error_of([&] { return ring_load_gguf<FakeCopyEngine>(cut, {.map_location = "cuda:0"}, ring); }) ==
            expected);
    }
  }
  SECTION("into buffers and a slice rule are ArgumentErrors, as load_gguf gives them") {
    const LoadOptions into{.map_location = "cuda:0", .into = {{"h.i32", Tensor::zeros({3}, DType::Int32)}}};
    CHECK_THROWS_AS(ring_load_gguf<FakeCopyEngine>(ggml_fixture(), into, ring), ArgumentError);
    const LoadOptions sliced{.map_location = "cuda:0",
                             .slice = [](std::string_view, const Shape&) -> std::optional<TensorSlice> {
                               return TensorSlice{0, 0, 1};
                             }};
    CHECK_THROWS_AS(ring_load_gguf<FakeCopyEngine>(ggml_fixture(), sliced, ring), ArgumentError);
  }
}

TEST_CASE("a streamed state-dict load reads a GGUF file, and a split model from any part, to a (fake) device",
          "[ring][gguf]") {
  const RingOptions ring{.ring_bytes = 4096, .slot_bytes = 512, .threads = 2};
  SECTION("one file") {
    const Value on_device = ring_state_dict(ggml_fixture(), {.map_location = "cuda:1"}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(on_device)) CHECK(t.device() == Device::cuda(1));
    const Value on_cpu = load_state_dict(ggml_fixture());
    CHECK(tensorfile_test::to_host(on_device) == on_cpu);
    CHECK(attributes_of(on_device) == attributes_of(on_cpu));
  }
  SECTION("a split model, from each of its parts") {
    tensorfile_test::ScratchDir dir;
    save_gguf(load_gguf(ggml_fixture()), dir / "model.gguf", {.gguf = {.split_max_tensors = 2}});
    for (const char* part : {"model-00001-of-00003.gguf", "model-00002-of-00003.gguf", "model-00003-of-00003.gguf"}) {
      INFO(part);
      REQUIRE(std::filesystem::exists(dir / part));
      const Value on_device = ring_state_dict(dir / part, {.map_location = "cuda:0"}, ring);
      const Value on_cpu = load_state_dict(dir / part);
      REQUIRE(on_cpu.as_dict().size() == 5);
      for (const Tensor& t : tensorfile_test::tensors_of(on_device)) CHECK(t.device() == Device::cuda(0));
      CHECK(tensorfile_test::to_host(on_device) == on_cpu);
      CHECK(attributes_of(on_device) == attributes_of(on_cpu));
    }
  }
}

}  // namespace ring_gguf_test
