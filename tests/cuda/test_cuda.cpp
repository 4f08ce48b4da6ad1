// SPDX-License-Identifier: MIT
// Tests of <tensorfile/cuda.hpp>: [no_device] ones run everywhere (clear DeviceErrors, no crash);
// the rest need a CUDA device: values loaded to the GPU and copied back equal the CPU load.
#include <tensorfile/cuda.hpp>
#include <tensorfile/tensorfile.hpp>

#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda/ring/value_map.hpp"
#include "cuda/skip_rule.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {

/// `options` with the ring settings (threads, direct_reads, cuda) of `ring`.
LoadOptions on_ring(LoadOptions options, const LoadOptions& ring) {
  options.threads = ring.threads;
  options.direct_reads = ring.direct_reads;
  options.cuda = ring.cuda;
  return options;
}

std::filesystem::path sample(const std::string& name) { return tensorfile_test::data_dir() / "torch" / name; }

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

/// "cudaGetDeviceCount failed: cudaErrorNoDevice (...)" as this machine says it.
std::string no_device_reason() {
  std::string reason = cuda::unavailable_reason();
  REQUIRE(starts_with(reason, "cudaGetDeviceCount: "));
  return "cudaGetDeviceCount failed: " + reason.substr(std::string("cudaGetDeviceCount: ").size());
}

/// Every tensor leaf of a TensorDict, by path.
void leaves(const TensorDict& td, const std::string& prefix, NamedTensors& out) {
  for (const auto& item : td.items()) {
    if (item.value.is_tensor()) out.emplace_back(prefix + item.key, item.value.as_tensor());
    if (item.value.is_tensordict()) leaves(item.value.as_tensordict(), prefix + item.key + "/", out);
  }
}

std::int64_t peak_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (starts_with(line, "VmHWM:")) return std::stoll(line.substr(6));
  }
  return -1;
}

}  // namespace

// ---- without a device: clear errors, never a crash --------------------------------------------

TEST_CASE("without a device CUDA reports itself unavailable", "[no_device]") {
  CHECK(cuda::device_count() == 0);
  cuda::release_ring();  // nothing cached: nothing to do, no crash
  CHECK_FALSE(cuda::is_available());
  const std::string reason = cuda::unavailable_reason();
  INFO(reason);
  CHECK(starts_with(reason, "cudaGetDeviceCount: "));
  CHECK(detail::device_copy_hook().copy == &detail::cuda_copy_tensor);  // installed by the include
  CHECK(detail::device_copy_hook().write == &detail::cuda_write_tensor);
  if (detail::CuFileApi::get() == nullptr) {  // absent or present, never a crash; when absent, the reason
    const std::string why = cuda::cufile_unavailable_reason();
    INFO(why);
    CHECK((starts_with(why, "libcufile.so.0 ") || starts_with(why, "cuFileDriverOpen failed")));
  }
}

TEST_CASE("without a device Tensor::to(cuda) throws a DeviceError naming the CUDA error", "[no_device]") {
  const Tensor t = Tensor::from_values<float>({1, 2, 3});
  const std::string expected = "tensorfile: " + no_device_reason();
  CHECK_THROWS_MATCHES(
      t.to(Device::cuda(0)), DeviceError,
      Catch::Matchers::Predicate<DeviceError>([&](const DeviceError& e) { return e.what() == expected; }));
  CHECK_THROWS_AS(t.to(Device::cuda()), DeviceError);
  CHECK_THROWS_AS(Tensor::zeros({2, 2}, DType::Float32, Device::cuda()), DeviceError);
  CHECK_THROWS_AS(cuda_storage(16), DeviceError);
  CHECK_THROWS_AS(cuda_storage(0, Device::cuda(3)), DeviceError);  // even empty: the device must exist
}

