// SPDX-License-Identifier: MIT
// The front door (checkpoint.hpp, formats/source.hpp): open / load / save over every format and every byte source,
// checked against the per-format loaders on the committed fixtures.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>

#include "same_tensors.hpp"
#include "tensorfile/checkpoint.hpp"
#include "tensorfile/tensorfile.hpp"
#include "tensorfile_catch.hpp"

namespace checkpoint_test {

using namespace tensorfile;
using tensorfile_test::check_same_tensors;
using tensorfile_test::sample;
using tensorfile_test::ScratchDir;

/// A fixture and its per-format loader (the reference the front door must agree with).
struct Fixture {
  std::string label;
  std::filesystem::path path;
  FileFormat format;
  bool sharded = false;
  std::function<Value(const std::filesystem::path&, const LoadOptions&)> reference;
};

Value reference_npy(const std::filesystem::path& path, const LoadOptions& options) {
  LoadOptions plain = options;  // the one tensor's path is "": a select of it keeps it
  if (plain.select) REQUIRE(plain.select(""));
  plain.select = {};
  plain.select_drops = false;
  return Value(load_npy(path, plain));
}

Value reference_tree(const std::filesystem::path& path, const LoadOptions& options) {
  std::vector<LeftOut> left_out;
  return to_value(load_memmap(path, options), {.file = path, .left_out = &left_out});
}

std::vector<Fixture> fixtures() {
  const auto torch = [](const std::filesystem::path& p, const LoadOptions& o) { return load_torch(p, o); };
  const auto safetensors = [](const std::filesystem::path& p, const LoadOptions& o) { return load_safetensors(p, o); };
  const auto npz = [](const std::filesystem::path& p, const LoadOptions& o) { return load_npz(p, o); };
  const auto sharded = [](const std::filesystem::path& p, const LoadOptions& o) { return load_state_dict(p, o); };
  return {
      {"torch zip", sample("torch", "state_dict_linear_bn.pt"), FileFormat::torch_zip, false, torch},
      {"torch zip deflated", sample("torch_gen", "zip_deflated.pt"), FileFormat::torch_zip, false, torch},
      {"torch views", sample("torch_gen", "views_shared_storage.pt"), FileFormat::torch_zip, false, torch},
      {"torch legacy", sample("torch", "legacy_format.pt"), FileFormat::torch_legacy, false, torch},
      {"safetensors", sample("safetensors", "overall.safetensors"), FileFormat::safetensors, false, safetensors},
      {"npy", sample("numpy", "f4_c.npy"), FileFormat::npy, false, reference_npy},
      {"npy fortran", sample("numpy", "i8_fortran.npy"), FileFormat::npy, false, reference_npy},
      {"npz stored", sample("numpy", "stored.npz"), FileFormat::npz, false, npz},
      {"npz deflated", sample("numpy", "deflated.npz"), FileFormat::npz, false, npz},
      {"tensordict", sample("tensordict", "s01_basic"), FileFormat::tensordict, false, reference_tree},
      {"sharded torch", sample("sharded", "torch_bin"), FileFormat::torch_zip, true, sharded},
      {"sharded safetensors", sample("safetensors", "samples.safetensors.index.json"), FileFormat::safetensors, true,
       sharded},
  };
}

/// check_same_tensors with the tensors taken in name order (safetensors saves sort them).
void check_same_by_name(const Value& got, const Value& expected) {
  const auto sorted = [](const Value& v) {
    NamedTensors all = named_tensors(v);
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    Dict dict;
    dict.ordered = true;
    for (const auto& [name, tensor] : all) dict.set(name, tensor);
    return Value(std::move(dict));
  };
  check_same_tensors(sorted(got), sorted(expected));
}

/// The bytes of a file.
std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
  const std::string text = tensorfile_test::read_text(path);
  const auto* first = reinterpret_cast<const std::byte*>(text.data());
  return {first, first + text.size()};
}

