// SPDX-License-Identifier: MIT
// Tests of the heap load's pooled path (issue 17): a zip file's records read after the pickle into one arena
// (huge-page advised when asked) by a few threads with preadv, and the heap backend's mapped large blocks.
#include <tensorfile/backends/borrowed.hpp>
#include <tensorfile/core/heap_backend.hpp>
#include <tensorfile/detail/posix/direct_reads.hpp>
#include <tensorfile/detail/posix/parallel_reads.hpp>
#include <tensorfile/detail/zip/crc32.hpp>
#include <tensorfile/detail/zip/writer.hpp>
#include <tensorfile/formats/torch/archive.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "page_cache.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {

// A dict of tensors: small ones, ones over 64 KiB and one over 2 MiB (all deferred into the arena),
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
  save_torch(dict, dir / "mixed.pt");
  for (const std::size_t threads : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{8}}) {
    INFO(threads << " threads");
    const Value pooled = load_torch(dir / "mixed.pt", {.threads = threads});
    CHECK(pooled == dict);
    // Every record, small or large, is a slice of the one arena.
    const Storage& big = pooled["layer1.weight"].as_tensor().storage();
    CHECK(big.kind() == StorageKind::heap);
    CHECK(big.shares_owner_with(pooled["layer4.weight"].as_tensor().storage()));
    CHECK(big.shares_owner_with(pooled["layer0.weight"].as_tensor().storage()));
  }
  SECTION("with large heap blocks from operator new (none mapped)") {
    const PlainHeapBlocks plain;
    CHECK(load_torch(dir / "mixed.pt", {.threads = 4}) == dict);
  }
  SECTION("the records bound for the meta device or through a map_location function are not deferred") {
    const Value meta = load_torch(dir / "mixed.pt", {.map_location = "meta", .threads = 4});
    CHECK(meta["layer4.weight"].as_tensor().device().is_meta());
    int calls = 0;
    const Value through =
        load_torch(dir / "mixed.pt", {.map_location = MapLocation([&](const Storage& s, std::string_view) {
                                        ++calls;
                                        return std::optional<Storage>(s);
                                      }),
                                      .threads = 4});
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

using tensorfile_test::cached_fraction_of;
using tensorfile_test::evict_from_page_cache;

TEST_CASE("cached_fraction tells how much of a range the page cache holds, every page or by samples",
          "[load][parallel][direct]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "half.bin";
  tensorfile_test::write_text(path, std::string(std::size_t{8} << 20, 'x'));  // 2,048 pages
  evict_from_page_cache(path);
  const auto file = detail::FileHandle::open(path, detail::OpenMode::read);
  CHECK(detail::cached_fraction(file, 0, file.size(), 4096) < 0.01);
  // Writing the first half puts exactly its pages in the cache: no read, so no readahead still in flight
  // when the fractions below are asked for.
  const std::vector<std::byte> first_half(std::size_t{4} << 20, std::byte{'y'});
  detail::FileHandle::open(path, detail::OpenMode::read_write).write_all(0, first_half);
  CHECK(detail::cached_fraction(file, 0, std::size_t{4} << 20) > 0.99);
  CHECK(detail::cached_fraction(file, std::size_t{4} << 20, std::size_t{4} << 20) < 0.01);
  for (const std::size_t sampled : {std::size_t{4096}, std::size_t{1024}, std::size_t{64}}) {
    INFO(sampled << " pages asked at most");
    CHECK(std::abs(detail::cached_fraction(file, 0, file.size(), sampled) - 0.5) < 0.05);
  }
  CHECK(detail::cached_fraction(file, 0, 0) == 1.0);  // nothing to tell
}

TEST_CASE("ParallelReads reads groups that land in a FileMirror around the page cache", "[load][parallel][direct]") {
  const tensorfile_test::ScratchDir dir;
  const auto path = dir / "bytes.bin";
  std::string content(6 << 20, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 131) >> 7);
  tensorfile_test::write_text(path, content);
  const auto file = detail::FileHandle::open(path, detail::OpenMode::read);
  const std::optional<detail::FileHandle> direct = detail::open_direct(file);
  if (!direct) WARN("the file system of " << dir.path() << " refuses O_DIRECT: only the fallback is checked");
  // The file from byte 4096 on, mirrored in huge-page aligned memory; ranges at unaligned offsets with gaps.
  HeapBackend memory(content.size() - 4096, true);
  const detail::FileMirror mirror{direct ? &*direct : nullptr, {memory.data(), memory.size_bytes()}, 4096};
  const std::pair<std::uint64_t, std::size_t> ranges[] = {
      {4096 + 100, 5000}, {4096 + 5100 + 64, 3 << 20}, {(4 << 20) + 7, (1 << 20) + 3}, {(5 << 20) + 3000, 100}};
  const auto run = [&](std::size_t threads) {
    detail::ParallelReads reads;
    for (const auto& [offset, size] : ranges) reads.add(offset, {memory.data() + (offset - 4096), size}, "member");
    reads.run(file, threads, &mirror);
    for (const auto& [offset, size] : ranges) {
      INFO("range at " << offset);
      CHECK(std::memcmp(memory.data() + (offset - 4096), content.data() + offset, size) == 0);
    }
  };
  for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
    INFO(threads << " threads");
    std::fill(memory.data(), memory.data() + memory.size_bytes(), std::byte{0});
    evict_from_page_cache(path);
    REQUIRE(cached_fraction_of(path) < 0.01);
    run(threads);
    // Read directly, partial first and last pages too, the ranges leave nothing in the cache.
    if (direct) CHECK(cached_fraction_of(path) < 0.01);
  }
  SECTION("destinations outside the mirror are read through the cache") {
    evict_from_page_cache(path);
    std::vector<std::byte> elsewhere(2 << 20);
    detail::ParallelReads reads;
    reads.add(8192, elsewhere, "member");
    reads.run(file, 2, &mirror);
    CHECK(std::memcmp(elsewhere.data(), content.data() + 8192, elsewhere.size()) == 0);
    CHECK(cached_fraction_of(path) > 0.3);
  }
  SECTION("a file ending inside a mirrored group names the member and the offset") {
    HeapBackend longer(content.size() + (1 << 20), true);
    const detail::FileMirror past_end{mirror.direct, {longer.data(), longer.size_bytes()}, 0};
    detail::ParallelReads reads;
    reads.add(8192, {longer.data() + 8192, content.size()}, "archive/data/9");
    try {
      reads.run(file, 1, &past_end);
      FAIL("no error");
    } catch (const FormatError& error) {
      CHECK(error.path() == path);
      CHECK(error.member() == "archive/data/9");
      CHECK(error.offset() == content.size());
    }
  }
}