TEST_CASE("without a device loads to CUDA throw a DeviceError naming the file and the CUDA error", "[no_device]") {
  const auto path = sample("t_float32_2x3.pt");
  const std::string reason = no_device_reason();
  SECTION("load with map_location (one copy per storage)") {
    try {
      (void)load_torch(path, {.map_location = "cuda:0"});
      FAIL("expected a DeviceError");
    } catch (const DeviceError& e) {
      CHECK(e.path() == path);
      CHECK(e.reason() == "storage tagged \"cpu\": " + reason);
    }
  }
  SECTION("cuda::load (streamed)") {
    try {
      (void)cuda::load_torch(path, {.map_location = "cuda:0"});
      FAIL("expected a DeviceError");
    } catch (const DeviceError& e) {
      CHECK(e.path() == path);
      CHECK(e.reason() == "storage tagged \"cpu\": " + reason);
    }
  }
  SECTION("a file saved on the GPU, with its saved tags") {
    CHECK_THROWS_AS(cuda::load_torch(sample("fake_cuda0.pt")), DeviceError);
    CHECK_THROWS_AS(load_torch(sample("fake_cuda0.pt")), DeviceError);
    CHECK(load_torch(sample("fake_cuda0.pt"), {.map_location = "cpu"}).is_dict());
  }
  SECTION("cuda::from_file") {
    try {
      (void)cuda::from_file(path, {.dtype = DType::UInt8});
      FAIL("expected a DeviceError");
    } catch (const DeviceError& e) {
      CHECK(std::string(e.what()) == "tensorfile: " + path.string() + ": " + reason);
    }
    CHECK_THROWS_MATCHES(cuda::from_file(path, {.mmap = MapMode::shared, .dtype = DType::UInt8}), ArgumentError,
                         Catch::Matchers::Predicate<ArgumentError>([&](const ArgumentError& e) {
                           return e.reason() ==
                                  "mmap = MapMode::shared maps the file for writing; a tensor on cuda cannot write "
                                  "back, expected copy_on_write or read_only";
                         }));
    CHECK_THROWS_AS(cuda::from_file(path, {.dtype = DType::UInt8}, {.map_location = Device::cpu()}), ArgumentError);
    CHECK_THROWS_AS(cuda::from_file(path, {.dtype = DType::UInt8}, {.map_location = {{{"cpu", "cuda:0"}}}}),
                    ArgumentError);
  }
  SECTION("cuda::load_safetensors and cuda::load_state_dict (streamed)") {
    const auto weights = tensorfile_test::data_dir() / "safetensors" / "overall.safetensors";
    try {
      (void)cuda::load_safetensors(weights, {.map_location = "cuda:0"});
      FAIL("expected a DeviceError");
    } catch (const DeviceError& e) {
      CHECK(e.path() == weights);
      CHECK(e.reason() == "the tensors' device: " + reason);
    }
    const auto index = tensorfile_test::data_dir() / "sharded" / "torch_bin" / "pytorch_model.bin.index.json";
    try {
      (void)cuda::load_state_dict(index, {.map_location = "cuda"});
      FAIL("expected a DeviceError");
    } catch (const DeviceError& e) {
      CHECK(e.path().filename() == "pytorch_model-00001-of-00003.bin");
      CHECK(e.reason() == "storage tagged \"cpu\": " + reason);
    }
    CHECK(cuda::load_safetensors(weights, {.map_location = "cpu"}) == load_safetensors(weights));
    CHECK(cuda::load_state_dict(index, {.map_location = "cpu"}) == load_state_dict(index));
  }
  SECTION("cuda::load_gguf and cuda::load_state_dict of a GGUF file (streamed)") {
    const auto model = tensorfile_test::data_dir() / "gguf" / "ggml_small.gguf";
    for (const bool whole_model : {false, true}) {
      INFO((whole_model ? "cuda::load_state_dict" : "cuda::load_gguf"));
      try {
        (void)(whole_model ? cuda::load_state_dict(model, {.map_location = "cuda:0"})
                           : cuda::load_gguf(model, {.map_location = "cuda:0"}));
        FAIL("expected a DeviceError");
      } catch (const DeviceError& e) {
        CHECK(e.path().filename() == model.filename());
        CHECK(e.reason() == "the tensors' device: " + reason);
      }
    }
    CHECK(cuda::load_gguf(model, {.map_location = "cpu"}) == load_gguf(model));
  }
  SECTION("cuda::load_ranks (streamed, a device per rank)") {
    const auto weights = tensorfile_test::data_dir() / "ranks" / "weights.pt";
    const ParallelDevices group{.plan = {.world = 2}, .devices = {"cuda:0", "cuda:1"}};
    try {
      (void)cuda::load_ranks(weights, group);
      FAIL("expected a DeviceError");
    } catch (const DeviceError& e) {
      CHECK(e.path() == weights);
      CHECK(e.reason() == "the device of rank 0, \"cuda:0\": " + reason);
    }
    CHECK_THROWS_AS(cuda::load_ranks(weights, {.plan = {.world = 2}, .devices = {"cuda:0"}}), ArgumentError);
    CHECK_THROWS_AS(cuda::load_ranks(weights, {.plan = {.world = 1}, .devices = {"gpu"}}), ArgumentError);
  }
  SECTION("load_memmap with a CUDA device") {
    CHECK_THROWS_AS(
        load_memmap(tensorfile_test::data_dir() / "tensordict" / "s01_basic", {.map_location = Device::cuda(0)}),
        DeviceError);
  }
  SECTION("CPU and meta loads are untouched") {
    CHECK(cuda::load_torch(path, {.map_location = "cpu"}) == load_torch(path));
    CHECK(cuda::load_torch(path, {.map_location = "meta"}).as_tensor().device() == Device::meta());
  }
}

