// SPDX-License-Identifier: MIT
// The hostile corpus (tests/hostile): every crafted input raises exactly the error expected.tsv gives,
// in every load mode; every truncation and byte flip of small valid files fails cleanly or loads;
// tensordict trees cannot reach outside themselves through symlinks; each LoadOptions limit holds at
// its boundary.
#include <tensorfile/tensorfile.hpp>

#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "hostile/hostile_outcome.hpp"
#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

namespace fs = std::filesystem;
using tensorfile_hostile::outcome;
using tensorfile_hostile::replace_all;
using tensorfile_test::PickleWriter;

namespace {

fs::path hostile_dir() { return tensorfile_test::data_dir() / ".." / "hostile"; }

std::vector<std::byte> slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

struct Row {
  std::string name, kind, expect, error_class, message, path_override;
};

std::vector<Row> read_table() {
  std::ifstream in(hostile_dir() / "expected.tsv");
  REQUIRE(in.good());
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::size_t start = 0;
    for (std::size_t tab = line.find('\t'); tab != std::string::npos; tab = line.find('\t', start)) {
      f.push_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    f.push_back(line.substr(start));
    REQUIRE(f.size() == 6);
    rows.push_back({f[0], f[1], f[2], f[3], f[4], f[5]});
  }
  return rows;
}

using Outcome = std::pair<std::string, std::string>;

tensorfile::LoadOptions options_for(const std::string& name, bool mmap) {
  return {.mmap = mmap ? std::optional<tensorfile::MapMode>(tensorfile::MapMode::copy_on_write) : std::nullopt,
          .verify_crc = name.find("crc") != std::string::npos};
}

/// {span heap, span mmap, path heap (records by pread), path mmap}, paths replaced by <file>.
std::vector<Outcome> torch_outcomes(const std::string& name) {
  const fs::path file = hostile_dir() / "corpus" / (name + ".pt");
  const std::vector<std::byte> bytes = slurp(file);
  const std::span<const std::byte> span(bytes);
  std::vector<Outcome> out;
  for (const bool mmap : {false, true}) {
    out.push_back(outcome([&] { (void)tensorfile::load_torch(span, options_for(name, mmap)); }));
  }
  for (const bool mmap : {false, true}) {
    auto o = outcome([&] { (void)tensorfile::load_torch(file, options_for(name, mmap)); });
    o.second = replace_all(o.second, file.string(), "<file>");
    out.push_back(o);
  }
  return out;
}

Outcome tree_outcome(const fs::path& dir) {
  auto o = outcome([&] { (void)tensorfile::load_memmap(dir); });
  o.second = replace_all(o.second, dir.string(), "<dir>");
  return o;
}

}  // namespace

TEST_CASE("Hostile corpus: every input raises its exact error in every load mode", "[hostile][safety]") {
  const std::vector<Row> rows = read_table();
  std::size_t tried = 0;
  for (const Row& row : rows) {
    if (row.expect != "exact") continue;
    INFO(row.name);
    if (row.kind == "torch") {
      const std::vector<Outcome> got = torch_outcomes(row.name);
      const std::string path_message =
          row.message.empty() ? "" : "tensorfile: <file>: " + row.message.substr(std::string("tensorfile: ").size());
      Outcome path_expected{row.error_class, path_message};
      if (!row.path_override.empty()) {
        const std::size_t bar = row.path_override.find('|');
        path_expected = {row.path_override.substr(0, bar), row.path_override.substr(bar + 1)};
      }
      CHECK(got[0] == Outcome{row.error_class, row.message});  // load_torch(span)
      CHECK(got[1] == Outcome{row.error_class, row.message});  // load_torch(span, {.mmap = copy_on_write})
      CHECK(got[2] == path_expected);                          // load_torch(path)
      CHECK(got[3] == path_expected);                          // load_torch(path, {.mmap = copy_on_write})
      tried += 4;
    } else {
      REQUIRE(row.kind == "tensordict");
      CHECK(tree_outcome(hostile_dir() / "tensordict" / row.name) == Outcome{row.error_class, row.message});
      ++tried;
    }
  }
  std::printf("hostile corpus: %zu rows, %zu loads checked\n", rows.size(), tried);
  CHECK(tried > 250);
}

