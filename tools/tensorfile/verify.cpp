// SPDX-License-Identifier: MIT
// tensorfile verify: a full structural and bounds check of a torch file or tensordict tree, CRCs included.
#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

#include <tensorfile/core/meta_backend.hpp>
#include <tensorfile/backends/mmap.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/detail/zip/reader.hpp>

#include "commands.hpp"
#include "formats.hpp"

namespace tensorfile::cli {

namespace {

/// What verify found: the errors, and a summary of what was checked when there were none.
struct Findings {
  std::vector<std::string> errors;
  std::string checked;
};

/// Runs one check; an Error it throws is a finding, and the check is reported as failed.
template <class Check>
bool attempt(Findings& findings, Check&& check) {
  try {
    check();
    return true;
  } catch (const Error& error) {
    findings.errors.emplace_back(error.what());
    return false;
  }
}

/// The pickle, every record it names and every view, by a meta load (no tensor data read); counts the records used.
std::size_t check_objects(Findings& findings, const std::filesystem::path& path, bool zip) {
  std::size_t storages = 0;
  std::size_t tensors = 0;
  LoadOptions options{.map_location = Device::meta(), .mmap = MapMode::copy_on_write, .strict = false};
  if (zip) {  // counts the records the pickle uses; their bytes are views of the mapping that no one reads
    options.map_location = MapLocation::Function([&storages](const Storage& bytes, std::string_view) {
      ++storages;
      return std::optional<Storage>(meta_storage(bytes.size_bytes()));
    });
  }
  attempt(findings, [&] { tensors = named_tensors(load(path, options)).size(); });
  findings.checked += fmt::format("; {} tensor{}", tensors, tensors == 1 ? "" : "s");
  return storages;
}

void verify_zip(Findings& findings, const std::filesystem::path& path) {
  const Storage mapping = mmap_storage(path, MapMode::read_only);
  std::optional<detail::ZipReader> zip;
  if (!attempt(findings, [&] { zip.emplace(detail::ZipReader::open({mapping.data(), mapping.size_bytes()}, path)); })) {
    return;  // no index: nothing else can be found
  }
  std::size_t data_records = 0;
  std::uint64_t bytes = 0;
  for (const detail::ZipEntry& entry : zip->entries()) {
    attempt(findings, [&] { zip->verify_crc(entry); });
    bytes += entry.size;
    if (std::string_view(entry.name).substr(zip->prefix().size() + 1).starts_with("data/")) ++data_records;
  }
  findings.checked = fmt::format("torch-zip, {} records ({}), every CRC-32", zip->entries().size(), human_bytes(bytes));
  const std::size_t used = check_objects(findings, path, true);
  if (findings.errors.empty() && used < data_records) {
    findings.checked +=
        fmt::format("; {} of {} storage records are not used by data.pkl", data_records - used, data_records);
  }
}

void verify_legacy(Findings& findings, const std::filesystem::path& path) {
  findings.checked = "torch-legacy, every storage's length";
  check_objects(findings, path, false);
}

void verify_tensordict(Findings& findings, const std::filesystem::path& path) {
  std::size_t leaves = 0;
  std::uint64_t bytes = 0;
  attempt(findings, [&] {
    // Mapped for real: every data file is opened and its length checked against meta.json.
    const TensorDict td = load_memmap(path, {.access = MapMode::read_only});
    td.for_each_leaf([&](const NestedKey&, const Entry& leaf) {
      ++leaves;
      if (leaf.is_tensor()) bytes += leaf.as_tensor().nbytes();
    });
  });
  findings.checked = fmt::format("tensordict, every meta.json and data file; {} lea{} ({})", leaves,
                                 leaves == 1 ? "f" : "ves", human_bytes(bytes));
}

}  // namespace

const CommandSpec verify_spec{
    .name = "verify",
    .operands = "PATH",
    .min_operands = 1,
    .max_operands = 1,
    .options = {},
    .summary = "Check a torch file or tensordict tree in full: structure, every record and its CRC-32, every view.",
    .details =
        "Torch zip files: the zip index and every record (sizes, overlaps, CRC-32 of all bytes), data.pkl, each\n"
        "storage record against the size its tensors declare, and each view against its storage. Legacy files:\n"
        "the pickles and every storage's length. Tensordict trees: every meta.json and every data file's length.\n"
        "Objects tensorfile keeps opaque (numpy arrays, modules) are not errors.\n"
        "\n"
        "Exit status 0 and a one-line summary on stdout when the file is clean; otherwise every error found on\n"
        "stderr (as the library words it) and exit status 1.",
};

int run_verify(const Args& args) {
  const std::string& shown = args.operands()[0];
  const std::filesystem::path path = shown;
  Findings findings;
  switch (detect_format(path)) {
    case InputFormat::torch_zip: verify_zip(findings, path); break;
    case InputFormat::torch_legacy: verify_legacy(findings, path); break;
    case InputFormat::tensordict: verify_tensordict(findings, path); break;
    case InputFormat::other: attempt(findings, [&] { (void)load(path, {.mmap = MapMode::copy_on_write}); }); break;
  }
  if (findings.errors.empty()) {
    fmt::print("{}: OK: {}\n", shown, findings.checked);
    return exit_ok;
  }
  for (const std::string& error : findings.errors) fmt::print(stderr, "{}\n", error);
  fmt::print(stderr, "{}: {} error{} found\n", shown, findings.errors.size(), findings.errors.size() == 1 ? "" : "s");
  return exit_file_error;
}

}  // namespace tensorfile::cli
