// SPDX-License-Identifier: MIT
// The front door (checkpoint.hpp, formats/source.hpp) against hostile input and misuse: readers that lie, indexes
// that point past the file, files that change under an open handle, saves that fail half-way, misused buffers.
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "tensorfile/checkpoint.hpp"
#include "tensorfile/tensorfile.hpp"
#include "tensorfile_catch.hpp"

namespace checkpoint_hostile_test {

using namespace tensorfile;
using tensorfile_test::sample;
using tensorfile_test::ScratchDir;

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* first = reinterpret_cast<const std::byte*>(text.data());
  return {first, first + text.size()};
}

std::vector<std::byte> bytes_of_file(const std::filesystem::path& path) {
  return bytes_of(tensorfile_test::read_text(path));
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  tensorfile_test::write_text(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

/// A safetensors file: the 8-byte length, `header` and `data` bytes.
std::vector<std::byte> safetensors_bytes(const std::string& header, std::size_t data) {
  std::vector<std::byte> out = bytes_of(tensorfile_test::le64(header.size()) + header);
  out.resize(out.size() + data, std::byte{7});
  return out;
}

/// What an Error must say: the source it names, and when given the member, the offset, a phrase of its message.
struct Says {
  std::string source;
  std::string member{};
  std::optional<std::uint64_t> offset{};
  bool some_offset = false;  // an offset, whichever
  std::string phrase{};
};

/// A matcher of the Error that `says` describes, for CHECK_THROWS_MATCHES.
Catch::Matchers::Generic::PredicateMatcher<Error> says(Says says) {
  const std::string description = "names " + says.source + (says.phrase.empty() ? "" : ", says " + says.phrase);
  return Catch::Matchers::Predicate<Error>(
      [says = std::move(says)](const Error& error) {
        const std::string what = error.what();
        return what.find(says.source) != std::string::npos && (says.member.empty() || error.member() == says.member) &&
               (!says.offset || error.offset() == says.offset) && (!says.some_offset || error.offset().has_value()) &&
               what.find(says.phrase) != std::string::npos;
      },
      description);
}

/// A RangeReader over bytes whose size(), read() and mapped() lie as configured.
class LyingReader final : public RangeReader {
 public:
  explicit LyingReader(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}

  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    ++reads_;
    for (std::size_t seen = max_ask_; out.size() > seen && !max_ask_.compare_exchange_weak(seen, out.size());) {
    }
    if (throw_after_ >= 0 && reads_ > throw_after_) throw std::runtime_error("the network went away");
    const std::size_t end = stop_at_ != 0 ? std::min<std::size_t>(stop_at_, bytes_.size()) : bytes_.size();
    if (offset >= end) return 0;
    const std::size_t n = std::min(out.size(), end - static_cast<std::size_t>(offset));
    std::memcpy(out.data(), bytes_.data() + offset, n);
    return n + extra_;  // a reader claiming more than it was asked for
  }
  std::optional<std::uint64_t> size() const override { return size_ ? size_ : std::optional(bytes_.size()); }
  std::string name() const override { return "mem://lying"; }
  std::optional<std::span<const std::byte>> mapped() const override {
    if (!mappable_) return std::nullopt;
    return std::span<const std::byte>(bytes_).first(std::min(mapped_size_, bytes_.size()));
  }

  std::vector<std::byte> bytes_;
  std::optional<std::uint64_t> size_{};  // set: what size() claims
  std::size_t extra_ = 0;                // added to each read's count
  std::uint64_t stop_at_ = 0;            // nonzero: the bytes end here, whatever size() says
  std::atomic<int> throw_after_{-1};     // >= 0: reads after this many throw
  bool mappable_ = false;
  std::size_t mapped_size_ = SIZE_MAX;  // mapped(): at most this many bytes
  std::atomic<int> reads_{0};
  std::atomic<std::size_t> max_ask_{0};  // the largest read asked for: what a buffer was sized to
};

/// An unsized reader (size() nullopt) that may claim more bytes than it was asked for.
class UnsizedReader final : public RangeReader {
 public:
  explicit UnsizedReader(std::vector<std::byte> bytes, std::size_t extra) : bytes_(std::move(bytes)), extra_(extra) {}
  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min(out.size(), bytes_.size() - static_cast<std::size_t>(offset));
    std::memcpy(out.data(), bytes_.data() + offset, n);
    return n + extra_;
  }
  std::string name() const override { return "mem://unsized"; }

 private:
  std::vector<std::byte> bytes_;
  std::size_t extra_;
};