TEST_CASE("Every truncation and every byte flip of small valid files fails cleanly or loads", "[hostile][safety]") {
  std::size_t tried = 0;
  for (const char* name : {"torch/t_float32_2x3.pt", "torch/legacy_format.pt", "torch/protocol4.pt",
                           "torch/storage_and_tensor.pt", "torch_gen/zip_deflated.pt", "torch_gen/root_int.pt"}) {
    INFO(name);
    const std::vector<std::byte> whole = slurp(tensorfile_test::data_dir() / name);
    REQUIRE(!whole.empty());
    const tensorfile::Value reference = tensorfile::load_torch(std::span<const std::byte>(whole));
    for (std::size_t n = 0; n < whole.size(); n += tensorfile_test::exhaustive_step()) {
      const std::vector<std::byte> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
      for (const bool mmap : {false, true}) {
        const Outcome o =
            outcome([&] { (void)tensorfile::load_torch(std::span<const std::byte>(cut), options_for("", mmap)); });
        CHECK(o.first != "NOT-A-TENSORFILE-ERROR");
        ++tried;
      }
    }
    for (std::size_t i = 0; i < whole.size(); i += tensorfile_test::exhaustive_step()) {
      std::vector<std::byte> flipped = whole;
      flipped[i] ^= std::byte{0xFF};
      for (const bool verify : {false, true}) {
        const Outcome o = outcome([&] {
          const tensorfile::Value v =
              tensorfile::load_torch(std::span<const std::byte>(flipped), {.verify_crc = verify});
          (void)(v == reference);  // a loaded value is a whole value
        });
        CHECK(o.first != "NOT-A-TENSORFILE-ERROR");
        ++tried;
      }
    }
  }
  std::printf("truncation and byte-flip loop: %zu loads\n", tried);
}

TEST_CASE("Tensordict trees cannot reach outside themselves through symbolic links", "[hostile][safety][tensordict]") {
  const tensorfile_test::ScratchDir scratch;
  const fs::path outside = scratch / "outside";
  fs::create_directories(outside / "sub");
  { std::ofstream(outside / "secret.memmap", std::ios::binary) << std::string(8, 'S'); }
  {
    std::ofstream(outside / "sub" / "meta.json")
        << R"({"shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})";
  }
  const std::string leaf = R"({"device": "cpu", "shape": [2], "dtype": "torch.float32", "is_nested": false})";
  const auto tree =
      [&](const std::string& name, const std::string& entries) {
        const fs::path root = scratch / name;
        fs::create_directories(root);
        std::ofstream(root / "meta.json")
            << "{" << entries << (entries.empty() ? "" : ", ")
            << R"("shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})";
        return root;
      };
  SECTION("a data file linking outside (relative and absolute)") {
    const fs::path rel = tree("rel", "\"a\": " + leaf);
    fs::create_symlink("../outside/secret.memmap", rel / "a.memmap");
    const fs::path abs = tree("abs", "\"a\": " + leaf);
    fs::create_symlink(fs::canonical(outside / "secret.memmap"), abs / "a.memmap");
    for (const fs::path& root : {rel, abs}) {
      const Outcome o = tree_outcome(root);
      CHECK(o.first == "FormatError");
      CHECK(o.second ==
            "tensorfile: <dir>/a.memmap: symbolic link leaves the tree; expected a target under <dir>, got " +
                fs::canonical(outside / "secret.memmap").string());
    }
  }
  SECTION("a sub-collection directory linking outside") {
    const fs::path root = tree("subdir", R"("sub": {"type": "TensorDict"})");
    fs::create_symlink(fs::canonical(outside / "sub"), root / "sub");
    const Outcome o = tree_outcome(root);
    CHECK(o.first == "FormatError");
    CHECK(o.second == "tensorfile: <dir>/sub: symbolic link leaves the tree; expected a target under <dir>, got " +
                          fs::canonical(outside / "sub").string());
  }
  SECTION("meta.json itself linking outside") {
    const fs::path root = scratch / "meta";
    fs::create_directories(root);
    fs::create_symlink(fs::canonical(outside / "sub" / "meta.json"), root / "meta.json");
    const Outcome o = tree_outcome(root);
    CHECK(o.first == "FormatError");
    CHECK(o.second.find("symbolic link leaves the tree") != std::string::npos);
  }
  SECTION("a link that stays inside the tree loads") {
    const fs::path root = tree("inside", "\"a\": " + leaf);
    { std::ofstream(root / "real.bin", std::ios::binary) << std::string(8, '\0'); }
    fs::create_symlink("real.bin", root / "a.memmap");
    CHECK(tree_outcome(root) == Outcome{"OK", ""});
  }
  SECTION("a link loop is an error, not a hang") {
    const fs::path root = tree("loop", "\"a\": " + leaf);
    fs::create_symlink("a.memmap", root / "a.memmap");
    CHECK(tree_outcome(root).first != "OK");
  }
}