TEST_CASE("DirectReads: heap loads read records around the page cache when told or when cold and large",
          "[load][parallel][direct]") {
  const tensorfile_test::ScratchDir dir;
  const Value dict = mixed_dict();
  save_torch(dict, dir / "mixed.pt");
  const auto path = dir / "mixed.pt";
  const bool direct_possible = tensorfile_test::direct_reads_possible(path);
  if (!direct_possible) WARN("the file system of " << dir.path() << " refuses O_DIRECT: only the fallback is checked");
  for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
    INFO(threads << " threads");
    evict_from_page_cache(path);
    const Value loaded = load_torch(path, {.threads = threads, .direct_reads = DirectReads::always});
    CHECK(loaded == dict);
    // The index, the pickle and the small records went through the cache; the 2.4 MB record did not.
    if (direct_possible) CHECK(cached_fraction_of(path) < 0.5);
    const Storage& big = loaded["layer4.weight"].as_tensor().storage();
    CHECK(big.shares_owner_with(loaded["layer0.weight"].as_tensor().storage()));
    CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % HeapBackend::alignment == 0);
  }
  SECTION("never, and automatic on a file under 64 MiB of records, read through the cache") {
    for (const DirectReads how : {DirectReads::never, DirectReads::automatic}) {
      evict_from_page_cache(path);
      CHECK(load_torch(path, {.direct_reads = how}) == dict);
      CHECK(cached_fraction_of(path) > 0.9);
    }
  }
  SECTION("legacy files are read whole the same way") {
    const auto legacy = tensorfile_test::data_dir() / "torch" / "legacy_format.pt";
    CHECK(load_torch(legacy, {.threads = 3, .direct_reads = DirectReads::always}) ==
          load_torch(legacy, {.direct_reads = DirectReads::never}));
  }
  SECTION("select and into still apply") {
    evict_from_page_cache(path);
    const Value one =
        load_torch(path, {.select = select_paths({"layer4.weight"}), .direct_reads = DirectReads::always});
    CHECK(one["layer4.weight"] == dict["layer4.weight"]);
    CHECK(one["layer1.weight"].as_tensor().device().is_meta());
    std::vector<float> buffer(600000);
    const Tensor target(Storage(BorrowedBackend(std::as_writable_bytes(std::span(buffer)))), DType::Float32, {600000});
    const Value into = load_torch(path, {.into = {{"layer4.weight", target}}, .direct_reads = DirectReads::always});
    CHECK(into == dict);
    CHECK(buffer[12345] == dict["layer4.weight"].as_tensor().data<float>()[12345]);
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

TEST_CASE("HeapBackend keeps the last released large block for the next block of about its size", "[heap][parallel]") {
  const std::size_t large = detail::large_heap_block + 12345;
  std::byte* first = nullptr;
  {
    HeapBackend block(large, false);
    REQUIRE(block.mapped());
    first = block.data();
    std::memset(first, 0x5a, large);
  }
  CHECK(detail::kept_heap_block.load() == first);
  {
    const HeapBackend again(large, true);
    CHECK(again.data() == first);
    CHECK(std::all_of(again.data(), again.data() + large, [](std::byte b) { return b == std::byte{0}; }));
    CHECK(detail::kept_heap_block.load() == nullptr);  // taken, not shared
  }
  std::byte* twice = nullptr;
  {
    const HeapBackend twice_as_large(2 * large, false);  // too large for the kept block, which stays kept
    twice = twice_as_large.data();
    CHECK(twice != first);
    CHECK(detail::kept_heap_block.load() == first);
  }
  CHECK(detail::kept_heap_block.load() == twice);  // the last released is kept, the one before unmapped
  std::byte* half = nullptr;
  {
    const HeapBackend half_as_large(large, false);
    half = half_as_large.data();
    CHECK(detail::kept_heap_block.load() == twice);  // more than a quarter too large for it: left kept
  }
  CHECK(detail::kept_heap_block.load() == half);
  { const HeapBackend over(detail::kept_heap_block_max + 4096, false); }  // too large to keep: unmapped
  CHECK(detail::kept_heap_block.load() == half);
  // A block is reused only with the huge-page advice it was mapped with.
  std::byte* advised = nullptr;
  {
    const HeapBackend huge(large, false, false, HugePages::on);
    advised = huge.data();
  }
  CHECK(detail::kept_heap_block.load() == advised);
  std::byte* unadvised = nullptr;
  {
    const HeapBackend plain(large, false, false, HugePages::off);
    unadvised = plain.data();
    CHECK(unadvised != advised);
    CHECK(detail::kept_heap_block.load() == advised);  // left kept
  }
  CHECK(detail::kept_heap_block.load() == unadvised);
  {
    const HeapBackend huge(large, false, false, HugePages::on);
    CHECK(huge.data() != unadvised);
    CHECK(detail::kept_heap_block.load() == unadvised);  // left kept
  }
  {
    const HeapBackend plain(large, false, false, HugePages::off);
    CHECK(plain.data() != detail::kept_heap_block.load());  // the advised block just released stays kept
  }
}

using tensorfile_test::bytes_read_so_far;

TEST_CASE("select reads only the selected tensors' records, the others come back as meta tensors", "[load][select]") {
  const tensorfile_test::ScratchDir dir;
  Dict dict;
  for (int i = 0; i < 300; ++i) {  // 128 KiB each: the fixed reads (index, pickle, 64 KiB tail) stay under 1%
    Tensor t(heap_storage(32768 * 4), DType::Float32, {256, 128});
    for (std::int64_t k = 0; k < t.numel(); k += 97) t.data<float>()[k] = static_cast<float>(i * 100000 + k);
    dict.set(Value("layers." + std::to_string(i) + ".weight"), Value(t));
  }
  const Value expected(dict);
  save_torch(expected, dir / "model.pt");
  const auto file_bytes = std::filesystem::file_size(dir / "model.pt");

  SECTION("one tensor of 300 by name: under 1% of the file read, whatever the thread count") {
    for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
      const std::uint64_t before = bytes_read_so_far();
      const Value loaded =
          load_torch(dir / "model.pt", {.select = select_paths({"layers.7.weight"}), .threads = threads});
      const std::uint64_t read = bytes_read_so_far() - before;
      CHECK(read < file_bytes / 100);
      CHECK(read >= 32768 * 4);
      CHECK(loaded["layers.7.weight"] == expected["layers.7.weight"]);
      const Tensor& other = loaded["layers.8.weight"].as_tensor();
      CHECK(other.device().is_meta());
      CHECK(other.dtype() == DType::Float32);
      CHECK(other.sizes() == Shape{256, 128});
      CHECK(named_tensors(loaded).size() == 300);
    }
  }
  SECTION("glob patterns and predicates; everything selected is a plain load") {
    const Value globbed = load_torch(dir / "model.pt", {.select = select_paths({"layers.1?.weight", "layers.3*"})});
    int host = 0;
    for (const auto& [path, t] : named_tensors(globbed)) {
      if (t.device().is_cpu()) {
        ++host;
        CHECK(Value(t) == expected[path]);
      }
    }
    CHECK(host == 10 + 1 + 10);  // layers.1x, layers.3, layers.3x
    const Value all = load_torch(dir / "model.pt", {.select = [](std::string_view) { return true; }});
    CHECK(all == Value(dict));
    const Value dropped =
        load_torch(dir / "model.pt", {.select = select_paths({"layers.5.weight"}), .select_drops = true});
    REQUIRE(dropped.as_dict().size() == 1);
    CHECK(dropped["layers.5.weight"] == expected["layers.5.weight"]);
    const Value none = load_torch(dir / "model.pt", {.select = [](std::string_view) { return false; }});
    for (const auto& [path, t] : named_tensors(none)) CHECK(t.device().is_meta());
  }
  SECTION("mmap and in-memory loads give the same selection") {
    const auto pick = select_paths({"layers.42.weight"});
    const Value mapped = load_torch(dir / "model.pt", {.mmap = MapMode::read_only, .select = pick});
    CHECK(mapped["layers.42.weight"] == expected["layers.42.weight"]);
    CHECK(mapped["layers.41.weight"].as_tensor().device().is_meta());
    const std::string bytes = tensorfile_test::read_text(dir / "model.pt");
    const Value span_loaded = load_torch(std::as_bytes(std::span(bytes.data(), bytes.size())), {.select = pick});
    CHECK(span_loaded["layers.42.weight"] == expected["layers.42.weight"]);
    CHECK(span_loaded["layers.0.weight"].as_tensor().device().is_meta());
  }
}