const std::filesystem::path overall = sample("safetensors", "overall.safetensors");

TEST_CASE("readers that lie about their size or their reads", "[checkpoint][hostile]") {
  const std::vector<std::byte> file = bytes_of_file(overall);
  const Value expected = load_safetensors(overall);

  SECTION("size() larger than what read() gives: the reader ended early, at the offset") {
    LyingReader reader(file);
    reader.size_ = file.size() + 1000;
    reader.stop_at_ = file.size();
    // The header's offsets fit the claimed size, so open() succeeds; the last tensor's range does not exist.
    CHECK_THROWS_MATCHES(open(Source::reader(reader)).load_all(), FormatError,
                         says({.source = "mem://lying", .some_offset = true}));
  }
  SECTION("size() smaller than the bytes: the header's data reaches past it") {
    LyingReader reader(file);
    reader.size_ = file.size() - 10;
    CHECK_THROWS_MATCHES(open(Source::reader(reader)), FormatError, says({.source = "mem://lying"}));
  }
  SECTION("read() claiming more than it was asked for is refused as such") {
    LyingReader reader(file);
    reader.extra_ = 5;
    CHECK_THROWS_MATCHES(open(Source::reader(reader)), FormatError,
                         says({.source = "mem://lying", .phrase = "more than"}));
    UnsizedReader unsized(file, std::size_t{1} << 20);
    CHECK_THROWS_MATCHES(open(Source::reader(unsized)), FormatError,
                         says({.source = "mem://unsized", .phrase = "more than"}));
  }
  SECTION("read() throwing: the reader's error reaches the caller unchanged") {
    LyingReader reader(file);
    const Checkpoint opened = open(Source::reader(reader));
    reader.throw_after_ = reader.reads_.load();  // every read after open()
    CHECK_THROWS_WITH(opened.tensor("d"), "the network went away");
    CHECK_THROWS_WITH(opened.load_all(), "the network went away");
    LyingReader at_once(file);
    at_once.throw_after_ = 0;
    CHECK_THROWS_WITH(open(Source::reader(at_once)), "the network went away");
  }
  SECTION("read() returning 0 early: a FormatError naming the reader and the offset") {
    LyingReader reader(file);
    reader.stop_at_ = 20;
    CHECK_THROWS_MATCHES(open(Source::reader(reader)), FormatError, says({.source = "mem://lying", .offset = 20}));
  }
  SECTION("a size of 2^63: no allocation of what it claims") {
    LyingReader reader(file);
    reader.size_ = std::uint64_t{1} << 63;
    CHECK_THROWS_MATCHES(open(Source::reader(reader)), FormatError,
                         says({.source = "mem://lying", .some_offset = true}));
    // A header of 99,999,999 bytes (under the limit) claimed by a reader of 1 KiB: read as its bytes arrive.
    LyingReader huge_header(safetensors_bytes("{" + std::string(1015, ' '), 0));
    const std::string length = tensorfile_test::le64(99'999'999);
    std::memcpy(huge_header.bytes_.data(), length.data(), 8);
    huge_header.size_ = std::uint64_t{1} << 63;
    CHECK_THROWS_MATCHES(open(Source::reader(huge_header)), FormatError,
                         says({.source = "mem://lying", .offset = 1024}));
    CHECK(huge_header.max_ask_ <= std::size_t{1} << 17);
    // A torch zip (read whole) over a reader claiming 2^40 bytes: no buffer of 2^40.
    LyingReader zip(bytes_of_file(sample("torch", "state_dict_linear_bn.pt")));
    zip.size_ = std::uint64_t{1} << 40;
    CHECK_THROWS_MATCHES(open(Source::reader(zip)), FormatError, says({.source = "mem://lying"}));
    CHECK(zip.max_ask_ <= std::size_t{1} << 20);
  }
  SECTION("a mapped() span shorter than size() is refused before any view is made") {
    LyingReader reader(file);
    reader.mappable_ = true;
    reader.mapped_size_ = file.size() / 2;
    CHECK_THROWS_MATCHES(open(Source::reader(reader), {.mmap = MapMode::read_only}), ArgumentError,
                         says({.source = "mem://lying", .phrase = "mapped()"}));
    // The torch zip path parses mapped() in place: the same check.
    LyingReader zip(bytes_of_file(sample("torch", "state_dict_linear_bn.pt")));
    zip.mappable_ = true;
    zip.mapped_size_ = 100;
    CHECK_THROWS_AS(open(Source::reader(zip)), ArgumentError);
  }
}

