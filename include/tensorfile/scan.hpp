// SPDX-License-Identifier: MIT
/// @file
/// scan(): is a checkpoint safe to hand to Python's torch.load? Every global every pickle of the file references,
/// with a verdict, read from the pickles alone (no tensor data). It sits above the formats because it covers them all.
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
#include "tensorfile/formats/torch/verdict.hpp"

namespace tensorfile {

class RangeReader;

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
  FileFormat format = FileFormat::unknown;  ///< the format detect_format() found (torch_legacy for a tar or a pickle)
  std::vector<std::string> pickles{};       ///< the pickles walked (zip records, side files; "" for the file itself)
  std::vector<ScannedGlobal> globals{};     ///< every global referenced, in file order
  std::vector<ScanFinding> anomalies{};     ///< crafted-file constructs and bytes that readers read two ways
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
  /// Whether the file is safe: torch.load(weights_only=True) of torch 1.13 would accept every global and every
  /// BUILD, and plain torch.load (weights_only=False) would run nothing beyond rebuilding tensors and plain
  /// containers; for .npy and .npz files the same under numpy.load(allow_pickle=True). Every global is on that
  /// allow-list, nothing looks crafted, no pickle is broken, and no reader could take the bytes for something else
  /// (two formats at once, two zip end records, zip names equal but for case). Bytes that hold no pickle (tensor
  /// data, JSON, an empty file) run nothing and are safe.
  [[nodiscard]] bool safe() const noexcept {
    return worst() <= GlobalVerdict::allowed && anomalies.empty() && errors.empty();
  }
};

/// Scans the file or folder at `path` as its readers read it, whatever its name: torch.load (zip magic, then any
/// header Python's tarfile accepts, then pickles from byte 0) and numpy.load(allow_pickle=True) (a zip's members
/// that start as .npy files, a .npy file's object pickle, else a pickle from byte 0). Every pickle they would
/// unpickle is walked opcode by opcode, never run: a torch zip file's .pkl records (any case), a legacy file's
/// pickles, a pre-0.4 tar checkpoint's members, the pickle of an object-dtype .npy file or .npz member. Bytes whose
/// walk from byte 0 breaks before any global (tensor data, text) hold no pickle; unless the format they claim is
/// a pickle, that is no error. A folder (a tensordict tree, a model directory, a Hugging Face cache) has every
/// regular file below it scanned so, by content. Tensor data is never read (except a deflated zip member's,
/// inflated to find a .npy header). Throws IoError when the path cannot be read and FormatError for a broken zip
/// index; a broken pickle, or a file of a folder that cannot be read, is a finding in the report.
[[nodiscard]] TENSORFILE_ENTRY ScanReport scan(const std::filesystem::path& path, const ScanOptions& options = {});

/// Scans a file held in memory (borrowed for the call), as scan(path) scans a file. Throws FormatError for a broken
/// zip index.
[[nodiscard]] TENSORFILE_ENTRY ScanReport scan(std::span<const std::byte> bytes, const ScanOptions& options = {});

