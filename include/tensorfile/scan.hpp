// SPDX-License-Identifier: MIT
// scan(): is a checkpoint safe to hand to Python's torch.load? Every global every pickle of the file references,
// with a verdict, read from the pickles alone (no tensor data). It sits above the formats because it covers them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/torch/detail/verdict.hpp"

namespace tensorfile {

/// What scan() treats as safe beyond torch's own lists.
struct ScanOptions {
  std::vector<std::string> allow{};  ///< globals ("module.name") to count as allowed when they would be unknown
};

/// One global a pickle of the file references.
struct ScannedGlobal {
  std::string module{};  ///< "collections"
  std::string name{};    ///< "OrderedDict"
  std::string member{};  ///< the pickle: zip record or side file ("archive/data.pkl"); empty for a bare pickle stream
  std::uint64_t offset = 0;                        ///< byte offset of the opcode inside `member` (or the file)
  std::string_view opcode{};                       ///< "GLOBAL", "STACK_GLOBAL" or "INST"
  bool called = false;                             ///< a REDUCE, NEWOBJ, OBJ or INST calls it
  GlobalVerdict verdict = GlobalVerdict::unknown;  ///< what it is to torch.load

  /// "module.name".
  [[nodiscard]] std::string full_name() const { return module + "." + name; }
};

/// A construct only a crafted pickle holds, or a pickle that could not be walked.
struct ScanFinding {
  std::string member{};      ///< as in ScannedGlobal
  std::uint64_t offset = 0;  ///< byte offset inside `member`
  std::string what{};        ///< "memo index 3 written twice"
};

/// What scan() found.
struct ScanReport {
  FileFormat format = FileFormat::unknown;  ///< the format detect_format() found
  std::vector<std::string> pickles{};       ///< the pickles walked (zip records, side files; "" for the file itself)
  std::vector<ScannedGlobal> globals{};     ///< every global referenced, in file order
  std::vector<ScanFinding> anomalies{};     ///< crafted-file constructs
  std::vector<ScanFinding> errors{};        ///< pickles that end early or hold non-opcode bytes, unreadable files
  std::size_t persistent_ids = 0;           ///< PERSID and BINPERSID opcodes (torch's storage references)
  std::uint64_t bytes_read = 0;             ///< bytes of pickle walked (tensor data is never read)

