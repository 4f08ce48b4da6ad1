// SPDX-License-Identifier: MIT
// Tests of <tensorfile/cuda/detail/ring_load.hpp> and <tensorfile/cuda/detail/ring_reader.hpp>: torch files and
// raw files streamed through the ring to fake CUDA devices, compared with the CPU load.
#include <tensorfile/cuda/detail/ring_load.hpp>
#include <tensorfile/cuda/detail/ring_reader.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <algorithm>
#include <fstream>
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

/// Progress calls, checked for order.
struct ProgressLog {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  RingProgress callback() {
    return [this](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  }
  void check() const {
    REQUIRE_FALSE(calls.empty());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      CHECK(calls[i].first <= calls[i].second);
      CHECK(calls[i].second == calls.back().second);
      if (i > 0) CHECK(calls[i].first >= calls[i - 1].first);
    }
    CHECK(calls.back().first == calls.back().second);
  }
};

void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("ring_load_torch streams every fixture to a (fake) device and matches the CPU load", "[ring][load]") {
  const RingOptions small{.ring_bytes = 48 * 1024, .slot_bytes = 16 * 1024, .threads = 3, .direct_io = false};
  const RingOptions direct{.ring_bytes = 64 * 1024, .slot_bytes = 16 * 1024, .threads = 2, .direct_io = true};
  const RingOptions separate{.ring_bytes = 1 << 20, .slot_bytes = 1 << 18, .threads = 4, .single_allocation = false};
  std::size_t loaded = 0;
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    for (const RingOptions* ring : {&small, &direct, &separate}) {
      INFO(path.filename().string() << ", slot " << ring->slot_bytes << ", single " << ring->single_allocation);
      Value on_cpu;
      try {
        on_cpu = load_torch(path, {.map_location = "cpu", .strict = false});
      } catch (const Error& e) {  // a fixture tensorfile refuses: refused the same way on a device
        CHECK_THROWS_AS(
            ring_load_torch<FakeCopyEngine>(path, LoadOptions{.map_location = "cuda:0", .strict = false}, *ring),
            Error);
        continue;
      }
      ProgressLog progress;
      const Value on_device = ring_load_torch<FakeCopyEngine>(
          path, LoadOptions{.map_location = "cuda:0", .strict = false}, *ring, progress.callback());
      for (const Tensor& t : tensorfile_test::tensors_of(on_device)) {
        CHECK(
            (t.device() == Device::cuda(0) || t.device().is_meta()));  // tensors saved on meta stay there, as in torch
      }
      CHECK(tensorfile_test::to_host(on_device) == on_cpu);
      progress.check();
      ++loaded;
    }
  }
  CHECK(loaded >= 3 * 50);
}

TEST_CASE("ring_load_torch puts a file's storages in one device allocation", "[ring][load]") {
  const auto path = tensorfile_test::data_dir() / "torch_gen" / "state_dict_1100_entries.pt";
  const Value cpu = load_torch(path);
  for (const bool single : {true, false}) {
    INFO("single allocation " << single);
    ProgressLog progress;
    const Value value = ring_load_torch<FakeCopyEngine>(path, LoadOptions{.map_location = "cuda:1"},
                                                        RingOptions{.ring_bytes = 1 << 20, .single_allocation = single},
                                                        progress.callback());
    CHECK(tensorfile_test::to_host(value) == cpu);
    const auto tensors = tensorfile_test::tensors_of(value);
    REQUIRE(tensors.size() == 1100);
    std::set<const void*> owners;
    for (const Tensor& t : tensors) {
      CHECK(t.device() == Device::cuda(1));
      owners.insert(t.storage().owner());
    }
    progress.check();
    CHECK(owners.size() == (single ? 1u : 1100u));
    std::uint64_t bytes = 0;
    for (const Tensor& t : tensors) bytes += t.storage().size_bytes();
    CHECK(progress.calls.back().second >= bytes);  // the zip headers between records ride along
    CHECK(progress.calls.back().second < bytes + 1100 * 200);
  }
}

