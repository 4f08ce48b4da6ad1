// SPDX-License-Identifier: MIT
// Slices through the front door (formats/slice.hpp, checkpoint.hpp): Checkpoint::tensor(path, slice), read_into,
// the LoadOptions::slice rule and tensor-parallel plans, on every committed fixture format, checked against the
// whole tensor narrowed, with the bytes a ranged reader hands out counted. (Against torch's own chunk and
// tensor_split: tests/interop/check_parallel_with_torch.py.)
#include <algorithm>
#include <atomic>
#include <cstring>

#include "same_tensors.hpp"
#include "tensorfile/checkpoint.hpp"
#include "tensorfile/tensorfile.hpp"
#include "tensorfile_catch.hpp"

namespace slices_test {

using namespace tensorfile;
using tensorfile_test::check_same_tensors;
using tensorfile_test::sample;
using tensorfile_test::ScratchDir;

std::vector<std::filesystem::path> fixtures() {
  return {
      sample("torch", "state_dict_linear_bn.pt"),
      sample("torch_gen", "zip_deflated.pt"),
      sample("torch_gen", "views_shared_storage.pt"),
      sample("torch", "legacy_format.pt"),
      sample("safetensors", "overall.safetensors"),
      sample("numpy", "f4_c.npy"),
      sample("numpy", "i8_fortran.npy"),
      sample("numpy", "stored.npz"),
      sample("numpy", "deflated.npz"),
      sample("tensordict", "s01_basic"),
      sample("tensordict", "s03_shapes"),
      sample("sharded", "torch_bin"),
      sample("safetensors", "samples.safetensors.index.json"),
  };
}

/// Every slice worth trying of a tensor of `shape`: each dimension whole, empty, its first and last index, and a
/// middle run.
std::vector<TensorSlice> slices_of(const Shape& shape) {
  std::vector<TensorSlice> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto dim = static_cast<std::int64_t>(d);
    const std::int64_t n = shape[d];
    out.push_back({dim, 0, n});
    out.push_back({dim, 0, 0});
    if (n > 0) out.push_back({dim, n - 1, n});
    if (n > 2) out.push_back({dim, 1, n - 1});
    if (n > 1) out.push_back({dim - static_cast<std::int64_t>(shape.size()), 0, 1});  // counted from the last
  }
  return out;
}

/// `whole` narrowed as `slice` says.
Tensor narrowed(const Tensor& whole, const TensorSlice& slice) {
  return whole.narrow(slice.dim, slice.begin, slice.end - slice.begin);
}

TEST_CASE("tensor(path, slice) gives the whole tensor narrowed, in every format", "[checkpoint][slice]") {
  for (const std::filesystem::path& path : fixtures()) {
    for (const bool mapped : {false, true}) {
      INFO(path.filename() << (mapped ? ", mmap" : ", heap"));
      LoadOptions options;
      if (mapped) options.mmap = MapMode::read_only;
      const Checkpoint opened = open(path, options);
      for (const CheckpointEntry& entry : opened.entries()) {
        const Tensor whole = opened.tensor(entry.path);
        for (const TensorSlice& slice : slices_of(entry.shape)) {
          INFO(entry.path << " dim " << slice.dim << " [" << slice.begin << ", " << slice.end << ")");
          const Tensor want = narrowed(whole, slice);
          const Tensor got = opened.tensor(entry.path, slice);
          CHECK(got.sizes() == want.sizes());
          CHECK(got.dtype() == want.dtype());
          CHECK(got.equal(want));
          const Tensor buffer = Tensor::zeros(want.sizes(), want.dtype());
          opened.read_into(entry.path, buffer, slice);
          CHECK(buffer.equal(want));
        }
      }
    }
  }
}