TEST_CASE("select: the tensors over one dropped storage share one meta stand-in and keep what they were",
          "[load][select]") {
  const tensorfile_test::ScratchDir dir;
  Tensor whole(heap_storage(64 * 4), DType::Float32, {8, 8});
  whole.set_requires_grad(true);
  Dict dict;
  dict.set(Value("weight"), Value::parameter(whole));
  dict.set(Value("row"), Value(Tensor(whole.storage(), DType::Float32, {8}, {1}, 8)));
  dict.set(Value("kept"), Value(Tensor(heap_storage(16), DType::Int32, {4})));
  const Value same_object(Tensor(heap_storage(8), DType::Int64, {1}));
  dict.set(Value("pair"), Value::tuple({same_object, same_object}));
  save_torch(Value(dict), dir / "model.pt");
  for (const bool drops : {false, true}) {
    INFO("select_drops " << drops);
    const Value loaded = load_torch(dir / "model.pt", {.select = select_paths({"kept"}), .select_drops = drops});
    CHECK(loaded["kept"].as_tensor().device().is_cpu());
    CHECK(loaded.as_dict().contains(Value("weight")) == !drops);
    if (!drops) {
      const Value& weight = loaded["weight"];
      const Tensor& row = loaded["row"].as_tensor();
      CHECK(weight.is_parameter());
      CHECK(weight.as_tensor().requires_grad());
      CHECK(weight.as_tensor().device().is_meta());
      CHECK(row.device().is_meta());
      CHECK(row.storage_offset() == 8);
      CHECK(row.storage().shares_owner_with(weight.as_tensor().storage()));
      CHECK(row.storage().size_bytes() == 64 * 4);
    }
    // a tuple is no dict: its tensors stay, as meta tensors, with drops too
    const auto& pair = loaded["pair"].as_tuple();
    REQUIRE(pair.size() == 2);
    CHECK(pair[0].as_tensor().device().is_meta());
    CHECK(pair[1].as_tensor().storage().shares_owner_with(pair[0].as_tensor().storage()));
  }
}