/// `n` bytes at `offset` of `path`, read with plain pread.
std::vector<std::byte> pread_bytes(const std::filesystem::path& path, std::uint64_t offset, std::size_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::vector<std::byte> out(n);
  const ssize_t got = ::pread(fd, out.data(), n, static_cast<off_t>(offset));
  ::close(fd);
  REQUIRE(got == static_cast<ssize_t>(n));
  return out;
}

/// A tensor's elements in C order, as bytes.
std::vector<std::byte> tensor_bytes(const Tensor& t) {
  std::vector<std::byte> out(t.nbytes());
  t.copy_into(std::span<std::byte>(out));
  return out;
}

/// A RangeReader over bytes in memory that answers at most `chunk` bytes a read and counts what it hands out.
class CountingReader final : public RangeReader {
 public:
  CountingReader(std::vector<std::byte> bytes, std::size_t chunk, bool mappable = false, bool sized = true)
      : bytes_(std::move(bytes)), chunk_(chunk), mappable_(mappable), sized_(sized) {}

  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min({out.size(), chunk_, bytes_.size() - static_cast<std::size_t>(offset)});
    std::memcpy(out.data(), bytes_.data() + offset, n);
    read_ += n;
    largest_ask_ = std::max(largest_ask_, out.size());
    return n;
  }
  std::optional<std::uint64_t> size() const override {
    return sized_ ? std::optional<std::uint64_t>(bytes_.size()) : std::nullopt;
  }
  std::string name() const override { return "mem://counting"; }
  std::optional<std::span<const std::byte>> mapped() const override {
    return mappable_ ? std::optional<std::span<const std::byte>>(bytes_) : std::nullopt;
  }

  [[nodiscard]] std::uint64_t bytes_read() const { return read_; }
  [[nodiscard]] std::uint64_t total() const { return bytes_.size(); }
  [[nodiscard]] std::size_t largest_ask() const { return largest_ask_; }  ///< the longest buffer a read was given

 private:
  std::vector<std::byte> bytes_;
  std::size_t chunk_;
  std::size_t largest_ask_ = 0;
  bool mappable_;
  bool sized_;
  std::atomic<std::uint64_t> read_{0};
};

/// The first tensor path of a fixture, as the per-format loader names it.
std::string first_path(const Fixture& fixture) {
  return named_tensors(fixture.reference(fixture.path, {})).front().first;
}

TEST_CASE("load and open give the per-format loaders' results for every option and format", "[checkpoint]") {
  for (const Fixture& fixture : fixtures()) {
    const std::string first = first_path(fixture);
    struct Case {
      std::string label;
      LoadOptions options;
    };
    std::vector<Case> cases{
        {"heap", {}},
        {"mmap read_only", {.mmap = MapMode::read_only}},
        {"meta", {.map_location = "meta"}},
        {"select one", {.select = select_paths({first})}},
        {"select one, drops", {.select = select_paths({first}), .select_drops = true}},
        {"threads 1", {.threads = 1}},
        {"threads 3", {.threads = 3}},
    };
    for (const Case& c : cases) {
      INFO(fixture.label << ", " << c.label);
      const Value expected = fixture.reference(fixture.path, c.options);
      check_same_tensors(load(fixture.path, c.options), expected);
      const Checkpoint opened = open(fixture.path, c.options);
      CHECK(opened.format() == fixture.format);
      CHECK(opened.sharded() == fixture.sharded);
      check_same_tensors(opened.load_all(), expected);
      check_same_tensors(opened.values(), fixture.reference(fixture.path, {.map_location = "meta"}));
      if (c.options.mmap && !fixture.sharded && fixture.format != FileFormat::tensordict) {
        // Views of the one mapping, for the formats that keep a tensor's bytes in one place.
        const CheckpointEntry& entry = opened.entries().front();
        if (entry.location && fixture.format != FileFormat::torch_legacy) {
          CHECK(opened.tensor(entry.path).storage().kind() == StorageKind::mmap);
        }
      }
    }
    INFO(fixture.label << ", into a buffer");
    const Checkpoint opened = open(fixture.path);
    const CheckpointEntry& entry = *opened.find(first);
    const Tensor buffer = Tensor::zeros(entry.shape, entry.dtype);
    opened.read_into(first, buffer);
    const Value all = fixture.reference(fixture.path, {});
    for (const auto& [path, tensor] : named_tensors(all)) {
      if (path == first) CHECK(buffer.equal(tensor));
    }
  }
}

