// SPDX-License-Identifier: MIT
// The one plan of how a slice's bytes are read, for every source: the runs of bytes a slice of a C-order tensor keeps
// (one per row before the cut dimension, one in all where they touch) and how many of them one read covers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "tensorfile/core/shape.hpp"

namespace tensorfile::detail {

/// The bytes a slice keeps of a C-order tensor: `rows` runs of `run` bytes, `stride` bytes apart, the first `first`
/// bytes into the tensor; runs that touch are one run (`rows` 1), and an empty slice has no rows.
struct RowRuns {
  std::uint64_t first = 0;   ///< where the first run starts, in bytes from the tensor's first
  std::uint64_t run = 0;     ///< bytes of each run
  std::uint64_t stride = 0;  ///< bytes from one run's start to the next's
  std::uint64_t rows = 0;    ///< how many runs
};

/// The runs of [begin, end) along dimension `dim` (checked: in `shape`, 0 <= begin <= end <= its extent) of a C-order
/// tensor of `shape` whose elements are `element` bytes.
[[nodiscard]] inline RowRuns row_runs(const Shape& shape, std::uint64_t element, std::size_t dim, std::int64_t begin,
                                      std::int64_t end) {
  std::uint64_t inner = element;  // bytes of one index of `dim`
  for (std::size_t d = dim + 1; d < shape.size(); ++d) inner *= static_cast<std::uint64_t>(shape[d]);
  std::uint64_t rows = 1;  // the extents before `dim`, multiplied
  for (std::size_t d = 0; d < dim; ++d) rows *= static_cast<std::uint64_t>(shape[d]);
  const std::uint64_t run = static_cast<std::uint64_t>(end - begin) * inner;
  const std::uint64_t stride = static_cast<std::uint64_t>(shape[dim]) * inner;
  const std::uint64_t first = static_cast<std::uint64_t>(begin) * inner;
  if (run == 0 || rows == 0) return {};
  if (rows == 1 || run == stride) return {first, rows * run, rows * run, 1};
  return {first, run, stride, rows};
}

/// How runs are read: a gap of at most `max_gap` bytes between two runs is read through, in reads of at most
/// `chunk_bytes` (into a scratch buffer the runs are copied out of); other runs are read one each, straight into place.
struct RunReading {
  std::uint64_t max_gap = 0;      ///< most bytes between runs read with them
  std::uint64_t chunk_bytes = 0;  ///< most bytes one read of several runs and their gaps covers
};

/// How the runs of `runs` are read from a local file (`file`), a ranged reader (`reader`, remote storage) or memory
/// (neither). A file is read by pages, whatever a call asks for: a gap shorter than a page holds no page of its own,
/// so reading through it takes no page that the runs do not (the gaps' bytes are copied, not read again), and a
/// read call per 256 KiB costs far less than one per run. A ranged reader is paid by the byte: only gaps up to a
/// fifth of a run are read through (the bytes read stay within 1.2x the runs'), in reads of up to 8 MiB. Memory is
/// copied run by run (a gap would be copied for nothing).
[[nodiscard]] inline RunReading run_reading_for(const RowRuns& runs, bool file, bool reader) {
  if (file) return {4095, std::uint64_t{256} << 10};
  if (reader) return {runs.run / 5, std::uint64_t{8} << 20};
  return {};
}

/// Reads `runs` into `out` (exactly their rows * run bytes, in order) with `read(offset, span)`, which fills the span
/// with the tensor's bytes from `offset` on: a group of runs and their gaps per call where `how` reads through the
/// gaps and a chunk holds two or more of them, else a run per call.
template <class Read>
void read_row_runs(const RowRuns& runs, const RunReading& how, Read&& read, std::span<std::byte> out) {
  if (runs.rows == 0) return;
  const std::uint64_t per_chunk =
      runs.rows > 1 && runs.stride - runs.run <= how.max_gap ? how.chunk_bytes / runs.stride : 1;
  if (per_chunk <= 1) {
    for (std::uint64_t row = 0; row < runs.rows; ++row) {
      read(runs.first + row * runs.stride,
           out.subspan(static_cast<std::size_t>(row * runs.run), static_cast<std::size_t>(runs.run)));
    }
    return;
  }
  const std::uint64_t most = std::min(per_chunk, runs.rows);
  const auto scratch =
      std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>((most - 1) * runs.stride + runs.run));
  for (std::uint64_t row = 0; row < runs.rows; row += per_chunk) {
    const std::uint64_t count = std::min(per_chunk, runs.rows - row);
    read(runs.first + row * runs.stride,
         std::span<std::byte>(scratch.get(), static_cast<std::size_t>((count - 1) * runs.stride + runs.run)));
    for (std::uint64_t k = 0; k < count; ++k) {
      std::memcpy(out.data() + (row + k) * runs.run, scratch.get() + k * runs.stride,
                  static_cast<std::size_t>(runs.run));
    }
  }
}

}  // namespace tensorfile::detail