/// Scans the file a RangeReader holds (a remote object, say; borrowed for the call), as scan(path) scans a file and
/// reading only what that scan reads: a zip (torch and .npz files) by ranges, its end records and central
/// directory, each local header, every .pkl record and the first bytes of every other member (a member that starts
/// as a .npy file: its header, and all of it when it holds an object array); any other file from byte 0 in growing
/// prefixes (1 MiB, then four times as much) until the readings are decided within one (safetensors and GGUF
/// files: the first, whatever their size). Some files are read whole because their readings need every byte: a
/// tar checkpoint, a pickle stream or an object .npy file walked to its end, a zip that opens on its end record,
/// and any file of at most 1 MiB. A reader without a size() is read whole first. Errors name reader.name(); a
/// reader's read errors reach the caller. Throws FormatError for a broken zip index.
[[nodiscard]] TENSORFILE_ENTRY ScanReport scan(RangeReader& reader, const ScanOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(scan)
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tensorfile/backends/mmap.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/numpy/npy_header.hpp"
#include "tensorfile/formats/source.hpp"
#include "tensorfile/formats/torch/detail/global_verdicts.hpp"
#include "tensorfile/formats/torch/detail/pickle_scan.hpp"

namespace tensorfile {

namespace detail {

/// "where/inner": a member inside a folder's file, or either alone.
inline std::string scan_member(const std::string& where, std::string_view inner) {
  if (where.empty()) return std::string(inner);
  if (inner.empty()) return where;
  return where + "/" + std::string(inner);
}

/// Whether `module` could name a module Python imports: dotted ASCII identifiers. A walk over data (tensor bytes,
/// text) that happens to spell a GLOBAL names none, and is not taken for a pickle.
[[nodiscard]] constexpr bool plausible_module(std::string_view module) noexcept {
  if (module.empty() || module.front() == '.' || module.back() == '.' ||
      (module.front() >= '0' && module.front() <= '9'))
    return false;
  for (char c : module) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  }
  return true;
}

/// How scan_pickles takes the bytes.
enum class PickleClaim : std::uint8_t {
  record,  ///< a zip record or side file: one pickle, bytes after its STOP are an anomaly
  stream,  ///< pickles one after another (a legacy file's five), raw data after them: a later one that breaks
           ///< before any global ends the stream
  trial,   ///< bytes that may be data: judged only when the walk reaches STOP or meets a global
};

/// Walks up to `count` pickles one after the other from byte `first` of `bytes`. Returns whether the bytes were
/// judged as pickles (always, but for a trial that found none). Sets `*truncated` (when given) where a walk ran out
/// of bytes: longer bytes (of which these are a prefix) might be judged otherwise.
inline bool scan_pickles(ScanReport& report, std::span<const std::byte> bytes, const std::string& member,
                         std::size_t count, const ScanOptions& options, std::uint64_t first = 0,
                         PickleClaim claim = PickleClaim::record, bool* truncated = nullptr) {
  std::uint64_t start = first;
  for (std::size_t i = 0; i < count && start < bytes.size(); ++i) {
    PickleScan found = scan_pickle(bytes, start);
    if (found.truncated && truncated != nullptr) *truncated = true;
    // Data: the unpickler fails before it imports anything. After a first pickle, so ends a stream of them (a
    // legacy file's raw storages follow its five; torch.load stops at a first one that is not its magic number).
    if (claim != PickleClaim::record && (claim == PickleClaim::trial || i > 0) && found.error &&
        found.extensions == 0 &&
        std::none_of(found.globals.begin(), found.globals.end(),
                     [](const PickleGlobal& global) { return plausible_module(global.module); })) {
      return i > 0;
    }
    if (i == 0) report.pickles.push_back(member);
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
    // A file of many pickles (a zip's records, a tar's members) cannot grow the report without bound either.
    constexpr std::size_t max_pickle_anomalies = 256;
    for (PickleAnomaly& anomaly : found.anomalies) {
      if (report.anomalies.size() < max_pickle_anomalies) {
        report.anomalies.push_back({member, anomaly.offset, std::move(anomaly.what)});
      } else if (report.anomalies.size() == max_pickle_anomalies) {
        report.anomalies.push_back({member, anomaly.offset, "more anomalies, not listed"});
      }
    }
    if (found.error) {
      report.errors.push_back({member, found.error->offset, found.error->what});
      return true;
    }
    start = found.end;
  }
  // A record holds one pickle; bytes after its STOP are unseen by torch.load but not by every reader.
  if (claim == PickleClaim::record && start < bytes.size()) {
    report.anomalies.push_back({member, start, std::to_string(bytes.size() - start) + " bytes after STOP"});
  }
  return true;
}

/// A .npy file or .npz member: np.save writes an object array (dtype '|O') as a pickle after the header, which
/// np.load(allow_pickle=True) runs; other dtypes hold no pickle. A header that cannot be read is an error finding.
/// `*truncated` (when given) is set where `bytes` may be a prefix too short to decide: a header that cannot be read,
/// an object array's pickle missing or cut.
inline void scan_npy(ScanReport& report, std::span<const std::byte> bytes, const std::filesystem::path& path,
                     const std::string& member, const ScanOptions& options, bool* truncated = nullptr) {
  std::optional<std::uint64_t> pickle_at;
  try {
    pickle_at = npy_object_pickle_offset(bytes, path, member);
  } catch (const Error& error) {
    if (truncated != nullptr) *truncated = true;
    report.errors.push_back({member, error.offset().value_or(0), error.what()});
    return;
  }
  if (pickle_at) {
    if (*pickle_at >= bytes.size()) {
      if (truncated != nullptr) *truncated = true;
      report.errors.push_back({member, *pickle_at, "the object array's pickle is missing"});
      return;
    }
    // np.load walks the pickle to its end, which the rest of the bytes hold.
    if (truncated != nullptr) *truncated = true;
    scan_pickles(report, bytes, member, 1, options, *pickle_at);
  }
}

inline bool starts_with_bytes(std::span<const std::byte> bytes, std::string_view magic) noexcept {
  return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}

/// Names equal but for ASCII case, which torch's miniz lookup (case-insensitive) may confuse: the first such pair.
inline std::optional<std::pair<std::string_view, std::string_view>> case_collision(
    const std::vector<ZipEntry>& entries) {
  std::vector<std::pair<std::string, std::string_view>> folded;
  folded.reserve(entries.size());
  for (const ZipEntry& entry : entries) {
    std::string lower(entry.name);
    for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    folded.emplace_back(std::move(lower), entry.name);
  }
  std::sort(folded.begin(), folded.end());
  for (std::size_t i = 1; i < folded.size(); ++i) {
    if (folded[i - 1].first == folded[i].first) return std::pair(folded[i - 1].second, folded[i].second);
  }
  return std::nullopt;
}

/// A zip: torch.load reads its data.pkl (found case-insensitively; every .pkl record is walked, in any case),
/// numpy.load every member that starts as a .npy file (whatever its name).
/// The limits a scan opens a zip with: an .npz names its members at the top level; torch's reader needs no prefix.
[[nodiscard]] inline ZipLimits scan_zip_limits() {
  ZipLimits limits;
  limits.require_prefix = false;
  return limits;
}

/// The bytes of a member of a zip read through a reader (ZipReader::open_file) that scan_zip_entries looks at: a .pkl
/// record whole; another stored member's first bytes, and all of it when it starts as a .npy file whose header
/// cannot be read from them or that holds an object array.
[[nodiscard]] inline std::vector<std::byte> scanned_member_bytes(const ZipReader& zip, const ZipEntry& entry,
                                                                 bool pickle, const std::filesystem::path& path) {
  constexpr std::uint64_t head_bytes = 4096;  // a .npy header, as np.save writes it, fits
  if (pickle || entry.size <= head_bytes) return zip.read(entry);
  std::vector<std::byte> head(static_cast<std::size_t>(head_bytes));
  zip.read_stored_range(entry, 0, head);
  if (!starts_with_bytes(head, npy_magic)) return head;
  try {
    if (!npy_object_pickle_offset(head, path, std::string(entry.name))) return head;
  } catch (const Error&) {  // a longer header, or a broken one: decided on the whole member
  }
  return zip.read(entry);
}

/// The members of an opened zip (see scan_zip): in memory, or read through the reader's read_at.
inline void scan_zip_entries(ScanReport& report, const ZipReader& zip, const std::filesystem::path& path,
                             const std::string& where, const ScanOptions& options) {
  if (zip.end_record_ambiguous()) {
    report.anomalies.push_back({where, zip.last_end_signature(),
                                std::to_string(zip.end_signatures()) +
                                    " end-of-central-directory signatures: torch's and Python's zip readers take the "
                                    "last one, which is not the record whose comment reaches the end of the file"});
  }
  if (zip.directory_apart()) {
    report.anomalies.push_back({where, 0,
                                "the central directory does not end where the end records begin: Python's zipfile "
                                "(numpy.load) reads another directory and other members than this reader"});
  }
  if (const auto collision = case_collision(zip.entries())) {
    report.anomalies.push_back({where, 0,
                                "the zip names '" + zip_impl::printable(collision->first) + "' and '" +
                                    zip_impl::printable(collision->second) +
                                    "' differ only in case: torch's reader may take either"});
  }
  for (const ZipEntry& entry : zip.entries()) {
    const std::string member = scan_member(where, entry.name);
    const bool pickle = entry.name.size() >= 4 && [&] {
      std::string tail(entry.name.substr(entry.name.size() - 4));
      for (char& c : tail) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      return tail == ".pkl";
    }();
    std::vector<std::byte> inflated;
    if (entry.method == 0 && !zip.in_memory()) {
      try {
        inflated = scanned_member_bytes(zip, entry, pickle, path);
      } catch (const Error& error) {
        report.errors.push_back({member, error.offset().value_or(entry.data_offset), error.what()});
        continue;
      }
    } else if (entry.method != 0) {
      // Deflate turns a byte into at most 1032; a size past that is a claim, never an allocation.
      if (entry.size / 1032 > entry.compressed_size + 1) {
        report.errors.push_back(
            {member, entry.data_offset,
             "the member declares " + std::to_string(entry.size) + " bytes, more than its deflate data can hold"});
        continue;
      }
      try {
        inflated = zip.read(entry);
      } catch (const Error& error) {
        report.errors.push_back({member, error.offset().value_or(entry.data_offset), error.what()});
        continue;
      }
    }
    const std::span<const std::byte> data =
        entry.method == 0 && zip.in_memory() ? zip.stored_bytes(entry) : std::span<const std::byte>(inflated);
    if (pickle) {
      scan_pickles(report, data, member, 1, options);
    } else if (starts_with_bytes(data, npy_magic)) {
      scan_npy(report, data, path, member, options);
    }
  }
}

/// A zip in memory: torch.load reads its data.pkl (found case-insensitively; every .pkl record is walked, in any
/// case), numpy.load every member that starts as a .npy file (whatever its name).
inline void scan_zip(ScanReport& report, std::span<const std::byte> bytes, const std::filesystem::path& path,
                     const std::string& where, const ScanOptions& options) {
  scan_zip_entries(report, ZipReader::open(bytes, path, scan_zip_limits()), path, where, options);
}

/// A tar number field as Python's tarfile reads it (nti): base-256 after a 0x80 or 0xff byte, else octal text up to
/// a NUL, spaces around it, as int(text, 8) takes it (a sign, "0o", single underscores between digits).
inline std::optional<std::int64_t> tar_number(std::span<const std::byte> field) {
  const auto byte = [&](std::size_t i) { return std::to_integer<std::uint8_t>(field[i]); };
  if (byte(0) == 0x80 || byte(0) == 0xff) {
    std::int64_t value = 0;
    for (std::size_t i = 1; i < field.size(); ++i) value = value * 256 + byte(i);
    if (byte(0) == 0xff) value -= std::int64_t{1} << (8 * (field.size() - 1));
    return value;
  }
  std::string_view text(reinterpret_cast<const char*>(field.data()), field.size());
  text = text.substr(0, text.find('\0'));
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  if (text.empty()) return 0;
  bool negative = false;
  if (text.front() == '+' || text.front() == '-') {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  bool digit_before = false;
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'o' || text[1] == 'O')) {
    text.remove_prefix(2);
    digit_before = true;  // "0o_7" is valid: an underscore may follow the prefix
  }
  std::int64_t value = 0;
  bool last_underscore = false, any = false;
  for (char c : text) {
    if (c == '_') {
      if (!digit_before || last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    if (c < '0' || c > '7') return std::nullopt;
    value = value * 8 + (c - '0');
    if (value > (std::int64_t{1} << 40)) return std::nullopt;  // past any 11-digit field
    digit_before = any = true;
    last_underscore = false;
  }
  if (!any || last_underscore) return std::nullopt;
  return negative ? -value : value;
}

inline constexpr std::size_t tar_block = 512;

/// Whether Python's tarfile takes the 512 bytes at `block` for a member header (TarInfo.frombuf): not all NUL, and
/// the checksum field equal to the block's byte sum with that field read as spaces, bytes unsigned or signed. No
/// "ustar" magic is needed: V7 headers pass.
inline bool tar_header(std::span<const std::byte> block) {
  if (block.size() < tar_block) return false;
  block = block.first(tar_block);
  if (std::all_of(block.begin(), block.end(), [](std::byte b) { return b == std::byte{0}; })) return false;
  const std::optional<std::int64_t> recorded = tar_number(block.subspan(148, 8));
  if (!recorded) return false;
  std::int64_t unsigned_sum = 8 * ' ', signed_sum = 8 * ' ';
  for (std::size_t i = 0; i < tar_block; ++i) {
    if (i >= 148 && i < 156) continue;
    const auto value = std::to_integer<std::uint8_t>(block[i]);
    unsigned_sum += value;
    signed_sum += static_cast<std::int8_t>(value);
  }
  return *recorded == unsigned_sum || *recorded == signed_sum;
}

/// A tar file torch.load accepts (checkpoints of torch before 0.4): it unpickles the members storages, tensors
/// and pickle (the last of each name, as tarfile's getmember finds it). Headers are followed while Python's test
/// passes; storages and tensors hold a pickle per entry between raw bytes, of which the first is walked, so the
/// file is never called safe.
inline void scan_tar(ScanReport& report, std::span<const std::byte> bytes, const std::string& where,
                     const ScanOptions& options) {
  struct Member {
    std::uint64_t data = 0, size = 0;
    bool found = false;
  };
  constexpr std::string_view names[] = {"storages", "tensors", "pickle"};
  Member members[3];
  for (std::uint64_t at = 0; at <= bytes.size() && bytes.size() - at >= tar_block;) {
    const std::span<const std::byte> block = bytes.subspan(static_cast<std::size_t>(at), tar_block);
    if (!tar_header(block)) break;
    std::string_view name(reinterpret_cast<const char*>(block.data()), 100);
    name = name.substr(0, name.find('\0'));
    const std::optional<std::int64_t> size = tar_number(block.subspan(124, 12));
    if (!size || *size < 0) break;
    const std::uint64_t data = at + tar_block;
    const std::uint64_t held = std::min<std::uint64_t>(static_cast<std::uint64_t>(*size), bytes.size() - data);
    for (std::size_t i = 0; i < 3; ++i) {
      if (name == names[i]) members[i] = {data, held, true};
    }
    const std::uint64_t padded = (static_cast<std::uint64_t>(*size) + tar_block - 1) / tar_block * tar_block;
    if (padded > bytes.size() - data) break;
    at = data + padded;
  }
  report.anomalies.push_back({where, 0,
                              "torch.load reads the file as a tar checkpoint (torch before 0.4; Python's tarfile "
                              "accepts its first header): the pickles after raw data in its storages and tensors "
                              "members are not walked"});
  for (std::size_t i = 0; i < 3; ++i) {
    if (!members[i].found) continue;
    const auto end = static_cast<std::size_t>(members[i].data + members[i].size);
    scan_pickles(report, bytes.first(end), scan_member(where, names[i]), 1, options, members[i].data,
                 i == 2 ? PickleClaim::record : PickleClaim::stream);
  }
}

/// One file's bytes, read as its readers read them (see scan()). `where` names the file inside a scanned folder
/// ("" for the file scanned itself); `path` names it in errors. Returns the format the file is reported as. With
/// `truncated` given, `bytes` may be a prefix of the file: `*truncated` is set when the readings need more of it.
inline FileFormat scan_content(ScanReport& report, std::span<const std::byte> bytes, const std::filesystem::path& path,
                               const std::string& where, const ScanOptions& options, bool* truncated = nullptr) {
  FileFormat format = detect_format(bytes);
  // torch.load takes a file for a zip by its first four bytes alone, and then reads nothing else; numpy.load also
  // takes an empty archive's end record.
  if (starts_with_bytes(bytes, "PK\x03\x04") || starts_with_bytes(bytes, "PK\x05\x06")) {
    if (truncated != nullptr) {  // the end records are at the end: a prefix holds none of them
      *truncated = true;
      return format;
    }
    scan_zip(report, bytes, path, where, options);
    if (starts_with_bytes(bytes, "PK\x03\x04")) return format;
  }
  std::vector<std::string_view> readings;  // what the bytes are to some reader
  if (format == FileFormat::safetensors) readings.emplace_back("a safetensors file");
  if (format == FileFormat::gguf) readings.emplace_back("a GGUF file");  // metadata and tensor data: no code
  if (starts_with_bytes(bytes, npy_magic)) {
    readings.emplace_back("a .npy file");
    scan_npy(report, bytes, path, where, options, truncated);
  }
  if (tar_header(bytes)) {
    readings.emplace_back("a tar checkpoint");
    if (truncated != nullptr) *truncated = true;  // its members' headers are followed through the file
    scan_tar(report, bytes, where, options);
  }
  // torch.load's legacy path, and numpy.load(allow_pickle=True) for anything that is neither zip nor .npy, unpickle
  // from byte 0: judged as pickles when the walk reaches STOP or meets a global; otherwise the unpickler fails before
  // it imports anything, whatever the first bytes looked like (tensor data may start with PROTO's 0x80).
  if (!bytes.empty() && scan_pickles(report, bytes, where, 5, options, 0, PickleClaim::trial, truncated)) {
    readings.emplace_back("a pickle stream");
  }
  if (readings.size() > 1) {
    std::string what = "the bytes are ";
    for (std::size_t i = 0; i < readings.size(); ++i) {
      what += i == 0 ? "" : i + 1 == readings.size() ? " and " : ", ";
      what += readings[i];
    }
    report.anomalies.push_back({where, 0, what + ": readers disagree on what the file holds"});
  }
  const bool pickles = std::find(readings.begin(), readings.end(), "a pickle stream") != readings.end() ||
                       std::find(readings.begin(), readings.end(), "a tar checkpoint") != readings.end();
  return format == FileFormat::unknown && pickles ? FileFormat::torch_legacy : format;
}

/// Calls `use` with the bytes of the regular file `path` (opened as `file`, `size` bytes): a small file is read whole
/// (cheaper than mapping and unmapping it), a large one mapped so that only the pages of its index and pickles are
/// touched.
template <class Use>
void with_file_bytes(const FileHandle& file, std::uint64_t size, Use&& use) {
  constexpr std::uint64_t read_whole_below = std::uint64_t{1} << 20;
  if (size == 0) {
    use(std::span<const std::byte>());
  } else if (size < read_whole_below) {
    // The file's real size, under 1 MiB; not zeroed first, the read fills it.
    const auto bytes = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(size));
    const std::span<std::byte> whole(bytes.get(), static_cast<std::size_t>(size));
    file.read_exact(0, whole);
    use(std::span<const std::byte>(whole));
  } else {
    const Storage mapping(MmapBackend(file, static_cast<std::size_t>(size), MapMode::read_only));
    use(std::span<const std::byte>(mapping.data(), mapping.size_bytes()));
  }
}

/// Every regular file below `root`, by content, in path order; one that cannot be read is an error finding.
inline void scan_tree(ScanReport& report, const std::filesystem::path& root, const ScanOptions& options) {
  std::vector<std::filesystem::path> files;
  std::error_code listing;
  auto it = std::filesystem::recursive_directory_iterator(root, {}, listing);
  for (; !listing && it != std::filesystem::recursive_directory_iterator(); it.increment(listing)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored)) files.push_back(it->path());
  }
  if (listing) throw IoError("cannot list the folder", listing.value(), {.file = root});
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    const std::string member = std::filesystem::relative(file, root).generic_string();
    try {
      const FileHandle handle = FileHandle::try_open_at(AT_FDCWD, file.c_str(), O_RDONLY | O_NONBLOCK, 0, file);
      if (!handle.valid()) throw IoError("cannot open for reading", errno, {.file = file});
      struct stat info {};
      if (::fstat(handle.fd(), &info) != 0) throw IoError("cannot stat", errno, {.file = file});
      if (!S_ISREG(info.st_mode)) continue;
      with_file_bytes(handle, static_cast<std::uint64_t>(info.st_size), [&](std::span<const std::byte> bytes) {
        (void)scan_content(report, bytes, file, member, options);
      });
    } catch (const Error& error) {
      report.errors.push_back({member, error.offset().value_or(0), error.message()});
    }
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
    report.format = FileFormat::tensordict;  // as detect_format() names any folder
    detail::scan_tree(report, path, options);
    return report;
  }
  if (!S_ISREG(info.st_mode)) throw ArgumentError("is not a regular file; expected a regular file", {.file = path});
  detail::with_file_bytes(file, static_cast<std::uint64_t>(info.st_size), [&](std::span<const std::byte> bytes) {
    report.format = detail::scan_content(report, bytes, path, "", options);
  });
  return report;
}