TEST_CASE("every single-file format through a ranged reader, a memory span and a stream", "[checkpoint]") {
  for (const Fixture& fixture : fixtures()) {
    if (fixture.sharded || fixture.format == FileFormat::tensordict) continue;
    INFO(fixture.label);
    const Value expected = fixture.reference(fixture.path, {});
    const std::vector<std::byte> bytes = file_bytes(fixture.path);

    CountingReader short_reads(bytes, 7);  // every read short
    check_same_tensors(load(Source::reader(short_reads)), expected);
    CountingReader unsized(bytes, 13, false, false);
    check_same_tensors(load(Source::reader(unsized)), expected);
    CountingReader mappable(bytes, 64, true);
    const Value views = load(Source::reader(mappable), {.mmap = MapMode::read_only});
    check_same_tensors(views, expected);

    check_same_tensors(load(Source::memory(bytes)), expected);
    check_same_tensors(load(Source::memory(bytes), {.mmap = MapMode::read_only}), expected);
    std::ifstream in(fixture.path, std::ios::binary);
    check_same_tensors(load(Source::stream(in, "the stream")), expected);

    // open() over each, then tensor(path) of every entry.
    CountingReader per_tensor(bytes, 5);
    const Checkpoint opened = open(Source::reader(per_tensor));
    CHECK(opened.format() == fixture.format);
    CHECK(opened.name() == "mem://counting");
    const NamedTensors all = named_tensors(expected);
    REQUIRE(opened.entries().size() == all.size());
    for (const auto& [path, tensor] : all) CHECK(opened.tensor(path).equal(tensor));
    CountingReader unmappable(bytes, 64);
    CHECK_THROWS_AS(open(Source::reader(unmappable), {.mmap = MapMode::read_only}), ArgumentError);
  }
}

TEST_CASE("a sized reader of a zip format is read whole by reads that ask for all that is left", "[checkpoint]") {
  // open() parses a zip in memory: one buffer of the claimed size, which a remote reader fills by concurrent ranges,
  // rather than doubling chunks copied again at the end.
  ScratchDir dir;
  const Tensor big = Tensor::zeros({1024, 1024}, DType::Float32);
  save(NamedTensors{{"w", big}}, dir / "big.pt");
  CountingReader reader(file_bytes(dir / "big.pt"), std::size_t{1} << 30);
  CHECK(load(Source::reader(reader)).as_dict().find("w")->as_tensor().equal(big));
  CHECK(reader.largest_ask() == reader.total());
  std::vector<std::byte> cut = file_bytes(dir / "big.pt");
  cut.resize(cut.size() / 2);
  CountingReader short_of_its_size(cut, std::size_t{1} << 30);
  class Claims final : public RangeReader {  // claims the whole file's size, holds half of it
   public:
    Claims(CountingReader& inner, std::uint64_t size) : inner_(inner), size_(size) {}
    std::size_t read(std::uint64_t offset, std::span<std::byte> out) override { return inner_.read(offset, out); }
    std::optional<std::uint64_t> size() const override { return size_; }
    std::string name() const override { return "mem://claims"; }

   private:
    CountingReader& inner_;
    std::uint64_t size_;
  } claims(short_of_its_size, reader.total());
  CHECK_THROWS_WITH(load(Source::reader(claims)),
                    Catch::Matchers::Contains("mem://claims") &&
                        Catch::Matchers::Contains("the reader ended early; expected " + std::to_string(reader.total()) +
                                                  " bytes, got " + std::to_string(cut.size())));
}