TEST_CASE("ring_load_torch follows map_location's forms", "[ring][load]") {
  const auto saved_on_cuda = tensorfile_test::data_dir() / "torch" / "fake_cuda0.pt";
  const auto saved_on_cpu = tensorfile_test::data_dir() / "torch" / "state_dict_linear_bn.pt";
  const RingOptions ring{.ring_bytes = 1 << 20};
  SECTION("saved tags: cuda:0 storages go to cuda:0") {
    const Value value = ring_load_torch<FakeCopyEngine>(saved_on_cuda, LoadOptions{}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device() == Device::cuda(0));
    CHECK(tensorfile_test::to_host(value) == load_torch(saved_on_cuda, {.map_location = "cpu"}));
  }
  SECTION("a tag map moves cuda:0 to cuda:1 and leaves the rest") {
    const Value value = ring_load_torch<FakeCopyEngine>(
        saved_on_cuda, LoadOptions{.map_location = std::map<std::string, std::string>{{"cuda:0", "cuda:1"}}}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device() == Device::cuda(1));
    const Value kept = ring_load_torch<FakeCopyEngine>(
        saved_on_cpu, LoadOptions{.map_location = std::map<std::string, std::string>{{"cuda:0", "cuda:1"}}}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(kept)) CHECK(t.device() == Device::cpu());
    CHECK(kept == load_torch(saved_on_cpu));
  }
  SECTION("the callable form sees CPU bytes and places them itself") {
    int calls = 0;
    const MapLocation::Function to_cuda1 = [&](const Storage& cpu, std::string_view tag) -> std::optional<Storage> {
      ++calls;
      CHECK(tag == "cpu");
      return Tensor(cpu, DType::UInt8, {static_cast<std::int64_t>(cpu.size_bytes())}).to(Device::cuda(1)).storage();
    };
    const Value value = ring_load_torch<FakeCopyEngine>(saved_on_cpu, LoadOptions{.map_location = to_cuda1}, ring);
    CHECK(calls > 0);
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device() == Device::cuda(1));
    CHECK(tensorfile_test::to_host(value) == load_torch(saved_on_cpu));
  }
  SECTION("meta keeps shapes only") {
    ProgressLog progress;
    const Value value =
        ring_load_torch<FakeCopyEngine>(saved_on_cpu, LoadOptions{.map_location = "meta"}, ring, progress.callback());
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device() == Device::meta());
    CHECK(progress.calls == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 0}});
  }
  SECTION("a legacy file loads through the usual path") {
    const auto legacy = tensorfile_test::data_dir() / "torch" / "legacy_format.pt";
    const Value value = ring_load_torch<FakeCopyEngine>(legacy, LoadOptions{.map_location = "cuda:0"}, ring);
    for (const Tensor& t : tensorfile_test::tensors_of(value)) CHECK(t.device() == Device::cuda(0));
    CHECK(tensorfile_test::to_host(value) == load_torch(legacy));
  }
}

TEST_CASE("ring_load_torch reports a missing device as load_torch() does", "[ring][load]") {
  const auto path = tensorfile_test::data_dir() / "torch" / "t_float32_2x3.pt";
  std::string plain_message;
  try {
    (void)load_torch(path, {.map_location = "cuda:7"});
  } catch (const DeviceError& e) {
    plain_message = e.what();
  }
  REQUIRE_FALSE(plain_message.empty());
  CHECK(plain_message.find("storage tagged \"cpu\": device cuda:7 does not exist; expected an index below 2") !=
        std::string::npos);
  try {
    (void)ring_load_torch<FakeCopyEngine>(path, LoadOptions{.map_location = "cuda:7"}, RingOptions{});
    FAIL("expected a DeviceError");
  } catch (const DeviceError& e) {
    CHECK(std::string(e.what()) == plain_message);
    CHECK(e.path() == path);
  }
}

TEST_CASE("ring_load_torch refuses what load refuses", "[ring][load]") {
  tensorfile_test::ScratchDir scratch;
  const auto source = tensorfile_test::data_dir() / "torch_gen" / "many_storages_12.pt";
  const auto size = std::filesystem::file_size(source);
  std::filesystem::copy_file(source, scratch / "cut.pt");
  std::filesystem::resize_file(scratch / "cut.pt", size - 30);  // the zip index is gone
  CHECK_THROWS_AS(load_torch(scratch / "cut.pt"), FormatError);
  CHECK_THROWS_AS(
      ring_load_torch<FakeCopyEngine>(scratch / "cut.pt", LoadOptions{.map_location = "cuda:0"}, RingOptions{}),
      FormatError);
  CHECK_THROWS_AS(ring_load_torch<FakeCopyEngine>(scratch / "missing.pt", LoadOptions{}, RingOptions{}), IoError);
  CHECK_THROWS_WITH(ring_load_torch<FakeCopyEngine>(source, LoadOptions{}, RingOptions{.ring_bytes = 0}),
                    "tensorfile: ring_bytes and slot_bytes must be positive; got 0 and 16777216");
}

