// SPDX-License-Identifier: MIT
// tensorfile convert: torch file to tensordict tree and back, or a clean re-save, streaming from mappings.
#include <fmt/format.h>

#include <array>
#include <map>
#include <utility>

#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/formats/safetensors/save.hpp>
#include <tensorfile/formats/safetensors/save_sharded.hpp>
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
    OptionSpec{"to", "pt|memmap|safetensors",
               "what to write; default: pt when OUT ends in .pt, .pth, .ckpt, .bin or .tar, safetensors when it ends "
               "in .safetensors or --max-shard-size is given, else memmap"},
    OptionSpec{"max-shard-size", "SIZE",
               "safetensors: write OUT as a directory of shards of at most SIZE tensor bytes (5GB, 500MB, 2GiB) "
               "with model.safetensors.index.json"},
    OptionSpec{"map-location", "WHERE",
               "where tensors load before they are written: a device (cpu, cuda:0), or for torch files tag remaps "
               "FROM=TO[,FROM=TO...]; default cpu"},
    OptionSpec{"select", "PATTERN",
               "write only the tensors whose path (keys joined by /, as inspect lists them) is PATTERN or matches it "
               "as a glob (* and ?); repeatable; other data is kept",
               true},
    OptionSpec{"quiet", "", "draw no progress bar"},
    OptionSpec{"strict", "", "write nothing when the conversion would leave something out or change it"},
};

enum class Output { pt, memmap, safetensors };

Output output_of(const Args& args, const std::filesystem::path& out) {
  if (const auto to = args.value("to")) {
    if (*to == "pt") return Output::pt;
    if (*to == "memmap") return Output::memmap;
    if (*to == "safetensors") return Output::safetensors;
    throw UsageError(fmt::format("--to must be pt, memmap or safetensors, got '{}'", *to));
  }
  if (args.value("max-shard-size") || out.extension() == ".safetensors") return Output::safetensors;
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

/// The tensors of `v` as safetensors can hold them: a name whose tensor is the very view of an earlier
/// one (tied weights) is left out and recorded in `metadata` as removed name -> kept name, as the reference's
/// save_model records it; other tensors sharing a storage are written as copies. Each is reported on stderr.
NamedTensors unshared_tensors(const Value& v, std::vector<std::pair<std::string, std::string>>& metadata) {
  NamedTensors out;
  std::map<std::pair<const std::byte*, std::size_t>, std::size_t> first_user;  // storage -> index in `out`
  for (auto& [name, tensor] : named_tensors(v)) {
    const Storage& s = tensor.storage();
    if (s.device().is_meta() || s.size_bytes() == 0) {
      out.emplace_back(name, tensor);
      continue;
    }
    const auto [it, fresh] = first_user.emplace(std::make_pair(s.data(), s.size_bytes()), out.size());
    if (fresh) {
      out.emplace_back(name, tensor);
      continue;
    }
    const auto& [kept, kept_tensor] = out[it->second];
    if (kept_tensor.raw_data() == tensor.raw_data() && kept_tensor.sizes() == tensor.sizes() &&
        kept_tensor.strides() == tensor.strides() && kept_tensor.dtype() == tensor.dtype()) {
      fmt::print(stderr,
                 "tensorfile convert: shared tensors: {} is {} (the same view); written once, recorded in "
                 "__metadata__ as {} -> {}\n",
                 escape_controls(name), escape_controls(kept), escape_controls(name), escape_controls(kept));
      metadata.emplace_back(name, kept);
      continue;
    }
    fmt::print(stderr, "tensorfile convert: shared tensors: {} shares its storage with {}; written as a copy\n",
               escape_controls(name), escape_controls(kept));
    out.emplace_back(name, tensor.contiguous().clone());
  }
  return out;
}

void write_safetensors(const Value& v, const std::filesystem::path& out, const std::optional<std::uint64_t>& shard_size,
                       bool quiet) {
  std::vector<std::pair<std::string, std::string>> metadata;
  if (const Dict* kept = safetensors_metadata(v)) {  // a safetensors input's __metadata__
    for (const auto& [key, value] : *kept) {
      if (key.is_string() && value.is_string()) metadata.emplace_back(key.as_string(), value.as_string());
    }
  }
  if (metadata.empty()) metadata.emplace_back("format", "pt");  // what transformers writes
  const auto tensors = unshared_tensors(v, metadata);
  std::uint64_t total = 0;
  for (const auto& [name, tensor] : tensors) total += tensor.nbytes();
  ProgressBar progress("writing " + escape_controls(out.filename().string()), total, !quiet);
  if (shard_size || out.extension() != ".safetensors") {
    const SafetensorsShards written = save_safetensors_sharded(
        tensors, out,
        {.max_shard_size = shard_size.value_or(SafetensorsShardedSaveOptions{}.max_shard_size), .metadata = metadata});
    progress.finish();
    if (!quiet && written.files.size() > 1) {
      fmt::print(stderr, "tensorfile convert: wrote {} shards and {}\n", written.files.size(),
                 escape_controls(written.index.filename().string()));
    }
    return;
  }
  save_safetensors(tensors, out, {.metadata = metadata});
  progress.finish();
}

}  // namespace