TEST_CASE("several threads reading one Checkpoint over a ranged reader", "[checkpoint][hostile]") {
  LyingReader reader(bytes_of_file(overall));
  const Checkpoint opened = open(Source::reader(reader));
  const NamedTensors expected = named_tensors(load_safetensors(overall));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (const auto& [name, tensor] : expected) {
          const Tensor buffer = Tensor::zeros(tensor.sizes(), tensor.dtype());
          opened.read_into(name, buffer);
          if (!opened.tensor(name).equal(tensor) || !buffer.equal(tensor)) ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(wrong == 0);
}

TEST_CASE("a big-endian .npy through a ranged reader is converted, as load_npy converts it", "[checkpoint][hostile]") {
  for (const char* name : {"f8_big.npy", "c8_big.npy"}) {
    INFO(name);
    const std::filesystem::path path = sample("numpy", name);
    const Tensor expected = load_npy(path);
    LyingReader reader(bytes_of_file(path));
    const Checkpoint opened = open(Source::reader(reader));
    CHECK(opened.tensor("").equal(expected));
    CHECK(load(Source::reader(reader)).as_tensor().equal(expected));
    const Tensor buffer = Tensor::zeros(expected.sizes(), expected.dtype());
    opened.read_into("", buffer);
    CHECK(buffer.equal(expected));
    reader.mappable_ = true;  // a view of big-endian bytes cannot be converted in place: refused, as load_npy does
    CHECK_THROWS_AS(open(Source::reader(reader), {.mmap = MapMode::read_only}).tensor(""), UnsupportedError);
  }
}

TEST_CASE("what a Checkpoint borrows and what it does not", "[checkpoint][hostile]") {
  const Value expected = load_safetensors(overall);
  const Tensor d = expected.as_dict().find(std::string_view("d"))->as_tensor();
  SECTION("a stream is read whole at open(): the handle outlives it") {
    auto in = std::make_unique<std::ifstream>(overall, std::ios::binary);
    const Checkpoint opened = open(Source::stream(*in));
    in.reset();
    CHECK(opened.tensor("d").equal(d));
  }
  SECTION("memory without mmap: tensors are copies, valid after the memory is gone") {
    auto bytes = std::make_unique<std::vector<std::byte>>(bytes_of_file(overall));
    const Tensor t = open(Source::memory(*bytes)).tensor("d");
    std::fill(bytes->begin(), bytes->end(), std::byte{0});
    bytes.reset();
    CHECK(t.equal(d));
  }
  SECTION("heap tensors never alias the handle's buffer, nor each other") {
    // A torch zip over a reader is read whole into the handle's buffer; tensor() still gives its own bytes.
    const std::filesystem::path path = sample("torch", "state_dict_linear_bn.pt");
    LyingReader reader(bytes_of_file(path));
    const Checkpoint opened = open(Source::reader(reader));
    const std::string first = opened.entries().front().path;
    const Tensor a = opened.tensor(first);
    REQUIRE(a.is_writable());
    const Tensor before = a.clone();
    std::fill_n(a.mutable_raw_data(), a.nbytes(), std::byte{0x55});
    CHECK(opened.tensor(first).equal(before));
    CHECK(a.storage().kind() == StorageKind::heap);
  }
  SECTION("mmap over a stream or an unsized reader: read-only views of the handle's buffer") {
    std::ifstream in(overall, std::ios::binary);
    const Checkpoint opened = open(Source::stream(in), {.mmap = MapMode::read_only});
    CHECK_FALSE(opened.tensor("d").is_writable());
    CHECK(opened.tensor("d").equal(d));
  }
}

TEST_CASE("indexes that point past the file or overflow", "[checkpoint][hostile]") {
  SECTION("safetensors offsets past the end, overlapping, or a size that overflows") {
    const std::vector<std::pair<std::string, std::string>> headers{
        {"past the end", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})"},
        {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],)"
                    R"("data_offsets":[4,12]}})"},
        {"shape overflow", R"({"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})"},
        {"offsets overflow", R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[18446744073709551615,7]}})"},
    };
    for (const auto& [label, header] : headers) {
      INFO(label);
      const std::vector<std::byte> bytes = safetensors_bytes(header, 8);
      CHECK_THROWS_AS(open(Source::memory(bytes, "hostile")), FormatError);
      LyingReader reader(bytes);
      CHECK_THROWS_MATCHES(open(Source::reader(reader)), FormatError,
                           says({.source = "mem://lying", .some_offset = true}));
    }
  }
  SECTION("a safetensors header that claims more than the limit allocates nothing") {
    std::vector<std::byte> bytes = safetensors_bytes("{" + std::string(1015, ' '), 0);
    bytes[4] = std::byte{0x01};  // 2^32 + 1016 bytes of header, in a file of 1 KiB: no format at all
    CHECK_THROWS_AS(open(Source::memory(bytes)), FormatError);
    LyingReader reader(bytes);
    reader.size_ = std::uint64_t{1} << 40;
    CHECK_THROWS_AS(open(Source::reader(reader)), FormatError);
    const std::string length = tensorfile_test::le64(5'000'000);  // a plausible length, over the option's limit
    std::memcpy(reader.bytes_.data(), length.data(), 8);
    CHECK_THROWS_WITH(open(Source::reader(reader), {.safetensors = {.max_header_bytes = 1 << 20}}),
                      Catch::Contains("mem://lying") && Catch::Contains("exceeds the limit"));
    CHECK(reader.max_ask_ <= 1024);
  }
  SECTION(".npy data past the end, and a shape that overflows") {
    const auto npy = [](const std::string& dict, std::size_t data) {
      std::string header = dict;
      while ((10 + header.size() + 1) % 64 != 0) header += ' ';
      header += '\n';
      std::string text = "\x93NUMPY\x01";
      text += '\0';
      text += static_cast<char>(header.size() & 0xFF);
      text += static_cast<char>(header.size() >> 8);
      text += header;
      text.append(data, '\1');
      return bytes_of(text);
    };
    const std::vector<std::byte> short_data = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }", 8);
    const std::vector<std::byte> overflow =
        npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8);
    for (const auto* bytes : {&short_data, &overflow}) {
      LyingReader reader(*bytes);
      // A FormatError, or the LimitError of a size past what a tensor may hold.
      CHECK_THROWS_MATCHES(open(Source::reader(reader)).tensor(""), Error, says({.source = "mem://lying"}));
    }
  }
}