TEST_CASE("the slice rule of the load options applies to load(), tensor() and read_into()", "[checkpoint][slice]") {
  for (const std::filesystem::path& path : fixtures()) {
    INFO(path.filename());
    const Value whole = load(path);
    // Dimension 0 of every tensor of rank 1 or more, rank 1 of 2 as tensor_split cuts it.
    const SliceRule rule = parallel_slices({.world = 2, .rank = 1, .rules = {{"*", 0}}});
    const auto expected_part = [&](const std::string& name, const Tensor& t) -> Tensor {
      if (t.sizes().empty()) return t;
      const std::optional<TensorSlice> slice = rule(name, t.sizes());
      return narrowed(t, *slice).contiguous();
    };
    Dict expected;
    expected.ordered = true;
    for (const auto& [name, tensor] : named_tensors(whole)) expected.set(name, expected_part(name, tensor));
    LoadOptions options{.slice = [&](std::string_view name, const Shape& shape) -> std::optional<TensorSlice> {
      if (shape.empty()) return std::nullopt;
      return rule(name, shape);
    }};
    const Value got = load(path, options);
    const NamedTensors a = named_tensors(got);
    const NamedTensors b = named_tensors(Value(expected));
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO(b[i].first);
      CHECK(a[i].first == b[i].first);
      CHECK(a[i].second.sizes() == b[i].second.sizes());
      CHECK(a[i].second.equal(b[i].second));
    }
    const Checkpoint opened = open(path, options);
    const std::string first = b.front().first;
    CHECK(opened.tensor(first).equal(b.front().second));
    CHECK(opened.find(first)->shape == named_tensors(whole).front().second.sizes());  // entries keep the file's
    const Tensor buffer = Tensor::zeros(b.front().second.sizes(), b.front().second.dtype());
    opened.read_into(first, buffer);
    CHECK(buffer.equal(b.front().second));

    // With select (and select_drops), and an into buffer for the first tensor's slice.
    LoadOptions narrowed_options = options;
    narrowed_options.select = select_paths({first});
    const NamedTensors kept = named_tensors(load(path, narrowed_options));
    REQUIRE(kept.size() == named_tensors(load(path, {.select = select_paths({first})})).size());
    CHECK(kept.front().second.equal(b.front().second));
    for (std::size_t i = 1; i < kept.size(); ++i) {
      if (kept[i].first != first) CHECK(kept[i].second.device().is_meta());
    }
    narrowed_options.select_drops = true;
    const Tensor into = Tensor::zeros(b.front().second.sizes(), b.front().second.dtype());
    narrowed_options.into = {{first, into}};
    const NamedTensors only = named_tensors(load(path, narrowed_options));
    REQUIRE(only.size() == 1);
    CHECK(only.front().first == first);
    CHECK(into.equal(b.front().second));
    CHECK(only.front().second.raw_data() == into.raw_data());
  }
}

/// A RangeReader over bytes in memory that counts what it hands out.
class CountingReader final : public RangeReader {
 public:
  explicit CountingReader(const std::filesystem::path& path) {
    const std::string text = tensorfile_test::read_text(path);
    bytes_.resize(text.size());
    std::memcpy(bytes_.data(), text.data(), text.size());
  }
  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min(out.size(), bytes_.size() - static_cast<std::size_t>(offset));
    std::memcpy(out.data(), bytes_.data() + offset, n);
    read_ += n;
    return n;
  }
  std::optional<std::uint64_t> size() const override { return bytes_.size(); }
  std::string name() const override { return "mem://counting"; }
  [[nodiscard]] std::uint64_t bytes_read() const { return read_; }

 private:
  std::vector<std::byte> bytes_;
  std::atomic<std::uint64_t> read_{0};
};

TEST_CASE("a slice reads only its bytes: one range on dimension 0, a range per row on others", "[checkpoint][slice]") {
  ScratchDir dir;
  std::vector<float> values(64 * 32);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const Tensor big = Tensor::from_values<float>(std::span<const float>(values), {64, 32});
  for (const std::string name : {"w.safetensors", "w.npy", "w.pt"}) {
    INFO(name);
    if (name == "w.npy") {
      save(Value(big), dir / name);
    } else {
      save(NamedTensors{{"w", big}}, dir / name);
    }
    CountingReader reader(dir / name);
    const Checkpoint opened = open(Source::reader(reader));
    const std::string path = opened.entries().front().path;
    const std::uint64_t index = reader.bytes_read();
    const Tensor rows = opened.tensor(path, {0, 16, 32});
    CHECK(rows.equal(big.narrow(0, 16, 16)));
    if (name != "w.pt") {  // torch zip files are read whole from a reader (parsed as memory); see open()
      CHECK(reader.bytes_read() - index == 16 * 32 * 4);
      const std::uint64_t before = reader.bytes_read();
      const Tensor columns = opened.tensor(path, {1, 8, 12});
      CHECK(columns.equal(big.narrow(1, 8, 4).contiguous()));
      CHECK(reader.bytes_read() - before == 64 * 4 * 4);
    }
  }
}