const CommandSpec convert_spec{
    .name = "convert",
    .operands = "IN OUT",
    .min_operands = 2,
    .max_operands = 2,
    .options = convert_options,
    .summary =
        "Convert between torch.save files, safetensors files and sharded checkpoints, and tensordict memmap\n"
        "trees, or re-save a torch file cleanly.",
    .details =
        "IN is a torch file (zip or legacy), a safetensors file, a sharded checkpoint (a *.index.json, or a model\n"
        "directory holding one) or a tensordict directory, detected from its contents. OUT is written beside its\n"
        "final name and renamed into place when complete; an existing OUT is replaced.\n"
        "\n"
        "safetensors output: OUT.safetensors is one file; a directory OUT (any other name, or --max-shard-size)\n"
        "gets model-0000K-of-0000N.safetensors shards and model.safetensors.index.json as the Hugging Face tools\n"
        "write them (5GB shards by default), or model.safetensors when everything fits in one. Shards carry\n"
        "__metadata__ {\"format\": \"pt\"} (or a safetensors input's own). Tensors that share memory (tied\n"
        "weights) are reported on stderr: a name that is the very view of another is written once and recorded\n"
        "in __metadata__ as name -> kept name (as safetensors' save_model does); other sharers are copied.\n"
        "\n"
        "Tensors stream one by one from a mapping of IN, so files larger than memory convert. A progress bar\n"
        "(bytes, rate, time left) is drawn on stderr when it is a terminal and the write takes over a second.\n"
        "\n"
        "Only data is written: objects torch would build by calling code (numpy arrays, modules, tensor subclasses,\n"
        "quantized and sparse tensors) and class references are left out, each named on stderr.\n"
        "torch -> tensordict: dicts become TensorDicts (keys as text), lists holding tensors TensorDicts keyed\n"
        "0, 1, ..., other values NonTensorData (JSON); views are written as contiguous copies, and requires_grad,\n"
        "Parameter and storage sharing are not kept (the format has no place for them). The root must be a dict\n"
        "(or a list holding tensors). Int keys, lists, tuples, OrderedDicts and their JSON attributes are recorded\n"
        "in meta.json (a member tensordict skips), so converting back rebuilds them; other key types become text\n"
        "and attributes that are not JSON are left out, each named on stderr.\n"
        "tensordict -> torch: TensorDicts become dicts (or what was recorded), lazy stacks lists, NonTensorData\n"
        "its value; pickled NonTensorData is never unpickled and is left out.\n"
        "--strict turns every one of these losses into an error before anything is written.\n"
        "\n"
        "--select keeps only the tensors it names, and only they are read from IN (the others' bytes are never\n"
        "read: a few tensors of a large checkpoint convert in the time their bytes take). A pattern that matches\n"
        "no tensor is an error, and nothing is written.",
};

