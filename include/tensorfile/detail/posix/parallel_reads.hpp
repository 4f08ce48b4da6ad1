// SPDX-License-Identifier: MIT
// Many reads of one file into their destinations, gathered and spread over a few threads: neighbouring
// ranges become one preadv, destinations are populated just before their read, and each thread faults
// in the memory it is about to fill while the others copy. Groups landing in a FileMirror are read with
// O_DIRECT, bypassing the page cache.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/direct_reads.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/posix/populate.hpp"

namespace tensorfile::detail {

/// Threads reading records when the caller does not say: min(4, cores), at least 1.
[[nodiscard]] inline std::size_t default_read_threads() noexcept {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
}

/// A list of (file offset, destination) reads of one file, run together by run().
class ParallelReads {
 public:
  /// Most bytes one preadv call covers: enough to amortize the call, small enough to share the work.
  static constexpr std::uint64_t group_bytes = std::uint64_t{8} << 20;
  /// Most bytes between two ranges read in one call (zip local headers sit between records).
  static constexpr std::uint64_t max_gap = 4096;
  /// Most destinations one call fills (IOV_MAX is 1024; gaps take a slot each).
  static constexpr std::size_t max_parts = 512;

  /// Adds a read of out.size() bytes at `offset` into `out`; `member` (kept as given: it must outlive
  /// run()) names it in errors.
  void add(std::uint64_t offset, std::span<std::byte> out, std::string_view member) {
    if (!out.empty()) requests_.push_back({offset, out, member});
  }
  [[nodiscard]] bool empty() const noexcept { return requests_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return requests_.size(); }