TEST_CASE("files that change between open() and tensor()", "[checkpoint][hostile]") {
  ScratchDir dir;
  const Value expected = load_safetensors(overall);
  SECTION("truncated: a FormatError naming the file and the offset, with and without mmap") {
    for (const bool mapped : {false, true}) {
      INFO("mmap " << mapped);
      const std::filesystem::path path = dir / "cut.safetensors";
      std::filesystem::copy_file(overall, path, std::filesystem::copy_options::overwrite_existing);
      const Checkpoint opened = open(path, mapped ? LoadOptions{.mmap = MapMode::read_only} : LoadOptions{});
      const CheckpointEntry& last = opened.entries().back();
      REQUIRE(::truncate(path.c_str(), static_cast<off_t>(last.location->offset)) == 0);
      CHECK_THROWS_MATCHES(opened.tensor(last.path), FormatError, says({.source = path.string(), .some_offset = true}));
      const Tensor buffer = Tensor::zeros(last.shape, last.dtype);
      CHECK_THROWS_AS(opened.read_into(last.path, buffer), FormatError);
    }
  }
  SECTION("replaced: tensors read by range come from the file that was opened") {
    const std::filesystem::path path = dir / "swap.safetensors";
    std::filesystem::copy_file(overall, path);
    const Checkpoint opened = open(path);
    save_safetensors(NamedTensors{{"other", Tensor::from_values({1.0f})}}, path);  // a rename over it
    CHECK(opened.tensor("d").equal(expected.as_dict().find(std::string_view("d"))->as_tensor()));
  }
  SECTION("replaced, for a tensor its loader reads: a tensor unlike its entry is refused") {
    // A legacy torch file keeps no locations: tensor() asks the loader, which opens the path again.
    const std::filesystem::path path = dir / "legacy.pt";
    std::filesystem::copy_file(sample("torch", "legacy_format.pt"), path);
    const Checkpoint opened = open(path);
    Dict other;
    other.ordered = true;
    for (const CheckpointEntry& entry : opened.entries()) {
      other.set(entry.path, Tensor::zeros({static_cast<std::int64_t>(entry.nbytes) + 3}, DType::UInt8));
    }
    save_torch(Value(std::move(other)), path);
    const CheckpointEntry& first = opened.entries().front();
    CHECK_THROWS_MATCHES(opened.tensor(first.path), FormatError,
                         says({.source = path.string(), .member = first.path, .phrase = "changed"}));
  }
}