TEST_CASE("a load sizes the first dict written in full batches for the file's records, once", "[load]") {
  const tensorfile_test::ScratchDir dir;
  // 1,500 tensors in the model (a full batch of 1,000 pairs, then 500), `extra` more records in a list after it,
  // and a dict of plain items after that (in batches too).
  const auto checkpoint = [](int extra) {
    Dict model;
    for (int i = 0; i < 1500; ++i) {
      model.set(Value("w" + std::to_string(i)), Value(Tensor(heap_storage(4), DType::Float32, {1})));
    }
    List buffers;
    for (int i = 0; i < extra; ++i) buffers.push_back(Value(Tensor(heap_storage(4), DType::Float32, {1})));
    Dict other;
    for (int i = 0; i < 1200; ++i) other.set(Value("k" + std::to_string(i)), Value(std::int64_t{i}));
    Dict top;
    top.set(Value("model"), Value(model));
    top.set(Value("buffers"), Value(buffers));
    top.set(Value("other"), Value(other));
    return Value(top);
  };
  for (const int extra : {200, 800}) {
    INFO(extra << " records beside the model's");
    const Value saved = checkpoint(extra);
    save_torch(saved, dir / "checkpoint.pt");
    for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
      const Value loaded = load_torch(dir / "checkpoint.pt", {.threads = threads});
      CHECK(loaded == saved);
      // The model's dict got room for every record at its first batch (growing, it would end at 1,500); at
      // STOP, room more than a quarter over its size was given back.
      CHECK(detail::ValueAccess::room(loaded["model"].as_dict()) == (extra == 200 ? 1700 : 1500));
      // The dict after it grew as before (1,000, then a quarter more), not sized for the records again.
      CHECK(detail::ValueAccess::room(loaded["other"].as_dict()) == 1250);
    }
  }
}

