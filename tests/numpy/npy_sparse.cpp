// SPDX-License-Identifier: MIT
// A .npy past 2 GiB without writing 2 GiB: the header save_npy would write for a 2.25 GiB int32 array, the
// file extended with ftruncate (sparse: holes read as zeros), markers written at the first element, just past
// the 2 GiB offset and at the last element. load_npy maps it (read_only and copy_on_write) and meta-loads it;
// the markers and a hole must read back. CTest label "long" (needs 2.25 GiB of address space, little disk).
// Usage: npy_sparse SCRATCH_DIR
#include <tensorfile/formats/numpy/npy.hpp>

#include "../faults/expect.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace tf = tensorfile;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: npy_sparse SCRATCH_DIR\n", stderr);
    return 64;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / "sparse_2gib.npy";
  const std::int64_t count = (std::int64_t{9} << 28) / 4;  // 2.25 GiB of int32
  const std::string header = tf::detail::npy_header_bytes("<i4", false, tf::Shape{count});
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror("open");
    return 1;
  }
  const auto data_offset = static_cast<off_t>(header.size());
  const std::int64_t past_2gib = (std::int64_t{1} << 31) / 4 + 1;  // its bytes lie past offset 2^31
  bool ok = ::pwrite(fd, header.data(), header.size(), 0) == static_cast<ssize_t>(header.size()) &&
            ::ftruncate(fd, data_offset + count * 4) == 0;
  for (const auto& [index, value] : {std::pair<std::int64_t, std::int32_t>{0, 1}, {past_2gib, 2}, {count - 1, 3}}) {
    ok = ok && ::pwrite(fd, &value, 4, data_offset + index * 4) == 4;
  }
  ::close(fd);
  if (!ok) {
    std::perror("writing the sparse file");
    std::filesystem::remove(path);
    return 1;
  }
  for (const tf::MapMode mode : {tf::MapMode::read_only, tf::MapMode::copy_on_write}) {
    const tf::Tensor t = tf::load_npy(path, {.mmap = mode});
    EXPECT(t.storage().kind() == tf::StorageKind::mmap);
    EXPECT(t.dim() == 1 && t.sizes()[0] == count);
    EXPECT(t.dtype() == tf::DType::Int32);
    const std::int32_t* values = t.data<const std::int32_t>();
    EXPECT(values[0] == 1);
    EXPECT(values[past_2gib] == 2);
    EXPECT(values[count - 1] == 3);
    EXPECT(values[count / 2] == 0);  // a hole
  }
  const tf::Tensor meta = tf::load_npy(path, {.map_location = "meta"});
  EXPECT(meta.device().is_meta() && meta.sizes()[0] == count);
  std::filesystem::remove(path);
  std::printf("%s: a %lld-byte sparse .npy mapped and meta-loaded\n", failures == 0 ? "passed" : "FAILED",
              static_cast<long long>(data_offset + count * 4));
  return failures == 0 ? 0 : 1;
}
