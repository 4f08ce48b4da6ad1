// SPDX-License-Identifier: MIT
// The pickle machine builds `_rebuild_tensor_v2/v3` calls straight from their bytes when they look the
// way Python's pickler writes them. These tests hold that shortcut to the opcode-by-opcode result:
// on every torch-written fixture and on every one-byte change and truncation of several of them.
#include <tensorfile/detail/zip/reader.hpp>

#include <fstream>

#include "tensorfile_catch.hpp"
#include "torch/recognition_differential.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;

namespace {
std::vector<std::byte> pickle_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string raw{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto zip = detail::ZipReader::open(std::as_bytes(std::span(raw.data(), raw.size())), path);
  const detail::ZipEntry* entry = zip.find("data.pkl");
  REQUIRE(entry != nullptr);
  return zip.read(*entry);
}
std::string differs(std::span<const std::byte> pickle, bool strict, std::size_t* recognized = nullptr) {
  const auto fast = tensorfile_test::run_torch_pickle(pickle, true, strict);
  const auto slow = tensorfile_test::run_torch_pickle(pickle, false, strict);
  if (recognized != nullptr) *recognized += fast.recognized;
  return tensorfile_test::recognition_difference(fast, slow);
}
}  // namespace

TEST_CASE("recognized tensor calls equal the opcode-by-opcode result on every torch fixture") {
  std::size_t recognized = 0;
  std::size_t fixtures = 0;
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    if (path.stem() == "legacy_format") continue;  // no zip, no data.pkl
    CAPTURE(path.filename().string());
    const auto pickle = pickle_of(path);
    for (const bool strict : {true, false}) CHECK(differs(pickle, strict, &recognized).empty());
    ++fixtures;
  }
  CHECK(fixtures >= 50);
  // The first tensor of each storage class is always run by opcodes (its class is a GLOBAL, not a
  // memo read); nearly every later one is recognised.
  std::size_t in_big_state_dict = 0;
  CHECK(differs(pickle_of(tensorfile_test::data_dir() / "torch_gen" / "state_dict_1100_entries.pt"), true,
                &in_big_state_dict)
            .empty());
  CHECK(in_big_state_dict >= 1000);
  CHECK(recognized > in_big_state_dict);
}

TEST_CASE("a pickle read through a window of any size gives the result and the error of the pickle in memory") {
  // Heap loads read the pickle from the file a window at a time; opcodes, lines and whole tensor calls then
  // straddle the windows' edges.
  const auto same = [](std::span<const std::byte> pickle, std::size_t window, bool recognize) {
    const auto whole = tensorfile_test::run_torch_pickle(pickle, recognize);
    const auto streamed = tensorfile_test::run_torch_pickle(pickle, recognize, true, {}, window);
    return tensorfile_test::recognition_difference(streamed, whole);
  };
  std::size_t fixtures = 0;
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    if (path.stem() == "legacy_format") continue;  // no zip, no data.pkl
    CAPTURE(path.filename().string());
    const auto pickle = pickle_of(path);
    for (const std::size_t window : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{100}}) {
      CAPTURE(window);
      CHECK(same(pickle, window, true).empty());
    }
    CHECK(same(pickle, 3, false).empty());
    ++fixtures;
  }
  CHECK(fixtures >= 50);
  // Every window from 1 to 64 bytes (so that each opcode meets an edge at each of its bytes), then every
  // truncation and a changed byte at every offset, of one fixture with shared views and memo reads.
  const auto pickle = pickle_of(tensorfile_test::data_dir() / "torch_gen" / "views_shared_storage.pt");
  for (std::size_t window = 1; window <= 64; ++window) {
    const std::string difference = same(pickle, window, true);
    if (!difference.empty()) FAIL_CHECK("a window of " << window << " bytes: " << difference);
  }
  std::size_t errors = 0;
  std::size_t tried = 0;
  for (std::size_t at = 0; at < pickle.size(); at += tensorfile_test::exhaustive_step()) {
    CAPTURE(at);
    ++tried;
    const auto cut = std::span(pickle).first(at);
    const std::string truncated = same(cut, 1 + at % 13, true);
    if (!truncated.empty()) FAIL_CHECK("truncated to " << at << " bytes: " << truncated);
    auto changed = pickle;
    changed[at] = static_cast<std::byte>(0xff);
    const std::string difference = same(changed, 1 + at % 5, true);
    if (!difference.empty()) FAIL_CHECK("byte " << at << " = 0xff: " << difference);
    if (!tensorfile_test::run_torch_pickle(changed, true).value) ++errors;
  }
  CHECK(errors > tried / 4);  // the changes reach the error paths, whose messages must agree too
  // A large state dict: whole tensor calls, and many windows of the default size.
  const auto big = pickle_of(tensorfile_test::data_dir() / "torch_gen" / "state_dict_1100_entries.pt");
  REQUIRE(big.size() > 3 * 4096);
  CHECK(same(big, 4096, true).empty());
  CHECK(same(big, 64, true).empty());
}

