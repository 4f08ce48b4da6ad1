// SPDX-License-Identifier: MIT
// save_safetensors_sharded as one commit, in real processes: a save SIGKILLed after each step of its commit
// leaves the old or the new checkpoint loadable in full (every value checked), and a reader beside a writer that
// saves again and again never gets tensors of two versions, nor an error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensorfile/formats/safetensors/save_sharded.hpp>
#include <tensorfile/state_dict.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;

namespace {

constexpr int tensor_count = 8;
constexpr std::size_t tensor_values = 16;  // 64 bytes of float32 each
constexpr std::uint64_t tensor_bytes = tensor_values * 4;

/// Eight tensors w0..w7, every value `version`.
NamedTensors version_tensors(int version) {
  NamedTensors tensors;
  for (int i = 0; i < tensor_count; ++i) {
    const std::vector<float> values(tensor_values, static_cast<float>(version));
    tensors.emplace_back("w" + std::to_string(i), Tensor::from_values<float>(std::span<const float>(values)));
  }
  return tensors;
}

/// Saves version `version` in `shards` shards (1: model.safetensors) to `dir`.
SafetensorsShards save_version(const std::filesystem::path& dir, int version, int shards, bool sync = true) {
  const std::uint64_t per_shard = tensor_bytes * static_cast<std::uint64_t>((tensor_count + shards - 1) / shards);
  return save_safetensors_sharded(
      version_tensors(version), dir,
      {.sync = sync, .sharded = {.max_shard_size = shards == 1 ? std::uint64_t{1} << 40 : per_shard}});
}

/// The version the folder loads as: every one of w0..w7 there and holding one value; nullopt for a mix (or a
/// tensor missing, or another name). Throws what load_state_dict throws.
std::optional<int> loaded_version(const std::filesystem::path& dir, const LoadOptions& options = {}) {
  const Value loaded = load_state_dict(dir, options);
  if (loaded.as_dict().size() != tensor_count) return std::nullopt;
  std::optional<float> seen;
  for (int i = 0; i < tensor_count; ++i) {
    const Value* tensor = loaded.as_dict().find(std::string_view("w" + std::to_string(i)));
    if (tensor == nullptr) return std::nullopt;
    for (const float x : tensor->as_tensor().to_vector<float>()) {
      if (seen && x != *seen) return std::nullopt;
      seen = x;
    }
  }
  return static_cast<int>(*seen);
}

/// The names of `dir` that hold ".tmp-", sorted.
std::vector<std::filesystem::path> tmp_names(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int kill_at = 0;  // the child's step to die after
int steps_done = 0;

void kill_after_step(const std::string& /*step*/) {
  if (++steps_done == kill_at) ::raise(SIGKILL);
}

/// Runs save_version in a child killed after its `step`-th step; whether it was killed (else it finished).
bool save_killed_at(const std::filesystem::path& dir, int step, int version, int shards) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    kill_at = step;
    steps_done = 0;
    detail::sharded_save_step_hook = kill_after_step;
    try {
      (void)save_version(dir, version, shards);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) {
    REQUIRE(WTERMSIG(status) == SIGKILL);
    return true;
  }
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return false;
}

struct CrashCase {
  const char* name;
  int old_shards;  // 0: an empty folder
  int new_shards;
  bool index_names_single = false;  // the old index names model.safetensors (a one-shard index, by hand)
};

}  // namespace

