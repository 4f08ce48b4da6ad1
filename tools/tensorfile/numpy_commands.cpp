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

#include "describe.hpp"
#include "formats.hpp"

namespace tensorfile::cli {

Value load_numpy(const std::filesystem::path& path, NumpyFile kind, const LoadOptions& options) {
  if (kind == NumpyFile::npz) return load_npz(path, options);
  Dict dict;
  dict.ordered = true;
  const std::string name = path.stem().string();
  LoadOptions array_options = options;  // load_npy takes no select: its one array is kept or not here
  array_options.select = {};
  array_options.select_drops = false;
  if (options.select && !options.select(name)) {
    if (options.select_drops) return Value(std::move(dict));
    array_options.map_location = "meta";
  }
  dict.set(name, load_npy(path, array_options));
  return Value(std::move(dict));
}

std::optional<NumpyFile> numpy_file(const std::filesystem::path& path) {
  switch (detect_format(path)) {
    case FileFormat::npy: return NumpyFile::npy;
    case FileFormat::npz: return NumpyFile::npz;
    default: return std::nullopt;
  }
}

std::optional<int> inspect_numpy(const Args& args) {
  const std::filesystem::path path = args.operands()[0];
  const auto kind = numpy_file(path);
  if (!kind) return std::nullopt;
  const bool hashes = args.flag("hash");
  LoadOptions options;
  if (hashes) {
    options.mmap = MapMode::read_only;  // big-endian .npy data needs a copy: retried on the heap below
  } else {
    options.map_location = Device::meta();
  }
  Value loaded;
  try {
    loaded = load_numpy(path, *kind, options);
  } catch (const UnsupportedError&) {
    if (!hashes) throw;
    loaded = load_numpy(path, *kind, {});
  }
  StorageTags tags;
  tags.fallback = "cpu";
  const Description description = describe_value(loaded, tags, hashes);
  const std::string format = *kind == NumpyFile::npy ? "npy" : "npz";
  std::string out;
  if (args.flag("json")) {
    out = description_json(description, format, hashes) + "\n";
  } else {
    out = fmt::format("{}: numpy .{}, {} array{}\n", escape_controls(args.operands()[0]), format,
                      description.tensors.size(), description.tensors.size() == 1 ? "" : "s");
    std::uint64_t total = 0;
    for (const TensorRecord& r : description.tensors) {
      total += r.tensor.nbytes();
      std::string line =
          fmt::format("  {}  {}  {}  {}", escape_controls(r.path.empty() ? "(root)" : r.path.substr(1)),
                      dtype_name(r.tensor.dtype()), shape_text(r.tensor.sizes()), human_bytes(r.tensor.nbytes()));
      if (r.sha256) line += "  sha256 " + *r.sha256;
      out += line + "\n";
    }
    out += fmt::format("{} of data\n", human_bytes(total));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return exit_ok;
}

std::optional<int> verify_numpy(const Args& args) {
  const std::filesystem::path path = args.operands()[0];
  const auto kind = numpy_file(path);
  if (!kind) return std::nullopt;
  const std::string shown = escape_controls(args.operands()[0]);
  try {
    std::string checked;
    if (*kind == NumpyFile::npz) {
      const Value loaded = load_npz(path, {.verify_crc = true});
      checked = fmt::format("numpy .npz, {} arrays, every CRC-32 and .npy header", named_tensors(loaded).size());
    } else {
      const Tensor t = load_npy(path);
      checked = fmt::format("numpy .npy, {} {}, header and data size", dtype_name(t.dtype()), shape_text(t.sizes()));
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
