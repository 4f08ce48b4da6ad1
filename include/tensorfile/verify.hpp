// SPDX-License-Identifier: MIT
/// @file
/// A full structural and bounds check of a torch file or tensordict tree, returned as a report (what `tensorfile
/// verify` prints). It sits above the formats because it dispatches over all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/formats/format.hpp"

namespace tensorfile {

class RangeReader;

/// What verify() checks beyond the structure.
struct VerifyOptions {
  bool crc = true;  ///< check every zip record's CRC-32 (reads every byte of a torch zip file)
};

/// What verify() found. The counts describe what was checked; those of another format stay 0.
struct VerifyReport {
  FileFormat format = FileFormat::unknown;  ///< the format detect_format() found
  std::vector<std::string> errors{};        ///< every error found, worded as the library's exceptions word them
  std::size_t records = 0;                  ///< torch zip: records (zip entries) in the archive
  std::uint64_t record_bytes = 0;           ///< torch zip: their bytes once decompressed
  std::size_t storage_records = 0;          ///< torch zip: records under data/
  std::size_t storages_used = 0;            ///< torch zip: storage records that data.pkl uses
  std::size_t tensors = 0;                  ///< torch: tensors in the loaded object tree
  std::size_t leaves = 0;                   ///< tensordict: leaves of the tree
  std::uint64_t leaf_bytes = 0;             ///< tensordict: bytes of its tensor leaves