TEST_CASE("load() of a torch file read whole from a reader gives writable tensors, a handle's loads stay its own",
          "[checkpoint]") {
  // load() alone holds the buffer it read the file into, so its tensors are slices of it; a Checkpoint's loads are
  // copies, so that writing into one load's tensors never shows in the next.
  ScratchDir dir;
  const Tensor a = Tensor::from_values({1.0f, 2.0f, 3.0f});
  const Tensor b = Tensor::from_values({4.0, 5.0});
  save(NamedTensors{{"a", a}, {"b", b}}, dir / "two.pt");
  for (const bool legacy : {false, true}) {
    INFO("legacy " << legacy);
    const std::filesystem::path file =
        legacy ? tensorfile_test::data_dir() / "torch_gen" / "legacy_format.pt" : dir / "two.pt";
    const Value expected = load(file);
    CountingReader reader(file_bytes(file), std::size_t{1} << 30);
    const Value loaded = load(Source::reader(reader));
    check_same_tensors(loaded, expected);
    for (const auto& [path, tensor] : named_tensors(loaded)) {
      INFO(path);
      CHECK(tensor.storage().writable());
      CHECK(tensor.device().is_cpu());
    }
    CountingReader again(file_bytes(file), std::size_t{1} << 30);
    const Checkpoint opened = open(Source::reader(again));
    const NamedTensors first = named_tensors(opened.load_all());
    REQUIRE_FALSE(first.empty());
    Tensor written = first.front().second;
    std::memset(written.storage().mutable_data(), 0x5A, written.storage().size_bytes());
    check_same_tensors(opened.load_all(), expected);
  }
}

TEST_CASE("a ranged reader reads only the header and the selected tensor of safetensors and .npy", "[checkpoint]") {
  ScratchDir dir;
  std::vector<float> big(1 << 18, 1.5f);
  const Tensor large = Tensor::from_values(std::span<const float>(big), {512, 512});
  const Tensor small = Tensor::from_values({1.0f, 2.0f, 3.0f});
  save_safetensors(NamedTensors{{"large", large}, {"small", small}}, dir / "two.safetensors");
  save_npy(large, dir / "large.npy");

  SECTION("safetensors: 8 bytes, the header, then the one range") {
    CountingReader reader(file_bytes(dir / "two.safetensors"), 1 << 20);
    const Checkpoint opened = open(Source::reader(reader));
    const std::uint64_t after_open = reader.bytes_read();
    CHECK(after_open < 1024);
    CHECK(opened.tensor("small").equal(small));
    CHECK(reader.bytes_read() == after_open + 12);
    const Value selected = load(Source::reader(reader), {.select = select_paths({"small"})});
    CHECK(selected.as_dict().find(std::string_view("small"))->as_tensor().equal(small));
    CHECK(reader.bytes_read() < reader.total() / 100);
  }
  SECTION("npy: the header alone for open() and a meta load") {
    CountingReader reader(file_bytes(dir / "large.npy"), 1 << 20);
    const Checkpoint opened = open(Source::reader(reader));
    CHECK(reader.bytes_read() < 1024);
    CHECK(opened.entries().front().shape == Shape{512, 512});
    CHECK(load(Source::reader(reader), {.map_location = "meta"}).as_tensor().device().is_meta());
    CHECK(reader.bytes_read() < 2048);
    CHECK(opened.tensor("").equal(large));
  }
}

