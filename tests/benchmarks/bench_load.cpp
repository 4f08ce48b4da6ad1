// SPDX-License-Identifier: MIT
// bench_load MODE PATH [REPEATS]: times tensorfile::load (heap, mmap, meta, select) of a checkpoint in any format
// against floors of the same bytes; one JSON line.
//
// PATH is what load() takes: a file (torch, safetensors, .npy, .npz), a Hugging Face *.index.json (its folder's
// files are the bytes) or a folder (a tensordict tree: every file under it). Each configuration belongs in its own
// process so that peak_rss_kb (ru_maxrss) is its own. The heap page policy is the environment's
// (TENSORFILE_HUGE_PAGES=1: huge pages on), reported as "huge_pages".
// Timed: load() alone (the floors: open and fstat every file, one destination for all their bytes, pread them all:
// pread_floor into operator new's memory, populate_floor into a MAP_POPULATE mapping, huge_floor into a huge-page
// advised mapping populated with MADV_POPULATE_WRITE, huge2_floor the same read by two threads; decode_floor, for a
// torch zip file, is pread_floor and one pass that decodes every opcode of the pickle). Not timed:
// destroying the previous result, and the checksum that keeps the result alive: one byte per
// tensor for heap (already resident), the data pointers for mmap (so that no page is faulted in
// and RSS shows what the load itself maps), numel for meta.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <tensorfile/tensorfile.hpp>

#include "bench_common.hpp"