// ---- with a device ------------------------------------------------------------------------------

TEST_CASE("Tensor::to moves tensors between host and device and keeps views", "[cuda]") {
  const Tensor t = Tensor::from_values<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  const Tensor on_gpu = t.to(Device::cuda());
  CHECK(on_gpu.device() == Device::cuda(0));
  CHECK(on_gpu.storage().kind() == StorageKind::cuda);
  CHECK_THROWS_AS(on_gpu.data<const float>(), DeviceError);  // never dereferenced on the host
  CHECK(on_gpu.to(Device::cpu()).equal(t));
  for (const Tensor& view : {t.transpose(0, 1), t.narrow(1, 1, 2), t.select(0, 2), t.slice(1, 0, 4, 3),
                             t.narrow(0, 1, 0), t.select(0, 1).unsqueeze(0).expand({5, 4})}) {
    const Tensor there = view.to(Device::cuda(0));
    CHECK(there.sizes() == view.sizes());
    CHECK(there.to(Device::cpu()).equal(view));
    CHECK(there.storage().size_bytes() <= t.storage().size_bytes());  // only the bytes the view touches
  }
  CHECK(
      Tensor::zeros({1000}, DType::Int64, Device::cuda()).to(Device::cpu()).equal(Tensor::zeros({1000}, DType::Int64)));
  CHECK(on_gpu.clone().device() == Device::cuda(0));
  CHECK(on_gpu.clone().to(Device::cpu()).equal(t));
  if (cuda::device_count() > 1) {
    const Tensor other = on_gpu.to(Device::cuda(1));
    CHECK(other.device() == Device::cuda(1));
    CHECK(other.to(Device::cpu()).equal(t));
    CHECK(other.to(Device::cuda(0)).to(Device::cpu()).equal(t));
  }
  const int count = cuda::device_count();
  CHECK_THROWS_WITH(t.to(Device::cuda(count)), "tensorfile: device cuda:" + std::to_string(count) +
                                                   " does not exist; expected an index below " + std::to_string(count) +
                                                   " (the CUDA devices present)");
}

TEST_CASE("every torch fixture loaded to the GPU equals the CPU load", "[cuda]") {
  const LoadOptions small{.threads = 3, .cuda = {.ring_bytes = 64 * 1024, .slot_bytes = 16 * 1024}};
  const LoadOptions direct{.direct_reads = DirectReads::always, .cuda = {.ring_bytes = 1 << 20}};
  const LoadOptions cufile{.cuda = {.use_cufile = true}};
  const LoadOptions separate{.cuda = {.single_allocation = false}};
  std::size_t compared = 0;
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    INFO(path.filename().string());
    Value on_cpu;
    try {
      on_cpu = load_torch(path, {.map_location = "cpu", .strict = false});
    } catch (const Error&) {
      CHECK_THROWS_AS(cuda::load_torch(path, {.map_location = "cuda:0", .strict = false}), Error);
      continue;
    }
    const auto check = [&](const Value& on_gpu) {
      for (const Tensor& t : tensorfile_test::tensors_of(on_gpu)) {
        CHECK((t.device() == Device::cuda(0) || t.device().is_meta()));
      }
      CHECK(tensorfile_test::to_host(on_gpu) == on_cpu);
      ++compared;
    };
    check(load_torch(path, {.map_location = "cuda:0", .strict = false}));  // per-storage copies through Tensor::to
    check(load_torch(path, {.map_location = std::map<std::string, std::string>{{"cpu", "cuda:0"}, {"cuda:0", "cuda:0"}},
                            .strict = false}));
    check(load_torch(path, {.map_location = MapLocation::Function(
                                [](const Storage& cpu, std::string_view) -> std::optional<Storage> {
                                  return Tensor(cpu, DType::UInt8, {static_cast<std::int64_t>(cpu.size_bytes())})
                                      .to(Device::cuda(0))
                                      .storage();
                                }),
                            .strict = false}));
    for (const auto* options : {&small, &direct, &cufile, &separate}) {
      std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
      LoadOptions with_progress = *options;
      with_progress.cuda.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
      check(cuda::load_torch(path, on_ring({.map_location = "cuda:0", .strict = false}, with_progress)));
      REQUIRE_FALSE(calls.empty());
      CHECK(calls.back().first == calls.back().second);
      for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first >= calls[i - 1].first);
    }
  }
  CHECK(compared >= 7 * 50);
}

TEST_CASE("safetensors files and sharded checkpoints streamed to the GPU equal the CPU loads", "[cuda]") {
  const LoadOptions small{.threads = 3, .cuda = {.ring_bytes = 64 * 1024, .slot_bytes = 16 * 1024}};
  const LoadOptions cufile{.cuda = {.use_cufile = true}};
  for (const auto& entry : std::filesystem::directory_iterator(tensorfile_test::data_dir() / "safetensors")) {
    if (entry.path().extension() != ".safetensors") continue;
    INFO(entry.path().filename().string());
    const Value on_cpu = load_safetensors(entry.path());
    for (const auto* options : {&small, &cufile}) {
      const Value on_gpu = cuda::load_safetensors(entry.path(), on_ring({.map_location = "cuda:0"}, *options));
      for (const Tensor& t : tensorfile_test::tensors_of(on_gpu)) CHECK(t.device() == Device::cuda(0));
      CHECK(tensorfile_test::to_host(on_gpu) == on_cpu);
      CHECK((safetensors_metadata(on_gpu) == nullptr) == (safetensors_metadata(on_cpu) == nullptr));
    }
  }
  const auto index = tensorfile_test::data_dir() / "sharded" / "torch_bin" / "pytorch_model.bin.index.json";
  const Value on_gpu = cuda::load_state_dict(index, on_ring({.map_location = "cuda:0"}, small));
  for (const Tensor& t : tensorfile_test::tensors_of(on_gpu)) CHECK(t.device() == Device::cuda(0));
  CHECK(tensorfile_test::to_host(on_gpu) == load_state_dict(index));
}

TEST_CASE("a GGUF file and a split GGUF model streamed to the GPU equal the CPU loads", "[cuda]") {
  const auto model = tensorfile_test::data_dir() / "gguf" / "ggml_small.gguf";
  const LoadOptions small{.threads = 3, .cuda = {.ring_bytes = 64 * 1024, .slot_bytes = 16 * 1024}};
  const LoadOptions cufile{.cuda = {.use_cufile = true}};
  const Value on_cpu = load_gguf(model);
  for (const auto* options : {&small, &cufile}) {
    const Value on_gpu = cuda::load_gguf(model, on_ring({.map_location = "cuda:0"}, *options));
    for (const Tensor& t : tensorfile_test::tensors_of(on_gpu)) CHECK(t.device() == Device::cuda(0));
    const Value back = tensorfile_test::to_host(on_gpu);
    CHECK(back == on_cpu);
    CHECK(back.as_dict().attributes() == on_cpu.as_dict().attributes());
    CHECK(dequantize(back, "blk.0.ffn_up.weight").equal(dequantize(on_cpu, "blk.0.ffn_up.weight")));
  }
  tensorfile_test::ScratchDir dir;
  save_gguf(on_cpu, dir / "model.gguf", {.gguf = {.split_max_tensors = 2}});
  const Value split =
      cuda::load_state_dict(dir / "model-00002-of-00003.gguf", on_ring({.map_location = "cuda:0"}, small));
  for (const Tensor& t : tensorfile_test::tensors_of(split)) CHECK(t.device() == Device::cuda(0));
  CHECK(tensorfile_test::to_host(split) == load_state_dict(dir / "model-00002-of-00003.gguf"));
}