TEST_CASE("tensors as dict keys load as distinct keys, read, also under select", "[load][select]") {
  const tensorfile_test::ScratchDir dir;
  Dict keyed;  // three keys of equal values: three keys, as in torch (tensors hash by identity)
  for (int i = 0; i < 3; ++i) keyed.set(Value(Tensor::from_values<float>({7, 8, 9})), Value(std::int64_t{i}));
  const Value both(Tensor::from_values<float>({4, 5}));  // one tensor as a key and as a value
  keyed.set(both, both);
  Dict top;
  top.set(Value("keyed"), Value(keyed));
  top.set(Value("w"), Value(Tensor::from_values<float>({1})));
  save_torch(Value(top), dir / "keys.pt");
  for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
    for (const bool picked : {false, true}) {
      INFO(threads << " threads, select: " << picked);
      LoadOptions options{.threads = threads};
      if (picked) options.select = select_paths({"w"});
      const Value loaded = load_torch(dir / "keys.pt", options);
      const Dict& got = loaded["keyed"].as_dict();
      REQUIRE(got.size() == 4);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const Value& key = got.items()[i].first;
        CHECK(got.find(key) == &got.items()[i].second);  // each key finds its own item
        CHECK(key.as_tensor().device().is_cpu());        // keys have no path to deselect: always read
        CHECK(key == keyed.items()[i].first);            // with the values saved
      }
      const Value& value = got.items()[3].second;
      CHECK(value == both);
    }
  }
}