TEST_CASE("ring_read_file streams a raw file to the device in ring-sized pieces", "[ring][load]") {
  tensorfile_test::ScratchDir scratch;
  std::vector<std::byte> bytes(3 * 1024 * 1024 + 123);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 7919) >> 3);
  write_file(scratch / "raw.bin", bytes);
  auto tracker = std::make_shared<tensorfile_test::FakeTracker>();
  FakeCopyEngine::default_tracker() = tracker;
  for (const bool direct : {false, true}) {
    INFO("direct " << direct);
    ProgressLog progress;
    const Storage storage = ring_read_file<FakeCopyEngine>(
        scratch / "raw.bin", bytes.size() - 100, Device::cuda(0),
        RingOptions{.ring_bytes = 256 * 1024, .slot_bytes = 64 * 1024, .threads = 4, .direct_io = direct},
        progress.callback());
    CHECK(storage.device() == Device::cuda(0));
    REQUIRE(storage.size_bytes() == bytes.size() - 100);
    CHECK(std::memcmp(storage.data(), bytes.data(), storage.size_bytes()) == 0);  // fake device memory is host memory
    progress.check();
    CHECK(progress.calls.size() == (bytes.size() - 100 + 65535) / 65536);
    CHECK(tracker->peak_pinned <= 256 * 1024);
    CHECK(tracker->live_pinned == 0);
    CHECK(tracker->violations == 0);
  }
  FakeCopyEngine::default_tracker() = std::make_shared<tensorfile_test::FakeTracker>();
  SECTION("an empty file") {
    write_file(scratch / "empty.bin", {});
    ProgressLog progress;
    const Storage storage =
        ring_read_file<FakeCopyEngine>(scratch / "empty.bin", 0, Device::cuda(0), RingOptions{}, progress.callback());
    CHECK(storage.size_bytes() == 0);
    CHECK(progress.calls == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 0}});
  }
}

TEST_CASE("PosixRangeReader reads ranges, short at the end of the file, buffered or direct", "[ring][reader]") {
  tensorfile_test::ScratchDir scratch;
  std::vector<std::byte> bytes(3 * 4096 + 100);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i % 251);
  write_file(scratch / "data.bin", bytes);
  for (const std::optional<bool> direct :
       {std::optional<bool>(false), std::optional<bool>(true), std::optional<bool>()}) {
    INFO("direct " << (direct ? (*direct ? "on" : "off") : "auto"));
    const PosixRangeReader reader(scratch / "data.bin", direct);
    if (direct != true) CHECK(reader.alignment() == 1);  // auto: a small, cached file reads normally
    CHECK(reader.size() == bytes.size());
    auto* buffer = static_cast<std::byte*>(::operator new (4 * 4096, std::align_val_t{4096}));
    const std::span<std::byte> out(buffer, 4 * 4096);
    CHECK(reader.read(0, out.first(4096)) == 4096);
    CHECK(std::memcmp(buffer, bytes.data(), 4096) == 0);
    CHECK(reader.read(4096, out) == bytes.size() - 4096);  // short: the end of the file
    CHECK(std::memcmp(buffer, bytes.data() + 4096, bytes.size() - 4096) == 0);
    CHECK(reader.read(bytes.size() + 4096 * 2, out.first(4096)) == 0);
    ::operator delete (buffer, std::align_val_t{4096});
  }
  CHECK_THROWS_MATCHES(PosixRangeReader(scratch / "missing.bin", std::nullopt), IoError,
                       Catch::Matchers::Predicate<IoError>([&](const IoError& e) {
                         return e.error_number() == ENOENT &&
                                std::string(e.what()) == "tensorfile: " + (scratch / "missing.bin").string() +
                                                             ": cannot open for reading: No such file or directory";
                       }));
  CHECK(page_cache_fraction(-1, 4096) == 1.0);
}

TEST_CASE("ring_load_torch gives each empty record its own storage, so save_torch() keeps them apart", "[ring][load]") {
  tensorfile_test::ScratchDir scratch;
  Dict saved;
  saved.set(Value("empty_f32"), Value(Tensor::zeros({0}, DType::Float32)));
  saved.set(Value("full"), Value(Tensor::from_values<float>({1, 2, 3})));
  saved.set(Value("empty_i64"), Value(Tensor::zeros({0, 4}, DType::Int64)));
  saved.set(Value("empty_f64"), Value(Tensor::zeros({2, 0}, DType::Float64)));
  save_torch(Value(std::move(saved)), scratch / "empties.pt");
  for (const bool single : {true, false}) {
    INFO("single allocation " << single);
    const Value loaded = ring_load_torch<FakeCopyEngine>(scratch / "empties.pt", LoadOptions{.map_location = "cuda:0"},
                                                         RingOptions{.single_allocation = single});
    const auto tensors = tensorfile_test::tensors_of(loaded);
    REQUIRE(tensors.size() == 4);
    std::set<std::pair<const void*, std::size_t>> identities;
    for (const Tensor& t : tensors) {
      const Storage& s = t.storage();
      identities.emplace(s.data() != nullptr ? static_cast<const void*>(s.data()) : s.owner(), s.size_bytes());
    }
    CHECK(identities.size() == 4);
    CHECK_NOTHROW(save_torch(loaded, scratch / "again.pt"));
    CHECK(load_torch(scratch / "again.pt", {.map_location = "cpu"}) == load_torch(scratch / "empties.pt"));
  }
}