TEST_CASE("row runs: a run per row, several rows and their gaps per read where the plan allows", "[slice]") {
  // Bytes 0, 1, 2, ... as the tensor; the reference is the slice taken index by index.
  const auto reference = [](const Shape& shape, std::uint64_t element, std::size_t dim, std::int64_t begin,
                            std::int64_t end) {
    std::uint64_t inner = element;
    for (std::size_t d = dim + 1; d < shape.size(); ++d) inner *= static_cast<std::uint64_t>(shape[d]);
    std::uint64_t rows = 1;
    for (std::size_t d = 0; d < dim; ++d) rows *= static_cast<std::uint64_t>(shape[d]);
    std::vector<std::byte> want;
    for (std::uint64_t row = 0; row < rows; ++row) {
      for (std::uint64_t at = static_cast<std::uint64_t>(begin) * inner; at < static_cast<std::uint64_t>(end) * inner;
           ++at) {
        want.push_back(static_cast<std::byte>((row * static_cast<std::uint64_t>(shape[dim]) * inner + at) & 0xff));
      }
    }
    return want;
  };
  struct Case {
    Shape shape;
    std::uint64_t element;
    std::size_t dim;
    std::int64_t begin, end;
  };
  const std::vector<Case> cases{
      {{40, 24}, 4, 1, 3, 6},    // 12-byte runs of 96-byte rows
      {{40, 24}, 4, 1, 0, 24},   // whole rows: one run
      {{40, 24}, 4, 0, 5, 17},   // dimension 0: one run
      {{7, 5, 3}, 2, 1, 1, 4},   // a middle dimension
      {{7, 5, 3}, 2, 2, 2, 3},   // the last, one element a row
      {{1, 9}, 8, 1, 2, 7},      // one row: one run
      {{33, 10}, 1, 1, 9, 10},   // 1-byte runs
      {{6, 0, 4}, 4, 2, 1, 3},   // no elements
      {{6, 5}, 4, 1, 2, 2},      // an empty slice
      {{500, 40}, 4, 1, 8, 16},  // 32-byte runs, 128-byte gaps
  };
  for (const Case& c : cases) {
    const detail::RowRuns runs = detail::row_runs(c.shape, c.element, c.dim, c.begin, c.end);
    const std::vector<std::byte> want = reference(c.shape, c.element, c.dim, c.begin, c.end);
    REQUIRE(runs.rows * runs.run == want.size());
    std::uint64_t total = c.element;
    for (const std::int64_t extent : c.shape) total *= static_cast<std::uint64_t>(extent);
    std::vector<std::byte> tensor(static_cast<std::size_t>(total));
    for (std::size_t k = 0; k < tensor.size(); ++k) tensor[k] = static_cast<std::byte>(k & 0xff);
    const std::uint64_t gap = runs.rows > 1 ? runs.stride - runs.run : 0;
    // Each run alone; the gaps read through in chunks of every size around the rows' (a chunk smaller than two
    // rows reads run by run); a gap one byte over the limit; the three sources' plans.
    std::vector<detail::RunReading> readings{{},
                                             {gap, runs.stride * 2},
                                             {gap, runs.stride * 3 + 1},
                                             {gap, runs.stride * 7 - 1},
                                             {gap, runs.stride + runs.run},
                                             {gap, runs.stride - 1},
                                             {gap, std::uint64_t{1} << 20}};
    if (gap > 0) readings.push_back({gap - 1, std::uint64_t{1} << 20});
    for (const bool file : {false, true}) {
      for (const bool reader : {false, true}) readings.push_back(detail::run_reading_for(runs, file, reader));
    }
    for (const detail::RunReading& how : readings) {
      INFO("shape of " << c.shape.size() << " dims, " << runs.rows << " rows of " << runs.run << " bytes, dim " << c.dim
                       << " [" << c.begin << ", " << c.end << "), gap " << how.max_gap << " chunk " << how.chunk_bytes);
      std::vector<std::byte> got(want.size(), std::byte{0xee});
      std::uint64_t calls = 0;
      std::uint64_t asked = 0;
      detail::read_row_runs(
          runs, how,
          [&](std::uint64_t from, std::span<std::byte> into) {
            REQUIRE(from + into.size() <= tensor.size());
            std::memcpy(into.data(), tensor.data() + from, into.size());
            ++calls;
            asked += into.size();
          },
          got);
      CHECK(got == want);
      const std::uint64_t per_chunk = runs.stride == 0 ? 0 : how.chunk_bytes / runs.stride;
      const bool through = runs.rows > 1 && gap <= how.max_gap && per_chunk >= 2;
      CHECK(calls == (through ? (runs.rows + per_chunk - 1) / per_chunk : runs.rows));
      CHECK(asked == (through ? (runs.rows - 1) * runs.stride + runs.run - (calls - 1) * gap : want.size()));
    }
  }
  // The plans: a file reads through gaps shorter than a page, a reader through a fifth of a run, memory none.
  const detail::RowRuns narrow_columns = detail::row_runs(Shape{1000, 1024}, 4, 1, 0, 128);  // 3,584-byte gaps
  const detail::RowRuns page_gaps = detail::row_runs(Shape{1000, 1025}, 4, 1, 0, 1);         // 4,096-byte gaps
  CHECK(detail::run_reading_for(narrow_columns, true, false).max_gap >= narrow_columns.stride - narrow_columns.run);
  CHECK(detail::run_reading_for(page_gaps, true, false).max_gap < page_gaps.stride - page_gaps.run);
  CHECK(detail::run_reading_for(narrow_columns, false, true).max_gap * 5 <= narrow_columns.run);
  CHECK(detail::run_reading_for(narrow_columns, false, false).max_gap == 0);
}

