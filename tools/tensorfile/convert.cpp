// SPDX-License-Identifier: MIT
// tensorfile convert: torch file to tensordict tree and back, or a clean re-save, streaming from mappings.
#include <fmt/format.h>

#include <array>
#include <map>
#include <utility>

#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include "commands.hpp"
#include "formats.hpp"
#include "numpy_commands.hpp"
#include "progress.hpp"
#include "tree_convert.hpp"

namespace tensorfile::cli {

namespace {

constexpr std::array convert_options{
    OptionSpec{"to", "pt|memmap",
               "what to write; default: pt when OUT ends in .pt, .pth, .ckpt, .bin or .tar, else memmap"},
    OptionSpec{"map-location", "WHERE",
               "where tensors load before they are written: a device (cpu, cuda:0), or for torch files tag remaps "
               "FROM=TO[,FROM=TO...]; default cpu"},
    OptionSpec{"quiet", "", "draw no progress bar"},
};

enum class Output { pt, memmap };

Output output_of(const Args& args, const std::filesystem::path& out) {
  if (const auto to = args.value("to")) {
    if (*to == "pt") return Output::pt;
    if (*to == "memmap") return Output::memmap;
    throw UsageError(fmt::format("--to must be pt or memmap, got '{}'", *to));
  }
  static constexpr std::array<std::string_view, 5> torch_suffixes{".pt", ".pth", ".ckpt", ".bin", ".tar"};
  const std::string suffix = out.extension().string();
  for (const std::string_view s : torch_suffixes) {
    if (suffix == s) return Output::pt;
  }
  return Output::memmap;
}

/// Bytes save() writes for the storages of `v`: each distinct storage with data once.
std::uint64_t storage_bytes(const Value& v) {
  std::map<std::pair<const std::byte*, std::size_t>, bool> seen;
  std::uint64_t total = 0;
  for (const auto& [path, tensor] : named_tensors(v)) {
    const Storage& s = tensor.storage();
    if (s.device().is_meta()) continue;
    if (seen.emplace(std::make_pair(s.data(), s.size_bytes()), true).second) total += s.size_bytes();
  }
  return total;
}

/// Bytes save_memmap() writes: every leaf in C order.
std::uint64_t leaf_bytes(const TensorDict& td) {
  std::uint64_t total = 0;
  td.for_each_leaf([&](const NestedKey&, const Entry& leaf) {
    if (leaf.is_tensor()) total += leaf.as_tensor().nbytes();
    if (leaf.is_nested_tensor())
      total += leaf.as_nested_tensor().values.nbytes() + leaf.as_nested_tensor().nested_sizes.nbytes();
  });
  return total;
}

void write_pt(const Value& v, const std::filesystem::path& out, bool quiet) {
  ProgressBar progress("writing " + escape_controls(out.filename().string()), storage_bytes(v), !quiet);
  save(v, out);
  progress.finish();
}

void write_memmap(const TensorDict& td, const std::filesystem::path& out, bool quiet) {
  ProgressBar progress("writing " + escape_controls(out.filename().string()), leaf_bytes(td), !quiet);
  save_memmap(td, out);
  progress.finish();
}

}  // namespace

const CommandSpec convert_spec{
    .name = "convert",
    .operands = "IN OUT",
    .min_operands = 2,
    .max_operands = 2,
    .options = convert_options,
    .summary = "Convert a torch.save file to a tensordict memmap tree and back, or re-save a torch file cleanly.",
    .details =
        "IN is a torch file (zip or legacy) or a tensordict directory, detected from its contents. OUT is written\n"
        "beside its final name and renamed into place when complete; an existing OUT is replaced.\n"
        "\n"
        "Tensors stream one by one from a mapping of IN, so files larger than memory convert. A progress bar\n"
        "(bytes, rate, time left) is drawn on stderr when it is a terminal and the write takes over a second.\n"
        "\n"
        "Only data is written: objects torch would build by calling code (numpy arrays, modules, tensor subclasses,\n"
        "quantized and sparse tensors) and class references are left out, each named on stderr.\n"
        "torch -> tensordict: dicts become TensorDicts (keys as text), lists holding tensors TensorDicts keyed\n"
        "0, 1, ..., other values NonTensorData (JSON); views are written as contiguous copies, and requires_grad,\n"
        "Parameter and storage sharing are not kept (the format has no place for them). The root must be a dict\n"
        "(or a list holding tensors).\n"
        "tensordict -> torch: TensorDicts become dicts, lazy stacks lists, NonTensorData its value; pickled\n"
        "NonTensorData is never unpickled and is left out.",
};

int run_convert(const Args& args) {
  if (const auto numpy = convert_numpy(args)) return *numpy;  // from or to .npy/.npz: numpy_commands.cpp
  const std::filesystem::path in = args.operands()[0];
  const std::filesystem::path out = args.operands()[1];
  const Output output = output_of(args, out);
  const std::optional<std::string> where = args.value("map-location");
  const bool quiet = args.flag("quiet");
  std::vector<Dropped> dropped;
  const auto report_dropped = [&] {
    for (const Dropped& d : dropped) {
      fmt::print(stderr, "tensorfile convert: left out {}: {} (not data tensorfile writes)\n",
                 d.path.empty() ? "(root)" : escape_controls(d.path), escape_controls(d.what));
    }
  };

  if (detect_format(in) == FileFormat::tensordict) {
    MemmapLoadOptions options{.access = MapMode::read_only};
    if (where) {
      Device device;
      try {
        device = Device::parse(*where);
      } catch (const ArgumentError& error) {
        throw UsageError("--map-location: a tensordict tree takes a device; " + error.reason());
      }
      if (!device.is_cpu()) options.device = device;
    }
    const TensorDict td = load_memmap(in, options);
    if (output == Output::memmap) {
      write_memmap(td, out, quiet);
    } else {
      const Value v = to_value(td, in, dropped);
      report_dropped();
      write_pt(v, out, quiet);
    }
    return exit_ok;
  }

  const LoadOptions options{.map_location = where ? parse_map_location(*where) : MapLocation(Device::cpu()),
                            .mmap = MapMode::copy_on_write,
                            .strict = false};
  const Value loaded = load(in, options);
  const Value v = without_code(loaded, dropped);
  if (!dropped.empty() && dropped.front().path.empty()) {
    throw UnsupportedError("the root is a " + dropped.front().what + ", which is not data; nothing to write",
                           {.file = in});
  }
  report_dropped();
  if (output == Output::pt) {
    write_pt(v, out, quiet);
  } else {
    write_memmap(to_tensordict(v, in), out, quiet);
  }
  return exit_ok;
}

}  // namespace tensorfile::cli
