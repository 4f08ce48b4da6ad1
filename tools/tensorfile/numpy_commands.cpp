// SPDX-License-Identifier: MIT
// inspect and verify for NumPy's .npy and .npz files (see numpy_commands.hpp).
#include "numpy_commands.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/numpy/npz.hpp>
#include <tensorfile/formats/source.hpp>

#include "describe.hpp"
#include "formats.hpp"

namespace tensorfile::cli {

namespace {

/// A NumPy file as inspect lists it: a dict of name -> tensor (a .npy gives one entry named after the file's stem).
Value numpy_value(const std::filesystem::path& file, FileFormat format, const LoadOptions& options) {
  if (format == FileFormat::npz) return load_npz(file, options);
  Dict dict;
  dict.ordered = true;
  dict.set(file.stem().string(), load_npy(file, options));
  return Value(std::move(dict));
}

}  // namespace

int inspect_numpy(const Args& args, const std::filesystem::path& file, FileFormat format) {
  const bool hashes = args.flag("hash");
  LoadOptions options;
  if (hashes) {
    options.mmap = MapMode::read_only;  // big-endian .npy data needs a copy: retried on the heap below
  } else {
    options.map_location = Device::meta();
  }
  Value loaded;
  try {
    loaded = numpy_value(file, format, options);
  } catch (const UnsupportedError&) {
    if (!hashes) throw;
    loaded = numpy_value(file, format, {});
  }
  return inspect_numpy_value(args, loaded, format);
}

int inspect_numpy_value(const Args& args, const Value& loaded, FileFormat format) {
  const bool hashes = args.flag("hash");
  StorageTags tags;
  tags.fallback = "cpu";
  const Description description = describe_value(loaded, tags, hashes);
  const std::string name(format_name(format));
  std::string out;
  if (args.flag("json")) {
    out = description_json(description, name, hashes) + "\n";
  } else {
    out = fmt::format("{}: numpy .{}, {} array{}\n", escape_controls(redacted_url(args.operands()[0])), name,
                      description.tensors.size(), description.tensors.size() == 1 ? "" : "s");
    std::uint64_t total = 0;
    for (const TensorRecord& r : description.tensors) {
      total += r.tensor.nbytes();
      std::string line = fmt::format("  {}  {}  {}  {}", escape_controls(r.path.empty() ? "(root)" : r.path),
                                     dtype_name(r.tensor.dtype()), r.tensor.sizes(), human_bytes(r.tensor.nbytes()));
      if (r.sha256) line += "  sha256 " + *r.sha256;
      out += line + "\n";
    }
    out += fmt::format("{} of data\n", human_bytes(total));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return exit_ok;
}

int verify_numpy(const Args& args, const std::filesystem::path& file, FileFormat format) {
  const std::string shown = escape_controls(args.operands()[0]);
  try {
    std::string checked;
    if (format == FileFormat::npz) {
      const Value loaded = load_npz(file, {.verify_crc = true});
      checked = fmt::format("numpy .npz, {} arrays, every CRC-32 and .npy header", named_tensors(loaded).size());
    } else {
      const Tensor t = load_npy(file);
      checked = fmt::format("numpy .npy, {} {}, header and data size", dtype_name(t.dtype()), t.sizes());
    }
    fmt::print("{}: OK: {}\n", shown, checked);
    return exit_ok;
  } catch (const Error& error) {
    fmt::print(stderr, "{}\n", escape_controls(error.message()));
    fmt::print(stderr, "{}: 1 error found\n", shown);
    return exit_file_error;
  }
}

}  // namespace tensorfile::cli