TEST_CASE("a slice of another dimension over rows that straddle the read chunks equals the tensor narrowed",
          "[checkpoint][slice]") {
  // 400-byte rows (655 to a 256 KiB chunk, the last chunk partial), 13-byte rows (runs of a few bytes), 12,000-byte
  // rows (gaps longer than a page: a read per run), and a 4-D conv weight; on a file, through a reader, and mapped.
  ScratchDir dir;
  NamedTensors weights;
  std::vector<float> wide(3000 * 100);
  for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(i);
  weights.emplace_back("wide", Tensor::from_values<float>(std::span<const float>(wide), {3000, 100}));
  std::vector<std::int8_t> bytes(40000 * 13);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::int8_t>(i * 7 % 251);
  weights.emplace_back("bytes", Tensor::from_values<std::int8_t>(std::span<const std::int8_t>(bytes), {40000, 13}));
  weights.emplace_back("tall", Tensor::from_values<float>(std::span<const float>(wide).first(6 * 3000), {6, 3000}));
  weights.emplace_back("conv",
                       Tensor::from_values<float>(std::span<const float>(wide).first(16 * 40 * 9), {16, 40, 3, 3}));
  for (const std::string name : {"parts.pt", "parts.safetensors"}) {
    save(weights, dir / name);
    CountingReader reader(dir / name);
    for (int how = 0; how < 3; ++how) {
      INFO(name << (how == 0 ? ", file" : how == 1 ? ", reader" : ", mmap"));
      const Checkpoint opened = how == 1   ? open(Source::reader(reader))
                                : how == 2 ? open(dir / name, {.mmap = MapMode::read_only})
                                           : open(dir / name);
      for (const auto& [path, whole] : weights) {
        for (std::int64_t world : {2, 3, 8}) {
          for (std::int64_t rank = 0; rank < world; ++rank) {
            for (std::int64_t dim = 1; dim < static_cast<std::int64_t>(whole.sizes().size()); ++dim) {
              TensorSlice slice =
                  split_extent(whole.sizes()[static_cast<std::size_t>(dim)], world, rank, EvenSplit::tensor_split);
              slice.dim = dim;
              INFO(path << " dim " << dim << " rank " << rank << " of " << world);
              const Tensor want = narrowed(whole, slice).contiguous();
              CHECK(opened.tensor(path, slice).equal(want));
              const Tensor buffer = Tensor::zeros(want.sizes(), want.dtype());
              opened.read_into(path, buffer, slice);
              CHECK(buffer.equal(want));
            }
          }
        }
      }
    }
  }
  SECTION("a reader reads through gaps of up to a fifth of a run, and no more") {
    save(NamedTensors{{"wide", weights.front().second}}, dir / "wide.safetensors");
    CountingReader reader(dir / "wide.safetensors");
    const Checkpoint opened = open(Source::reader(reader));
    std::uint64_t before = reader.bytes_read();
    CHECK(opened.tensor("wide", {1, 5, 95}).equal(narrowed(weights.front().second, {1, 5, 95}).contiguous()));
    CHECK(reader.bytes_read() - before == 2999 * 400 + 360);  // 40-byte gaps, 360-byte runs: read through
    before = reader.bytes_read();
    CHECK(opened.tensor("wide", {1, 10, 90}).equal(narrowed(weights.front().second, {1, 10, 90}).contiguous()));
    CHECK(reader.bytes_read() - before == 3000 * 320);  // 80-byte gaps, 320-byte runs: a run each
  }
  SECTION("a file cut inside the gaps read through is a FormatError naming it") {
    save(NamedTensors{{"wide", weights.front().second}}, dir / "cut.safetensors");
    const Checkpoint opened = open(dir / "cut.safetensors");
    std::filesystem::resize_file(dir / "cut.safetensors", std::filesystem::file_size(dir / "cut.safetensors") - 1000);
    try {
      (void)opened.tensor("wide", {1, 0, 10});
      FAIL("a cut file was read");
    } catch (const FormatError& error) {
      CHECK(std::string(error.what()).find("cut.safetensors") != std::string::npos);
      CHECK(error.offset().has_value());
    }
  }
}