TEST_CASE("select on torch-written files: legacy format, conj/neg views, shared views", "[load][select]") {
  const auto sample = [](const std::string& name) { return tensorfile_test::data_dir() / "torch" / name; };
  SECTION("everything selected loads as without select (reads deferred past conj/neg materialization)") {
    for (const auto& path : tensorfile_test::torch_fixtures()) {
      INFO(path.filename().string());
      bool plain_ok = true;
      Value plain;
      try {
        plain = load_torch(path);
      } catch (const Error&) {
        plain_ok = false;  // files strict loads refuse (code, quantized ...) refuse the same with select
      }
      if (plain_ok) {
        CHECK(load_torch(path, {.select = [](std::string_view) { return true; }}) == plain);
      } else {
        CHECK_THROWS_AS(load_torch(path, {.select = [](std::string_view) { return true; }}), Error);
      }
    }
  }
  SECTION("legacy: the unselected tensor is meta") {
    const Value plain = load_torch(sample("legacy_format.pt"));
    const Value picked = load_torch(sample("legacy_format.pt"), {.select = select_paths({"a"})});
    CHECK(picked["a"] == plain["a"]);
    CHECK(picked["b"].as_tensor().device().is_meta());
    CHECK(picked["b"].as_tensor().sizes() == plain["b"].as_tensor().sizes());
  }
}

namespace {

// 2,000 small tensors (each record lies in the window the zip reader reads with its local header), three past
// the windows' 4 KiB gap, two views of one storage and a plain value.
Value many_small_dict() {
  Dict dict;
  for (int n = 0; n < 2000; ++n) {
    const std::int64_t numel = 1 + (n * 37) % 300 + (n % 500 == 7 ? 5000 : 0);
    Tensor t(heap_storage(static_cast<std::size_t>(numel) * 4), DType::Float32, {numel});
    for (std::int64_t i = 0; i < numel; ++i) t.data<float>()[i] = static_cast<float>(n * 1000003 + i);
    dict.set(Value("block" + std::to_string(n / 4) + ".w" + std::to_string(n % 4)), Value(t));
  }
  const Tensor whole = dict.at(Value("block0.w1")).as_tensor();
  dict.set(Value("view.head"), Value(Tensor(whole.storage(), DType::Float32, {10}, {1}, 0)));
  dict.set(Value("view.tail"), Value(Tensor(whole.storage(), DType::Float32, {5}, {2}, 20)));
  dict.set(Value("step"), Value(std::int64_t{12345}));
  return Value(dict);
}

// The offset of the local header of `member` (its name's first appearance: local headers precede the central
// directory).
std::size_t local_header_of(const std::string& bytes, const std::string& member) {
  const std::size_t name = bytes.find(member);
  REQUIRE(name != std::string::npos);
  REQUIRE(name >= 30);
  REQUIRE(bytes.compare(name - 30, 4, "PK\x03\x04") == 0);
  return name - 30;
}

}  // namespace