namespace {

using tensorfile_bench::Timings;

// The files whose bytes a load of `path` reads: the file itself; a *.index.json's folder (the index and its
// shards); every regular file under a folder. Sorted, so that every floor reads them in one order.
std::vector<std::filesystem::path> data_files(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  const bool index = name.size() > 11 && name.ends_with(".index.json");
  const std::filesystem::path folder = index ? path.parent_path() : path;
  if (!index && !std::filesystem::is_directory(folder)) return {path};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::uint64_t bytes_of(const std::vector<std::filesystem::path>& files) {
  std::uint64_t total = 0;
  for (const auto& file : files) total += std::filesystem::file_size(file);
  return total;
}

// The page policy of this process's default heap loads, as the library resolves it.
std::string huge_pages_field() {
  const bool on =
      tensorfile::detail::resolve_huge_pages(tensorfile::HugePages::from_environment) == tensorfile::HugePages::on;
  return std::string("\"huge_pages\": \"") + (on ? "on" : "off") + "\", ";
}

struct Result {
  std::size_t tensors = 0;
  std::uint64_t checksum = 0;
};

enum class Mode { heap, mmap, meta, select };

// Walks the tensors in place (named_tensors would copy every tensor into a list, and the peak RSS reported is
// meant to be the load's).
Result checksum_of(const tensorfile::Value& value, Mode mode) {
  Result r;
  auto visit = [&](const std::string&, const tensorfile::Tensor& tensor) {
    ++r.tensors;
    if (mode == Mode::meta || mode == Mode::select || tensor.numel() == 0) {
      r.checksum += static_cast<std::uint64_t>(tensor.numel());
    } else if (mode == Mode::mmap) {
      r.checksum += reinterpret_cast<std::uintptr_t>(tensor.raw_data());
    } else {
      r.checksum += std::to_integer<std::uint64_t>(*tensor.raw_data());
    }
  };
  tensorfile::detail::walk_tensors(value, "", visit);
  return r;
}

int bench_tensorfile(Mode mode, const std::string& mode_name, const std::string& path, int repeats) {
  tensorfile::LoadOptions options;
  if (mode == Mode::mmap) options.mmap = tensorfile::MapMode::copy_on_write;
  if (mode == Mode::meta) options.map_location = "meta";
  // TENSORFILE_BENCH_READ_THREADS: LoadOptions.threads (unset: the library's default).
  if (const char* threads = std::getenv("TENSORFILE_BENCH_READ_THREADS")) options.threads = std::stoul(threads);
  // TENSORFILE_BENCH_DIRECT_READS=always|never: LoadOptions.direct_reads (unset: automatic).
  if (const char* direct = std::getenv("TENSORFILE_BENCH_DIRECT_READS")) {
    const std::string_view how(direct);
    options.direct_reads = how == "always"  ? tensorfile::DirectReads::always
                           : how == "never" ? tensorfile::DirectReads::never
                                            : tensorfile::DirectReads::automatic;
  }
  Timings t;
  Result r;
  long anon = -1;
  long file = -1;
  std::uint64_t bytes_read = 0;
  for (int i = 0; i < repeats; ++i) {
    std::optional<tensorfile::Value> value;
    // select: the first tensor the walk meets, one of all; bytes_read is rchar's growth over the load.
    if (mode == Mode::select)
      options.select = [first = true](std::string_view) mutable { return std::exchange(first, false); };
    const std::uint64_t rchar_before = tensorfile_bench::proc_io("rchar");
    t.run([&] { value = tensorfile::load(std::filesystem::path(path), options); });
    bytes_read = tensorfile_bench::proc_io("rchar") - rchar_before;
    r = checksum_of(*value, mode);
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("tensorfile", mode_name, path, bytes_of(data_files(path)), r.tensors, t, anon, file,
                               r.checksum, huge_pages_field() + "\"bytes_read\": " + std::to_string(bytes_read) + ", ");
  return 0;
}

// Where a floor reads the file to: operator new's memory (faulted 4 KiB at a time during the read), an
// anonymous mapping with MAP_POPULATE, or one advised MADV_HUGEPAGE and populated with MADV_POPULATE_WRITE.
enum class FloorMemory { plain, populate, huge };

// Owns the floor's destination, whichever way it was made.
class FloorBuffer {
 public:
  FloorBuffer(std::size_t size, FloorMemory memory) : size_(size), memory_(memory) {
    if (size == 0) return;
    if (memory == FloorMemory::plain) {
      data_ = static_cast<std::byte*>(::operator new (size, std::align_val_t{64}));
      return;
    }
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (memory == FloorMemory::populate ? MAP_POPULATE : 0);
    void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (address == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    data_ = static_cast<std::byte*>(address);
    if (memory == FloorMemory::huge) {
      ::madvise(data_, size, MADV_HUGEPAGE);
      if (::madvise(data_, size, 23 /* MADV_POPULATE_WRITE */) != 0) std::perror("MADV_POPULATE_WRITE");
    }
  }
  FloorBuffer(const FloorBuffer&) = delete;
  FloorBuffer& operator=(const FloorBuffer&) = delete;
  ~FloorBuffer() {
    if (data_ == nullptr) return;
    if (memory_ == FloorMemory::plain) {
      ::operator delete (data_, std::align_val_t{64});
    } else {
      ::munmap(data_, size_);
    }
  }
  [[nodiscard]] std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_;
  FloorMemory memory_;
};

void pread_all(int fd, std::byte* out, std::uint64_t begin, std::uint64_t end) {
  while (begin < end) {
    const ssize_t got = ::pread(fd, out + begin, end - begin, static_cast<off_t>(begin));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      std::perror("pread");
      std::exit(1);
    }
    begin += static_cast<std::uint64_t>(got);
  }
}

// The length of each pickle opcode's argument, as `decode_floor` needs it: a fixed width, a count of `count_width`
// bytes before the bytes, or text up to a newline (two for GLOBAL and INST). Written here, apart from the library,
// so that the floor owes nothing to the loader it is a floor for.
struct OpLength {
  enum Kind : std::uint8_t { unknown, fixed, counted, lines } kind = unknown;
  std::uint8_t width = 0;  // fixed: the argument's bytes; counted: the count's bytes; lines: how many lines
};
constexpr std::array<OpLength, 256> op_lengths = [] {
  std::array<OpLength, 256> table{};
  const auto set = [&](std::string_view ops, OpLength length) {
    for (const char op : ops) table[static_cast<std::uint8_t>(op)] = length;
  };
  set("(.012N]ael}dsut)RbQo", {OpLength::fixed, 0});
  set("\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98", {OpLength::fixed, 0});
  set("Kqh\x80\x82", {OpLength::fixed, 1});
  set("M\x83", {OpLength::fixed, 2});
  set("Jrj\x84", {OpLength::fixed, 4});
  set("G\x95", {OpLength::fixed, 8});
  set("UC\x8c\x8a", {OpLength::counted, 1});
  set("TXB\x8b", {OpLength::counted, 4});
  set("\x8d\x8e\x96", {OpLength::counted, 8});
  set("ILFSVpgP", {OpLength::lines, 1});
  set("ci", {OpLength::lines, 2});
  return table;
}();

// Decodes every opcode of `pickle` once (each argument's length, nothing built) and returns how many there were;
// 0 when the bytes are not a pickle this decoder knows.
std::uint64_t decode_opcodes(std::span<const std::byte> pickle) {
  std::uint64_t count = 0;
  std::size_t at = 0;
  const auto byte_at = [&](std::size_t i) { return std::to_integer<std::uint8_t>(pickle[i]); };
  while (at < pickle.size()) {
    const std::uint8_t op = byte_at(at++);
    ++count;
    if (op == '.') return count;
    const OpLength length = op_lengths[op];
    std::uint64_t skip = 0;
    switch (length.kind) {
      case OpLength::unknown: return 0;
      case OpLength::fixed: skip = length.width; break;
      case OpLength::counted:
        if (pickle.size() - at < length.width) return 0;
        for (unsigned i = 0; i < length.width; ++i) skip |= std::uint64_t{byte_at(at + i)} << (8 * i);
        at += length.width;
        break;
      case OpLength::lines:
        for (unsigned line = 0; line < length.width; ++line) {
          const void* newline = std::memchr(pickle.data() + at, '\n', pickle.size() - at);
          if (newline == nullptr) return 0;
          at = static_cast<std::size_t>(static_cast<const std::byte*>(newline) - pickle.data()) + 1;
        }
        break;
    }
    if (pickle.size() - at < skip) return 0;
    at += static_cast<std::size_t>(skip);
  }
  return 0;
}

// One file of a floor's set: its descriptor, its size and where its bytes go in the one destination.
struct FloorPiece {
  int fd = -1;
  std::uint64_t at = 0;
  std::uint64_t size = 0;
};

// Reads bytes [begin, end) of the set laid end to end: each piece's share of the range from its file.
void pread_range(const std::vector<FloorPiece>& pieces, std::byte* out, std::uint64_t begin, std::uint64_t end) {
  for (const FloorPiece& piece : pieces) {
    const std::uint64_t from = std::max(begin, piece.at);
    const std::uint64_t to = std::min(end, piece.at + piece.size);
    if (from < to) pread_all(piece.fd, out + piece.at, from - piece.at, to - piece.at);
  }
}

// The floor: open and fstat each file, make one destination for all their bytes, pread them all (with `threads`
// threads, each a contiguous share of the bytes). Timed from the first open to the last byte read.
// `pass`, when given, runs over the bytes read, inside the timed part, and its result goes into the checksum.
int bench_floor(const std::string& mode_name, FloorMemory memory, unsigned threads, const std::string& path,
                int repeats, const std::function<std::uint64_t(std::span<const std::byte>)>& pass = {}) {
  const std::vector<std::filesystem::path> files = data_files(path);
  Timings t;
  std::uint64_t checksum = 0;
  std::uint64_t size = 0;
  long anon = -1;
  long file = -1;
  for (int i = 0; i < repeats; ++i) {
    std::optional<FloorBuffer> buffer;
    t.run([&] {
      std::vector<FloorPiece> pieces;
      pieces.reserve(files.size());
      size = 0;
      for (const auto& name : files) {
        const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          std::perror(name.c_str());
          std::exit(1);
        }
        struct stat info {};
        ::fstat(fd, &info);
        pieces.push_back({fd, size, static_cast<std::uint64_t>(info.st_size)});
        size += pieces.back().size;
      }
      buffer.emplace(static_cast<std::size_t>(size), memory);
      std::vector<std::thread> pool;
      const std::uint64_t share = (size / threads + 4095) / 4096 * 4096;
      for (unsigned k = 1; k < threads; ++k) {
        pool.emplace_back([&, k] {
          pread_range(pieces, buffer->data(), std::min(size, k * share), std::min(size, (k + 1) * share));
        });
      }
      pread_range(pieces, buffer->data(), 0, std::min(size, share));
      for (auto& thread : pool) thread.join();
      for (const FloorPiece& piece : pieces) ::close(piece.fd);
      if (pass) checksum += pass(std::span(buffer->data(), static_cast<std::size_t>(size)));
    });
    checksum += size ? std::to_integer<std::uint64_t>(buffer->data()[size - 1]) : 0;
    anon = tensorfile_bench::proc_status_kb("RssAnon");
    file = tensorfile_bench::proc_status_kb("RssFile");
  }
  tensorfile_bench::print_json("floor", mode_name, path, size, 0, t, anon, file, checksum);
  return 0;
}

// The decode floor of a torch zip file: the pread floor, then one pass that decodes every opcode of its pickle
// (no value built, no record placed). Any loader of the file does at least this much; finding the pickle in the
// zip is left untimed.
int bench_decode_floor(const std::string& path, int repeats) {
  std::size_t pickle_begin = 0;
  std::size_t pickle_size = 0;
  {  // the pickle found by reading the zip index and its local header alone, so that the peak RSS is the floor's
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::perror(path.c_str());
      return 1;
    }
    auto zip = tensorfile::detail::ZipReader::open_file_index(
        std::filesystem::file_size(path), path, [fd](std::uint64_t offset, std::span<std::byte> out) {
          if (::pread(fd, out.data(), out.size(), static_cast<off_t>(offset)) != static_cast<ssize_t>(out.size())) {
            throw std::runtime_error("short read of the zip index");
          }
        });
    const tensorfile::detail::ZipEntry* entry = zip.find("data.pkl");
    if (entry != nullptr) zip.read_local_header(*entry);
    ::close(fd);
    if (entry == nullptr) {
      std::fprintf(stderr, "%s: no data.pkl (decode_floor reads torch zip files)\n", path.c_str());
      return 1;
    }
    pickle_begin = static_cast<std::size_t>(entry->data_offset);
    pickle_size = static_cast<std::size_t>(entry->size);
  }
  return bench_floor("decode_floor", FloorMemory::plain, 1, path, repeats, [&](std::span<const std::byte> file) {
    const std::uint64_t opcodes = decode_opcodes(file.subspan(pickle_begin, pickle_size));
    if (opcodes == 0) {
      std::fprintf(stderr, "%s: the pickle has an opcode decode_floor does not know\n", path.c_str());
      std::exit(1);
    }
    return opcodes;
  });
}

}  // namespace