  /// The worst verdict among the globals (tensor_rebuild when there are none).
  [[nodiscard]] GlobalVerdict worst() const noexcept {
    GlobalVerdict worst = GlobalVerdict::tensor_rebuild;
    for (const ScannedGlobal& global : globals) {
      if (global.verdict > worst) worst = global.verdict;
    }
    return worst;
  }
  /// Whether torch.load(weights_only=True) would accept every global and nothing looks crafted or broken.
  [[nodiscard]] bool safe() const noexcept {
    return worst() <= GlobalVerdict::allowed && anomalies.empty() && errors.empty();
  }
};

/// Scans the file or tensordict tree at `path`: every pickle it holds (a torch zip file's data.pkl and other .pkl
/// records, a legacy file's pickles, a tree's pickle side files, the pickle of an object-dtype .npy file or .npz
/// member) is walked opcode by opcode, never run; tensor data is never read (except a deflated .npz member's, inflated
/// to find its header). Throws IoError when the path cannot be read and FormatError for a broken zip index; a broken
/// pickle is a finding in the report.
[[nodiscard]] TENSORFILE_ENTRY ScanReport scan(const std::filesystem::path& path, const ScanOptions& options = {});

/// Scans a file held in memory (borrowed for the call): a zip archive's .pkl records, else the bytes as a sequence of
/// pickles (a legacy torch file, a bare pickle). Throws FormatError for a broken zip index.
[[nodiscard]] TENSORFILE_ENTRY ScanReport scan(std::span<const std::byte> bytes, const ScanOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/numpy/npy_header.hpp"
#include "tensorfile/formats/torch/detail/global_verdicts.hpp"
#include "tensorfile/formats/torch/detail/pickle_scan.hpp"

namespace tensorfile {

namespace detail {

/// Walks `count` pickles one after the other from byte `first` of `bytes` (the legacy format holds five before its
/// raw storages; a bare pickle file one; an object .npy one after its header), stopping at the end of the bytes.
inline void scan_pickles(ScanReport& report, std::span<const std::byte> bytes, const std::string& member,
                         std::size_t count, const ScanOptions& options, std::uint64_t first = 0) {
  report.pickles.push_back(member);
  if (bytes.size() <= first) report.errors.push_back({member, first, "no pickle: the bytes are empty"});
  std::uint64_t start = first;
  for (std::size_t i = 0; i < count && start < bytes.size(); ++i) {
    PickleScan found = scan_pickle(bytes, start);
    report.bytes_read += found.end - start;
    report.persistent_ids += found.persistent_ids;
    for (PickleGlobal& global : found.globals) {
      const std::string full = global.module + "." + global.name;
      GlobalVerdict verdict = classify_global(global.module, global.name, full);
      if (verdict == GlobalVerdict::unknown &&
          std::find(options.allow.begin(), options.allow.end(), full) != options.allow.end()) {
        verdict = GlobalVerdict::allowed;
      }
      report.globals.push_back({std::move(global.module), std::move(global.name), member, global.offset, global.opcode,
                                global.called, verdict});
    }
    for (PickleAnomaly& anomaly : found.anomalies) report.anomalies.push_back({member, anomaly.offset, anomaly.what});
    if (found.error) {
      report.errors.push_back({member, found.error->offset, found.error->what});
      return;
    }
    start = found.end;
  }
  // A record holds one pickle; bytes after its STOP are unseen by torch.load but not by every reader.
  if (count == 1 && start < bytes.size()) {
    report.anomalies.push_back({member, start, std::to_string(bytes.size() - start) + " bytes after STOP"});
  }
}

/// A .npy file or .npz member: np.save writes an object array (dtype '|O') as a pickle after the header, which
/// np.load(allow_pickle=True) runs; other dtypes hold no pickle. A header that cannot be read is an error finding.
inline void scan_npy(ScanReport& report, std::span<const std::byte> bytes, const std::filesystem::path& path,
                     const std::string& member, const ScanOptions& options) {
  std::optional<std::uint64_t> pickle_at;
  try {
    pickle_at = npy_object_pickle_offset(bytes, path, member);
  } catch (const Error& error) {
    report.errors.push_back({member, error.offset().value_or(0), error.what()});
    return;
  }
  if (pickle_at) scan_pickles(report, bytes, member, 1, options, *pickle_at);
}

inline void scan_zip(ScanReport& report, std::span<const std::byte> bytes, const std::filesystem::path& path,
                     const ScanOptions& options) {
  ZipLimits limits;
  limits.require_prefix = report.format == FileFormat::torch_zip;  // an .npz names its members at the top level
  const ZipReader zip = ZipReader::open(bytes, path, limits);
  for (const ZipEntry& entry : zip.entries()) {
    const bool pickle = entry.name.ends_with(".pkl");
    // An .npz member's header is read in place when stored; a deflated one is inflated to find it (its data
    // with it: only .npz members, never a torch file's records).
    if (!pickle && !(report.format == FileFormat::npz && entry.name.ends_with(".npy"))) continue;
    std::vector<std::byte> inflated;
    const std::span<const std::byte> member =
        entry.method == 0 ? zip.stored_bytes(entry) : std::span<const std::byte>(inflated = zip.read(entry));
    if (pickle) {
      scan_pickles(report, member, std::string(entry.name), 1, options);
    } else {
      scan_npy(report, member, path, std::string(entry.name), options);
    }
  }
}

inline void scan_bytes(ScanReport& report, std::span<const std::byte> bytes, const std::filesystem::path& path,
                       const ScanOptions& options) {
  switch (report.format) {
    case FileFormat::torch_zip:
    case FileFormat::npz: scan_zip(report, bytes, path, options); break;
    case FileFormat::torch_legacy: scan_pickles(report, bytes, "", 5, options); break;
    case FileFormat::npy: scan_npy(report, bytes, path, "", options); break;
    default: break;  // safetensors, tensordict trees' data files: no pickle
  }
}

/// A tensordict tree's pickle side files (pickle.pkl of non-tensor data, other.pickle...).
inline void scan_tree(ScanReport& report, const std::filesystem::path& root, const ScanOptions& options) {
  for (const auto& item : std::filesystem::recursive_directory_iterator(root)) {
    const std::filesystem::path& file = item.path();
    if (!item.is_regular_file() || (file.extension() != ".pkl" && file.extension() != ".pickle")) continue;
    const std::string member = std::filesystem::relative(file, root).generic_string();
    if (item.file_size() == 0) {
      report.errors.push_back({member, 0, "the pickle file is empty"});
      continue;
    }
    const Storage mapping = mmap_storage(file, MapMode::read_only);
    scan_pickles(report, {mapping.data(), mapping.size_bytes()}, member, 1, options);
  }
}

}  // namespace detail

TENSORFILE_ENTRY ScanReport scan(const std::filesystem::path& path, const ScanOptions& options) {
  ScanReport report;
  // One open and one fstat tell a tree from a file and give the size: a folder of thousands of small checkpoints
  // pays four system calls per file (open, fstat, pread, close). O_NONBLOCK: a FIFO is refused below, never waited
  // on; it changes nothing for a regular file.
  const detail::FileHandle file =
      detail::FileHandle::try_open_at(AT_FDCWD, path.c_str(), O_RDONLY | O_NONBLOCK, 0, path);
  if (!file.valid()) throw IoError("cannot open for reading", errno, {.file = path});
  struct stat info {};
  if (::fstat(file.fd(), &info) != 0) throw IoError("cannot stat", errno, {.file = path});
  if (S_ISDIR(info.st_mode)) {
    report.format = detect_format(path);
    if (report.format == FileFormat::tensordict) detail::scan_tree(report, path, options);
    return report;
  }
  if (!S_ISREG(info.st_mode)) throw ArgumentError("is not a regular file; expected a regular file", {.file = path});
  // One read serves the format check and the scan: a small file is read whole (cheaper than mapping and
  // unmapping it), a large one mapped so that only the pages of its index and pickles are touched.
  constexpr std::uint64_t read_whole_below = std::uint64_t{1} << 20;
  const auto scan_span = [&](std::span<const std::byte> bytes) {
    report.format = detect_format(bytes);
    if (report.format == FileFormat::unknown) report.format = FileFormat::torch_legacy;  // try it as pickles
    detail::scan_bytes(report, bytes, path, options);
  };
  if (const auto size = static_cast<std::uint64_t>(info.st_size); size < read_whole_below) {
    // The file's real size, under 1 MiB; not zeroed first, the read fills it.
    const auto bytes = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(size));
    const std::span<std::byte> whole(bytes.get(), static_cast<std::size_t>(size));
    file.read_exact(0, whole);
    scan_span(whole);
  } else {
    const Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), MapMode::read_only));
    scan_span({mapping.data(), mapping.size_bytes()});
  }
  return report;
}

TENSORFILE_ENTRY ScanReport scan(std::span<const std::byte> bytes, const ScanOptions& options) {
  ScanReport report;
  report.format = detect_format(bytes);
  if (report.format == FileFormat::unknown) report.format = FileFormat::torch_legacy;
  detail::scan_bytes(report, bytes, {}, options);
  return report;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS
