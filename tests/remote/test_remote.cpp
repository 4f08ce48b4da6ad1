// SPDX-License-Identifier: MIT
// tensorfile::remote (<tensorfile/remote.hpp>) against real servers on 127.0.0.1, started by run_remote_tests.py:
// nginx serving a copy of tests/data, a proxy in front of it injecting faults, and s3rver when it is installed.
// Every format loads over HTTP as it loads from the served file on disk; select fetches only its bytes; each fault
// ends in a clear error naming the URL, or is cured by a retry.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../checkpoint/same_tensors.hpp"
#include "tensorfile/remote.hpp"
#include "tensorfile/tensorfile.hpp"
#include "tensorfile_catch.hpp"

namespace remote_test {

using namespace tensorfile;
using tensorfile_test::check_same_tensors;

/// The environment variable `name`, which the driver sets: missing, the test fails (it is not skipped).
std::string env(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before any thread starts
  if (value == nullptr || *value == '\0') {
    FAIL("environment variable " << name << " is not set; run this test through tests/remote/run_remote_tests.py");
  }
  return value;
}

std::string http() { return env("TENSORFILE_REMOTE_HTTP"); }
std::string proxy() { return env("TENSORFILE_REMOTE_PROXY"); }
std::filesystem::path root() { return env("TENSORFILE_REMOTE_ROOT"); }

/// The message of the `E` that `f` throws; fails when it throws nothing or something else.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& error) {
    return error.message();
  } catch (const std::exception& other) {
    FAIL("expected another exception type; got: " << other.what());
  }
  FAIL("expected an exception; none was thrown");
  return {};
}

/// A safetensors file of `count` float32 tensors "t0".."t<count-1>" of 64 Ki elements each (256 KiB), written to
/// the served folder; its tensors lie beyond a small probe.
std::filesystem::path write_big(const std::string& name, std::size_t count, float base) {
  NamedTensors tensors;
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<float> values(std::size_t{1} << 16);
    for (std::size_t j = 0; j < values.size(); ++j) values[j] = base + static_cast<float>(i * 100000 + j);
    tensors.emplace_back("t" + std::to_string(i),
                         Tensor::from_values<float>(std::span<const float>(values), Shape{256, 256}));
  }
  const std::filesystem::path path = root() / name;
  save(tensors, path);
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                         std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  return path;
}