TEST_CASE("a rank of a tensor-parallel plan reads 1/world of the split tensors and the replicated ones whole",
          "[checkpoint][slice]") {
  ScratchDir dir;
  std::vector<float> values(64 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const Tensor square = Tensor::from_values<float>(std::span<const float>(values), {64, 64});
  const Tensor row = Tensor::from_values<float>(std::span<const float>(values).first(64), {64});
  NamedTensors weights;
  for (int i = 0; i < 4; ++i) {
    weights.emplace_back("l" + std::to_string(i) + (i % 2 == 0 ? ".col" : ".row"), square.clone());
  }
  weights.emplace_back("norm.a", row.clone());
  weights.emplace_back("norm.b", row.clone());
  save(weights, dir / "tp.safetensors");
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    CountingReader reader(dir / "tp.safetensors");
    const LoadOptions options{
        .slice = parallel_slices({.world = 4, .rank = rank, .rules = {{"*.col", 0}, {"*.row", 1}, {"norm.*"}}})};
    const Checkpoint opened = open(Source::reader(reader), options);
    const std::uint64_t index = reader.bytes_read();
    const Value part = opened.load_all();
    CHECK(reader.bytes_read() - index == 4 * (64 * 64 * 4) / 4 + 2 * 64 * 4);
    CHECK(part["l0.col"].as_tensor().equal(square.narrow(0, rank * 16, 16)));
    CHECK(part["l1.row"].as_tensor().equal(square.narrow(1, rank * 16, 16).contiguous()));
    CHECK(part["norm.b"].as_tensor().equal(row));
  }
}

TEST_CASE("split_extent follows torch.chunk and torch.tensor_split", "[slice]") {
  struct Row {
    std::int64_t extent, world;
    EvenSplit rule;
    std::vector<std::pair<std::int64_t, std::int64_t>> parts;
  };
  // What t.chunk(world) and t.tensor_split(world) give for torch.arange(extent), worked out from their rules.
  const std::vector<Row> rows{
      {10, 4, EvenSplit::chunk, {{0, 3}, {3, 6}, {6, 9}, {9, 10}}},
      {10, 4, EvenSplit::tensor_split, {{0, 3}, {3, 6}, {6, 8}, {8, 10}}},
      {5, 4, EvenSplit::chunk, {{0, 2}, {2, 4}, {4, 5}, {5, 5}}},
      {5, 4, EvenSplit::tensor_split, {{0, 2}, {2, 3}, {3, 4}, {4, 5}}},
      {3, 4, EvenSplit::tensor_split, {{0, 1}, {1, 2}, {2, 3}, {3, 3}}},
      {0, 2, EvenSplit::chunk, {{0, 0}, {0, 0}}},
      {8, 1, EvenSplit::chunk, {{0, 8}}},
  };
  for (const Row& row : rows) {
    for (std::int64_t rank = 0; rank < row.world; ++rank) {
      INFO(row.extent << " over " << row.world << ", rank " << rank);
      const TensorSlice got = split_extent(row.extent, row.world, rank, row.rule);
      CHECK(got.begin == row.parts[static_cast<std::size_t>(rank)].first);
      CHECK(got.end == row.parts[static_cast<std::size_t>(rank)].second);
    }
  }
  CHECK_THROWS_AS(split_extent(4, 0, 0, EvenSplit::chunk), ArgumentError);
  CHECK_THROWS_AS(split_extent(4, 2, 2, EvenSplit::chunk), ArgumentError);
}

