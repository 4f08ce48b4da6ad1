// SPDX-License-Identifier: MIT
// Tests of the heap load's pooled path (issue 17): records of large files read after the pickle into one
// huge-page advised arena by a few threads with preadv, and the heap backend's mapped large blocks.
#include <tensorfile/core/heap_backend.hpp>
#include <tensorfile/detail/posix/parallel_reads.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <cstdint>
#include <numeric>

#include "tensorfile_catch.hpp"
#include "torch/load_helpers.hpp"

using namespace tensorfile;

namespace {

// A dict of tensors: small ones (batched), ones over 64 KiB (deferred into the arena) and one over 2 MiB,
// each filled with values that tell its bytes from every other tensor's.
Value mixed_dict() {
  Dict dict;
  const std::int64_t sizes[] = {3, 20000, 17, 65536 / 4 + 1, 600000, 40000, 5, 100000, 1};
  int n = 0;
  for (const std::int64_t numel : sizes) {
    Tensor t(heap_storage(static_cast<std::size_t>(numel) * 4), DType::Float32, {numel});
    for (std::int64_t i = 0; i < numel; ++i) t.data<float>()[i] = static_cast<float>(n * 1000003 + i);
    dict.set(Value("layer" + std::to_string(n++) + ".weight"), Value(t));
  }
  return Value(dict);
}

// Restores map_large_heap_blocks on scope exit.
class PlainHeapBlocks {
 public:
  PlainHeapBlocks() { detail::map_large_heap_blocks = false; }
  PlainHeapBlocks(const PlainHeapBlocks&) = delete;
  PlainHeapBlocks& operator=(const PlainHeapBlocks&) = delete;
  ~PlainHeapBlocks() { detail::map_large_heap_blocks = true; }
};

}  // namespace

TEST_CASE("pooled preadv loads give the bytes of one-buffer loads, with 1 to 8 threads", "[load][parallel]") {
  const tensorfile_test::ScratchDir dir;
  const Value dict = mixed_dict();
  save(dict, dir / "mixed.pt");
  const Value whole = load(dir / "mixed.pt");
  REQUIRE(whole == dict);
  const tensorfile_test::PiecewiseHeapLoads piecewise;
  for (const std::size_t threads : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{8}}) {
    INFO(threads << " threads");
    const Value pooled = load(dir / "mixed.pt", {.read_threads = threads});
    CHECK(pooled == dict);
    // The records over 64 KiB share the arena; the small ones share their batch.
    const Storage& big = pooled["layer1.weight"].as_tensor().storage();
    CHECK(big.kind() == StorageKind::heap);
    CHECK(big.shares_owner_with(pooled["layer4.weight"].as_tensor().storage()));
    CHECK_FALSE(big.shares_owner_with(pooled["layer0.weight"].as_tensor().storage()));
  }
  SECTION("with large heap blocks from operator new (huge pages off)") {
    const PlainHeapBlocks plain;
    CHECK(load(dir / "mixed.pt", {.read_threads = 4}) == dict);
  }
  SECTION("the records bound for the meta device or through a map_location function are not deferred") {
    const Value meta = load(dir / "mixed.pt", {.map_location = "meta", .read_threads = 4});
    CHECK(meta["layer4.weight"].as_tensor().device().is_meta());
    int calls = 0;
    const Value through = load(dir / "mixed.pt", {.map_location = MapLocation([&](const Storage& s, std::string_view) {
                                                    ++calls;
                                                    return std::optional<Storage>(s);
                                                  }),
                                                  .read_threads = 4});
    CHECK(through == dict);
    CHECK(calls == 9);
  }
}

TEST_CASE("ParallelReads gathers neighbours, and a file ending early names the file, the member and the offset",
          "[load][parallel][safety]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "bytes.bin";
  std::string content(3 << 20, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 131) >> 7);
  tensorfile_test::write_text(path, content);
  const auto file = detail::FileHandle::open(path, detail::OpenMode::read);
  // Ranges with gaps, out of order, one past a 4 KiB gap limit, adjacent ones.
  const std::pair<std::uint64_t, std::size_t> ranges[] = {
      {100, 5000}, {0, 100}, {5100, 70000}, {75100 + 5000, 1 << 20}, {2 << 20, 4096}, {(2 << 20) + 4096, 1000}};
  for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
    std::vector<std::vector<std::byte>> out;
    detail::ParallelReads reads;
    for (const auto& [offset, size] : ranges) out.emplace_back(size);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < out.size(); ++i) names.push_back("member" + std::to_string(i));
    for (std::size_t i = 0; i < out.size(); ++i) reads.add(ranges[i].first, out[i], names[i]);
    reads.run(file, threads);
    CHECK(reads.empty());
    for (std::size_t i = 0; i < out.size(); ++i) {
      INFO("range " << i);
      CHECK(std::memcmp(out[i].data(), content.data() + ranges[i].first, out[i].size()) == 0);
    }
  }
  SECTION("a read past the end") {
    std::vector<std::byte> head(1000);
    std::vector<std::byte> cut(5000);
    detail::ParallelReads reads;
    reads.add(0, head, "archive/data/0");
    reads.add(content.size() - 1000, cut, "archive/data/1");
    for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
      detail::ParallelReads again = reads;
      try {
        again.run(file, threads);
        FAIL("no error");
      } catch (const FormatError& error) {
        CHECK(error.path() == path);
        CHECK(error.member() == "archive/data/1");
        CHECK(error.offset() == content.size());
      }
    }
  }
}

TEST_CASE("HeapBackend maps large blocks at huge-page boundaries, zeroed or populated, or takes operator new's",
          "[heap][parallel]") {
  const std::size_t large = detail::large_heap_block + 12345;
  for (const bool populate : {false, true}) {
    HeapBackend block(large, true, populate);
    CHECK(block.mapped());
    CHECK(reinterpret_cast<std::uintptr_t>(block.data()) % detail::huge_page == 0);
    CHECK(std::all_of(block.data(), block.data() + large, [](std::byte b) { return b == std::byte{0}; }));
    block.data()[large - 1] = std::byte{7};
    CHECK(block.data()[large - 1] == std::byte{7});
  }
  CHECK_FALSE(HeapBackend(detail::large_heap_block - 1).mapped());
  const PlainHeapBlocks plain;
  HeapBackend block(large, true);
  CHECK_FALSE(block.mapped());
  CHECK(reinterpret_cast<std::uintptr_t>(block.data()) % HeapBackend::alignment == 0);
  CHECK(block.data()[large - 1] == std::byte{0});
}