TENSORFILE_ENTRY ScanReport scan(std::span<const std::byte> bytes, const ScanOptions& options) {
  ScanReport report;
  report.format = detail::scan_content(report, bytes, {}, "", options);
  return report;
}

TENSORFILE_ENTRY ScanReport scan(RangeReader& reader, const ScanOptions& options) {
  const detail::SourceBytes source(Source::reader(reader), false);
  const std::filesystem::path name = source.name();
  constexpr std::uint64_t first_prefix = std::uint64_t{1} << 20;
  std::vector<std::byte> bytes(static_cast<std::size_t>(std::min(source.size(), first_prefix)));
  source.read_exact(0, bytes);
  if (bytes.size() < source.size() && detail::starts_with_bytes(bytes, "PK\x03\x04")) {
    ScanReport report;
    report.format = detect_format(bytes);
    const detail::ZipReader zip = detail::ZipReader::open_file(
        source.size(), name,
        [&source](std::uint64_t offset, std::span<std::byte> out) { source.read_exact(offset, out); },
        detail::scan_zip_limits());
    detail::scan_zip_entries(report, zip, name, "", options);
    return report;
  }
  while (true) {
    ScanReport report;
    bool truncated = false;  // a prefix: whether its readings need more of the file
    const bool whole = bytes.size() == source.size();
    report.format = detail::scan_content(report, bytes, name, "", options, whole ? nullptr : &truncated);
    if (!truncated) return report;
    // Grown from what was read (never to a size() merely claimed): four times as much, or the rest.
    const std::size_t have = bytes.size();
    bytes.resize(static_cast<std::size_t>(std::min<std::uint64_t>(source.size(), std::uint64_t{have} * 4)));
    source.read_exact(have, std::span(bytes).subspan(have));
  }
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(scan)
