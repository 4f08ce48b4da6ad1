// SPDX-License-Identifier: MIT
// tensorfile verify: a full structural and bounds check of a checkpoint in any format, CRCs included.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tensorfile/checkpoint.hpp>
#include <tensorfile/core/text.hpp>
#include <tensorfile/scan.hpp>
#include <tensorfile/verify.hpp>

#include "commands.hpp"
#include "formats.hpp"
#include "numpy_commands.hpp"
#include "scan_report.hpp"
#include "urls.hpp"

namespace tensorfile::cli {

namespace {

/// The one-line summary of what a clean verify checked.
std::string checked_summary(const VerifyReport& report) {
  const auto tensors = fmt::format("; {} tensor{}", report.tensors, report.tensors == 1 ? "" : "s");
  switch (report.format) {
    case FileFormat::torch_zip: {
      std::string text =
          fmt::format("torch-zip, {} records ({}), every CRC-32", report.records, human_bytes(report.record_bytes)) +
          tensors;
      if (report.storages_used < report.storage_records) {
        text += fmt::format("; {} of {} storage records are not used by data.pkl",
                            report.storage_records - report.storages_used, report.storage_records);
      }
      return text;
    }
    case FileFormat::torch_legacy: return "torch-legacy, every storage's length" + tensors;
    case FileFormat::tensordict:
      return fmt::format("tensordict, every meta.json and data file; {} lea{} ({})", report.leaves,
                         report.leaves == 1 ? "f" : "ves", human_bytes(report.leaf_bytes));
    case FileFormat::safetensors: return "safetensors, the header and the data offsets" + tensors;
    case FileFormat::npy: return "npy, the header and the data's length" + tensors;
    case FileFormat::npz: return "npz, every member's header, length and CRC-32" + tensors;
    case FileFormat::gguf: return "gguf, the header and every tensor's offset, alignment, size and overlap" + tensors;
    case FileFormat::unknown: break;
  }
  return "";
}

}  // namespace

constexpr OptionSpec verify_options[] = {
    {"allow", "MODULE.NAME",
     "count this global as safe for weights_only (repeatable; commas list several; never a dangerous one)", true},
    {"json", "", "print the safety scan's report as JSON"},
    {"allow-unlisted", "", "sharded PATH: a shard's tensors that its index does not list are not errors"},
};

const CommandSpec verify_spec{
    .name = "verify",
    .operands = "PATH",
    .min_operands = 1,
    .max_operands = 1,
    .options = verify_options,
    .summary =
        "Check a torch file, safetensors file, sharded checkpoint, .npy, .npz or GGUF file or tensordict tree in\n"
        "full: "
        "structure, every record and its CRC-32, every view.",
    .details =
        "PATH may be a URL (http://, https://, s3://; built with TENSORFILE_REMOTE, S3 from the AWS_* environment\n"
        "variables): safetensors, .npy and GGUF files are checked by ranged reads of their headers; torch files\n"
        "and .npz archives are downloaded whole into memory (every CRC-32 needs every byte); a *.index.json or a\n"
        "model folder ending in '/' is checked against its shards, then each shard by its URL.\n"
        "\n"
        "Torch zip files: the zip index and every record (sizes, overlaps, CRC-32 of all bytes), data.pkl, each\n"
        "storage record against the size its tensors declare, and each view against its storage. Legacy files:\n"
        "the pickles and every storage's length. Tensordict trees: every meta.json and every data file's length.\n"
        "Safetensors files: the header and the data offsets' tiling. Sharded checkpoints (*.index.json or a model\n"
        "directory): every shard as above, then the index against them (names missing, in two shards, unlisted).\n"
        ".npy files: the header and the data's length; .npz files: every member's header, length and CRC-32.\n"
        "GGUF files: the header (counts, types, alignment) and every tensor's offset, alignment, size and overlap.\n"
        "Objects tensorfile keeps opaque (numpy arrays, modules) are not errors.\n"
        "\n"
        "Every pickle is also scanned for what torch.load would import: a dangerous global (os.system, eval...)\n"
        "prints \"UNSAFE: calls os.system (archive/data.pkl, byte 34)\", one weights_only refuses prints\n"
        "\"NOT SAFE FOR torch.load(weights_only=True): NAME\" unless --allow lists it; both exit 1.\n"
        "\n"
        "Exit status 0 and a one-line summary on stdout when the file is clean; otherwise every error found on\n"
        "stderr (as the library words it) and exit status 1.",
};

namespace {

/// The safety scan of `file` (any format: torch.load and numpy.load read a file by its bytes): its reasons not to be
/// safe, each line led by `shown`, printed on stdout, and its JSON with --json. Returns whether it is safe. A file
/// the scan cannot read (a broken zip index) adds that error to `errors`, unless the check found it already.
bool scan_safe(const Args& args, const std::filesystem::path& file, const std::string& shown,
               std::vector<std::string>& errors) {
  ScanReport scanned;
  try {
    scanned = scan(file, scan_options(args));
  } catch (const Error& error) {
    if (std::find(errors.begin(), errors.end(), error.message()) == errors.end()) errors.push_back(error.message());
    return false;
  }
  if (args.flag("json")) fmt::print("{}\n", scan_json(file.string(), scanned));
  const std::vector<std::string> unsafe = unsafe_lines(scanned);
  for (const std::string& line : unsafe) fmt::print("{}: {}\n", shown, line);
  return unsafe.empty();
}

/// verify() of every shard an index lists, then the index against them (a load on meta: names missing,
/// repeated or unlisted). The errors of all of them together.
std::vector<std::string> verify_shards(const std::filesystem::path& path, const StateDictLayout& layout,
                                       bool allow_unlisted, std::size_t& tensors) {
  std::vector<std::string> errors;
  for (const std::filesystem::path& shard : layout.files) {
    const VerifyReport report = verify(shard);
    errors.insert(errors.end(), report.errors.begin(), report.errors.end());
  }
  if (!errors.empty()) return errors;
  try {
    std::vector<FormatError> mismatches;  // every name missing, repeated or unlisted, one error each
    tensors = load_state_dict(path, {.map_location = "meta",
                                     .strict = false,
                                     .sharded = {.allow_unlisted = allow_unlisted, .mismatches = &mismatches}})
                  .as_dict()
                  .size();
    for (const FormatError& mismatch : mismatches) errors.push_back(mismatch.message());
  } catch (const Error& error) {
    errors.push_back(error.message());
  }
  return errors;
}

/// The safety scan of the object `reader` holds, as scan_safe() scans a file; its lines led by `shown`.
bool scan_reader_safe(const Args& args, RangeReader& reader, const std::string& shown,
                      std::vector<std::string>& errors) {
  try {
    const ScanReport scanned = scan(reader, scan_options(args));
    if (args.flag("json")) fmt::print("{}\n", scan_json(reader.name(), scanned));
    const std::vector<std::string> unsafe = unsafe_lines(scanned);
    for (const std::string& line : unsafe) fmt::print("{}: {}\n", shown, line);
    return unsafe.empty();
  } catch (const Error& error) {
    if (std::find(errors.begin(), errors.end(), error.message()) == errors.end()) errors.push_back(error.message());
    return false;
  }
}

/// Prints the outcome as run_verify does: OK and `summary` on stdout, or every error on stderr.
int verify_outcome(const std::string& shown, const std::vector<std::string>& errors, bool safe,
                   const std::string& summary) {
  if (errors.empty() && !safe) return exit_file_error;
  if (errors.empty()) {
    fmt::print("{}: OK: {}\n", shown, summary);
    return exit_ok;
  }
  for (const std::string& error : errors) fmt::print(stderr, "{}\n", escape_controls(with_flag_names(error)));
  fmt::print(stderr, "{}: {} error{} found\n", shown, errors.size(), errors.size() == 1 ? "" : "s");
  return exit_file_error;
}

/// verify of the URL of a sharded index or a model folder (ending in '/'): open() checks the index against its
/// shards (every mismatch an error), then each shard (a folder's one file) is verified and scanned by its URL, the
/// index's folder and the shard's name.
int verify_url_index(const Args& args, const std::string& url) {
  const std::string shown = escape_controls(redacted_url(url));
  std::vector<std::string> errors;
  std::vector<FormatError> mismatches;
  std::optional<Checkpoint> checkpoint;
  try {
    checkpoint.emplace(
        open(url, {.map_location = Device::meta(),
                   .strict = false,
                   .sharded = {.allow_unlisted = args.flag("allow-unlisted"), .mismatches = &mismatches}}));
  } catch (const Error& error) {
    errors.push_back(error.message());
  }
  for (const FormatError& mismatch : mismatches) errors.push_back(mismatch.message());
  if (!checkpoint) return verify_outcome(shown, errors, true, "");
  std::vector<std::string> files;  // each shard's name in the index's order, once
  if (checkpoint->sharded()) {
    for (const CheckpointEntry& entry : checkpoint->entries()) {
      if (!entry.location) continue;
      const std::string name = entry.location->file.filename().string();
      if (std::find(files.begin(), files.end(), name) == files.end()) files.push_back(name);
    }
  } else {
    files.push_back(std::filesystem::path(checkpoint->name()).filename().string());
  }
  const std::string plain = url.substr(0, url.find('?'));  // a query signs the index alone
  const std::string folder = plain.substr(0, plain.rfind('/'));
  bool safe = true;
  VerifyReport last;
  for (const std::string& file : files) {
    const std::string shard = folder + "/" + file;
    try {
      const std::unique_ptr<RangeReader> reader = open_url_reader(shard);
      last = verify(*reader);
      errors.insert(errors.end(), last.errors.begin(), last.errors.end());
      safe = scan_reader_safe(args, *reader, escape_controls(redacted_url(shard)), errors) && safe;
    } catch (const Error& error) {
      errors.push_back(error.message());
    }
  }
  const std::size_t tensors = checkpoint->entries().size();
  const std::string summary =
      checkpoint->sharded() ? fmt::format("{}, {} shard{} each checked in full, the index against them; {} tensor{}",
                                          format_label(*checkpoint), files.size(), files.size() == 1 ? "" : "s",
                                          tensors, tensors == 1 ? "" : "s")
                            : checked_summary(last);
  return verify_outcome(shown, errors, safe, summary);
}

/// verify of a URL: the object read through the library's RangeReader forms of verify() and scan() (torch and .npz
/// files whole, as their checks need every byte; the others by ranges).
int verify_url(const Args& args, const std::string& url) {
  const std::string shown = escape_controls(redacted_url(url));
  const std::unique_ptr<RangeReader> reader = open_url_reader(url);
  const VerifyReport report = verify(*reader);
  std::vector<std::string> errors = report.errors;
  const bool safe = scan_reader_safe(args, *reader, shown, errors);
  std::string summary = checked_summary(report);
  if (errors.empty() && report.format == FileFormat::npy) {  // worded as verify_numpy words a file's
    const CheckpointEntry entry = open(Source::reader(*reader)).entries().front();
    summary = fmt::format("numpy .npy, {} {}, header and data size", dtype_name(entry.dtype), entry.shape);
  } else if (report.format == FileFormat::npz) {
    summary = fmt::format("numpy .npz, {} arrays, every CRC-32 and .npy header", report.tensors);
  }
  return verify_outcome(shown, errors, safe, summary);
}

}  // namespace

int run_verify(const Args& args) {
  require_url_support(args.operands()[0]);
  const std::string& operand = args.operands()[0];
  if (is_url(operand)) {
    const std::string plain = operand.substr(0, operand.find('?'));
    return plain.ends_with(".json") || plain.ends_with('/') ? verify_url_index(args, operand)
                                                            : verify_url(args, operand);
  }
  const std::filesystem::path path = args.operands()[0];
  const std::string shown = escape_controls(args.operands()[0]);
  std::vector<std::string> errors;
  // The library's layout, not open(): a damaged file must reach verify()'s checks, which open() would refuse first.
  const StateDictLayout layout = resolve_state_dict(path);
  if (layout.format == FileFormat::npy || layout.format == FileFormat::npz) {
    // An object array's pickle runs under numpy.load(allow_pickle=True); one found unsafe is not checked further
    // (the check would print OK after the reasons). One the scan cannot read gets the check's error.
    if (!scan_safe(args, path, shown, errors) && errors.empty()) return exit_file_error;
    return verify_numpy(args, layout.files.front(), layout.format);
  }
  bool safe = true;  // the safety scan's findings are printed on stdout
  std::string summary;
  if (layout.sharded()) {
    std::size_t tensors = 0;
    errors = verify_shards(path, layout, args.flag("allow-unlisted"), tensors);
    // Every file the index names is scanned, whatever its name or format.
    for (const std::filesystem::path& shard : layout.files) {
      safe = scan_safe(args, shard, escape_controls(shard.string()), errors) && safe;
    }
    summary = fmt::format("{}, {} shard{} each checked in full, the index against them; {} tensor{}",
                          state_dict_format_name(layout), layout.files.size(), layout.files.size() == 1 ? "" : "s",
                          tensors, tensors == 1 ? "" : "s");
  } else {
    const std::filesystem::path& file = layout.files.front();  // a model directory: its file
    const VerifyReport report = verify(file);
    errors = report.errors;
    summary = checked_summary(report);
    safe = scan_safe(args, file, shown, errors);
  }
  // A folder, or the folder of an index: what interrupted saves left there is reported, not an error.
  if (std::filesystem::is_directory(path) || layout.sharded()) {
    const std::filesystem::path folder = std::filesystem::is_directory(path) ? path : path.parent_path();
    for (const std::string& line : leftover_lines(folder.empty() ? std::filesystem::path(".") : folder)) {
      fmt::print("{}: {}\n", shown, line);
    }
  }
  if (errors.empty() && !safe) return exit_file_error;
  if (errors.empty()) {
    fmt::print("{}: OK: {}\n", shown, summary);
    return exit_ok;
  }
  for (const std::string& error : errors) fmt::print(stderr, "{}\n", escape_controls(with_flag_names(error)));
  fmt::print(stderr, "{}: {} error{} found\n", shown, errors.size(), errors.size() == 1 ? "" : "s");
  return exit_file_error;
}

}  // namespace tensorfile::cli