  /// Whether no error was found.
  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

/// Checks the file or tree at `path` in full and reports every error instead of stopping at the first.
/// Torch zip files: the zip index and every record (sizes, overlaps, CRC-32 of all bytes), the version and
/// byteorder records, data.pkl, each storage record against the size its tensors declare and each view against
/// its storage. Legacy files: the pickles and every storage's length. Tensordict trees: every meta.json and
/// every data file's length. Safetensors files: the
/// header and the data section's tiling (as load_safetensors checks them). .npy files: the header and the data's
/// length; .npz files: every member's, and every member's CRC-32. GGUF files: the header in full (counts, types,
/// alignment, each tensor's offset aligned, inside the file and overlapping no other). Objects kept opaque (numpy
/// arrays, modules) are not errors. A path of unknown format gets the error load_torch() gives it. Torch zip records
/// are read for their CRC-32 in pieces of at most 1 MiB; other tensor data is mapped, never copied. Throws IoError only
/// when a torch zip file cannot be opened; every other problem is in the report.
[[nodiscard]] TENSORFILE_ENTRY VerifyReport verify(const std::filesystem::path& path,
                                                   const VerifyOptions& options = {});

/// Checks the file a RangeReader holds (a remote object, say; borrowed for the call) as verify(path) checks a file,
/// the errors naming reader.name(). Safetensors, .npy and GGUF files are read by ranges, as open() reads them: the
/// header (for GGUF every range its parser asks for), their data never (its extent is checked against size()).
/// Torch zip and legacy files and .npz archives are read whole into one heap buffer first, since they need every
/// byte: each record's CRC-32 covers all of them, and their loaders parse memory. A reader without a size() is read
/// whole. A tensordict tree is no single file: open a folder for it. A read that fails (the network, a server's
/// error) is in the report, as are the bytes of an unknown format (load_torch()'s error).
[[nodiscard]] TENSORFILE_ENTRY VerifyReport verify(RangeReader& reader, const VerifyOptions& options = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(verify)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/checkpoint.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/value_print.hpp"
#include "tensorfile/detail/posix/file.hpp"
#include "tensorfile/detail/zip/reader.hpp"
#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/gguf/load.hpp"
#include "tensorfile/formats/numpy/npy.hpp"
#include "tensorfile/formats/numpy/npz.hpp"
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/source.hpp"
#include "tensorfile/formats/tensordict/load_memmap.hpp"
#include "tensorfile/formats/torch/archive.hpp"
#include "tensorfile/formats/torch/load.hpp"

namespace tensorfile {

namespace detail {

/// Runs one check; an Error it throws becomes a finding. Returns whether the check passed.
template <class Check>
bool verify_step(VerifyReport& report, Check&& check) {
  try {
    check();
    return true;
  } catch (const Error& error) {
    report.errors.push_back(error.message());
    return false;
  }
}

/// The pickle, every record it names and every view, by a meta load that reads no tensor data; for a zip file
/// counts the storage records the pickle uses. `input` is a path or the file's bytes in memory.
template <class Input>
void verify_torch_objects(VerifyReport& report, const Input& input) {
  LoadOptions options{.map_location = Device::meta(), .mmap = MapMode::copy_on_write, .strict = false};
  if (report.format == FileFormat::torch_zip) {  // the bytes handed over are views of the mapping no one reads
    options.map_location = MapLocation::Function([&report](const Storage& bytes, std::string_view) {
      ++report.storages_used;
      return std::optional<Storage>(meta_storage(bytes.size_bytes()));
    });
  }
  verify_step(report, [&] { report.tensors = named_tensors(load_torch(input, options)).size(); });
}

/// The zip index and every record's CRC-32 of an archive opened by `open_zip` (on a file or in memory), then the
/// objects of `input`.
template <class OpenZip, class Input>
void verify_torch_zip_with(VerifyReport& report, const OpenZip& open_zip, const Input& input,
                           const VerifyOptions& options) {
  std::optional<ZipReader> zip;
  if (!verify_step(report, [&] { zip.emplace(open_zip()); })) {
    return;  // no index: nothing else can be found
  }
  for (const ZipEntry& entry : zip->entries()) {
    if (options.crc) verify_step(report, [&] { zip->verify_crc(entry); });
    report.record_bytes += entry.size;
    if (std::string_view(entry.name).substr(zip->prefix().size() + 1).starts_with("data/")) ++report.storage_records;
  }
  report.records = zip->entries().size();
  verify_torch_objects(report, input);
}

/// The zip index and every record's CRC-32, read with pread in bounded pieces: nothing mapped, so a file
/// truncated meanwhile is a finding, never SIGBUS, and a record's size never sets an allocation.
inline void verify_torch_zip(VerifyReport& report, const std::filesystem::path& path, const VerifyOptions& options) {
  const FileHandle file = FileHandle::open(path, OpenMode::read);
  verify_torch_zip_with(
      report, [&] { return open_zip_file(file); }, path, options);
}

inline void verify_tensordict(VerifyReport& report, const std::filesystem::path& path) {
  verify_step(report, [&] {
    // Mapped for real: every data file is opened and its length checked against meta.json.
    const TensorDict td = load_memmap(path, {.mmap = MapMode::read_only});
    td.for_each_leaf([&](const NestedKey&, const Entry& leaf) {
      ++report.leaves;
      if (leaf.is_tensor()) report.leaf_bytes += leaf.as_tensor().nbytes();
    });
  });
}

/// verify() of a file held in memory (a reader read whole), named `name`: the formats that need every byte.
inline void verify_memory(VerifyReport& report, std::span<const std::byte> bytes, const std::string& name,
                          const VerifyOptions& options) {
  switch (report.format) {
    case FileFormat::torch_zip:
      verify_torch_zip_with(
          report, [&] { return ZipReader::open(bytes, name); }, bytes, options);
      break;
    case FileFormat::npz:
      verify_step(report, [&] {
        report.tensors = named_tensors(load_npz(bytes, {.mmap = MapMode::read_only, .verify_crc = true})).size();
      });
      break;
    default:  // torch_legacy, unknown: the pickles (unknown bytes get load_torch()'s error)
      verify_torch_objects(report, bytes);
      break;
  }
}

}  // namespace detail

TENSORFILE_ENTRY VerifyReport verify(RangeReader& reader, const VerifyOptions& options) {
  VerifyReport report;
  std::optional<detail::SourceBytes> source;
  std::vector<std::byte> head;
  const bool opened = detail::verify_step(report, [&] {
    source.emplace(Source::reader(reader), false);
    head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(source->size(), format_sniff_bytes)));
    source->read_exact(0, head);
  });
  if (!opened) return report;
  report.format = detect_format(head);
  const std::string name = source->name();
  switch (report.format) {
    case FileFormat::safetensors:  // the header in full and the data offsets' tiling, as open() reads them
    case FileFormat::npy:          // the header, and the data's length against size()
    case FileFormat::gguf:         // the header in full: offsets aligned, inside the file, not overlapping
      detail::verify_step(report, [&] {
        report.tensors =
            open(Source::reader(reader), {.map_location = Device::meta(), .strict = false}).entries().size();
      });
      break;
    default: {
      Storage whole;
      if (!detail::verify_step(report, [&] { whole = source->whole(); })) break;
      detail::verify_memory(report, {whole.data(), whole.size_bytes()}, name, options);
      break;
    }
  }
  return report;
}

TENSORFILE_ENTRY VerifyReport verify(const std::filesystem::path& path, const VerifyOptions& options) {
  VerifyReport report;
  report.format = detect_format(path);
  switch (report.format) {
    case FileFormat::torch_zip: detail::verify_torch_zip(report, path, options); break;
    case FileFormat::torch_legacy: detail::verify_torch_objects(report, path); break;
    case FileFormat::tensordict: detail::verify_tensordict(report, path); break;
    case FileFormat::safetensors:  // the header in full, and the data section against it; data mapped, not read
      detail::verify_step(
          report, [&] { report.tensors = named_tensors(load_safetensors(path, {.mmap = MapMode::read_only})).size(); });
      break;
    case FileFormat::npy:  // the header, and the data's length against it; data mapped, not read
      detail::verify_step(report, [&] {
        (void)load_npy(path, {.mmap = MapMode::read_only});
        report.tensors = 1;
      });
      break;
    case FileFormat::npz:  // every member's header and length, and every CRC-32
      detail::verify_step(report, [&] {
        report.tensors = named_tensors(load_npz(path, {.mmap = MapMode::read_only, .verify_crc = true})).size();
      });
      break;
    case FileFormat::gguf:  // the header in full: offsets aligned, inside the file, not overlapping; data mapped
      detail::verify_step(
          report, [&] { report.tensors = named_tensors(load_gguf(path, {.mmap = MapMode::read_only})).size(); });
      break;
    case FileFormat::unknown:
      detail::verify_step(report, [&] { (void)load_torch(path, {.mmap = MapMode::copy_on_write}); });
      break;
  }
  return report;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(verify)
