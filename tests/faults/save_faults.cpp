// SPDX-License-Identifier: MIT
// Fault-injection driver, run under LD_PRELOAD=libtensorfile_fail_io.so (see run_faults.sh): save_torch() over
// an existing file while writes fail with ENOSPC or EIO after N bytes, or fsync fails, must throw
// IoError carrying that errno, leave the old file byte for byte, and leave no temporary behind; with
// short writes only, the save must succeed. Then: a file shrunk under a live mapping (documented:
// SIGBUS on touching the lost pages, in a child process), and the loader's size checks at map time. A sharded
// safetensors save failing in any of its files leaves the old checkpoint whole.
// Prints the figures; exits non-zero on any violation.
#include <tensorfile/tensorfile.hpp>

#include "expect.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace tf = tensorfile;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int temporaries(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}

void reset_shim() {
  using Fn = void (*)();
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "tensorfile_faults_reset"))) fn();
}

unsigned long long injected() {
  using Fn = unsigned long long (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "tensorfile_faults_injected"));
  return fn ? fn() : 0;
}

tf::Value sample_value() {  // ~330 KB: buffered small records and direct (> 64 KiB) writes
  std::vector<float> big(80000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  return tf::make_state_dict({{"small", tf::Tensor::from_values<float>({1, 2, 3})},
                              {"big", tf::Tensor::from_values<float>(std::span<const float>(big))},
                              {"ints", tf::Tensor::from_values<std::int64_t>({7, 8, 9, 10})}});
}
}  // namespace