TEST_CASE("heap loads read the local headers beside the pickle and take small records from the windows read for them",
          "[load][parallel]") {
  const tensorfile_test::ScratchDir dir;
  const Value dict = many_small_dict();
  const auto path = dir / "small.pt";
  save_torch(dict, path);
  const std::uint64_t file_bytes = std::filesystem::file_size(path);
  std::uint64_t pickle_bytes = 0;
  for (const ArchiveRecord& record : list_records(path)) {
    if (record.name == "small/data.pkl") pickle_bytes = record.size;
  }
  REQUIRE(pickle_bytes > 0);
  // One thread: every header before the pickle, the records after it (each byte of a record read twice).
  std::uint64_t before = tensorfile_test::bytes_read_so_far();
  CHECK(load_torch(path, {.threads = 1}) == dict);
  const std::uint64_t read_alone = tensorfile_test::bytes_read_so_far() - before;
  CHECK(read_alone > file_bytes * 3 / 2);
  for (const std::size_t threads : {std::size_t{2}, std::size_t{3}}) {
    INFO(threads << " threads");
    before = tensorfile_test::bytes_read_so_far();
    const Value beside = load_torch(path, {.threads = threads});
    const std::uint64_t read = tensorfile_test::bytes_read_so_far() - before;
    CHECK(beside == dict);
    // The small records come from the header windows, not a second read; the pickle is read twice, a window at a
    // time (its memo scan, then its run).
    CHECK(read < file_bytes * 21 / 20 + pickle_bytes);
    const Tensor& head = beside["view.head"].as_tensor();
    const Tensor& tail = beside["view.tail"].as_tensor();
    CHECK(head.storage().shares_owner_with(tail.storage()));
    CHECK(head.storage().data() == tail.storage().data());
    CHECK(head.storage().data() == beside["block0.w1"].as_tensor().storage().data());
  }
  SECTION("meta and select loads of many records give the same tensors with the headers read first or beside") {
    for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
      INFO(threads << " threads");
      const Value meta = load_torch(path, {.map_location = "meta", .threads = threads});
      CHECK(named_tensors(meta).size() == named_tensors(dict).size());
      for (const auto& [name, t] : named_tensors(meta)) {
        CHECK(t.device().is_meta());
        CHECK(t.sizes() == dict[name].as_tensor().sizes());
      }
      const Value picked = load_torch(path, {.select = select_paths({"block7.*"}), .threads = threads});
      for (const auto& [name, t] : named_tensors(picked)) {
        INFO(name);
        CHECK(t.device().is_cpu() == name.starts_with("block7."));
        if (t.device().is_cpu()) CHECK(Value(t) == dict[name]);
      }
    }
  }
  SECTION("records through a map_location function: the headers first, as before") {
    const Value through = load_torch(
        path,
        {.map_location = MapLocation([](const Storage& s, std::string_view) { return std::optional<Storage>(s); }),
         .threads = 2});
    CHECK(through == dict);
  }
  SECTION("a bad local header is reported with its member and offset, before what the pickle found meanwhile") {
    std::string bytes = tensorfile_test::read_text(path);
    std::size_t stop = 0;  // the pickle's last byte
    for (const ArchiveRecord& record : list_records(path)) {
      if (record.name == "small/data.pkl") stop = static_cast<std::size_t>(record.offset + record.size - 1);
    }
    const std::size_t bad = local_header_of(bytes, "small/data/1500");
    bytes.replace(bad, 4, "PK\x07\x08");
    tensorfile_test::write_text(path, bytes);
    const LoadOptions to_meta{.map_location = "meta"};
    const LoadOptions selected{.select = select_paths({"block0.w1"})};
    for (const LoadOptions& how : {LoadOptions{}, to_meta, selected}) {
      for (const std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
        INFO(threads << " threads, meta: " << how.map_location.all_meta() << ", select: " << bool(how.select));
        LoadOptions options = how;
        options.threads = threads;
        try {
          (void)load_torch(path, options);
          FAIL("a load with a bad local header succeeded");
        } catch (const FormatError& e) {
          CHECK(e.member() == "small/data/1500");
          CHECK(e.offset() == bad);
          CHECK_THAT(e.reason(), Catch::Matchers::StartsWith("bad local file header signature"));
        }
      }
    }
    // The pickle's last opcode (STOP) made unknown too: the header's error still comes first.
    REQUIRE(bytes[stop] == '.');
    bytes[stop] = '\xff';
    tensorfile_test::write_text(path, bytes);
    try {
      (void)load_torch(path, {.threads = 2});
      FAIL("a load with a bad local header and a bad pickle succeeded");
    } catch (const FormatError& e) {
      CHECK(e.member() == "small/data/1500");
    }
  }
}