TEST_CASE("save() to misleading or occupied destinations, and saves that fail half-way", "[checkpoint][hostile]") {
  ScratchDir dir;
  const Value state = load_safetensors(overall);
  SECTION("SaveOptions::format conflicting with a known extension is refused") {
    CHECK_THROWS_MATCHES(save(state, dir / "model.safetensors", {.format = FileFormat::torch_zip}), ArgumentError,
                         says({.source = "model.safetensors", .phrase = "SaveOptions::format"}));
    CHECK_THROWS_AS(save(state, dir / "a.npz", {.format = FileFormat::npy}), ArgumentError);
    CHECK_THROWS_AS(save(state, dir / "m.safetensors.index.json", {.format = FileFormat::npz}), ArgumentError);
    CHECK_THROWS_AS(save(state, dir / "m.pt", {.format = FileFormat::tensordict}), ArgumentError);
    CHECK_FALSE(std::filesystem::exists(dir / "model.safetensors"));
    save(state, dir / "model.safetensors", {.format = FileFormat::safetensors});  // agreeing is fine
    CHECK(open(dir / "model.safetensors").format() == FileFormat::safetensors);
  }
  SECTION("a file format to a directory, or a name ending in '/', is an ArgumentError; the folder stays") {
    std::filesystem::create_directory(dir / "model.pt");
    tensorfile_test::write_text(dir / "model.pt" / "keep", "x");
    CHECK_THROWS_MATCHES(save(state, dir / "model.pt"), ArgumentError, says({.source = (dir / "model.pt").string()}));
    CHECK(std::filesystem::exists(dir / "model.pt" / "keep"));
    CHECK_THROWS_AS(save(state, (dir / "x").string() + "/", {.format = FileFormat::npz}), ArgumentError);
    CHECK_THROWS_AS(save(state, dir / "model.pt", {.format = FileFormat::torch_zip}), ArgumentError);
  }
  SECTION("a tree over an existing file is an ArgumentError; the file stays") {
    tensorfile_test::write_text(dir / "tree", "a file");
    CHECK_THROWS_AS(save(state, dir / "tree"), ArgumentError);
    CHECK(tensorfile_test::read_text(dir / "tree") == "a file");
  }
  SECTION("a tensor that cannot be written leaves the old file intact and no temporary beside it") {
    Dict bad;
    bad.ordered = true;
    bad.set("good", Tensor::from_values({1.0f, 2.0f}));
    std::vector<std::byte> elsewhere(16);  // a tensor on a device this build has no copy for
    const Tensor unreadable(Storage(BorrowedBackend(std::span<std::byte>(elsewhere), {}, Device::cuda(0))),
                            DType::Float32, {4});
    bad.set("elsewhere", unreadable);
    for (const char* name : {"m.pt", "m.safetensors", "m.npz", "one.npy"}) {
      INFO(name);
      ScratchDir each;
      const std::filesystem::path target = each / name;
      tensorfile_test::write_text(target, "the old file");
      const Value value = std::string_view(name) == "one.npy" ? Value(unreadable) : Value(bad);
      CHECK_THROWS_AS(save(value, target), Error);
      CHECK(tensorfile_test::read_text(target) == "the old file");
      CHECK(tensorfile_test::names_in(each.path()) == std::vector<std::string>{name});
    }
  }
}