int run_convert(const Args& args) {
  if (const auto numpy = convert_numpy(args)) return *numpy;  // from or to .npy/.npz: numpy_commands.cpp
  const std::filesystem::path in = args.operands()[0];
  const std::filesystem::path out = args.operands()[1];
  const Output output = output_of(args, out);
  const std::optional<std::string> where = args.value("map-location");
  const bool quiet = args.flag("quiet");
  std::optional<std::uint64_t> shard_size;
  if (const auto size = args.value("max-shard-size")) shard_size = parse_size(*size, "max-shard-size");
  if (shard_size && output != Output::safetensors) throw UsageError("--max-shard-size needs --to safetensors");
  std::vector<Dropped> dropped;
  std::vector<Dropped> changed;
  // Names every loss on stderr; with --strict any loss stops the conversion before anything is written.
  const auto report_dropped = [&] {
    for (const Dropped& d : dropped) {
      fmt::print(stderr, "tensorfile convert: left out {}: {} (not data tensorfile writes)\n",
                 d.path.empty() ? "(root)" : escape_controls(d.path), escape_controls(d.what));
    }
    for (const Dropped& d : changed) {
      fmt::print(stderr, "tensorfile convert: changed {}: {}\n", d.path.empty() ? "(root)" : escape_controls(d.path),
                 escape_controls(d.what));
    }
    if (args.flag("strict") && !(dropped.empty() && changed.empty())) {
      throw UnsupportedError(fmt::format("--strict: the conversion would leave out or change {} thing(s), named "
                                         "above; nothing was written",
                                         dropped.size() + changed.size()),
                             {.file = in});
    }
  };

  const PathPatterns selection(args.values("select"));
  const TensorSelect select = selection.select();
  const bool select_drops = !selection.empty();

  const std::optional<StateDictLayout> layout = weights_layout(in);
  if (!layout && detect_format(in) == FileFormat::tensordict) {
    MemmapLoadOptions options{.access = MapMode::read_only, .select = select, .select_drops = select_drops};
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
    selection.require_all_matched(in);
    if (output == Output::memmap) {
      write_memmap(td, out, quiet);
    } else {
      const Value v = to_value(td, in, dropped);
      report_dropped();
      if (output == Output::pt) write_pt(v, out, quiet);
      if (output == Output::safetensors) write_safetensors(v, out, shard_size, quiet);
    }
    return exit_ok;
  }

  std::filesystem::path source = in;
  if (layout) {
    if (layout->sharded() || layout->format == FileFormat::safetensors) {
      const Value v =
          load_state_dict(in, {.map_location = where ? parse_map_location(*where) : MapLocation(Device::cpu()),
                               .mmap = MapMode::copy_on_write,
                               .select = select,
                               .select_drops = select_drops});
      selection.require_all_matched(in);
      if (output == Output::pt) write_pt(v, out, quiet);
      if (output == Output::memmap) {
        const TensorDict td = to_tensordict(v, in, changed);
        report_dropped();
        write_memmap(td, out, quiet);
      }
      if (output == Output::safetensors) write_safetensors(v, out, shard_size, quiet);
      return exit_ok;
    }
    source = layout->files.front();  // a model directory's pytorch_model.bin
  }

  const LoadOptions options{.map_location = where ? parse_map_location(*where) : MapLocation(Device::cpu()),
                            .mmap = MapMode::copy_on_write,
                            .strict = false,
                            .select = select,
                            .select_drops = select_drops};
  const Value loaded = load(source, options);
  selection.require_all_matched(source);
  const Value v = without_code(loaded, dropped);
  if (!dropped.empty() && dropped.front().path.empty()) {
    throw UnsupportedError("the root is a " + dropped.front().what + ", which is not data; nothing to write",
                           {.file = source});
  }
  if (output == Output::memmap) {
    const TensorDict td = to_tensordict(v, source, changed);
    report_dropped();
    write_memmap(td, out, quiet);
    return exit_ok;
  }
  report_dropped();
  if (output == Output::pt) write_pt(v, out, quiet);
  if (output == Output::safetensors) write_safetensors(v, out, shard_size, quiet);
  return exit_ok;
}

}  // namespace tensorfile::cli