TEST_CASE("cuda::load_ranks puts each rank's part on its own GPU, as torch cuts it", "[cuda]") {
  // Ranks over the devices there are (two ranks share a device where there is one); parts.pt holds torch's cuts.
  const auto folder = tensorfile_test::data_dir() / "ranks";
  const Value parts = load_torch(folder / "parts.pt");
  const std::string rules =
      "q.weight=0,o.weight=1,bias=0,norm=replicate,tiny=0,int=1,half=-1,transposed=0,scalar=replicate,wide=1";
  const LoadOptions small{.threads = 2, .cuda = {.ring_bytes = 16 * 1024, .slot_bytes = 4096}};
  const LoadOptions cufile{.cuda = {.use_cufile = true}};
  for (const std::int64_t world : {2, 3, 4}) {
    ParallelDevices group{.plan = {.world = world, .rules = parse_parallel_rules(rules), .even = EvenSplit::chunk}};
    for (std::int64_t r = 0; r < world; ++r) {
      group.devices.push_back("cuda:" + std::to_string(r % cuda::device_count()));
    }
    for (const auto* options : {&small, &cufile}) {
      const std::vector<Value> ranks = cuda::load_ranks(folder / "weights.pt", group, *options);
      REQUIRE(ranks.size() == static_cast<std::size_t>(world));
      for (std::int64_t r = 0; r < world; ++r) {
        for (const auto& [path, tensor] : named_tensors(ranks[static_cast<std::size_t>(r)])) {
          INFO("world " << world << ", rank " << r << ", " << path);
          if (path == "sizes") continue;  // its explicit sizes differ per world: the CPU tests check them
          CHECK(tensor.device() == Device::cuda(static_cast<int>(r % cuda::device_count())));
          const Tensor& expected =
              parts[std::to_string(world) + "/chunk/" + std::to_string(r) + "/" + path].as_tensor();
          CHECK(tensor.to(Device::cpu()).equal(expected));
        }
      }
    }
  }
}

TEST_CASE("device tensors save as torch files", "[cuda]") {
  tensorfile_test::ScratchDir scratch;
  for (const char* name : {"state_dict_linear_bn.pt", "shared_views.pt", "noncontig_view.pt", "all_dtypes.pt"}) {
    INFO(name);
    const Value on_cpu = load_torch(sample(name));
    const Value on_gpu = cuda::load_torch(sample(name), {.map_location = "cuda:0"});
    save_torch(on_gpu, scratch / "saved.pt");
    CHECK(load_torch(scratch / "saved.pt", {.map_location = "cpu"}) == on_cpu);
  }
}