  /// Performs every read added so far with up to `threads` threads, then forgets them. A file that ends
  /// early is a FormatError naming the file, the member and the offset of the first missing byte. With a
  /// `mirror`, the page-aligned middle of each group whose destinations all lie in it is read directly.
  void run(const FileHandle& file, std::size_t threads, const FileMirror* mirror = nullptr) {
    std::vector<Request> requests = std::move(requests_);
    requests_.clear();
    const auto by_offset = [](const Request& a, const Request& b) { return a.offset < b.offset; };
    if (!std::is_sorted(requests.begin(), requests.end(), by_offset)) {  // records in file order usually are
      std::sort(requests.begin(), requests.end(), by_offset);
    }
    // Groups of neighbouring requests, each one preadv call: [begin, end) indices into requests.
    std::vector<std::pair<std::size_t, std::size_t>> groups;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!groups.empty()) {
        const auto& [begin, end] = groups.back();
        const Request& last = requests[end - 1];
        const std::uint64_t last_end = last.offset + last.out.size();
        const bool joins = requests[i].offset >= last_end && requests[i].offset - last_end <= max_gap &&
                           requests[i].offset + requests[i].out.size() - requests[begin].offset <= group_bytes &&
                           end - begin < max_parts;
        if (joins) {
          ++groups.back().second;
          continue;
        }
      }
      groups.emplace_back(i, i + 1);
    }
    spread(groups.size(), threads, [&] {  // each thread's worker, with its own buffers
      return [&, gap_bytes = std::vector<std::byte>(),
              parts = std::vector<std::span<std::byte>>()](std::size_t g) mutable {
        read_group(file, std::span(requests).subspan(groups[g].first, groups[g].second - groups[g].first), gap_bytes,
                   parts, mirror);
      };
    });
  }

  /// Performs every read added so far through `read_at` (a ranged reader: no gathering, each read one call),
  /// with up to `threads` threads, then forgets them; rethrows the first error `read_at` threw.
  void run(const std::function<void(std::uint64_t, std::span<std::byte>)>& read_at, std::size_t threads) {
    std::vector<Request> requests = std::move(requests_);
    requests_.clear();
    spread(requests.size(), threads,
           [&] { return [&](std::size_t i) { read_at(requests[i].offset, requests[i].out); }; });
  }

 private:
  // Calls `work(k)` for each k in [0, count) from up to `threads` threads, each with its own `work` from
  // make_worker() and taking the next k; after an error no new k starts, and the first error is rethrown once
  // all have stopped.
  template <class MakeWorker>
  static void spread(std::size_t count, std::size_t threads, const MakeWorker& make_worker) {
    const std::size_t workers = std::min(std::max<std::size_t>(threads, 1), count);
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    const auto run_some = [&] {
      auto work = make_worker();
      for (std::size_t k = next++; k < count && !failed; k = next++) {
        try {
          work(k);
        } catch (...) {
          const std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
    };
    if (workers <= 1) {
      run_some();
    } else {
      std::vector<std::jthread> pool;
      pool.reserve(workers - 1);
      for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(run_some);
      run_some();
    }  // the jthreads join here
    if (error) std::rethrow_exception(error);
  }

  struct Request {
    std::uint64_t offset;
    std::span<std::byte> out;
    std::string_view member;
  };

  /// Fewest page-aligned bytes a group must span to be read directly: below it the cache's path costs less
  /// than the extra calls for the unaligned head and tail.
  static constexpr std::uint64_t min_direct_bytes = std::uint64_t{256} << 10;

  // Where `group` lies in `mirror` at its file positions: the mirror's bytes from the group's first to
  // its last byte; empty when some destination is elsewhere.
  static std::span<std::byte> mirrored(std::span<const Request> group, const FileMirror& mirror) {
    const std::uint64_t start = group.front().offset;
    const std::uint64_t end = group.back().offset + group.back().out.size();
    if (start < mirror.offset || end - mirror.offset > mirror.memory.size()) return {};
    for (const Request& request : group) {
      if (request.out.data() != mirror.memory.data() + (request.offset - mirror.offset)) return {};
    }
    return mirror.memory.subspan(static_cast<std::size_t>(start - mirror.offset),
                                 static_cast<std::size_t>(end - start));
  }

  // Reads up to `count` bytes at `offset` of the O_DIRECT descriptor `direct` (all aligned) into `out`: the
  // bytes read (fewer at the end of the file), or -1 when the file system refuses the request.
  static std::int64_t read_direct_at(const FileHandle& file, const FileHandle& direct, std::byte* out,
                                     std::size_t count, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < count) {
      const std::size_t chunk = std::min<std::size_t>(count - done, std::size_t{1} << 30);
      const ssize_t got = ::pread(direct.fd(), out + done, chunk, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EINVAL) return -1;
      if (got < 0) throw IoError("cannot read", errno, {.file = file.path(), .offset = offset + done});
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    return static_cast<std::int64_t>(done);
  }

  // Reads a mirrored group with O_DIRECT: its page-aligned middle straight into the mirror, its partial first
  // and last pages whole into a page of their own, copied from there (read through the cache, they would bring
  // their neighbours in by readahead). False (nothing lost: the caller reads the group through the cache) when
  // the group is small, the mirror is not aligned like the file, the file system refuses, or the file ends
  // inside the group (the cache's path then names the record cut).
  static bool read_direct(const FileHandle& file, std::span<const Request> group, const FileMirror& mirror) {
    const std::span<std::byte> out = mirrored(group, mirror);
    if (out.empty()) return false;
    const std::uint64_t start = group.front().offset;
    const std::uint64_t end = start + out.size();
    const std::uint64_t middle = (start + direct_alignment - 1) / direct_alignment * direct_alignment;
    const std::uint64_t tail = end / direct_alignment * direct_alignment;
    const auto at = [&](std::uint64_t offset) { return out.data() + (offset - start); };
    if (tail < middle || tail - middle < min_direct_bytes ||
        reinterpret_cast<std::uintptr_t>(at(middle)) % direct_alignment != 0) {
      return false;
    }
    populate_for_write(out.data(), out.size());  // best effort, as for the cache's path
    const auto middle_bytes = static_cast<std::size_t>(tail - middle);
    if (read_direct_at(file, *mirror.direct, at(middle), middle_bytes, middle) !=
        static_cast<std::int64_t>(middle_bytes)) {
      return false;
    }
    struct FreePage {
      void operator()(std::byte* page) const { ::operator delete (page, std::align_val_t{direct_alignment}); }
    };
    const std::unique_ptr<std::byte, FreePage> page(
        static_cast<std::byte*>(::operator new (direct_alignment, std::align_val_t{direct_alignment})));
    // Copies file bytes [from, to), which lie in the page at `page_offset`.
    const auto partial_page = [&](std::uint64_t page_offset, std::uint64_t from, std::uint64_t to) {
      if (from == to) return true;
      if (read_direct_at(file, *mirror.direct, page.get(), direct_alignment, page_offset) <
          static_cast<std::int64_t>(to - page_offset)) {
        return false;
      }
      std::memcpy(at(from), page.get() + (from - page_offset), static_cast<std::size_t>(to - from));
      return true;
    };
    return partial_page(middle - direct_alignment, start, middle) && partial_page(tail, tail, end);
  }

  static void read_group(const FileHandle& file, std::span<const Request> group, std::vector<std::byte>& gap_bytes,
                         std::vector<std::span<std::byte>>& parts, const FileMirror* mirror) {
    if (mirror != nullptr && mirror->direct != nullptr && read_direct(file, group, *mirror)) return;
    std::uint64_t gaps = 0;
    for (std::size_t i = 1; i < group.size(); ++i) {
      gaps = std::max(gaps, group[i].offset - group[i - 1].offset - group[i - 1].out.size());
    }
    gap_bytes.resize(static_cast<std::size_t>(gaps));  // the gaps are read over one scratch buffer
    parts.clear();
    // Destinations that follow each other in memory (records of one arena) are populated in one call.
    std::span<std::byte> adjoining;
    const auto populate = [&] {  // best effort: else faulted by the read
      if (!adjoining.empty()) populate_for_write(adjoining.data(), adjoining.size());
    };
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (i != 0) {
        const auto gap = static_cast<std::size_t>(group[i].offset - group[i - 1].offset - group[i - 1].out.size());
        if (gap != 0) parts.emplace_back(gap_bytes.data(), gap);
      }
      const std::span<std::byte> out = group[i].out;
      const auto start = reinterpret_cast<std::uintptr_t>(adjoining.data());
      const auto at = reinterpret_cast<std::uintptr_t>(out.data());
      if (!adjoining.empty() && at >= start + adjoining.size() && at - (start + adjoining.size()) < 64) {
        adjoining = {adjoining.data(), at + out.size() - start};
      } else {
        populate();
        adjoining = out;
      }
      parts.push_back(out);
    }
    populate();
    try {
      file.read_scattered(group.front().offset, parts);
    } catch (const FormatError&) {
      // The file ends inside the group: read it request by request to name the member that is cut.
      for (const Request& request : group) {
        try {
          file.read_exact(request.offset, request.out);
        } catch (const FormatError& cut) {
          throw FormatError(cut.reason(), {cut.path(), std::string(request.member), cut.offset()});
        }
      }
      throw;
    }
  }

  std::vector<Request> requests_;
};

}  // namespace tensorfile::detail
