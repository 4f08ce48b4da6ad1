// SPDX-License-Identifier: MIT
// The front door over a caller's FolderReader (formats/source.hpp): every format, sharded checkpoints, model folders
// and tensordict trees included, read through a folder of readers and checked against the path loads of the same
// committed fixtures, with what the folder was asked for and the errors of broken folders.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "same_tensors.hpp"
#include "tensorfile/checkpoint.hpp"
#include "tensorfile/tensorfile.hpp"
#include "tensorfile_catch.hpp"

namespace folder_source_test {

using namespace tensorfile;
using tensorfile_test::check_same_tensors;
using tensorfile_test::sample;
using tensorfile_test::ScratchDir;

using Bytes = std::shared_ptr<const std::vector<std::byte>>;

/// A reader of bytes a folder holds: at most `chunk` bytes a read, sized or not, mappable or not.
class BytesReader final : public RangeReader {
 public:
  BytesReader(Bytes bytes, std::string name, std::size_t chunk, bool mappable, bool sized,
              std::atomic<std::uint64_t>& counter)
      : bytes_(std::move(bytes)), name_(std::move(name)), chunk_(chunk), mappable_(mappable), sized_(sized),
        counter_(counter) {}

  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_->size()) return 0;
    const std::size_t n = std::min({out.size(), chunk_, bytes_->size() - static_cast<std::size_t>(offset)});
    std::memcpy(out.data(), bytes_->data() + offset, n);
    counter_ += n;
    return n;
  }
  std::optional<std::uint64_t> size() const override {
    return sized_ ? std::optional<std::uint64_t>(bytes_->size()) : std::nullopt;
  }
  std::string name() const override { return "reader:" + name_; }
  std::optional<std::span<const std::byte>> mapped() const override {
    return mappable_ ? std::optional<std::span<const std::byte>>(*bytes_) : std::nullopt;
  }

 private:
  Bytes bytes_;
  std::string name_;
  std::size_t chunk_;
  bool mappable_;
  bool sized_;
  std::atomic<std::uint64_t>& counter_;
};

/// How a MemoryFolder's readers behave.
struct FolderKind {
  std::size_t chunk = 1 << 20;
  bool mappable = false;
  bool sized = true;
  bool listable = true;
};

/// A folder held in memory: every file below a directory read once, by its '/'-separated relative name. It records
/// each name it is asked for and counts the bytes its readers hand out.
class MemoryFolder final : public FolderReader {
 public:
  MemoryFolder(const std::filesystem::path& root, FolderKind kind) : kind_(kind) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      const std::string text = tensorfile_test::read_text(entry.path());
      const auto* first = reinterpret_cast<const std::byte*>(text.data());
      put(entry.path().lexically_relative(root).generic_string(),
          std::make_shared<const std::vector<std::byte>>(first, first + text.size()));
    }
  }

  void put(const std::string& relative, Bytes bytes) { files_[relative] = std::move(bytes); }
  void put(const std::string& relative, const std::string& text) {
    const auto* first = reinterpret_cast<const std::byte*>(text.data());
    put(relative, std::make_shared<const std::vector<std::byte>>(first, first + text.size()));
  }
  void remove(const std::string& relative) { files_.erase(relative); }

  std::unique_ptr<RangeReader> open(const std::string& relative) override {
    const std::lock_guard lock(mutex_);
    asked_.insert(relative);
    const auto it = files_.find(relative);
    if (it == files_.end()) return nullptr;
    return std::make_unique<BytesReader>(it->second, relative, kind_.chunk, kind_.mappable, kind_.sized, read_);
  }

  std::optional<std::vector<std::string>> list(const std::string& relative) override {
    if (!kind_.listable) return std::nullopt;
    const std::string prefix = relative.empty() ? std::string() : relative + "/";
    std::set<std::string> names;
    for (const auto& [name, bytes] : files_) {
      if (!name.starts_with(prefix)) continue;
      const std::string rest = name.substr(prefix.size());
      const std::size_t slash = rest.find('/');
      names.insert(slash == std::string::npos ? rest : rest.substr(0, slash + 1));
    }
    return std::vector<std::string>(names.begin(), names.end());
  }

  std::string name() const override { return "mem://folder"; }

  /// Every name open() was asked for.
  [[nodiscard]] std::set<std::string> asked() const {
    const std::lock_guard lock(mutex_);
    return asked_;
  }
  [[nodiscard]] std::uint64_t bytes_read() const { return read_; }

 private:
  FolderKind kind_;
  std::map<std::string, Bytes> files_;
  mutable std::mutex mutex_;
  std::set<std::string> asked_;
  std::atomic<std::uint64_t> read_{0};
};