TEST_CASE("recognized tensor calls equal the opcode result under every one-byte change and truncation") {
  std::size_t inputs = 0;
  std::size_t recognized = 0;
  for (const char* name : {"torch_gen/views_shared_storage.pt", "torch/state_dict_linear_bn.pt"}) {
    const auto pickle = pickle_of(tensorfile_test::data_dir() / name);
    CAPTURE(name);
    for (std::size_t at = 0; at < pickle.size(); ++at) {
      CAPTURE(at);
      auto changed = pickle;
      const auto original = std::to_integer<unsigned>(pickle[at]);
      for (const unsigned replacement : {0x00u, 0xffu, original ^ 1u, (original + 1u) & 0xffu}) {
        if (replacement == original) continue;
        changed[at] = static_cast<std::byte>(replacement);
        const std::string difference = differs(changed, true, &recognized);
        if (!difference.empty()) FAIL_CHECK("byte " << at << " = " << replacement << ": " << difference);
        ++inputs;
      }
      const std::string difference = differs(std::span(pickle).first(at), true);
      if (!difference.empty()) FAIL_CHECK("truncated to " << at << " bytes: " << difference);
    }
  }
  CHECK(inputs > 5000);
  CHECK(recognized > 500);  // the changes reach recognised calls, not only the opcode path
}

namespace {
// Two float tensors the way Python's pickler writes them: the second one's storage class, "storage"
// tag, location and OrderedDict are memo reads, so its call is recognizable. `tail` goes after
// both tensors, inside the outer tuple.
// `second_shape`, when given, replaces the second tensor's size and stride tuples (raw opcodes).
std::string two_tensors(std::int32_t second_offset, const std::string& tail = {},
                        const std::string& second_shape = {}) {
  using tensorfile_test::PickleWriter;
  PickleWriter w;
  w.proto().mark();
  w.global("torch._utils", "_rebuild_tensor_v2").put(0).mark();
  w.mark().string("storage").put(1).global("torch", "FloatStorage").put(2).string("0").put(3).string("cpu").put(4);
  w.integer(6).tuple().put(5).persid().put(6);
  w.integer(0).int_tuple({2, 3}).put(7).int_tuple({3, 1}).put(8).boolean(false);
  w.global("collections", "OrderedDict").put(9).empty_tuple().reduce().put(10).tuple().put(11).reduce().put(12);
  w.get(0).mark();
  w.mark().get(1).get(2).string("1").put(13).get(4).integer(4).tuple().put(14).persid().put(15);
  w.integer(second_offset);
  if (second_shape.empty()) {
    w.int_tuple({2, 2}).put(16).int_tuple({2, 1}).put(17);
  } else {
    w.raw(second_shape);
  }
  w.boolean(true);
  w.get(9).empty_tuple().reduce().put(18).tuple().put(19).reduce().put(20);
  return w.raw(tail).tuple().stop().bytes();
}
std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
}  // namespace

TEST_CASE("a tensor call written as Python writes it is recognized and equals the opcode result") {
  const std::string pickle = two_tensors(0);
  const auto fast = tensorfile_test::run_torch_pickle(bytes_of(pickle), true);
  const auto slow = tensorfile_test::run_torch_pickle(bytes_of(pickle), false);
  CHECK(tensorfile_test::recognition_difference(fast, slow).empty());
  CHECK(fast.recognized == 1);  // the first call names its classes with GLOBAL: opcode path
  REQUIRE(fast.value);
  const Tensor& second = fast.value->at(1).as_tensor();
  CHECK(second.sizes() == Shape{2, 2});
  CHECK(second.strides() == Shape{2, 1});
  CHECK(second.requires_grad());
}

TEST_CASE("a memo entry written inside a tensor call and read later sends the call to the opcode path") {
  // GET 16 reads the second tensor's size tuple back, so that tuple must exist as a value.
  const std::string pickle = two_tensors(0, std::string("h\x10", 2));
  const auto fast = tensorfile_test::run_torch_pickle(bytes_of(pickle), true);
  const auto slow = tensorfile_test::run_torch_pickle(bytes_of(pickle), false);
  CHECK(tensorfile_test::recognition_difference(fast, slow).empty());
  CHECK(fast.recognized == 0);
  REQUIRE(fast.value);
  CHECK(fast.value->at(2) == Value::tuple({std::int64_t{2}, std::int64_t{2}}));
}