TEST_CASE("misuse of tensor() and read_into() is an ArgumentError naming the path", "[checkpoint][hostile]") {
  const Checkpoint opened = open(overall);
  const CheckpointEntry& d = *opened.find("d");
  const auto refused = [&](const Tensor& buffer, const std::string& why) {
    INFO(why);
    CHECK_THROWS_MATCHES(opened.read_into("d", buffer), ArgumentError,
                         says({.source = overall.string(), .phrase = "\"d\""}));
  };
  refused(Tensor(), "undefined");
  refused(Tensor::zeros(d.shape, DType::Float32), "wrong dtype");
  refused(Tensor::zeros({7}, d.dtype), "wrong shape");
  const Tensor wide = Tensor::zeros({6, 2}, d.dtype);
  refused(wide.select(1, 0), "non-contiguous");
  const std::vector<double> values(6, 0.0);
  refused(Tensor(Storage(BorrowedBackend(std::as_bytes(std::span(values)))), d.dtype, d.shape), "read-only");
  refused(Tensor(meta_storage(static_cast<std::size_t>(d.nbytes)), d.dtype, d.shape), "a meta buffer");
  CHECK_THROWS_AS(opened.tensor(""), ArgumentError);
  CHECK_THROWS_AS(open(overall, {.into = {{"no.such", Tensor::zeros({1}, DType::Float32)}}}).load_all(), ArgumentError);
  LyingReader reader(bytes_of_file(overall));
  CHECK_THROWS_AS(open(Source::reader(reader), {.into = {{"no.such", Tensor::zeros({1}, DType::Float32)}}}).load_all(),
                  ArgumentError);
}

TEST_CASE("mmap over memory gives read-only views, a null path is an ArgumentError", "[checkpoint][hostile]") {
  const std::vector<std::byte> bytes = bytes_of_file(overall);
  // LoadOptions::mmap: a memory source gives read-only views of the caller's bytes in every mode.
  for (const MapMode mode : {MapMode::read_only, MapMode::copy_on_write, MapMode::shared}) {
    const Checkpoint opened = open(Source::memory(bytes, "the bytes"), {.mmap = mode});
    CHECK(opened.tensor("d").storage().kind() == StorageKind::borrowed);
    CHECK_FALSE(opened.tensor("d").is_writable());
  }
  CHECK_THROWS_AS(Source(static_cast<const char*>(nullptr)), ArgumentError);
}

TEST_CASE("a loader that cannot fill into buffers refuses them, and the front door fills them for every format") {
  const Tensor f = Tensor::zeros({6}, DType::Float32);
  const LoadOptions with_f{.into = {{"f", f}}};
  const auto refused = [](const std::string& loader) {
    return Catch::Matchers::Contains(loader + " does not fill LoadOptions::into buffers");
  };
  const std::filesystem::path safetensors = sample("safetensors", "f.safetensors");
  CHECK_THROWS_WITH(load_safetensors(safetensors, with_f), refused("load_safetensors()"));
  CHECK_THROWS_WITH(load_state_dict(safetensors, with_f), refused("load_state_dict()"));
  const Tensor w = Tensor::zeros({2, 3}, DType::Float32);
  const LoadOptions with_w{.into = {{"w", w}}};
  const std::filesystem::path npz = sample("numpy", "stored.npz");
  CHECK_THROWS_WITH(load_npz(npz, with_w), refused("load_npz()"));
  CHECK_THROWS_WITH(load_memmap(sample("tensordict", "s01_basic"), with_w), refused("load_memmap()"));

  // The front door fills them: the values are the file's, and the result's tensor is the buffer.
  const Value loaded = load(safetensors, with_f);
  CHECK(f.equal(load_safetensors(safetensors).as_dict().at("f").as_tensor()));
  CHECK(loaded.as_dict().at("f").as_tensor().raw_data() == f.raw_data());
  (void)load(npz, with_w);
  CHECK(w.equal(load_npz(npz).as_dict().at("w").as_tensor()));
}

}  // namespace checkpoint_hostile_test