TEST_CASE("open: entries, locations, tensor(), read_into() and unknown paths", "[checkpoint]") {
  SECTION("safetensors entries in header order, with their dtypes and shapes") {
    const Checkpoint opened = open(sample("safetensors", "overall.safetensors"));
    REQUIRE(opened.entries().size() == 9);
    CHECK(opened.entries().front().path == "B");
    CHECK(opened.find("d")->dtype == DType::Float64);
    CHECK(opened.find("d")->shape == Shape{6});
    CHECK(opened.find("d")->nbytes == 48);
    CHECK(opened.find("zz") == nullptr);
    CHECK(opened.metadata().as_dict().find(std::string_view("test"))->as_string() == "a");
  }
  SECTION("the accessors of a temporary handle give copies that outlive it") {
    const std::filesystem::path path = sample("safetensors", "overall.safetensors");
    const Value& metadata = open(path).metadata();  // a Value, kept alive by the reference
    CHECK(metadata.as_dict().find(std::string_view("test"))->as_string() == "a");
    std::vector<std::string> paths;
    for (const CheckpointEntry& entry : open(path).entries()) paths.push_back(entry.path);
    CHECK(paths.size() == 9);
    CHECK(paths.front() == "B");
    CHECK(open(path).values().as_dict().size() == 9);
    const std::string name = open(path).name();
    CHECK(name == path.string());
    STATIC_REQUIRE(std::is_same_v<decltype(open(path).metadata()), Value>);
    STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const Checkpoint&>().metadata()), const Value&>);
  }
  SECTION("every location holds the loaded tensor's bytes, read with plain pread") {
    std::size_t located = 0;
    for (const Fixture& fixture : fixtures()) {
      INFO(fixture.label);
      const Checkpoint opened = open(fixture.path);
      const NamedTensors expected = named_tensors(fixture.reference(fixture.path, {}));
      REQUIRE(opened.entries().size() == expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const CheckpointEntry& entry = opened.entries()[i];
        CHECK(entry.path == expected[i].first);
        CHECK(entry.dtype == expected[i].second.dtype());
        CHECK(entry.shape == expected[i].second.sizes());
        if (!entry.location || !expected[i].second.is_contiguous()) continue;
        ++located;
        CHECK(pread_bytes(entry.location->file, entry.location->offset, static_cast<std::size_t>(entry.nbytes)) ==
              tensor_bytes(expected[i].second));
      }
      const bool keeps_locations = fixture.format == FileFormat::safetensors || fixture.format == FileFormat::npy ||
                                   fixture.label == "torch zip" || fixture.label == "npz stored" ||
                                   fixture.format == FileFormat::tensordict;
      if (keeps_locations) CHECK(opened.entries().front().location.has_value());
    }
    CHECK(located > 20);
  }
  SECTION("tensor(path) per mode, read_into, and a path the checkpoint lacks") {
    const std::filesystem::path path = sample("torch", "state_dict_linear_bn.pt");
    const Value expected = load_torch(path);
    const NamedTensors all = named_tensors(expected);
    const Checkpoint heap = open(path);
    const Checkpoint mapped = open(path, {.mmap = MapMode::read_only});
    const Checkpoint meta = open(path, {.map_location = "meta"});
    for (const auto& [name, tensor] : all) {
      CHECK(heap.tensor(name).equal(tensor));
      CHECK(heap.tensor(name).storage().kind() == StorageKind::heap);
      CHECK(mapped.tensor(name).equal(tensor));
      CHECK(mapped.tensor(name).storage().kind() == StorageKind::mmap);
      CHECK(meta.tensor(name).device().is_meta());
      const Tensor buffer = Tensor::zeros(tensor.sizes(), tensor.dtype());
      heap.read_into(name, buffer);
      CHECK(buffer.equal(tensor));
    }
    const Tensor wrong = Tensor::zeros({1}, DType::Float64);
    CHECK_THROWS_AS(heap.read_into(all.front().first, wrong), ArgumentError);
    try {
      (void)heap.tensor("no.such.tensor");
      FAIL("an unknown path was read");
    } catch (const ArgumentError& error) {
      CHECK(std::string(error.what()).find(path.string()) != std::string::npos);
      CHECK(std::string(error.what()).find("\"no.such.tensor\"") != std::string::npos);
    }
  }
  SECTION("4 threads reading every entry at once agree with the loader") {
    for (const Fixture& fixture : fixtures()) {
      INFO(fixture.label);
      const Checkpoint opened = open(fixture.path, {.mmap = MapMode::read_only});
      const NamedTensors expected = named_tensors(fixture.reference(fixture.path, {}));
      std::atomic<std::size_t> wrong{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
          for (const auto& [name, tensor] : expected) {
            try {
              if (!opened.tensor(name).equal(tensor)) ++wrong;
            } catch (const Error&) {
              ++wrong;
            }
          }
        });
      }
      for (std::thread& thread : threads) thread.join();
      CHECK(wrong == 0);
    }
  }
  SECTION("sharded checkpoints and trees need a path") {
    CountingReader index(file_bytes(sample("safetensors", "samples.safetensors.index.json")), 64);
    CHECK_THROWS_AS(open(Source::reader(index)), ArgumentError);
    const Checkpoint sharded = open(sample("safetensors", "samples.safetensors.index.json"));
    CHECK(sharded.metadata().as_dict().find(std::string_view("total_size"))->as_int() == 42);
    CHECK(sharded.find("H")->location->file.filename() == "H.safetensors");
  }
}