TEST_CASE("parallel plans: rules in order, explicit sizes, and the errors of plans that do not fit", "[slice]") {
  const std::vector<ParallelRule> rules = parse_parallel_rules("*.q.weight=0,*.o.weight=-1,*.bias=0:1/3,*=replicate");
  REQUIRE(rules.size() == 4);
  CHECK(rules[1].dim == -1);
  CHECK(rules[2].sizes == std::vector<std::int64_t>{1, 3});
  CHECK_FALSE(rules[3].dim);
  const SliceRule rank1 = parallel_slices({.world = 2, .rank = 1, .rules = rules});
  const std::optional<TensorSlice> q = rank1("l.q.weight", Shape{6, 4});
  REQUIRE(q);
  CHECK((q->dim == 0 && q->begin == 3 && q->end == 6));
  const std::optional<TensorSlice> o = rank1("l.o.weight", Shape{6, 5});
  REQUIRE(o);
  CHECK((o->dim == 1 && o->begin == 3 && o->end == 5));
  const std::optional<TensorSlice> bias = rank1("l.bias", Shape{4});
  REQUIRE(bias);
  CHECK((bias->begin == 1 && bias->end == 4));
  CHECK_FALSE(rank1("norm.weight", Shape{6}));
  CHECK_THROWS_AS(rank1("l.bias", Shape{5}), ArgumentError);                                 // sizes sum to 4
  CHECK_THROWS_AS(rank1("x.q.weight", Shape{}), ArgumentError);                              // no dimension 0
  CHECK_THROWS_AS(parallel_slices({.world = 3, .rank = 0, .rules = rules}), ArgumentError);  // two sizes, world 3
  CHECK_THROWS_AS(parallel_slices({.world = 2, .rank = 2}), ArgumentError);
  CHECK_THROWS_AS(parse_parallel_rules("w"), ArgumentError);
  CHECK_THROWS_AS(parse_parallel_rules("w=x"), ArgumentError);
  CHECK_THROWS_AS(parse_parallel_rules("w=0:"), ArgumentError);
  CHECK_THROWS_AS(parse_parallel_rules("w=0:1/-2"), ArgumentError);
}

TEST_CASE("slices that do not fit, and per-format loaders asked for slices, are errors", "[checkpoint][slice]") {
  const std::filesystem::path path = sample("safetensors", "overall.safetensors");
  const Checkpoint opened = open(path);
  const CheckpointEntry& entry = opened.entries().front();
  const auto rank = static_cast<std::int64_t>(entry.shape.size());
  CHECK_THROWS_AS(opened.tensor(entry.path, {rank, 0, 0}), ArgumentError);
  CHECK_THROWS_AS(opened.tensor(entry.path, {0, 1, 0}), ArgumentError);
  CHECK_THROWS_AS(opened.tensor(entry.path, {0, 0, entry.shape.empty() ? 1 : entry.shape[0] + 1}), ArgumentError);
  const Tensor wrong = Tensor::zeros({1}, DType::Float64);
  CHECK_THROWS_AS(opened.read_into(entry.path, wrong, {0, 0, 0}), ArgumentError);
  const LoadOptions sliced{.slice = [](std::string_view, const Shape&) { return std::optional<TensorSlice>(); }};
  CHECK_THROWS_AS(load_safetensors(path, sliced), ArgumentError);
  CHECK_THROWS_AS(load_torch(sample("torch", "state_dict_linear_bn.pt"), sliced), ArgumentError);
  CHECK_THROWS_AS(load_npy(sample("numpy", "f4_c.npy"), sliced), ArgumentError);
  CHECK_THROWS_AS(load_npz(sample("numpy", "stored.npz"), sliced), ArgumentError);
  CHECK_THROWS_AS(load_memmap(sample("tensordict", "s01_basic"), sliced), ArgumentError);
  CHECK_THROWS_AS(load_state_dict(sample("sharded", "torch_bin"), sliced), ArgumentError);
  CHECK_NOTHROW(load(path, sliced));
}

}  // namespace slices_test