int main(int argc, char** argv) {
  tensorfile_bench::mark_start();
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr,
                 "usage: %s heap|mmap|meta|select|pread_floor|populate_floor|huge_floor|huge2_floor|decode_floor PATH "
                 "[REPEATS=5]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const int repeats = argc == 4 ? std::atoi(argv[3]) : 5;
  if (repeats < 1) {
    std::fprintf(stderr, "REPEATS must be at least 1\n");
    return 2;
  }
  try {
    if (mode == "heap") return bench_tensorfile(Mode::heap, mode, path, repeats);
    if (mode == "mmap") return bench_tensorfile(Mode::mmap, mode, path, repeats);
    if (mode == "meta") return bench_tensorfile(Mode::meta, mode, path, repeats);
    if (mode == "select") return bench_tensorfile(Mode::select, mode, path, repeats);
    if (mode == "pread_floor") return bench_floor(mode, FloorMemory::plain, 1, path, repeats);
    if (mode == "populate_floor") return bench_floor(mode, FloorMemory::populate, 1, path, repeats);
    if (mode == "huge_floor") return bench_floor(mode, FloorMemory::huge, 1, path, repeats);
    if (mode == "huge2_floor") return bench_floor(mode, FloorMemory::huge, 2, path, repeats);
    if (mode == "decode_floor") return bench_decode_floor(path, repeats);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  std::fprintf(
      stderr,
      "unknown MODE %s; expected heap, mmap, meta, select or a floor (pread_floor, populate_floor, huge_floor, "
      "huge2_floor, decode_floor)\n",
      mode.c_str());
  return 2;
}