TEST_CASE("cuda::from_file reads a raw file onto the device", "[cuda]") {
  tensorfile_test::ScratchDir scratch;
  std::vector<float> values(5'000'000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  {
    std::ofstream out(scratch / "raw.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
  const Tensor mapped = tensorfile::from_file(scratch / "raw.bin");
  for (const bool direct : {false, true}) {
    const Tensor t = cuda::from_file(scratch / "raw.bin", {},
                                     {.map_location = Device::cuda(0),
                                      .direct_reads = direct ? DirectReads::always : DirectReads::never,
                                      .cuda = {.ring_bytes = 4 << 20, .slot_bytes = 1 << 20}});
    CHECK(t.device() == Device::cuda(0));
    CHECK(t.to(Device::cpu()).equal(mapped));
  }
  const Tensor part = cuda::from_file(scratch / "raw.bin", {.size = 1000, .dtype = DType::Float64});
  CHECK(part.to(Device::cpu())
            .equal(tensorfile::from_file(scratch / "raw.bin", {.size = 1000, .dtype = DType::Float64})));
  CHECK(cuda::from_file(scratch / "raw.bin", {.size = 0}).numel() == 0);
}

TEST_CASE("load_memmap to a CUDA device equals the CPU load", "[cuda]") {
  for (const char* name : {"s01_basic", "s02_dtypes", "s03_shapes", "s07_tensorclass"}) {
    INFO(name);
    const auto prefix = tensorfile_test::data_dir() / "tensordict" / name;
    NamedTensors on_cpu, on_gpu;
    leaves(load_memmap(prefix), "", on_cpu);
    leaves(load_memmap(prefix, {.map_location = Device::cuda(0)}), "", on_gpu);
    REQUIRE(on_cpu.size() == on_gpu.size());
    for (std::size_t i = 0; i < on_cpu.size(); ++i) {
      INFO(on_cpu[i].first);
      CHECK(on_gpu[i].first == on_cpu[i].first);
      CHECK(on_gpu[i].second.device() == Device::cuda(0));
      CHECK(on_gpu[i].second.to(Device::cpu()).equal(on_cpu[i].second));
    }
  }
}

TEST_CASE("cuda::load of a large file keeps host memory near the ring size", "[cuda]") {
  tensorfile_test::ScratchDir scratch;
  Dict state;
  const std::int64_t per_tensor = 16 << 20;  // 64 MiB of float32 each, 512 MiB in all
  for (int i = 0; i < 8; ++i) {
    Tensor t = Tensor::zeros({per_tensor}, DType::Float32);
    float* p = t.data<float>();
    for (std::int64_t j = 0; j < per_tensor; j += 4096) p[j] = static_cast<float>(i * 1000 + j);
    state.set("w" + std::to_string(i), t);
  }
  state.ordered = true;
  save_torch(Value(std::move(state)), scratch / "big.pt");
  const Value on_cpu = load_torch(scratch / "big.pt", {.mmap = MapMode::copy_on_write});
  (void)Tensor::zeros({1}, DType::Float32, Device::cuda(0));  // the CUDA context exists before the measurement
  std::ofstream("/proc/self/clear_refs") << "5";              // resets the peak resident size (VmHWM)
  const std::int64_t before = peak_rss_kib();
  const Value on_gpu =
      cuda::load_torch(scratch / "big.pt", {.map_location = "cuda:0", .cuda = {.ring_bytes = 64 << 20}});
  const std::int64_t growth_kib = peak_rss_kib() - before;
  INFO("peak resident growth " << growth_kib << " KiB");
  CHECK(growth_kib < 200 * 1024);  // 64 MiB ring + the runtime's own; never the 512 MiB of data
  CHECK(tensorfile_test::to_host(on_gpu) == on_cpu);
  std::set<const void*> owners;
  for (const Tensor& t : tensorfile_test::tensors_of(on_gpu)) owners.insert(t.storage().owner());
  CHECK(owners.size() == 1);  // one device allocation for the file
}

TEST_CASE("clone() and contiguous() of a CUDA tensor are contiguous", "[cuda]") {
  const Tensor t = Tensor::from_values<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  for (const Tensor& view : {t.transpose(0, 1), t.select(0, 1).unsqueeze(0).expand({4, 3}), t.narrow(1, 1, 2)}) {
    const Tensor there = view.to(Device::cuda(0));
    for (const Tensor& dense : {there.clone(), there.contiguous()}) {
      CHECK(dense.device() == Device::cuda(0));
      CHECK(dense.is_contiguous());
      CHECK(dense.storage().size_bytes() == dense.nbytes());
      CHECK(dense.to(Device::cpu()).equal(view));
    }
  }
}

TEST_CASE("cuda::load gives each empty record its own storage", "[cuda]") {
  tensorfile_test::ScratchDir scratch;
  Dict saved;
  saved.set(Value("empty_f32"), Value(Tensor::zeros({0}, DType::Float32)));
  saved.set(Value("full"), Value(Tensor::from_values<float>({1, 2, 3})));
  saved.set(Value("empty_i64"), Value(Tensor::zeros({0, 4}, DType::Int64)));
  save_torch(Value(std::move(saved)), scratch / "empties.pt");
  for (const bool cufile : {false, true}) {
    INFO("cufile " << cufile);
    const Value loaded =
        cuda::load_torch(scratch / "empties.pt", {.map_location = "cuda:0", .cuda = {.use_cufile = cufile}});
    CHECK_NOTHROW(save_torch(loaded, scratch / "again.pt"));
    CHECK(load_torch(scratch / "again.pt", {.map_location = "cpu"}) == load_torch(scratch / "empties.pt"));
  }
}

TEST_CASE("cuda::load with into reads records straight into the caller's device buffers", "[cuda]") {
  const auto tensor_at = [](const Value& v, const std::string& path) {
    for (auto& [name, t] : named_tensors(v)) {
      if (name == path) return t;
    }
    FAIL("no tensor at " << path);
    return Tensor();
  };
  const auto buffer_like = [](const Tensor& t) { return Tensor::zeros(t.sizes(), t.dtype(), Device::cuda(0)); };
  const auto file = sample("state_dict_linear_bn.pt");
  const Value plain = load_torch(file);
  for (const bool cufile : {false, true}) {
    INFO("cufile " << cufile);
    LoadOptions options{.map_location = "cuda:0", .cuda = {.use_cufile = cufile}};
    for (const auto& named : named_tensors(plain)) options.into.emplace(named.first, buffer_like(named.second));
    const Value loaded = cuda::load_torch(file, options);
    CHECK(tensorfile_test::to_host(loaded) == plain);
    for (const auto& [path, buffer] : options.into) {
      INFO(path);
      CHECK(buffer.to(Device::cpu()).equal(tensor_at(plain, path)));
      CHECK(tensor_at(loaded, path).storage().data() == buffer.storage().data());
    }
  }
  // Views and a storage two paths share: copied on the device; load_torch() with map_location fills them too.
  const auto views = sample("shared_views.pt");
  const Value viewed = load_torch(views);
  LoadOptions options{.map_location = "cuda:0"};
  LoadOptions plain_options{.map_location = "cuda:0"};
  for (const char* path : {"base", "again", "row1", "t"}) {
    options.into.emplace(path, buffer_like(tensor_at(viewed, path)));
    plain_options.into.emplace(path, buffer_like(tensor_at(viewed, path)));
  }
  CHECK(tensorfile_test::to_host(cuda::load_torch(views, options)) == viewed);
  CHECK(tensorfile_test::to_host(load_torch(views, plain_options)) == viewed);
  for (const char* path : {"base", "again", "row1", "t"}) {
    INFO(path);
    CHECK(options.into.at(path).to(Device::cpu()).equal(tensor_at(viewed, path)));
    CHECK(plain_options.into.at(path).to(Device::cpu()).equal(tensor_at(viewed, path)));
  }
  // A host buffer in a load to the device is refused: the result lives on the device.
  LoadOptions host_buffer{.map_location = "cuda:0"};
  host_buffer.into.emplace("0.weight", Tensor::zeros({2, 3}, DType::Float32));
  CHECK_THROWS_WITH(cuda::load_torch(file, host_buffer),
                    Catch::Matchers::Contains("the file's tensor loads to cuda:0, the buffer is on cpu"));
}

TEST_CASE("cuda::load leaves the calling thread's device as it was", "[cuda]") {
  const auto path = sample("state_dict_linear_bn.pt");
  const int last = cuda::device_count() - 1;
  for (const bool cufile : {false, true}) {
    INFO("cufile " << cufile);
    int after = -1;
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    (void)cuda::load_torch(path, {.map_location = "cuda:" + std::to_string(last), .cuda = {.use_cufile = cufile}});
    REQUIRE(cudaGetDevice(&after) == cudaSuccess);
    CHECK(after == 0);
  }
  if (last > 0) {  // a fresh thread that never chose a device gets no context on GPU 0 from a load to the last
    bool bound_after = true;
    int device_after = -1;
    std::jthread([&] {
      (void)cuda::load_torch(path, {.map_location = "cuda:" + std::to_string(last)});
      bound_after = detail::CudaThreadDevice::chosen();
      (void)cudaGetDevice(&device_after);  // the runtime's default again, not the load's device
    }).join();
    CHECK_FALSE(bound_after);
    CHECK(device_after == 0);
  }
}

TEST_CASE("require_cufile reads with cuFile or says why it cannot", "[cuda]") {
  const auto path = sample("state_dict_linear_bn.pt");
  const LoadOptions options{.map_location = "cuda:0", .cuda = {.use_cufile = true, .require_cufile = true}};
  const std::string why = cuda::cufile_unavailable_reason();
  if (why.empty()) {
    Value loaded;
    try {
      loaded = cuda::load_torch(path, options);
    } catch (const DeviceError& e) {  // a filesystem cuFile refuses: the message says so
      CHECK(std::string(e.reason()).rfind("cuFile cannot be used: cuFileHandleRegister refused the file", 0) == 0);
      return;
    }
    CHECK(tensorfile_test::to_host(loaded) == load_torch(path));
  } else {
    CHECK_THROWS_MATCHES(cuda::load_torch(path, options), DeviceError,
                         Catch::Matchers::Predicate<DeviceError>([&](const DeviceError& e) {
                           return e.reason() == "cuFile cannot be used: " + why && e.path() == path;
                         }));
  }
}

TEST_CASE("keep_ring reuses the ring across loads until release_ring", "[cuda]") {
  const auto path = sample("state_dict_linear_bn.pt");
  const Value expected = load_torch(path);
  const LoadOptions keep{.map_location = "cuda:0",
                         .cuda = {.ring_bytes = 1 << 20, .slot_bytes = 64 * 1024, .keep_ring = true}};
  for (int i = 0; i < 5; ++i) CHECK(tensorfile_test::to_host(cuda::load_torch(path, keep)) == expected);
  std::size_t cached_pinned = 0;
  {
    const std::lock_guard lock(detail::CudaRingCache::get().mutex);
    for (const auto& [ordinal, device] : detail::CudaRingCache::get().devices) cached_pinned += device.pinned.size();
  }
  CHECK(cached_pinned > 0);
  cuda::release_ring();
  CHECK(detail::CudaRingCache::get().devices.empty());
  CHECK(tensorfile_test::to_host(cuda::load_torch(path, keep)) == expected);
  cuda::release_ring();
}

// ---- the skip rule (tests/cuda/skip_rule.hpp), on every machine ---------------------------------

TEST_CASE("the CUDA tests skip only without a driver or a device, and fail on a driver that does not start",
          "[skip_rule]") {
  using tensorfile_test::CudaProbe;
  using tensorfile_test::CudaTestVerdict;
  using tensorfile_test::decide_cuda_tests;
  const std::string insufficient = "cudaErrorInsufficientDriver: CUDA driver version is insufficient";
  SECTION("devices: run") {
    CHECK(decide_cuda_tests({.count_ok = true, .count = 2, .driver_installed = true}).verdict == CudaTestVerdict::run);
    CHECK(decide_cuda_tests({.count_ok = true, .count = 1, .driver_installed = true, .require = true}).verdict ==
          CudaTestVerdict::run);
  }
  SECTION("no driver at all (CI): skip, with the reason") {
    const auto decision = decide_cuda_tests({.error = insufficient});
    CHECK(decision.verdict == CudaTestVerdict::skip);
    CHECK(decision.reason ==
          "no NVIDIA driver (libcuda.so.1 does not load, no /dev/nvidiactl); cudaGetDeviceCount: " + insufficient);
  }
  SECTION("a driver older than the toolkit, or one that cannot reach its GPU: fail") {
    const auto decision = decide_cuda_tests({.error = insufficient, .driver_installed = true});
    CHECK(decision.verdict == CudaTestVerdict::fail);
    CHECK(decision.reason ==
          "an NVIDIA driver is installed but CUDA does not start: cudaGetDeviceCount: " + insufficient);
    CHECK(decide_cuda_tests({.error = "cudaErrorUnknown: unknown error", .driver_installed = true}).verdict ==
          CudaTestVerdict::fail);
  }
  SECTION("a driver and no visible device: skip") {
    const auto decision = decide_cuda_tests({.no_device_error = true,
                                             .error = "cudaErrorNoDevice: no CUDA-capable device is detected",
                                             .driver_installed = true});
    CHECK(decision.verdict == CudaTestVerdict::skip);
    CHECK(decision.reason ==
          "an NVIDIA driver but 0 CUDA devices (cudaErrorNoDevice: no CUDA-capable device is detected)");
  }
  SECTION("TENSORFILE_REQUIRE_CUDA=1 turns every skip into a failure") {
    const auto decision = decide_cuda_tests({.error = insufficient, .require = true});
    CHECK(decision.verdict == CudaTestVerdict::fail);
    CHECK(decision.reason.rfind("TENSORFILE_REQUIRE_CUDA=1 and no NVIDIA driver", 0) == 0);
  }
}