/// A fixture: the folder it lies in, the name in it to open ("" the folder itself), and its path for the path loads.
struct Fixture {
  std::string label;
  std::filesystem::path root;
  std::string relative;
  FileFormat format;
  bool sharded = false;
};

std::vector<Fixture> fixtures() {
  return {
      {"torch zip", sample("torch", ""), "state_dict_linear_bn.pt", FileFormat::torch_zip},
      {"torch zip deflated", sample("torch_gen", ""), "zip_deflated.pt", FileFormat::torch_zip},
      {"torch views", sample("torch_gen", ""), "views_shared_storage.pt", FileFormat::torch_zip},
      {"torch legacy", sample("torch", ""), "legacy_format.pt", FileFormat::torch_legacy},
      {"safetensors", sample("safetensors", ""), "overall.safetensors", FileFormat::safetensors},
      {"npy", sample("numpy", ""), "f4_c.npy", FileFormat::npy},
      {"npy fortran", sample("numpy", ""), "i8_fortran.npy", FileFormat::npy},
      {"npz stored", sample("numpy", ""), "stored.npz", FileFormat::npz},
      {"npz deflated", sample("numpy", ""), "deflated.npz", FileFormat::npz},
      {"tensordict basic, the folder itself", sample("tensordict", "s01_basic"), "", FileFormat::tensordict},
      {"tensordict basic, a folder's directory", sample("tensordict", ""), "s01_basic", FileFormat::tensordict},
      {"tensordict dtypes", sample("tensordict", ""), "s02_dtypes", FileFormat::tensordict},
      {"tensordict shapes", sample("tensordict", ""), "s03_shapes", FileFormat::tensordict},
      {"tensordict non-tensor data", sample("tensordict", ""), "s05_nontensor", FileFormat::tensordict},
      {"tensordict tensorclass", sample("tensordict", ""), "s07_tensorclass", FileFormat::tensordict},
      {"sharded torch, the model folder", sample("sharded", "torch_bin"), "", FileFormat::torch_zip, true},
      {"sharded torch, the index", sample("sharded", ""), "torch_bin/pytorch_model.bin.index.json",
       FileFormat::torch_zip, true},
      {"sharded safetensors", sample("safetensors", ""), "samples.safetensors.index.json", FileFormat::safetensors,
       true},
  };
}

std::filesystem::path path_of(const Fixture& fixture) {
  return fixture.relative.empty() ? fixture.root : fixture.root / fixture.relative;
}

/// A float32 tensor of `shape` holding `value` everywhere.
Tensor filled(Shape shape, float value) {
  std::size_t count = 1;
  for (const std::int64_t extent : shape) count *= static_cast<std::size_t>(extent);
  const std::vector<float> values(count, value);
  return Tensor::from_values<float>(std::span<const float>(values), std::move(shape));
}

/// Whether `name` stays below its folder by its text: relative, without "." or ".." steps.
bool stays_below(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  std::string_view rest = name;
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    const std::string_view step = rest.substr(0, slash);
    if (step == "." || step == ".." || step.empty()) return false;
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return true;
}