/// Whether the mapping holding `address` is advised for transparent huge pages: its VmFlags in /proc/self/smaps
/// hold "hg" (MADV_HUGEPAGE), which the system-wide THP setting alone never sets.
bool advised_for_huge_pages(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  REQUIRE(smaps);
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long long begin = 0;
    unsigned long long end = 0;
    // A mapping's first line starts "begin-end " in hex; its key lines ("Size:", "AnonHugePages:") never parse so.
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2) {
      inside = at >= begin && at < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return (line + " ").find(" hg ") != std::string::npos;
  }
  FAIL("no mapping in /proc/self/smaps holds the address");
  return false;
}

TEST_CASE("one path spelling: named_tensors, select, entries, tensor() and load()", "[checkpoint]") {
  std::vector<Fixture> all = fixtures();
  const auto torch = [](const std::filesystem::path& p, const LoadOptions& o) { return load_torch(p, o); };
  all.push_back({"torch nested", sample("torch", "optimizer_sgd.pt"), FileFormat::torch_zip, false, torch});
  bool nested = false;
  for (const Fixture& fixture : all) {
    INFO(fixture.label);
    std::vector<std::string> paths;
    for (const auto& [path, tensor] : named_tensors(load(fixture.path))) paths.push_back(path);
    std::set<std::string> asked;
    std::mutex asking;  // the sharded loads ask from several threads
    const LoadOptions recording{.select = [&](std::string_view path) {
      const std::lock_guard lock(asking);
      asked.emplace(path);
      return true;
    }};
    (void)load(fixture.path, recording);
    CHECK(asked == std::set<std::string>(paths.begin(), paths.end()));
    const Checkpoint opened = open(fixture.path);
    REQUIRE(opened.entries().size() == paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const std::string& path = paths[i];
      INFO("path " << path);
      CHECK(opened.entries()[i].path == path);
      CHECK(path.find("//") == std::string::npos);
      if (!path.empty()) CHECK((path.front() != '/' && path.back() != '/'));
      nested = nested || path.find('/') != std::string::npos;
      // A select of the path reads that tensor (others stay meta or, from unread shards, out).
      const NamedTensors selected = named_tensors(load(fixture.path, {.select = select_paths({path})}));
      const auto found = std::find_if(selected.begin(), selected.end(), [&](const auto& p) { return p.first == path; });
      REQUIRE(found != selected.end());
      CHECK_FALSE(found->second.device().is_meta());
      CHECK(opened.tensor(path).equal(found->second));
    }
  }
  CHECK(nested);  // some fixture nests tensors ("state/0/momentum_buffer", "nested/deeper/c")
}

// What equal() says of contiguous tensors without NaNs, by memcmp: its element-by-element loop over the 4 MiB tensor
// below, about 50 times, took 80 s of the valgrind run.
bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.is_contiguous() && b.is_contiguous() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST_CASE("huge_pages advises the large heap blocks of every format's load only when asked", "[checkpoint][heap]") {
  const ScratchDir dir;
  Tensor big = Tensor::zeros({1 << 20}, DType::Float32);  // 4 MiB: a mapped block of its own in every format
  for (std::int64_t i = 0; i < big.numel(); ++i) big.data<float>()[i] = static_cast<float>(i % 977);
  Dict dict;
  dict.set("w", big);
  const Value value(dict);
  for (const std::string name : {"m.pt", "m.safetensors", "m.npy", "m.npz"}) {
    if (name == "m.npy") {
      save(NamedTensors{{"", big}}, dir / name);
    } else {
      save(value, dir / name);
    }
    const std::vector<std::byte> bytes = file_bytes(dir / name);
    CountingReader reader(bytes, 1 << 20);
    for (const HugePages pages : {HugePages::on, HugePages::off}) {
      INFO(name << (pages == HugePages::on ? ", on" : ", off"));
      const bool advised = pages == HugePages::on;
      const LoadOptions options{.huge_pages = pages};
      const auto check = [&](const Value& loaded) {
        const NamedTensors all = named_tensors(loaded);
        REQUIRE(all.size() == 1);
        CHECK(same_bytes(all.front().second, big));
        CHECK(advised_for_huge_pages(all.front().second.storage().data()) == advised);
      };
      check(load(dir / name, options));
      check(load(Source::memory(bytes), options));
      check(load(Source::reader(reader), options));
      const Checkpoint opened = open(dir / name, options);
      const Tensor one = opened.tensor(opened.entries().front().path);
      CHECK(advised_for_huge_pages(one.storage().data()) == advised);
    }
  }
  // The environment's choice (TENSORFILE_HUGE_PAGES=1: on), read once per process.
  const char* variable = std::getenv("TENSORFILE_HUGE_PAGES");
  const bool environment_on = variable != nullptr && std::string_view(variable) == "1";
  CHECK(detail::resolve_huge_pages(HugePages::from_environment) == (environment_on ? HugePages::on : HugePages::off));
  const Storage plain = heap_storage(std::size_t{4} << 20, false);
  CHECK(advised_for_huge_pages(plain.data()) == environment_on);
}

TEST_CASE("save by extension, read back by load() and the per-format loaders", "[checkpoint]") {
  ScratchDir dir;
  const Value state = load_safetensors(sample("safetensors", "overall.safetensors"));
  const NamedTensors tensors = named_tensors(state);
  SECTION("every writable format") {
    save(state, dir / "model.pt");
    check_same_by_name(load(dir / "model.pt"), state);
    check_same_by_name(load_torch(dir / "model.pt"), state);
    save(tensors, dir / "model.safetensors");
    check_same_by_name(load(dir / "model.safetensors"), state);
    check_same_by_name(load_safetensors(dir / "model.safetensors"), state);
    save(state, dir / "arrays.npz");
    check_same_by_name(load(dir / "arrays.npz"), state);
    check_same_by_name(load_npz(dir / "arrays.npz"), state);
    save(Value(tensors.front().second), dir / "one.npy");
    CHECK(load(dir / "one.npy").as_tensor().equal(tensors.front().second));
    CHECK_THROWS_AS(save(state, dir / "many.npy"), ArgumentError);
    save(state, dir / "tree");
    CHECK(open(dir / "tree").format() == FileFormat::tensordict);
    check_same_by_name(load(dir / "tree"), state);
    check_same_by_name(reference_tree(dir / "tree", {}), state);
    save(state, (dir / "sharded").string() + "/model.safetensors.index.json", {.sharded = {.max_shard_size = 40}});
    const Checkpoint sharded = open(dir / "sharded" / "model.safetensors.index.json");
    CHECK(sharded.sharded());
    check_same_by_name(sharded.load_all(), state);
    check_same_by_name(load_state_dict(dir / "sharded"), state);
    save(state, dir / "as_torch.weights", {.format = FileFormat::torch_zip});
    check_same_by_name(load_torch(dir / "as_torch.weights"), state);
  }
  SECTION("an unknown extension lists the choices") {
    try {
      save(state, dir / "model.weights");
      FAIL("saved to an unknown extension");
    } catch (const ArgumentError& error) {
      CHECK(std::string(error.what()).find("\".weights\"") != std::string::npos);
      CHECK(std::string(error.what()).find(".safetensors") != std::string::npos);
    }
    CHECK_THROWS_AS(save(state, dir / "x.pt", {.format = FileFormat::torch_legacy}), ArgumentError);
  }
  SECTION("real torch and numpy read what save() wrote") {
    if (!std::filesystem::exists("/usr/bin/python3")) {
      WARN("no /usr/bin/python3: the round trip through real torch is not checked");
      return;
    }
    Dict torch_types;  // torch 1.13 has no uint16 or uint32 (H, I)
    torch_types.ordered = true;
    for (const auto& [name, tensor] : tensors) {
      if (tensor.dtype() != DType::UInt16 && tensor.dtype() != DType::UInt32) torch_types.set(name, tensor);
    }
    save(Value(torch_types), dir / "model.pt");
    save(Value(torch_types), dir / "arrays.npz");
    const std::string script =
        "import sys, torch, numpy as np\n"
        "sd = torch.load(sys.argv[1])\n"
        "npz = np.load(sys.argv[2])\n"
        "assert sorted(sd) == sorted(npz.files) and len(sd) == 7, (sorted(sd), npz.files)\n"
        "for k in sd: assert (sd[k].numpy() == npz[k]).all(), k\n"
        "assert sd['d'].dtype == torch.float64 and sd['d'].tolist() == [-3, -2, -1, 0, 1, 2]\n";
    tensorfile_test::write_text(dir / "check.py", script);
    const std::string command = "/usr/bin/python3 " + (dir / "check.py").string() + " " + (dir / "model.pt").string() +
                                " " + (dir / "arrays.npz").string();
    CHECK(std::system(command.c_str()) == 0);
  }
}