TEST_CASE("LoadOptions limits hold at their boundary", "[hostile][safety][limits]") {
  const std::string six = [] {
    std::string s(24, '\0');
    return s;
  }();
  const auto load_pickle = [&](const std::string& pickle, tensorfile::LoadOptions options = {}) {
    const std::string file = tensorfile_test::torch_file(pickle, six);
    return outcome([&] { (void)tensorfile::load_torch(std::as_bytes(std::span(file.data(), file.size())), options); });
  };
  SECTION("defaults") {
    const tensorfile::LoadOptions d;
    CHECK(d.strict);
    CHECK(d.limits.max_depth == 5000);
    CHECK(d.limits.max_memo == (1u << 22));
    CHECK(d.limits.max_container == (1u << 26));
    CHECK(d.limits.max_tree_size == (std::uint64_t{1} << 27));
    CHECK(d.limits.max_total_bytes == (std::uint64_t{1} << 46));
  }
  SECTION("max_depth: lists, tuples and dicts") {
    // `depth` nested containers load with max_depth = depth and fail with depth - 1.
    for (const std::size_t depth : {std::size_t{2}, std::size_t{3}, std::size_t{10}, std::size_t{100}}) {
      PickleWriter lists, tuples, dicts;
      lists.proto();
      tuples.proto();
      dicts.proto();
      for (std::size_t i = 0; i < depth; ++i) {
        lists.empty_list();
        tuples.mark();
        dicts.empty_dict().integer(static_cast<std::int32_t>(i));
      }
      for (std::size_t i = 0; i + 1 < depth; ++i) lists.append();
      for (std::size_t i = 0; i < depth; ++i) tuples.tuple();
      dicts.none();
      for (std::size_t i = 0; i < depth; ++i) dicts.setitem();
      for (PickleWriter* w : {&lists, &tuples, &dicts}) {
        w->stop();
        INFO(depth);
        CHECK(load_pickle(w->bytes(), {.limits = {.max_depth = depth}}).first == "OK");
        const Outcome over = load_pickle(w->bytes(), {.limits = {.max_depth = depth - 1}});
        CHECK(over.first == "LimitError");
        CHECK(over.second.find("nesting exceeds " + std::to_string(depth - 1) + " levels") != std::string::npos);
      }
    }
  }
  SECTION("max_memo") {
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{300}}) {
      PickleWriter memo;
      memo.proto().none();
      for (std::size_t i = 0; i < n; ++i)
        memo.op('r').raw(std::string(reinterpret_cast<const char*>(&i), 4));  // LONG_BINPUT i
      memo.stop();
      CHECK(load_pickle(memo.bytes(), {.limits = {.max_memo = n}}).first == "OK");
      const Outcome over = load_pickle(memo.bytes(), {.limits = {.max_memo = n - 1}});
      CHECK(over.first == "LimitError");
      CHECK(over.second.find("pickle memo exceeds " + std::to_string(n - 1) + " entries") != std::string::npos);
    }
  }
  SECTION("max_container: APPENDS, SETITEMS, ADDITEMS, TUPLE, repeated APPEND") {
    const std::size_t n = 50;
    PickleWriter appends, setitems, additems, tuple, append_one;
    appends.proto().empty_list().mark();
    setitems.proto().empty_dict().mark();
    additems.proto(4).op(0x8f).mark();
    tuple.proto().mark();
    append_one.proto().empty_list();
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::int32_t>(i);
      appends.integer(v);
      setitems.integer(v).none();
      additems.integer(v);
      tuple.integer(v);
      append_one.integer(v).append();
    }
    appends.op('e');
    setitems.setitems();
    additems.op(0x90);
    tuple.tuple();
    for (PickleWriter* w : {&appends, &setitems, &additems, &tuple, &append_one}) {
      w->stop();
      CHECK(load_pickle(w->bytes(), {.limits = {.max_container = n}}).first == "OK");
      const Outcome over = load_pickle(w->bytes(), {.limits = {.max_container = n - 1}});
      CHECK(over.first == "LimitError");
      CHECK(over.second.find("container exceeds " + std::to_string(n - 1) + " items") != std::string::npos);
    }
  }
  SECTION("max_tree_size: a container shared level upon level counts at each place it appears") {
    // Level 0 is an empty list; level i holds level i - 1 twice: 2^(i+1) - 1 values reached, in a few bytes each.
    const auto shared_levels = [](std::size_t levels, char kind) {
      PickleWriter w;
      w.proto().empty_list().put(0).op('0');  // POP: each level is reached through the memo
      for (std::size_t i = 1; i <= levels; ++i) {
        const auto below = static_cast<std::uint8_t>(i - 1);
        if (kind == 't') w.mark().get(below).get(below).tuple();               // made whole (TUPLE)
        if (kind == 'l') w.empty_list().mark().get(below).get(below).op('e');  // filled (APPENDS)
        if (kind == 'd') w.empty_dict().integer(0).get(below).setitem().integer(1).get(below).setitem();
        w.put(static_cast<std::uint8_t>(i)).op('0');
      }
      return w.get(static_cast<std::uint8_t>(levels)).stop().bytes();
    };
    for (const char kind : {'t', 'l', 'd'}) {
      INFO(kind);
      // 10 levels: 2^11 - 1 values; dicts 5 * 2^10 - 4 (each also reaches its two keys and its attributes)
      const std::uint64_t reach = kind == 'd' ? 5116 : 2047;
      CHECK(load_pickle(shared_levels(10, kind), {.limits = {.max_tree_size = reach}}) == Outcome{"OK", ""});
      const Outcome over = load_pickle(shared_levels(10, kind), {.limits = {.max_tree_size = reach - 1}});
      CHECK(over.first == "LimitError");
      CHECK(over.second.find("object tree exceeds " + std::to_string(reach - 1) + " values") != std::string::npos);
      // 60 levels (2^61 values) are refused by default as soon as they pass it, quickly; select would walk them.
      tensorfile::LoadOptions select;
      select.select = tensorfile::select_paths({"0/0"});
      const Outcome deep = load_pickle(shared_levels(60, kind), select);
      CHECK(deep.first == "LimitError");
      CHECK(deep.second.find("object tree exceeds 134217728 values") != std::string::npos);
    }
  }
  SECTION("max_copied_text: a long str read back many times is that many copies") {
    // A 1,000-byte str, then copies of it into a list: g, memoized once and read back 100 times (the memo write
    // and 100 reads are copies); d, 99 DUPs; p, memoized under 100 indices and each read back (200 copies).
    for (const char how : {'g', 'd', 'p'}) {
      INFO(how);
      PickleWriter w;
      w.proto().empty_list().mark().string(std::string(1000, 'x'));
      if (how == 'g') {
        w.put(0);
        for (int i = 0; i < 100; ++i) w.get(0);
      }
      for (int i = 0; how == 'd' && i < 99; ++i) w.op('2');
      if (how == 'p') {
        for (int i = 1; i <= 100; ++i) w.put(static_cast<std::uint8_t>(i));
        for (int i = 1; i <= 100; ++i) w.get(static_cast<std::uint8_t>(i));
      }
      w.op('e').stop();
      const std::uint64_t copied = how == 'g' ? 101'000 : how == 'd' ? 99'000 : 200'000;
      CHECK(load_pickle(w.bytes(), {.limits = {.max_copied_text = copied}}).first == "OK");
      const Outcome over = load_pickle(w.bytes(), {.limits = {.max_copied_text = copied - 1}});
      CHECK(over.first == "LimitError");
      CHECK(over.second.find("str values copied by the memo and DUP exceed " + std::to_string(copied - 1) + " bytes") !=
            std::string::npos);
    }
  }
  SECTION("max_total_bytes: the sum over storages") {
    const std::string two = PickleWriter()
                                .proto()
                                .mark()
                                .tensor("FloatStorage", "0", 6, 0, {6}, {1})
                                .tensor("FloatStorage", "1", 6, 0, {6}, {1})
                                .tuple()
                                .stop()
                                .bytes();
    const std::string file = tensorfile_test::torch_zip(
        "archive", {{"data.pkl", two}, {"data/0", six}, {"data/1", six}, {"version", "3\n"}});
    const auto run = [&](std::uint64_t limit) {
      return outcome([&] {
        (void)tensorfile::load_torch(std::as_bytes(std::span(file.data(), file.size())),
                                     {.limits = {.max_total_bytes = limit}});
      });
    };
    CHECK(run(48).first == "OK");
    const Outcome over = run(47);
    CHECK(over.first == "LimitError");
    CHECK(over.second.find("storages exceed 47 bytes") != std::string::npos);
    // One storage viewed twice counts once.
    const std::string shared = PickleWriter()
                                   .proto()
                                   .mark()
                                   .tensor("FloatStorage", "0", 6, 0, {6}, {1})
                                   .tensor("FloatStorage", "0", 6, 0, {6}, {1})
                                   .tuple()
                                   .stop()
                                   .bytes();
    CHECK(load_pickle(shared, {.limits = {.max_total_bytes = 24}}).first == "OK");
  }
  SECTION("tensordict: max_meta_json_bytes") {
    const tensorfile_test::ScratchDir scratch;
    const std::string json = R"({"shape": [], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})";
    { std::ofstream(scratch / "meta.json") << json; }
    const auto run = [&](std::uint64_t limit) {
      return outcome(
          [&] { (void)tensorfile::load_memmap(scratch.path(), {.limits = {.max_meta_json_bytes = limit}}); });
    };
    CHECK(run(json.size()).first == "OK");
    CHECK(run(json.size() - 1).first == "LimitError");
  }
  SECTION("a declared container count is never pre-allocated: a 4 GiB BINUNICODE in a 100-byte file") {
    const Outcome o = load_pickle(PickleWriter().proto().op('X').raw("\xff\xff\xff\xff").raw("abc").bytes());
    CHECK(o.first == "FormatError");
  }
}