TEST_CASE("every format through a folder of readers gives what its path gives", "[checkpoint][folder]") {
  for (const Fixture& fixture : fixtures()) {
    const std::filesystem::path path = path_of(fixture);
    const std::string first = named_tensors(load(path)).front().first;
    struct Case {
      std::string label;
      FolderKind kind;
      LoadOptions options;
    };
    const std::vector<Case> cases{
        {"heap", {}, {}},
        {"short reads", {.chunk = 7}, {}},
        {"unsized readers, unlisted", {.chunk = 13, .sized = false, .listable = false}, {}},
        {"mapped readers", {.mappable = true}, {.mmap = MapMode::read_only}},
        {"meta", {}, {.map_location = "meta"}},
        {"select one", {}, {.select = select_paths({first})}},
        {"select one, drops", {}, {.select = select_paths({first}), .select_drops = true}},
        {"threads 1", {}, {.threads = 1}},
        {"threads 3", {.chunk = 5}, {.threads = 3}},
    };
    for (const Case& c : cases) {
      INFO(fixture.label << ", " << c.label);
      const bool meta = c.label == "meta";
      const Value expected = load(path, c.options);
      MemoryFolder folder(fixture.root, c.kind);
      check_same_tensors(load(Source::folder(folder, fixture.relative), c.options), expected);

      const Checkpoint opened = open(Source::folder(folder, fixture.relative), c.options);
      const Checkpoint by_path = open(path, c.options);
      CHECK(opened.format() == fixture.format);
      CHECK(opened.sharded() == fixture.sharded);
      CHECK(opened.name().starts_with("mem://folder"));
      check_same_tensors(opened.load_all(), expected);
      check_same_tensors(opened.values(), by_path.values());
      CHECK(opened.metadata().is_none() == by_path.metadata().is_none());
      REQUIRE(opened.entries().size() == by_path.entries().size());
      for (std::size_t i = 0; i < opened.entries().size(); ++i) {
        const CheckpointEntry& got = opened.entries()[i];
        const CheckpointEntry& want = by_path.entries()[i];
        CHECK(got.path == want.path);
        CHECK(got.dtype == want.dtype);
        CHECK(got.shape == want.shape);
        CHECK(got.nbytes == want.nbytes);
        if (got.location) CHECK(got.location->offset == want.location->offset);
        if (!meta) {
          CHECK(opened.tensor(got.path).equal(by_path.tensor(want.path)));
        }
      }
      if (!meta) {
        const CheckpointEntry& entry = *opened.find(first);
        const Tensor buffer = Tensor::zeros(entry.shape, entry.dtype);
        opened.read_into(first, buffer);
        CHECK(buffer.equal(by_path.tensor(first)));
      }
      for (const std::string& name : folder.asked()) {
        INFO("asked for " << name);
        CHECK(stays_below(name));
      }
    }
  }
}

TEST_CASE("a folder's mapped readers are viewed, not copied, and kept alive by the tensors", "[checkpoint][folder]") {
  Tensor viewed;
  const float* data = nullptr;
  {
    MemoryFolder folder(sample("tensordict", "s01_basic"), {.mappable = true});
    const Value tree = load(Source::folder(folder), {.mmap = MapMode::read_only});
    viewed = named_tensors(tree).front().second;
    data = viewed.data<const float>();
    MemoryFolder again(sample("safetensors", ""), {.mappable = true});
    const Checkpoint opened = open(Source::folder(again, "overall.safetensors"), {.mmap = MapMode::read_only});
    const std::uint64_t before = again.bytes_read();
    const Tensor tensor = opened.tensor(opened.entries().front().path);
    CHECK(again.bytes_read() == before);  // a view of the mapping: nothing read
    CHECK_FALSE(tensor.is_writable());
  }
  // The folders are gone; the view holds its reader and so its bytes.
  const Tensor expected = named_tensors(load(sample("tensordict", "s01_basic"))).front().second;
  CHECK(viewed.data<const float>() == data);
  CHECK(viewed.equal(expected));
}

