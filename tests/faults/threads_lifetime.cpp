// SPDX-License-Identifier: MIT
// Concurrency and lifetime checks, a standalone program built twice (see run_faults.sh):
// - under -fsanitize=thread: 8 threads load the same files at once (load from path, heap and mmap,
//   from one shared span, and load_memmap of one tree) and every result equals the single-threaded one;
// - under -fsanitize=address: tensors outliving every loader object (the Value, the TensorDict, the
//   caller's handle, even the file's directory entry) stay valid and readable.
// Usage: threads_lifetime DATA_DIR (tests/data). Exits non-zero on any mismatch.
#include <tensorfile/tensorfile.hpp>

#include "expect.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string_view>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
namespace tf = tensorfile;

namespace {

std::vector<std::byte> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}

double sum_floats(const tf::Tensor& t) {
  const tf::Tensor c = t.contiguous();
  double s = 0;
  for (std::int64_t i = 0; i < c.numel(); ++i) s += static_cast<double>(c.data<const float>()[i]);
  return s;
}

bool same_tree(const tf::TensorDict& a, const tf::TensorDict& b) { return a == b; }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: threads_lifetime DATA_DIR\n");
    return 2;
  }
  const fs::path data = argv[1];
  const std::vector<fs::path> files = {data / "torch_gen" / "state_dict_linear_bn.pt",
                                       data / "torch_gen" / "zip_deflated.pt", data / "torch" / "legacy_format.pt",
                                       data / "torch_gen" / "many_storages_12.pt"};
  const fs::path tree = data / "tensordict" / "s02_dtypes";

  // 1. Eight threads at once, several rounds, every mode.
  int loads = 0;
  for (const fs::path& file : files) {
    const tf::Value reference = tf::load_torch(file);
    const std::vector<std::byte> bytes = slurp(file);
    std::vector<std::thread> threads;
    std::atomic<int> done{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 4; ++round) {
          const int mode = (t + round) % 4;
          tf::Value v;
          if (mode == 0) v = tf::load_torch(file);
          if (mode == 1) v = tf::load_torch(file, {.mmap = tf::MapMode::copy_on_write});
          if (mode == 2) v = tf::load_torch(std::span<const std::byte>(bytes));
          if (mode == 3) v = tf::load_torch(std::span<const std::byte>(bytes), {.mmap = tf::MapMode::read_only});
          EXPECT(v == reference);
          ++done;
        }
      });
    }
    for (auto& th : threads) th.join();
    loads += done;
  }
  {
    const tf::TensorDict reference = tf::load_memmap(tree);
    std::vector<std::thread> threads;
    std::atomic<int> done{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int round = 0; round < 4; ++round) {
          const tf::TensorDict td = tf::load_memmap(tree, {.mmap = tf::MapMode::read_only});
          EXPECT(same_tree(td, reference));
          ++done;
        }
      });
    }
    for (auto& th : threads) th.join();
    loads += done;
  }
  {
    // A file of many small records: each heap load reads its local headers on other threads while its pickle
    // runs, copying the records from there, and a copy with one bad header in the middle fails the same way.
    const fs::path scratch = fs::temp_directory_path() / ("tensorfile-beside-" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    tf::Dict dict;
    for (int n = 0; n < 600; ++n) {
      const std::int64_t numel = 1 + n % 100;
      tf::Tensor t(tf::heap_storage(static_cast<std::size_t>(numel) * 4), tf::DType::Float32, {numel});
      for (std::int64_t i = 0; i < numel; ++i) t.data<float>()[i] = static_cast<float>(n * 1000 + i);
      dict.set(tf::Value("w" + std::to_string(n)), tf::Value(t));
    }
    const tf::Value reference(dict);
    const fs::path good = scratch / "many.pt";
    const fs::path bad = scratch / "bad.pt";
    tf::save_torch(reference, good);
    std::vector<std::byte> corrupt = slurp(good);
    const std::string_view name = "many/data/300";
    const auto at = std::search(corrupt.begin(), corrupt.end(), name.begin(), name.end(),
                                [](std::byte b, char c) { return b == static_cast<std::byte>(c); });
    EXPECT(at != corrupt.end() && at - corrupt.begin() >= 30);
    (at - 30)[2] = std::byte{0x07};  // "PK\x03\x04" -> "PK\x07\x04"
    std::ofstream(bad, std::ios::binary)
        .write(reinterpret_cast<const char*>(corrupt.data()), static_cast<std::streamsize>(corrupt.size()));
    std::vector<std::thread> threads;
    std::atomic<int> done{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 4; ++round) {
          EXPECT(tf::load_torch(good, {.threads = static_cast<std::size_t>(2 + (t + round) % 2)}) == reference);
          try {
            (void)tf::load_torch(bad, {.threads = 2});
            EXPECT(false);
          } catch (const tf::FormatError& e) {
            EXPECT(e.member() == name);
          }
          ++done;
        }
      });
    }
    for (auto& th : threads) th.join();
    loads += done;
    fs::remove_all(scratch);
  }
  std::printf("threads: %d concurrent loads (8 threads), all equal to the single-threaded result\n", loads);

  // 2. Tensors outlive every loader object.
  const fs::path scratch = fs::temp_directory_path() / ("tensorfile-lifetime-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  const fs::path copy = scratch / "copy.pt";
  fs::copy_file(files[0], copy);
  const tf::Value reference = tf::load_torch(files[0]);
  std::vector<tf::Tensor> kept;
  std::vector<double> expected;
  for (const auto& [key, value] : reference.as_dict()) {
    if (value.is_tensor() && value.as_tensor().dtype() == tf::DType::Float32)
      expected.push_back(sum_floats(value.as_tensor()));
  }
  for (const bool mmap : {false, true}) {
    {
      tf::Value v =
          tf::load_torch(copy, {.mmap = mmap ? std::optional<tf::MapMode>(tf::MapMode::copy_on_write) : std::nullopt});
      for (const auto& [key, value] : v.as_dict()) {
        if (value.is_tensor() && value.as_tensor().dtype() == tf::DType::Float32) kept.push_back(value.as_tensor());
      }
    }  // the Value and everything the loader made are gone
  }
  fs::remove(copy);  // even the directory entry: the mapping keeps the inode
  {
    std::vector<std::byte> buffer = slurp(files[0]);
    auto owner = std::make_shared<std::vector<std::byte>>(std::move(buffer));
    tf::Tensor t = tf::from_buffer(std::span<const std::byte>(*owner), owner, {.dtype = tf::DType::UInt8});
    owner.reset();  // the tensor's keep-alive holds the buffer
    EXPECT(t.numel() > 0 && t.data<const std::uint8_t>()[0] == 'P');
  }
  tf::Tensor from_tree;
  {
    const tf::TensorDict td = tf::load_memmap(tree);
    from_tree = td["float32"].as_tensor();
  }
  EXPECT(from_tree.numel() > 0);
  (void)from_tree.contiguous();
  for (std::size_t i = 0; i < kept.size(); ++i) EXPECT(sum_floats(kept[i]) == expected[i % expected.size()]);
  fs::remove_all(scratch);
  std::printf("lifetime: %zu tensors read after their loaders, file and buffers were released\n", kept.size() + 2);
  std::printf("%s\n", failures == 0 ? "threads_lifetime: all checks passed" : "threads_lifetime: FAILURES");
  return failures == 0 ? 0 : 1;
}