/// `bytes` of the served file `from` written as the served file `to` (a truncated copy when fewer).
std::filesystem::path write_prefix(const std::string& from, const std::string& to, std::uintmax_t bytes) {
  std::filesystem::copy_file(root() / from, root() / to, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(root() / to, bytes);
  std::filesystem::permissions(root() / to, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                                std::filesystem::perms::group_read |
                                                std::filesystem::perms::others_read);
  return root() / to;
}

TEST_CASE("verify() and scan() of a RemoteFile report what they report for the file on disk", "[remote][verify]") {
  (void)write_big("verify_big.safetensors", 8, 1.0F);  // 2 MiB: scanned by prefix, verified by its header
  {
    NamedTensors tensors;
    std::vector<float> values(std::size_t{1} << 19, 2.5F);
    tensors.emplace_back("w", Tensor::from_values<float>(std::span<const float>(values), Shape{512, 1024}));
    save(tensors, root() / "verify_big.pt");  // 2 MiB: a zip scanned by ranges, verified whole
    std::filesystem::permissions(root() / "verify_big.pt", std::filesystem::perms::others_read,
                                 std::filesystem::perm_options::add);
  }
  const std::uintmax_t st_size = std::filesystem::file_size(root() / "safetensors/overall.safetensors");
  const std::uintmax_t pt_size = std::filesystem::file_size(root() / "torch/state_dict_linear_bn.pt");
  (void)write_prefix("safetensors/overall.safetensors", "verify_cut.safetensors", st_size - 3);
  (void)write_prefix("torch/state_dict_linear_bn.pt", "verify_cut.pt", pt_size - 30);
  for (const std::string name :
       {"safetensors/overall.safetensors", "torch/state_dict_linear_bn.pt", "torch/legacy_format.pt",
        "torch/whole_module.pt", "torch_gen/zip_deflated.pt", "numpy/f4_c.npy", "numpy/object.npy",
        "numpy/deflated.npz", "numpy/stored.npz", "verify_big.safetensors", "verify_big.pt", "verify_cut.safetensors",
        "verify_cut.pt"}) {
    INFO(name);
    const std::string url = http() + "/" + name;
    const std::filesystem::path local = root() / name;
    const std::unique_ptr<remote::RemoteFile> file = remote::open_file(url);
    const VerifyReport there = verify(*file);
    const VerifyReport here = verify(local);
    CHECK(there.format == here.format);
    CHECK(there.ok() == here.ok());
    CHECK(there.errors.size() == here.errors.size());
    CHECK(there.tensors == here.tensors);
    CHECK(there.records == here.records);
    CHECK(there.storages_used == here.storages_used);
    for (const std::string& error : there.errors) CHECK_THAT(error, Catch::Contains(url));
    const std::uint64_t before = file->stats().bytes;
    // A broken zip index is thrown by both (the scan's one exception), naming the URL there.
    std::optional<ScanReport> scanned_there;
    std::optional<ScanReport> scanned_here;
    std::string thrown;
    try {
      scanned_there = scan(*file);
    } catch (const FormatError& error) {
      thrown = error.message();
    }
    try {
      scanned_here = scan(local);
    } catch (const FormatError&) {
    }
    REQUIRE(scanned_there.has_value() == scanned_here.has_value());
    if (!scanned_there) {
      CHECK_THAT(thrown, Catch::Contains(url));
      continue;
    }
    CHECK(scanned_there->format == scanned_here->format);
    CHECK(scanned_there->safe() == scanned_here->safe());
    CHECK(scanned_there->pickles == scanned_here->pickles);
    CHECK(scanned_there->globals.size() == scanned_here->globals.size());
    for (std::size_t i = 0; i < std::min(scanned_there->globals.size(), scanned_here->globals.size()); ++i) {
      CHECK(scanned_there->globals[i].full_name() == scanned_here->globals[i].full_name());
      CHECK(scanned_there->globals[i].verdict == scanned_here->globals[i].verdict);
    }
    CHECK(scanned_there->anomalies.size() == scanned_here->anomalies.size());
    CHECK(scanned_there->errors.size() == scanned_here->errors.size());
    CHECK(scanned_there->persistent_ids == scanned_here->persistent_ids);
    if (name.starts_with("verify_big")) {  // by ranges: less than the file, the 1 MiB prefix or the zip's pickles
      CHECK(file->stats().bytes - before < std::filesystem::file_size(local));
    }
  }
  SECTION("a missing object: an IoError naming the URL") {
    const std::string url = http() + "/safetensors/missing.safetensors";
    CHECK_THAT(error_of<IoError>([&] { (void)remote::open_file(url); }), Catch::Contains(url + ": not found"));
  }
}

const std::vector<std::string>& fixtures() {
  static const std::vector<std::string> names{
      "torch/state_dict_linear_bn.pt",
      "torch/legacy_format.pt",
      "torch/all_dtypes.pt",
      "torch_gen/zip_deflated.pt",
      "torch_gen/views_shared_storage.pt",
      "safetensors/overall.safetensors",
      "numpy/f4_c.npy",
      "numpy/i8_fortran.npy",
      "numpy/stored.npz",
      "numpy/deflated.npz",
      "tensordict/s01_basic/",
      "tensordict/s02_dtypes/",
      "tensordict/s07_tensorclass/",
      "sharded/torch_bin/",
      "sharded/torch_bin/pytorch_model.bin.index.json",
      "safetensors/samples.safetensors.index.json",
  };
  return names;
}

TEST_CASE("every format over HTTP loads as the served file does", "[remote][http]") {
  for (const std::string& name : fixtures()) {
    INFO(name);
    const std::string url = http() + "/" + name;
    const std::filesystem::path local = root() / name;
    const Value expected = load(local);
    check_same_tensors(load(url), expected);
    const Checkpoint opened = open(url);
    CHECK(opened.format() == open(local).format());
    CHECK(opened.sharded() == open(local).sharded());
    check_same_tensors(opened.load_all(), expected);
    for (const CheckpointEntry& entry : opened.entries()) {
      CHECK(opened.tensor(entry.path).equal(open(local).tensor(entry.path)));
    }
  }
}

TEST_CASE("a folder opened with options: parts, select, counters", "[remote][http]") {
  const std::filesystem::path local = write_big("big.safetensors", 32, 0.5F);
  const auto folder =
      remote::open_folder(http() + "/", {.connections = 4, .part_size = std::size_t{64} << 10, .probe_size = 4096});
  SECTION("select fetches the selected tensor's bytes and the header only") {
    const Checkpoint opened = open(Source::folder(*folder, "big.safetensors"));
    const remote::RemoteStats after_open = folder->stats();
    CHECK(after_open.requests == 1);  // the probe holds the 8-byte length and the header
    CHECK(after_open.bytes == 4096);
    CHECK(opened.tensor("t7").equal(open(local).tensor("t7")));
    const remote::RemoteStats after = folder->stats();
    CHECK(after.bytes - after_open.bytes == 256 * 1024);  // the one tensor, not a byte more
    CHECK(after.requests - after_open.requests == 4);     // 256 KiB in 64 KiB parts
    CHECK(after.retries == 0);
  }
  SECTION("load with select: the probe and the selected tensors") {
    const Value got =
        load(Source::folder(*folder, "big.safetensors"), {.select = select_paths({"t3", "t30"}), .select_drops = true});
    const NamedTensors tensors = named_tensors(got);
    REQUIRE(tensors.size() == 2);
    CHECK(tensors[0].second.equal(open(local).tensor("t3")));
    CHECK(tensors[1].second.equal(open(local).tensor("t30")));
    CHECK(folder->stats().bytes == 4096 + 2 * 256 * 1024);
    CHECK(folder->stats().bytes * 10 < std::filesystem::file_size(local));
  }
  SECTION("a whole load in parts equals the local file") {
    check_same_tensors(load(Source::folder(*folder, "big.safetensors")), load(local));
    CHECK(folder->stats().bytes <= std::filesystem::file_size(local) + 4096);
    // The 32 back-to-back tensors are one read (coalesced), split into 8 MiB / 64 KiB parts, after the probe.
    CHECK(folder->stats().requests == 1 + (std::size_t{32} * 256 * 1024) / (std::size_t{64} << 10));
  }
  SECTION("a file's size and validator come from its first GET") {
    const std::unique_ptr<remote::RemoteFile> file = folder->open_file("big.safetensors");
    REQUIRE(file != nullptr);
    CHECK(file->size() == std::filesystem::file_size(local));
    CHECK_FALSE(file->etag().empty());
    CHECK(file->name() == http() + "/big.safetensors");
    CHECK(folder->open("no/such.safetensors") == nullptr);
    std::vector<std::byte> tail(100);
    CHECK(file->read(*file->size() - 10, tail) == 10);
    CHECK(file->read(*file->size(), tail) == 0);
  }
}

TEST_CASE("a torch zip file over HTTP: open() reads its index by ranges, a select only its records", "[remote][http]") {
  NamedTensors tensors;
  for (std::size_t i = 0; i < 32; ++i) {
    std::vector<float> values(std::size_t{1} << 16);
    for (std::size_t j = 0; j < values.size(); ++j) values[j] = static_cast<float>(i * 100000 + j);
    tensors.emplace_back("t" + std::to_string(i),
                         Tensor::from_values<float>(std::span<const float>(values), Shape{256, 256}));
  }
  const std::filesystem::path local = root() / "big.pt";
  save(tensors, local);  // torch reads tensorfile's torch files (tests/torch_peer)
  std::filesystem::permissions(local, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                          std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  const std::uintmax_t size = std::filesystem::file_size(local);
  const auto folder = remote::open_folder(http() + "/", {.probe_size = 4096});
  SECTION("open() and tensor(): the index, then the one record") {
    const Checkpoint opened = open(Source::folder(*folder, "big.pt"));
    const remote::RemoteStats after_open = folder->stats();
    CHECK(after_open.bytes * 20 < size);  // end records, directory, local headers, pickle
    CHECK(opened.entries().size() == 32);
    CHECK(opened.tensor("t7").equal(open(local).tensor("t7")));
    CHECK(folder->stats().bytes - after_open.bytes == 256 * 1024);  // the record, not a byte more
    CHECK(folder->stats().requests - after_open.requests == 1);
  }
  SECTION("load() with select: the index and the selected records") {
    const Value got =
        load(Source::folder(*folder, "big.pt"), {.select = select_paths({"t3", "t30"}), .select_drops = true});
    const NamedTensors loaded = named_tensors(got);
    REQUIRE(loaded.size() == 2);
    CHECK(loaded[0].second.equal(open(local).tensor("t3")));
    CHECK(loaded[1].second.equal(open(local).tensor("t30")));
    CHECK(folder->stats().bytes * 10 < size);
  }
  SECTION("load() of every tensor reads the file once, whole") {
    check_same_tensors(load(Source::folder(*folder, "big.pt")), load(local));
    CHECK(folder->stats().bytes <= size + 4096);
  }
  SECTION("a handle's load_all() reads the index again and every record, not the file twice") {
    const Checkpoint opened = open(Source::folder(*folder, "big.pt"));
    check_same_tensors(opened.load_all(), load(local));
    CHECK(folder->stats().bytes < size + size / 10);
  }
}

TEST_CASE("a URL's query goes with every GET and never into a message", "[remote][http][query]") {
  // nginx serves /signed/ only with ?token=s3cret-token, as a presigned URL's server checks its signature.
  const std::filesystem::path data = TENSORFILE_TEST_DATA_DIR;
  const std::string signed_base = http() + "/signed";
  SECTION("a file, a sharded index (its shards get the query too) and a folder opened with options") {
    check_same_tensors(load(signed_base + "/safetensors/overall.safetensors?token=s3cret-token"),
                       load(data / "safetensors/overall.safetensors"));
    check_same_tensors(load(signed_base + "/safetensors/samples.safetensors.index.json?token=s3cret-token"),
                       load(data / "safetensors/samples.safetensors.index.json"));
    check_same_tensors(load(signed_base + "/torch/state_dict_linear_bn.pt?token=s3cret-token"),
                       load(data / "torch/state_dict_linear_bn.pt"));
    const auto folder = remote::open_folder(signed_base + "/safetensors/?token=s3cret-token", {.probe_size = 64});
    CHECK(folder->name() == signed_base + "/safetensors");
    const Checkpoint opened = open(Source::folder(*folder, "overall.safetensors"));
    CHECK(opened.name() == signed_base + "/safetensors/overall.safetensors");
    check_same_tensors(opened.load_all(), load(data / "safetensors/overall.safetensors"));
    CHECK(folder->stats().requests > 1);  // the probe, then the ranges: each carried the token
  }
  SECTION("a wrong or missing query: 403 naming the URL without its query") {
    for (const std::string query : {"?token=wrong-secret-value", ""}) {
      INFO(query);
      const std::string message = error_of<IoError>([&] { (void)open(signed_base + "/numpy/f4_c.npy" + query); });
      CHECK_THAT(message, Catch::Contains(signed_base + "/numpy/f4_c.npy"));
      CHECK_THAT(message, Catch::Contains("HTTP 403"));
      CHECK_THAT(message, !Catch::Contains("wrong-secret-value"));
      CHECK_THAT(message, !Catch::Contains("token"));
    }
  }
  SECTION("an s3:// URL with a query is an ArgumentError") {
    const std::string message = error_of<ArgumentError>([] { (void)open("s3://bucket/key.safetensors?x=secret"); });
    CHECK_THAT(message, Catch::Contains("s3://bucket/key.safetensors"));
    CHECK_THAT(message, Catch::Contains("takes no query"));
    CHECK_THAT(message, !Catch::Contains("secret"));
  }
}

/// The most GETs the proxy's /slow/ path had in flight at once since the last call (which resets it).
std::size_t slow_most_in_flight() {
  const std::unique_ptr<remote::RemoteFile> answer = remote::open_file(proxy() + "/slow-most/count");
  std::string text(static_cast<std::size_t>(*answer->size()), '\0');
  REQUIRE(answer->read(0, std::as_writable_bytes(std::span<char>(text))) == text.size());
  return std::stoul(text);
}

TEST_CASE("connections caps the GETs in flight of a folder's reads together, across threads", "[remote][pool]") {
  const std::filesystem::path local = write_big("pooled.safetensors", 16, 3.0F);  // 4 MiB of tensors
  const auto folder =
      remote::open_folder(proxy() + "/slow", {.connections = 2, .part_size = 64 * 1024, .probe_size = 4096});
  const std::unique_ptr<remote::RemoteFile> file = folder->open_file("pooled.safetensors");
  REQUIRE(file != nullptr);
  (void)slow_most_in_flight();  // the probe's
  std::vector<std::byte> expected(static_cast<std::size_t>(std::filesystem::file_size(local)));
  std::ifstream(local, std::ios::binary)
      .read(reinterpret_cast<char*>(expected.data()), static_cast<std::streamsize>(expected.size()));
  constexpr std::size_t each = std::size_t{512} << 10;  // 8 parts per read
  std::vector<std::vector<std::byte>> got(4, std::vector<std::byte>(each));
  std::vector<std::string> errors(got.size());
  std::vector<std::thread> readers;
  for (std::size_t t = 0; t < got.size(); ++t) {
    readers.emplace_back([&, t] {
      try {
        (void)file->read(t * each, got[t]);
      } catch (const std::exception& error) {
        errors[t] = error.what();
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  for (std::size_t t = 0; t < got.size(); ++t) {
    CHECK(errors[t].empty());
    CHECK(std::equal(got[t].begin(), got[t].end(), expected.begin() + static_cast<std::ptrdiff_t>(t * each)));
  }
  CHECK(slow_most_in_flight() == 2);  // 4 reads of 2 parts in flight each would be 8
}

TEST_CASE("a llama.cpp split GGUF model over HTTP: any part's URL gives the whole model", "[remote][http][gguf]") {
  const Value single = load(root() / "torch/state_dict_linear_bn.pt");
  std::filesystem::create_directories(root() / "split");
  save(single, root() / "split/m.gguf", {.sync = false, .gguf = {.split_max_tensors = 3}});
  const std::filesystem::path local = root() / "split/m-00001-of-00003.gguf";
  for (const char* part : {"m-00001-of-00003.gguf", "m-00003-of-00003.gguf"}) {
    INFO(part);
    const std::string url = http() + "/split/" + part;
    check_same_tensors(load(url), load(local));
    const Checkpoint opened = open(url);
    CHECK(opened.sharded());
    CHECK(opened.format() == FileFormat::gguf);
    CHECK(opened.entries().size() == 7);
    CHECK(opened.tensor("1.running_var").equal(open(local).tensor("1.running_var")));
  }
  std::filesystem::remove(root() / "split/m-00002-of-00003.gguf");
  try {
    (void)open(http() + "/split/m-00001-of-00003.gguf");
    FAIL("no error");
  } catch (const FormatError& e) {
    CHECK(e.reason().find("part 2 of the split model's 3 is missing") != std::string::npos);
    CHECK(e.path() == http() + "/split/m-00002-of-00003.gguf");
  }
}

TEST_CASE("faults end in clear errors naming the URL, or are cured by retries", "[remote][faults]") {
  const std::string name = "safetensors/overall.safetensors";
  const Value expected = load(root() / name);
  const remote::RemoteOptions quick{.probe_size = 16,
                                    .stall_timeout = std::chrono::milliseconds(1000),
                                    .retries = 3,
                                    .retry_backoff = std::chrono::milliseconds(10)};
  SECTION("connections dropped mid-body: resumed where the body stopped") {
    const auto folder = remote::open_folder(proxy() + "/drop/safetensors", quick);
    check_same_tensors(load(Source::folder(*folder, "overall.safetensors")), expected);
    CHECK(folder->stats().retries > 0);
  }
  SECTION("intermittent 503 and 500: retried") {
    const auto folder = remote::open_folder(proxy() + "/flaky/safetensors", quick);
    check_same_tensors(load(Source::folder(*folder, "overall.safetensors")), expected);
    CHECK(folder->stats().retries > 0);
  }
  SECTION("connections always dropped: an IoError once the retries are spent") {
    const std::string url = proxy() + "/drop-always/" + name;
    const std::string message = error_of<IoError>([&] { (void)load(url); });
    CHECK_THAT(message, Catch::Contains(url));
    CHECK_THAT(message, Catch::Contains("connection dropped"));
  }
  SECTION("always 503: an IoError naming the status") {
    const auto folder = remote::open_folder(proxy() + "/flaky-always/safetensors", quick);
    const std::string message = error_of<IoError>([&] { (void)load(Source::folder(*folder, "overall.safetensors")); });
    CHECK_THAT(message, Catch::Contains(proxy() + "/flaky-always/safetensors/overall.safetensors"));
    CHECK_THAT(message, Catch::Contains("HTTP 503"));
    CHECK_THAT(message, Catch::Contains("4 times"));
  }
  SECTION("a trickle slower than the stall limit: timed out, no hang") {
    remote::RemoteOptions options = quick;
    options.retries = 1;
    const auto folder = remote::open_folder(proxy() + "/trickle/safetensors", options);
    const auto start = std::chrono::steady_clock::now();
    const std::string message = error_of<IoError>([&] { (void)load(Source::folder(*folder, "overall.safetensors")); });
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK_THAT(message, Catch::Contains("timed out"));
    CHECK_THAT(message, Catch::Contains("/trickle/"));
    CHECK(seconds < 15.0);
  }
  SECTION("404: no such file, named") {
    const std::string url = http() + "/safetensors/missing.safetensors";
    const std::string message = error_of<FormatError>([&] { (void)open(url); });
    CHECK_THAT(message, Catch::Contains(url));
    CHECK_THAT(message, Catch::Contains("no such file"));
  }
  SECTION("403: access denied, named") {
    const std::string url = http() + "/forbidden/overall.safetensors";
    const std::string message = error_of<IoError>([&] { (void)open(url); });
    CHECK_THAT(message, Catch::Contains(url));
    CHECK_THAT(message, Catch::Contains("access denied (HTTP 403)"));
    const std::string through_proxy = proxy() + "/forbidden/x/overall.safetensors";
    CHECK_THAT(error_of<IoError>([&] { (void)open(through_proxy); }), Catch::Contains("HTTP 403"));
  }
  SECTION("a server that cannot be reached: an IoError naming it") {
    const std::string url = "http://127.0.0.1:1/model.safetensors";
    const std::string message = error_of<IoError>([&] { (void)load(url); });
    CHECK_THAT(message, Catch::Contains(url));
  }
}

TEST_CASE("an object replaced during a load is an error, never a mix", "[remote][changed]") {
  const std::filesystem::path local = write_big("changing.safetensors", 4, 1.0F);
  // nginx refuses the pinned GET (412); through the proxy, which drops If-Match, the response's ETag tells.
  for (const char* via : {"http", "proxy"}) {
    INFO(via);
    const std::string base = std::string(via) == "http" ? http() : proxy() + "/unconditional";
    const auto folder = remote::open_folder(base, {.probe_size = 4096});
    const Checkpoint opened = open(Source::folder(*folder, "changing.safetensors"));
    write_big("changing.new.safetensors", 5, 2.0F);
    std::filesystem::rename(root() / "changing.new.safetensors", local);
    std::filesystem::last_write_time(local, std::filesystem::last_write_time(local) + std::chrono::hours(1));
    const std::string message = error_of<FormatError>([&] { (void)opened.load_all(); });
    CHECK_THAT(message, Catch::Contains(base + "/changing.safetensors"));
    CHECK_THAT(message, Catch::Contains("the object changed during the load"));
    write_big("changing.safetensors", 4, 1.0F);
  }
}

TEST_CASE("S3: s3:// URLs against s3rver, with the AWS environment's endpoint and credentials", "[remote][s3]") {
  const std::string endpoint = env("TENSORFILE_REMOTE_S3_ENDPOINT");
  const std::string bucket = env("TENSORFILE_REMOTE_S3_BUCKET");
  const std::filesystem::path data = TENSORFILE_TEST_DATA_DIR;
  SECTION("every fixture in the bucket loads as its file does") {
    for (const std::string name : {"safetensors/overall.safetensors", "torch/state_dict_linear_bn.pt",
                                   "torch/legacy_format.pt", "safetensors/samples.safetensors.index.json",
                                   "sharded/torch_bin/pytorch_model.bin.index.json", "sharded/torch_bin/"}) {
      INFO(name);
      const std::string url = "s3://" + bucket + "/" + name;
      check_same_tensors(load(url), load(data / name));
      CHECK(open(url).name().starts_with("s3://" + bucket + "/"));
    }
  }
  SECTION("options: a ranged read, counted") {
    const auto folder = remote::open_folder("s3://" + bucket + "/torch", {.probe_size = 64, .endpoint = endpoint});
    const Checkpoint opened = open(Source::folder(*folder, "state_dict_linear_bn.pt"));
    const std::uintmax_t size = std::filesystem::file_size(data / "torch/state_dict_linear_bn.pt");
    // open() reads the zip by its tail (a window this small a file fits in whole), then its directory, headers and
    // pickle again: under 3 times the file; the large file's test above bounds the index's share.
    CHECK(folder->stats().bytes <= 3 * size);
    check_same_tensors(opened.load_all(), load(data / "torch/state_dict_linear_bn.pt"));
    CHECK(folder->stats().requests > 1);
    CHECK(folder->stats().bytes <= 6 * size);  // load_all() reads the index again, then the records
  }
  SECTION("a wrong key id: 403 with S3's code, and the secret never in the message") {
    const auto folder = remote::open_folder(
        "s3://" + bucket + "/safetensors",
        {.endpoint = endpoint, .access_key_id = "NOSUCHKEY", .secret_access_key = "very-secret-value"});
    const std::string message = error_of<IoError>([&] { (void)open(Source::folder(*folder, "overall.safetensors")); });
    CHECK_THAT(message, Catch::Contains("s3://" + bucket + "/safetensors/overall.safetensors"));
    CHECK_THAT(message, Catch::Contains("access denied (HTTP 403, InvalidAccessKeyId)"));
    CHECK_THAT(message, !Catch::Contains("very-secret-value"));
    CHECK_THAT(message, !Catch::Contains("NOSUCHKEY"));
  }
  SECTION("a missing key: no such file") {
    const std::string url = "s3://" + bucket + "/safetensors/missing.safetensors";
    CHECK_THAT(error_of<FormatError>([&] { (void)open(url); }), Catch::Contains(url));
  }
}

}  // namespace remote_test