TEST_CASE("a selective load through a folder reads only the selected tensors' bytes", "[checkpoint][folder]") {
  ScratchDir dir;
  Dict weights;
  weights.ordered = true;
  for (int i = 0; i < 4; ++i) {
    weights.set("w" + std::to_string(i), filled({256, 256}, static_cast<float>(i)));
  }
  save(Value(std::move(weights)), dir / "model.safetensors.index.json", {.sharded = {.max_shard_size = 300'000}});
  MemoryFolder folder(dir.path(), {});
  const Checkpoint opened = open(Source::folder(folder));
  CHECK(opened.sharded());
  REQUIRE(opened.entries().size() == 4);
  const std::uint64_t index_read = folder.bytes_read();
  const Value one = opened.load(select_paths({"w2"}));
  const NamedTensors got = named_tensors(one);
  REQUIRE(got.size() == 4);
  CHECK(got[2].second.equal(filled({256, 256}, 2.0F)));
  CHECK(got[0].second.device().is_meta());
  const std::uint64_t tensor_bytes = 256 * 256 * 4;
  CHECK(folder.bytes_read() - index_read == tensor_bytes);
}

TEST_CASE("lazy stacks and lazy views in a folder load as from the file system", "[checkpoint][folder]") {
  ScratchDir dir;
  std::vector<Entry> items;
  for (int i = 0; i < 3; ++i) items.emplace_back(TensorDict({{"x", filled({2, 3}, static_cast<float>(i))}}, {2}));
  TensorDict root(Shape{});
  root.set("stack", TensorDict::lazy_stack(std::move(items), 0));
  save_memmap(root, dir / "tree");
  // A _SubTensorDict of rows 1..2 of a [4] source, as tensordict writes one.
  std::vector<float> values{0, 1, 2, 3, 4, 5, 6, 7};
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  const std::filesystem::path sub = dir / "tree/sub";
  std::filesystem::create_directories(sub / "_source");
  std::ofstream(sub / "_source/a.memmap", std::ios::binary) << bytes;
  std::ofstream(sub / "_source/meta.json")
      << R"({"a":{"device":"cpu","shape":[4,2],"dtype":"torch.float32","is_nested":false},"shape":[4],)"
      << R"("device":"cpu","_type":"<class 'tensordict._td.TensorDict'>"})";
  std::ofstream(sub / "meta.json") << R"({"_type":"<class 'tensordict._td._SubTensorDict'>","index":)"
                                   << R"(["tuple",[["slice",{"start":1,"stop":3,"step":null}]]]})";
  const std::string top = tensorfile_test::read_text(dir / "tree/meta.json");
  std::string patched = top;
  const std::size_t brace = patched.find('{');
  patched.insert(brace + 1, R"("sub":{"type":"_SubTensorDict"},)");
  std::ofstream(dir / "tree/meta.json", std::ios::trunc) << patched;

  const Value expected = load(dir / "tree");
  for (const FolderKind kind : {FolderKind{}, FolderKind{.chunk = 3, .sized = false, .listable = false}}) {
    MemoryFolder folder(dir.path(), kind);
    check_same_tensors(load(Source::folder(folder, "tree")), expected);
  }
  const NamedTensors all = named_tensors(expected);
  const auto sub_a = std::find_if(all.begin(), all.end(), [](const auto& item) { return item.first == "sub/a"; });
  REQUIRE(sub_a != all.end());
  CHECK(sub_a->second.sizes() == Shape{2, 2});
  CHECK(sub_a->second.data<const float>()[0] == 2.0F);
}

TEST_CASE("a broken folder is an error naming the folder's file", "[checkpoint][folder]") {
  const auto message_of = [](const auto& call) -> std::string {
    try {
      call();
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  SECTION("a shard the index lists is missing") {
    MemoryFolder folder(sample("sharded", "torch_bin"), {});
    folder.remove("pytorch_model-00002-of-00003.bin");
    const std::string what = message_of([&] { (void)open(Source::folder(folder)); });
    CHECK_THAT(what, Catch::Matchers::Contains("mem://folder/pytorch_model.bin.index.json"));
    CHECK_THAT(what, Catch::Matchers::Contains("pytorch_model-00002-of-00003.bin"));
    CHECK_THROWS_AS(open(Source::folder(folder)), FormatError);
  }
  SECTION("a shard name that leaves the folder is refused before it is asked for") {
    MemoryFolder folder(sample("sharded", "torch_bin"), {});
    folder.put("pytorch_model.bin.index.json", R"({"weight_map": {"w": "../secret.bin"}})");
    CHECK_THROWS_AS(open(Source::folder(folder)), FormatError);
    for (const std::string& name : folder.asked()) CHECK(stays_below(name));
  }
  SECTION("the index and a shard disagree") {
    MemoryFolder folder(sample("sharded", "torch_bin"), {});
    const std::string index = R"({"weight_map": {"nope": "pytorch_model-00001-of-00003.bin"}})";
    folder.put("pytorch_model.bin.index.json", index);
    const std::string what = message_of([&] { (void)open(Source::folder(folder)); });
    CHECK_THAT(what, Catch::Matchers::Contains("mem://folder/pytorch_model-00001-of-00003.bin"));
  }
  SECTION("a folder without a model file or a tree") {
    MemoryFolder folder(sample("numpy", ""), {});
    CHECK_THROWS_AS(open(Source::folder(folder)), FormatError);
    CHECK_THROWS_AS(open(Source::folder(folder, "absent.npy")), FormatError);
  }
  SECTION("a tree's missing, short or oversized files") {
    MemoryFolder folder(sample("tensordict", "s01_basic"), {});
    folder.remove("nested/b.memmap");
    std::string what = message_of([&] { (void)load(Source::folder(folder)); });
    CHECK_THAT(what, Catch::Matchers::Contains("mem://folder/nested/b.memmap"));
    folder.put("nested/b.memmap", "xy");
    what = message_of([&] { (void)load(Source::folder(folder)); });
    CHECK_THAT(what, Catch::Matchers::Contains("too short"));
    MemoryFolder huge(sample("tensordict", "s01_basic"), {.sized = false});
    huge.put("meta.json", std::string(100'000, ' '));
    CHECK_THROWS_AS(load(Source::folder(huge), {.limits = {.max_meta_json_bytes = 50'000}}), LimitError);
    MemoryFolder unlimited(sample("tensordict", "s01_basic"), {.chunk = 4096, .sized = false});
    unlimited.put("meta.json", tensorfile_test::read_text(sample("tensordict", "s01_basic/meta.json")) +
                                   std::string(40'000, ' '));  // past the first read's 16 KiB: the buffer grows
    CHECK_NOTHROW(load(Source::folder(unlimited), {.limits = {.max_meta_json_bytes = UINT64_MAX}}));
  }
  SECTION("an undeclared subdirectory is found where the folder can be listed") {
    MemoryFolder folder(sample("tensordict", "s01_basic"), {});
    folder.put("stray/meta.json", "{}");
    CHECK_THROWS_AS(load(Source::folder(folder)), FormatError);
    std::vector<std::filesystem::path> skipped;
    (void)load(Source::folder(folder), {.tensordict = {.skip_undeclared = true, .skipped = &skipped}});
    REQUIRE(skipped.size() == 1);
    CHECK(skipped.front() == "mem://folder/stray");
    MemoryFolder unlisted(sample("tensordict", "s01_basic"), {.listable = false});
    unlisted.put("stray/meta.json", "{}");
    CHECK_NOTHROW(load(Source::folder(unlisted)));
  }
  SECTION("mmap with readers that cannot be mapped") {
    MemoryFolder folder(sample("tensordict", "s01_basic"), {});
    CHECK_THROWS_AS(load(Source::folder(folder), {.mmap = MapMode::read_only}), ArgumentError);
    MemoryFolder files(sample("safetensors", ""), {});
    CHECK_THROWS_AS(open(Source::folder(files, "overall.safetensors"), {.mmap = MapMode::read_only}), ArgumentError);
  }
}

TEST_CASE("a URL without <tensorfile/remote.hpp> is an ArgumentError saying what to include", "[checkpoint][url]") {
  // This executable does not include the remote header, so no opener is registered: open() and load() of a URL
  // say so, naming the URL without its query, and never read it as a path.
  REQUIRE_FALSE(tensorfile::detail::url_opener());
  for (const std::string url : {"https://example.invalid/dir/model.safetensors?sig=secret",
                                "http://user:secret@127.0.0.1:1/m.pt", "s3://bucket/key.safetensors"}) {
    INFO(url);
    for (const bool by_load : {false, true}) {
      try {
        if (by_load) {
          (void)load(url);
        } else {
          (void)open(url);
        }
        FAIL("expected an ArgumentError");
      } catch (const ArgumentError& error) {
        CHECK_THAT(error.message(), Catch::Contains("#include <tensorfile/remote.hpp>"));
        CHECK_THAT(error.message(), Catch::Contains("tensorfile::remote"));
        CHECK_THAT(error.message(), Catch::Contains(tensorfile::redacted_url(url)));
        CHECK_THAT(error.message(), !Catch::Contains("secret"));
      }
    }
  }
  CHECK(tensorfile::is_url("https://x/y"));
  CHECK_FALSE(tensorfile::is_url("httpsx/y"));
  CHECK_FALSE(tensorfile::is_url("dir/https://x"));
  // What messages give: no query, no "user:password@" (an '@' in the path or query stays out of it).
  CHECK(tensorfile::redacted_url("https://user:secret@host:8080/dir/m.pt?sig=secret") == "https://host:8080/dir/m.pt");
  CHECK(tensorfile::redacted_url("http://host/a@b/m.pt") == "http://host/a@b/m.pt");
  CHECK(tensorfile::redacted_url("http://host?x=a@b") == "http://host");
  CHECK(tensorfile::redacted_url("s3://bucket/key") == "s3://bucket/key");
  CHECK(tensorfile::redacted_url("dir/m.pt?x") == "dir/m.pt?x");
}

}  // namespace folder_source_test