namespace {

// `archive` (a torch zip in memory) written again with the record `deflated` (a name past the prefix) compressed:
// as a single stored DEFLATE block, so that it has no place in a heap load's arena and is read on its own.
std::vector<std::byte> with_deflated_record(std::span<const std::byte> archive, const std::string& deflated) {
  const ArchiveInfo info = read_archive_info(archive);
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::ZipWriter zip(sink, info.prefix, 64);
  const bool all_stored = std::all_of(info.records.begin(), info.records.end(),
                                      [](const ArchiveRecord& r) { return r.compression == Compression::stored; });
  REQUIRE(all_stored);
  for (const ArchiveRecord& record : info.records) {
    const auto bytes = archive.subspan(static_cast<std::size_t>(record.offset), static_cast<std::size_t>(record.size));
    const std::string name = record.name.substr(info.prefix.size() + 1);
    if (name != deflated) {
      zip.add(name, bytes);
      continue;
    }
    REQUIRE(bytes.size() < 65536);
    const auto length = static_cast<std::uint16_t>(bytes.size());
    std::vector<std::byte> block{std::byte{1},  // BFINAL, stored
                                 std::byte(length & 0xFF), std::byte(length >> 8), std::byte(~length & 0xFF),
                                 std::byte((~length >> 8) & 0xFF)};
    block.insert(block.end(), bytes.begin(), bytes.end());
    zip.add_deflated(name, bytes.size(), detail::crc32(bytes), block);
  }
  zip.finish();
  return out;
}

}  // namespace

TEST_CASE("a heap or mapped load boxes its tensors together: one kept tensor keeps the boxes, each stays valid",
          "[load][arena]") {
  const tensorfile_test::ScratchDir dir;
  const Value dict = many_small_dict();
  const auto path = dir / "small.pt";
  save_torch(dict, path);
  for (const std::optional<MapMode> mode : {std::optional<MapMode>(), std::optional<MapMode>(MapMode::read_only)}) {
    INFO((mode ? "mapped" : "heap") << " load");
    Value kept;
    long tensors_holding = 0;
    {
      const Value loaded = load_torch(path, {.mmap = mode});
      REQUIRE(loaded == dict);
      kept = loaded["block3.w2"];
      tensors_holding = kept.as_tensor().storage().use_count();
      CHECK(tensors_holding > 2000);  // every tensor's storage shares the load's one arena or mapping
    }
    // The other tensors' boxes live in the kept tensor's arena: nothing was destroyed, and its bytes are intact.
    CHECK(kept.as_tensor().storage().use_count() == tensors_holding);
    CHECK(kept == dict["block3.w2"]);
  }
  SECTION("records that get storages of their own (a map_location function) are boxed one by one") {
    Value kept;
    {
      const auto own_copy = [](const Storage& s, std::string_view) {
        Storage copy = heap_storage(s.size_bytes(), false);
        std::memcpy(copy.mutable_data(), s.data(), s.size_bytes());
        return std::optional<Storage>(copy);
      };
      const Value loaded = load_torch(path, {.map_location = MapLocation(own_copy)});
      kept = loaded["block3.w2"];
    }
    CHECK(kept.as_tensor().storage().use_count() == 1);
    CHECK(kept == dict["block3.w2"]);
  }
}

TEST_CASE("a heap load that meets a record outside the arena mid-pickle waits for the local headers there",
          "[load][parallel]") {
  const tensorfile_test::ScratchDir dir;
  const Value dict = many_small_dict();
  const std::vector<std::byte> saved = save_torch_to_bytes(dict);
  const std::vector<std::byte> bytes = with_deflated_record(saved, "data/1000");
  REQUIRE(bytes != saved);
  const auto path = dir / "deflated.pt";
  tensorfile_test::write_text(path, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  for (const std::size_t threads : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    INFO(threads << " threads");
    CHECK(load_torch(path, {.threads = threads}) == dict);
  }
  // A bad local header after the deflated record is reported as itself (whether the wait at the deflated record or
  // the one after the pickle meets it first), not as a record read at a wrong offset.
  std::string text = tensorfile_test::read_text(path);
  const std::string member = read_archive_info(bytes).prefix + "/data/1900";
  const std::size_t bad = local_header_of(text, member);
  text.replace(bad, 4, "PK\x07\x08");
  tensorfile_test::write_text(path, text);
  try {
    (void)load_torch(path, {.threads = 2});
    FAIL("a load with a bad local header succeeded");
  } catch (const FormatError& e) {
    CHECK(e.member() == member);
    CHECK(e.offset() == bad);
  }
}