TEST_CASE("a truncated or corrupt source gives an error naming the source and the offset", "[checkpoint]") {
  ScratchDir dir;
  for (const Fixture& fixture : fixtures()) {
    if (fixture.sharded || fixture.format == FileFormat::tensordict) continue;
    INFO(fixture.label);
    const std::vector<std::byte> bytes = file_bytes(fixture.path);
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() * 2 / 3));
    const std::filesystem::path truncated = dir / ("cut-" + fixture.path.filename().string());
    tensorfile_test::write_text(truncated, std::string_view(reinterpret_cast<const char*>(cut.data()), cut.size()));
    bool threw = false;
    try {
      // open() reads the index; a format whose index survives the cut fails on its data.
      const Checkpoint opened = open(truncated);
      (void)opened.load_all();
    } catch (const Error& error) {
      threw = true;
      CHECK(std::string(error.what()).find(truncated.string()) != std::string::npos);
    }
    CHECK(threw);
    CountingReader reader(cut, 1 << 20);
    try {
      const Checkpoint opened = open(Source::reader(reader));
      (void)opened.load_all();
      FAIL("a truncated reader was read");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("mem://counting") != std::string::npos);
    }
  }
  SECTION("a truncated safetensors header names the offset") {
    const std::vector<std::byte> bytes = file_bytes(sample("safetensors", "overall.safetensors"));
    CountingReader reader(std::vector<std::byte>(bytes.begin(), bytes.begin() + 100), 1 << 20);
    try {
      (void)open(Source::reader(reader));
      FAIL("a truncated header was read");
    } catch (const FormatError& error) {
      CHECK(std::string(error.what()).find("mem://counting") != std::string::npos);
      CHECK(error.offset().has_value());
    }
  }
  SECTION("bytes of no format") {
    const std::string junk = "this is not a checkpoint";
    const auto* first = reinterpret_cast<const std::byte*>(junk.data());
    try {
      (void)open(Source::memory({first, junk.size()}, "junk"));
      FAIL("junk was opened");
    } catch (const FormatError& error) {
      CHECK(std::string(error.what()) ==
            "tensorfile: junk: not a format tensorfile reads; expected a torch, safetensors, .npy, .npz or GGUF file "
            "(at byte 0)");
    }
  }
}

}  // namespace checkpoint_test