TEST_CASE("a recognized tensor call that leaves its storage fails exactly as the opcode path does") {
  const std::string pickle = two_tensors(1);  // 2x2 at offset 1 needs 5 of the storage's 4 elements
  const auto fast = tensorfile_test::run_torch_pickle(bytes_of(pickle), true);
  const auto slow = tensorfile_test::run_torch_pickle(bytes_of(pickle), false);
  CHECK(tensorfile_test::recognition_difference(fast, slow).empty());
  CHECK_FALSE(fast.value);
  CHECK(fast.error.find("_rebuild_tensor_v2: ") != std::string::npos);
  CHECK(fast.error.find("(at byte " + std::to_string(pickle.size() - 5) + ")") !=
        std::string::npos);  // the last REDUCE
}

TEST_CASE("a torch 2.x _rebuild_tensor_v3 call over an UntypedStorage is recognized with its memoized dtype") {
  using tensorfile_test::PickleWriter;
  PickleWriter w;
  w.proto().mark();
  w.global("torch._utils", "_rebuild_tensor_v3").put(0).mark();
  w.mark().string("storage").put(1).global("torch", "UntypedStorage").put(2).string("0").put(3).string("cpu").put(4);
  w.integer(8).tuple().put(5).persid().put(6);
  w.integer(0).int_tuple({4}).put(7).int_tuple({1}).put(8).boolean(false);
  w.global("collections", "OrderedDict").put(9).empty_tuple().reduce().put(10).global("torch", "float16").put(11);
  w.tuple().put(12).reduce().put(13);
  w.get(0).mark();
  w.mark().get(1).get(2).string("1").put(14).get(4).integer(8).tuple().put(15).persid().put(16);
  w.integer(1).int_tuple({2}).put(17).int_tuple({1}).put(18).boolean(true);
  w.get(9).empty_tuple().reduce().put(19).get(11).tuple().put(20).reduce().put(21);
  const std::string pickle = w.tuple().stop().bytes();
  const auto fast = tensorfile_test::run_torch_pickle(bytes_of(pickle), true);
  const auto slow = tensorfile_test::run_torch_pickle(bytes_of(pickle), false);
  CHECK(tensorfile_test::recognition_difference(fast, slow).empty());
  CHECK(fast.recognized == 1);
  REQUIRE(fast.value);
  const Tensor& second = fast.value->at(1).as_tensor();
  CHECK(second.dtype() == DType::Float16);
  CHECK(second.sizes() == Shape{2});
  CHECK(second.storage_offset() == 1);
  CHECK(second.requires_grad());
}

TEST_CASE("ints the matcher cannot read as it reads them leave the call to the opcode path") {
  // LONG1 of length 0 is a valid 0; a LONG1 of 9 bytes is a wider int; a cut-off BININT is broken.
  const std::string long1_zero("(K\x02\x8a\x00t(K\x01\x8a\x00t", 12);  // sizes (2, 0), strides (1, 0)
  const std::string long1_wide("(K\x02\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00t(K\x01K\x01t", 21);
  for (const std::string& shape : {long1_zero, long1_wide}) {
    const std::string pickle = two_tensors(0, {}, shape);
    const auto fast = tensorfile_test::run_torch_pickle(bytes_of(pickle), true);
    const auto slow = tensorfile_test::run_torch_pickle(bytes_of(pickle), false);
    CHECK(tensorfile_test::recognition_difference(fast, slow).empty());
  }
  const auto zero = tensorfile_test::run_torch_pickle(bytes_of(two_tensors(0, {}, long1_zero)), true);
  CAPTURE(zero.error);
  REQUIRE(zero.value);
  CHECK(zero.recognized == 1);
  CHECK(zero.value->at(1).as_tensor().sizes() == Shape{2, 0});
}

TEST_CASE("near the stack and memo limits tensor calls run opcode by opcode, failing where they always did") {
  std::string dims64 = "(";  // a 64-dim view of one element: 64 sizes and strides of 1
  for (int i = 0; i < 64; ++i) dims64 += "K\x01";
  dims64 += "t";
  const std::string shape = dims64 + dims64;
  const std::string pickle = two_tensors(0, {}, shape);
  const auto loads = [&](const tensorfile::detail::PickleLimits& limits) {  // and the two paths agree
    const auto fast = tensorfile_test::run_torch_pickle(bytes_of(pickle), true, true, limits);
    const auto slow = tensorfile_test::run_torch_pickle(bytes_of(pickle), false, true, limits);
    CHECK(tensorfile_test::recognition_difference(fast, slow).empty());
    return fast.value.has_value();
  };
  std::size_t failures = 0;
  for (std::size_t max_stack = 60; max_stack <= 160; ++max_stack) {
    CAPTURE(max_stack);
    if (!loads({.max_stack = max_stack})) ++failures;
  }
  CHECK(failures > 0);  // the low limits are breached, on both paths alike
  for (std::size_t max_memo = 10; max_memo <= 120; ++max_memo) {
    CAPTURE(max_memo);
    (void)loads({.max_memo = max_memo});
  }
}