int main(int argc, char** argv) {
  if (dlsym(RTLD_DEFAULT, "tensorfile_faults_injected") == nullptr) {
    std::fprintf(stderr, "run me with LD_PRELOAD=libtensorfile_fail_io.so\n");
    return 2;
  }
  const fs::path dir =
      argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / ("tensorfile-faults-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "model.pt";
  const tf::Value old_value = tf::make_state_dict({{"old", tf::Tensor::from_values<float>({42, 43})}});
  tf::save_torch(old_value, target);
  std::string old_bytes = slurp(target);
  const tf::Value value = sample_value();
  const std::size_t full = tf::save_torch_to_bytes(value, {.torch = {.prefix = "model"}}).size();  // the file's size

  // 1. Writes fail after N bytes (ENOSPC, EIO), for N across the whole file.
  int attempts = 0;
  std::printf("the new file is %zu bytes\n", full);
  std::vector<unsigned long long> points = {0,      1,      2,        29,        30,        64,      100,
                                            511,    4095,   4096,     65535,     65536,     65537,   100000,
                                            200000, 262144, full / 2, full - 64, full - 22, full - 1};
  for (unsigned long long n = 0; n < full; n += 7919) points.push_back(n);
  // Saves `v` with writes failing with `error` after `n` bytes: the save throws that error and
  // leaves the old file and no temporary.
  const auto failing_save = [&](const tf::Value& v, int error, unsigned long long n) {
    reset_shim();
    ::setenv("TENSORFILE_FAIL_ERRNO", std::to_string(error).c_str(), 1);
    ::setenv("TENSORFILE_FAIL_AFTER", std::to_string(n).c_str(), 1);
    const unsigned long long before = injected();
    bool threw = false;
    try {
      tf::save_torch(v, target);
    } catch (const tf::IoError& e) {
      threw = true;
      EXPECT(e.error_number() == error);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unexpected exception: %s\n", e.what());
      ++failures;
    }
    EXPECT(threw);
    EXPECT(injected() > before);
    EXPECT(slurp(target) == old_bytes);
    EXPECT(temporaries(dir) == 0);
    ++attempts;
    ::unsetenv("TENSORFILE_FAIL_AFTER");
    ::unsetenv("TENSORFILE_FAIL_ERRNO");
  };
  for (const int error : {ENOSPC, EIO}) {
    for (const unsigned long long n : points) failing_save(value, error, n);
  }
  // 2. fsync fails (EIO), and with sync off the same save succeeds.
  for (const int error : {EIO, ENOSPC}) {
    ::setenv("TENSORFILE_FAIL_FSYNC", std::to_string(error).c_str(), 1);
    bool threw = false;
    try {
      tf::save_torch(value, target);
    } catch (const tf::IoError& e) {
      threw = true;
      EXPECT(e.error_number() == error);
    }
    EXPECT(threw);
    EXPECT(slurp(target) == old_bytes);
    EXPECT(temporaries(dir) == 0);
    ++attempts;
  }
  ::unsetenv("TENSORFILE_FAIL_FSYNC");
  // 3. Short writes only: the save completes and loads back equal.
  for (const char* k : {"1", "7", "4096"}) {
    ::setenv("TENSORFILE_SHORT_WRITES", k, 1);
    tf::save_torch(value, target);
    ::unsetenv("TENSORFILE_SHORT_WRITES");
    EXPECT(tf::load_torch(target) == value);
    EXPECT(temporaries(dir) == 0);
    tf::save_torch(old_value, target);  // back to an old file for the next round
    old_bytes = slurp(target);
  }
  // 4. A save past 64 MiB takes the other path (CRCs on a second thread, records gathered into
  //    writev calls of up to 32 MiB): failures inside and between gathers, and short writes.
  std::vector<float> block(std::size_t{9} << 20);  // 36 MiB
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<float>(i % 1000);
  const tf::Value large = tf::make_state_dict({{"a", tf::Tensor::from_values<float>(std::span<const float>(block))},
                                               {"b", tf::Tensor::from_values<float>(std::span<const float>(block))},
                                               {"c", tf::Tensor::from_values<float>({1, 2})}});
  std::size_t large_points = 0;
  for (const unsigned long long n : {0ull, 5000ull, 20ull << 20, 36ull << 20, 50ull << 20, 72ull << 20}) {
    failing_save(large, large_points % 2 == 0 ? ENOSPC : EIO, n);
    ++large_points;
  }
  ::setenv("TENSORFILE_SHORT_WRITES", "1000003", 1);
  tf::save_torch(large, target);
  ::unsetenv("TENSORFILE_SHORT_WRITES");
  EXPECT(tf::load_torch(target) == large);
  EXPECT(temporaries(dir) == 0);
  std::printf("large save (72 MiB): %zu injected-failure saves and one of short writes\n", large_points);

  std::printf(
      "save faults: %d injected-failure saves (ENOSPC/EIO at %zu byte offsets, fsync EIO/ENOSPC), "
      "%llu failures injected, 3 short-write saves; old file intact and no temporary each time\n",
      attempts, points.size(), injected());

  // 5. A sharded safetensors save over an existing sharded checkpoint (same names), failing in any shard
  //    or in the index, or at fsync: the old checkpoint stays byte for byte, no temporary is left.
  {
    const fs::path sharded = dir / "sharded";
    std::vector<std::pair<std::string, tf::Tensor>> old_named, new_named;
    for (int i = 0; i < 4; ++i) {
      std::vector<float> values(30000, static_cast<float>(i));  // 120 KB each: one tensor per shard
      old_named.emplace_back("w" + std::to_string(i), tf::Tensor::from_values<float>(std::span<const float>(values)));
      for (float& x : values) x += 100;
      new_named.emplace_back("w" + std::to_string(i), tf::Tensor::from_values<float>(std::span<const float>(values)));
    }
    const tf::SaveOptions shard_options{.sharded = {.max_shard_size = 150000}};
    const tf::SafetensorsShards old_files = tf::save_safetensors_sharded(old_named, sharded, shard_options);
    std::vector<fs::path> paths = old_files.files;
    paths.push_back(old_files.index);
    std::vector<std::string> old_contents;
    unsigned long long total = 0;
    for (const fs::path& p : paths) {
      old_contents.push_back(slurp(p));
      total += old_contents.back().size();
    }
    const auto intact = [&] {
      for (std::size_t i = 0; i < paths.size(); ++i) EXPECT(slurp(paths[i]) == old_contents[i]);
      EXPECT(temporaries(sharded) == 0);
    };
    std::size_t sharded_attempts = 0;
    for (unsigned long long n = 0; n < total; n += n < 1000 ? 97 : 24007) {
      const int error = sharded_attempts % 2 == 0 ? ENOSPC : EIO;
      reset_shim();
      ::setenv("TENSORFILE_FAIL_ERRNO", std::to_string(error).c_str(), 1);
      ::setenv("TENSORFILE_FAIL_AFTER", std::to_string(n).c_str(), 1);
      bool threw = false;
      try {
        (void)tf::save_safetensors_sharded(new_named, sharded, shard_options);
      } catch (const tf::IoError& e) {
        threw = true;
        EXPECT(e.error_number() == error);
      }
      ::unsetenv("TENSORFILE_FAIL_AFTER");
      ::unsetenv("TENSORFILE_FAIL_ERRNO");
      EXPECT(threw);
      intact();
      ++sharded_attempts;
    }
    ::setenv("TENSORFILE_FAIL_FSYNC", std::to_string(EIO).c_str(), 1);
    bool threw = false;
    try {
      (void)tf::save_safetensors_sharded(new_named, sharded, shard_options);
    } catch (const tf::IoError& e) {
      threw = e.error_number() == EIO;
    }
    ::unsetenv("TENSORFILE_FAIL_FSYNC");
    EXPECT(threw);
    intact();
    // Without faults the new checkpoint replaces the old one whole.
    (void)tf::save_safetensors_sharded(new_named, sharded, shard_options);
    const tf::Value back = tf::load_state_dict(sharded);
    for (const auto& [name, tensor] : new_named) EXPECT(back[name].as_tensor().equal(tensor));
    EXPECT(temporaries(sharded) == 0);
    std::printf(
        "sharded save (%zu files, %llu bytes): %zu injected-failure saves and one fsync failure; "
        "old checkpoint intact and no temporary each time\n",
        paths.size(), total, sharded_attempts + 1);
  }

  // 4. A file shrunk under a live mapping. At map time the loader checks every record against the file
  //    size, so a file already short fails to load (FormatError). Shrinking it after the load cannot be
  //    detected: touching a page past the new end raises SIGBUS (as with any mmap, torch included).
  tf::save_torch(value, target);
  {
    const tf::Value mapped = tf::load_torch(target, {.mmap = tf::MapMode::copy_on_write});
    const tf::Tensor big = mapped.as_dict().find(tf::Value("big"))->as_tensor();
    EXPECT(big.data<const float>()[79999] == 39999.5f);
    const pid_t child = ::fork();
    if (child == 0) {
      ::truncate(target.c_str(), 4096);
      volatile float x = big.data<const float>()[79999];  // page beyond the new end of file
      (void)x;
      std::_Exit(0);  // not reached: SIGBUS
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    const bool sigbus = WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
    std::printf("shrunk under a live mapping: child %s\n",
                sigbus ? "died of SIGBUS (documented)" : "did NOT die of SIGBUS");
    EXPECT(sigbus);
  }
  // The file is now 4096 bytes: loading it again is an error at map time, in both modes.
  for (const bool mmap : {false, true}) {
    bool format_error = false;
    try {
      (void)tf::load_torch(target,
                           {.mmap = mmap ? std::optional<tf::MapMode>(tf::MapMode::copy_on_write) : std::nullopt});
    } catch (const tf::FormatError& e) {
      format_error = true;
      std::printf("load of the shrunk file (%s): %s\n", mmap ? "mmap" : "heap", e.what());
    }
    EXPECT(format_error);
  }
  fs::remove_all(dir);
  std::printf("%s\n", failures == 0 ? "faults: all checks passed" : "faults: FAILURES");
  return failures == 0 ? 0 : 1;
}