TEST_CASE("a sharded save killed after any step of its commit leaves the old or the new checkpoint") {
  const CrashCase cases[] = {
      {"empty folder", 0, 8},
      {"older sharded save", 8, 8},
      {"older single model.safetensors", 1, 8},
      {"sharded save of another shard count", 3, 8},
      {"one-shard save over a sharded save", 8, 1},
      {"one-shard save over an index naming model.safetensors", 1, 1, true},
  };
  for (const CrashCase& c : cases) {
    INFO("case: " << c.name);
    int old_loads = 0;
    int new_loads = 0;
    int empty_loads = 0;
    int with_temporaries = 0;
    bool committed = false;  // a kill point already gave the new version: every later one must too
    int step = 1;
    for (;; ++step) {
      INFO("killed after step " << step);
      tensorfile_test::ScratchDir scratch;
      const std::filesystem::path dir = scratch / "ckpt";
      std::filesystem::create_directory(dir);
      if (c.old_shards > 0) (void)save_version(dir, 1, c.old_shards);
      if (c.index_names_single) {
        tensorfile_test::write_file(dir / "model.safetensors.index.json",
                                    "{\"weight_map\": {\"w0\": \"model.safetensors\", \"w1\": \"model.safetensors\", "
                                    "\"w2\": \"model.safetensors\", \"w3\": \"model.safetensors\", \"w4\": "
                                    "\"model.safetensors\", \"w5\": \"model.safetensors\", \"w6\": "
                                    "\"model.safetensors\", \"w7\": \"model.safetensors\"}}");
        REQUIRE(resolve_state_dict(dir).sharded());
      }
      if (c.old_shards == 1 && c.new_shards == 8 && !c.index_names_single) {
        REQUIRE(std::filesystem::exists(dir / "model.safetensors"));  // the stale single file the index must beat
      }
      const bool killed = save_killed_at(dir, step, 2, c.new_shards);

      // Listed as left over exactly when there: the hidden temporaries of the files not yet renamed.
      const std::vector<std::filesystem::path> left = leftover_save_temporaries(dir);
      CHECK(left == tmp_names(dir));
      if (!killed) CHECK(left.empty());
      if (!left.empty()) ++with_temporaries;
      try {
        const std::optional<int> version = loaded_version(dir);
        REQUIRE(version.has_value());  // never a mix
        CHECK((*version == 2 || (*version == 1 && c.old_shards > 0)));
        if (*version == 2) committed = true;
        CHECK(*version == (committed ? 2 : 1));  // once committed, never the old one again (nor a stale file)
        if (killed) ++(*version == 2 ? new_loads : old_loads);
      } catch (const FormatError& error) {
        // Only an empty folder may hold nothing loadable, and only before the commit.
        CHECK(c.old_shards == 0);
        CHECK_FALSE(committed);
        CHECK(std::string(error.what()).find("the directory holds no meta.json") != std::string::npos);
        if (killed) ++empty_loads;
      }

      // The next save removes what the killed one left, and replaces whichever version is there.
      (void)save_version(dir, 3, c.new_shards);
      CHECK(tmp_names(dir).empty());
      CHECK(loaded_version(dir) == 3);
      std::set<std::string> files;
      for (const auto& entry : std::filesystem::directory_iterator(dir)) files.insert(entry.path().filename());
      if (c.new_shards == 1) {
        CHECK(files == std::set<std::string>{"model.safetensors"});
      } else {
        CHECK(files.size() == static_cast<std::size_t>(c.new_shards) + 1);  // the index and its shards alone
        CHECK(files.count("model.safetensors.index.json") == 1);
      }
      if (!killed) break;
    }
    std::printf(
        "%s: %d kill points: %d loaded the old version, %d the new one, %d nothing (before the first "
        "commit); %d left temporaries, each listed and removed by the next save\n",
        c.name, step - 1, old_loads, new_loads, empty_loads, with_temporaries);
    CHECK(step > 3);  // the hook saw the steps of the save
    CHECK(new_loads > 0);
    CHECK((old_loads > 0 || c.old_shards == 0));
    CHECK(with_temporaries > 0);  // a kill among the writes leaves temporaries, and they were listed
  }
}

TEST_CASE("load_state_dict beside a writer saving again and again gets one version whole", "[long]") {
  tensorfile_test::ScratchDir scratch;
  const std::filesystem::path dir = scratch / "ckpt";
  (void)save_version(dir, 1, 8);
  const pid_t writer = ::fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {
    // Mostly 8 shards; every 5th save 3 shards and every 7th one file, so that layouts change under the reader.
    for (int version = 2;; ++version) {
      try {
        (void)save_version(dir, version, version % 7 == 0 ? 1 : version % 5 == 0 ? 3 : 8, false);
      } catch (...) {
        ::_exit(2);
      }
    }
  }
  constexpr int loads = 10'000;
  int mixed = 0;
  int errors = 0;
  std::string first_error;
  std::set<int> versions;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < loads; ++i) {
    LoadOptions options;
    if (i % 2 == 1) options.mmap = MapMode::read_only;
    if (i % 4 >= 2) options.threads = 1;
    try {
      const std::optional<int> version = loaded_version(dir, options);
      if (version) {
        versions.insert(*version);
      } else {
        ++mixed;
      }
    } catch (const Error& error) {
      if (errors++ == 0) first_error = error.what();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int status = 0;
  const bool writer_alive = ::waitpid(writer, &status, WNOHANG) == 0;
  ::kill(writer, SIGKILL);
  (void)::waitpid(writer, &status, 0);
  std::printf("%d loads in %.1f s beside a writer: %zu versions seen, %d mixed, %d errors %s\n", loads, seconds,
              versions.size(), mixed, errors, first_error.c_str());
  CHECK(writer_alive);  // it saved all along
  CHECK(mixed == 0);
  CHECK(errors == 0);
  CHECK(versions.size() > 100);  // the loads did run beside many commits
}
