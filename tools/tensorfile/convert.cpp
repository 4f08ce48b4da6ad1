// SPDX-License-Identifier: MIT
// tensorfile convert: between torch files, safetensors (single and sharded), NumPy and tensordict trees, streaming
// from mappings and naming every loss.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <utility>

#include <tensorfile/checkpoint.hpp>
#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/gguf/save.hpp>
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/safetensors/metadata.hpp>
#include <tensorfile/formats/safetensors/save.hpp>
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>

#include "commands.hpp"
#include "describe.hpp"
#include "formats.hpp"
#include "numpy_commands.hpp"
#include "progress.hpp"
#include "tree_convert.hpp"
#include "urls.hpp"

namespace tensorfile::cli {

namespace {

constexpr std::array convert_options{
    OptionSpec{
        "to", "FORMAT",
        "what to write: pt, memmap, safetensors, npz, npy or gguf; default: by OUT's suffix (.pt, .pth, .ckpt, "
        ".bin, .tar: pt; .safetensors; .npz; .npy; .gguf), a sharded safetensors directory with --max-shard-size, "
        "else memmap; a suffix that names another format than --to is an error"},
    OptionSpec{"max-shard-size", "SIZE",
               "safetensors: write OUT as a directory of shards of at most SIZE tensor bytes (5GB, 500MB, 2GiB) "
               "with model.safetensors.index.json"},
    OptionSpec{"split-max-tensors", "N",
               "gguf: write OUT as llama.cpp's split files PREFIX-00001-of-0000K.gguf (PREFIX: OUT less .gguf) of at "
               "most N tensors each, with split.* keys, as gguf-split --split-max-tensors"},
    OptionSpec{"split-max-size", "SIZE",
               "gguf: split files of at most SIZE tensor bytes each (500MB, 2GiB), as gguf-split --split-max-size"},
    OptionSpec{"metadata", "KEY=VALUE",
               "safetensors: set this __metadata__ entry (repeatable; replaces the input's entry of that key)", true},
    OptionSpec{"map-location", "WHERE",
               "where tensors load before they are written: a device (cpu, cuda:0), or for torch files tag remaps "
               "FROM=TO[,FROM=TO...]; default cpu"},
    OptionSpec{"select", "PATTERN",
               "write only the tensors whose path (keys joined by /, as inspect lists them) is PATTERN or matches it "
               "as a glob (* and ?); repeatable; other data is kept",
               true},
    OptionSpec{"allow-unlisted", "", "sharded IN: leave out a shard's tensors that its index does not list"},
    OptionSpec{"world", "W", "tensor-parallel: write one rank's part of a group of W ranks (with --rank and --split)"},
    OptionSpec{"rank", "R", "tensor-parallel: the rank, 0 to W-1, whose part is written"},
    OptionSpec{"split", "RULES",
               "tensor-parallel: which tensors split along which dimension, comma-separated PATTERN=DIM, "
               "PATTERN=DIM:S0/S1/... (explicit extents per rank) or PATTERN=replicate; the first that matches a "
               "path decides, and a path none matches is written whole"},
    OptionSpec{"even", "HOW",
               "tensor-parallel: how a split extent is shared where no sizes are given: tensor_split (default; the "
               "first n % W ranks one more) or chunk (ceil(n / W) each, as torch.chunk)"},
    OptionSpec{"mmap", "MODE",
               "how IN is mapped while its tensors stream to OUT: read-only, copy-on-write (default), shared, or off "
               "(read into memory first)"},
    OptionSpec{"threads", "N", "threads reading IN at once (heap reads, shards); default: the library's choice"},
    OptionSpec{"direct-reads", "WHEN",
               "with --mmap off: read around the page cache: automatic (default), always, never"},
    OptionSpec{"huge-pages", "WHEN",
               "with --mmap off: advise the memory read into for huge pages: on, or off (default, unless "
               "TENSORFILE_HUGE_PAGES=1)"},
    OptionSpec{"verify-crc", "", "check the CRC-32 of every zip member read (torch and .npz IN)"},
    OptionSpec{"quiet", "", "draw no progress bar"},
    OptionSpec{"strict", "", "write nothing when the conversion would leave something out or change it"},
};

/// What convert writes.
enum class Target { pt, memmap, safetensors, sharded, npz, npy, gguf };

std::string_view target_name(Target target) {
  switch (target) {
    case Target::pt: return "pt";
    case Target::memmap: return "memmap";
    case Target::safetensors: return "safetensors";
    case Target::sharded: return "sharded safetensors";
    case Target::npz: return "npz";
    case Target::npy: return "npy";
    case Target::gguf: return "gguf";
  }
  return "?";
}

/// The format OUT's suffix names, if any.
std::optional<Target> target_by_suffix(const std::filesystem::path& out) {
  const std::string suffix = out.extension().string();
  for (const std::string_view s : {".pt", ".pth", ".ckpt", ".bin", ".tar"}) {
    if (suffix == s) return Target::pt;
  }
  if (suffix == ".safetensors") return Target::safetensors;
  if (suffix == ".npz") return Target::npz;
  if (suffix == ".npy") return Target::npy;
  if (suffix == ".gguf") return Target::gguf;
  return std::nullopt;
}

/// The target from --to, --max-shard-size and OUT's suffix; a contradiction among them is a UsageError.
Target target_of(const Args& args, const std::filesystem::path& out, bool sharded) {
  const std::optional<Target> by_suffix = target_by_suffix(out);
  std::optional<Target> target;
  if (const auto to = args.value("to")) {
    static constexpr std::array<std::pair<std::string_view, Target>, 7> names{{{"pt", Target::pt},
                                                                               {"memmap", Target::memmap},
                                                                               {"tensordict", Target::memmap},
                                                                               {"safetensors", Target::safetensors},
                                                                               {"npz", Target::npz},
                                                                               {"npy", Target::npy},
                                                                               {"gguf", Target::gguf}}};
    for (const auto& [name, value] : names) {
      if (*to == name) target = value;
    }
    if (!target) {
      throw UsageError(fmt::format("--to must be pt, memmap, safetensors, npz, npy or gguf, got '{}'", *to));
    }
    if (by_suffix && *by_suffix != *target) {
      throw UsageError(fmt::format("--to {} contradicts OUT's suffix {} (which names {}); drop one or rename OUT", *to,
                                   out.extension().string(), target_name(*by_suffix)));
    }
  }
  target = target.value_or(by_suffix.value_or(sharded ? Target::safetensors : Target::memmap));
  if (sharded && *target != Target::safetensors) {
    throw UsageError(
        fmt::format("--max-shard-size writes sharded safetensors, but OUT is to be {}", target_name(*target)));
  }
  if (sharded && by_suffix) {
    throw UsageError("--max-shard-size writes a directory of shards; OUT ends in .safetensors, which names one file");
  }
  // --to safetensors (or --max-shard-size) with an OUT that names no file: a directory as the Hugging Face tools write.
  if (*target == Target::safetensors && !by_suffix) return Target::sharded;
  return *target;
}

/// What a conversion leaves out or changes, each named on stderr; --strict refuses any.
struct Losses {
  std::vector<Dropped> left_out;
  std::vector<Dropped> changed;
  [[nodiscard]] bool empty() const noexcept { return left_out.empty() && changed.empty(); }
};

std::string shown_path(const std::string& path) { return path.empty() ? "(root)" : escape_controls(path); }

/// Names every loss on stderr; with --strict any loss stops the conversion before anything is written.
void report(const Losses& losses, const std::filesystem::path& in, bool strict) {
  for (const Dropped& d : losses.left_out) {
    fmt::print(stderr, "tensorfile convert: left out {}: {}\n", shown_path(d.path), escape_controls(d.what));
  }
  for (const Dropped& d : losses.changed) {
    fmt::print(stderr, "tensorfile convert: changed {}: {}\n", shown_path(d.path), escape_controls(d.what));
  }
  if (strict && !losses.empty()) {
    throw UnsupportedError(fmt::format("--strict: the conversion would leave out or change {} thing(s), named "
                                       "above; nothing was written",
                                       losses.left_out.size() + losses.changed.size()),
                           {.file = in});
  }
}

/// Appends what without_code() or to_value() left out, marked as not data.
void add_not_data(Losses& losses, std::vector<Dropped> dropped) {
  for (Dropped& d : dropped) losses.left_out.push_back({std::move(d.path), d.what + " (not data tensorfile writes)"});
}

/// Bytes save_torch() writes for the storages of `v`: each distinct storage with data once.
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

/// Whether the flat target can hold `dtype`, asked of its writer with an empty tensor (the writer's table decides).
bool holds_dtype(Target target, DType dtype) {
  static std::map<std::pair<Target, DType>, bool> known;
  const auto [it, fresh] = known.emplace(std::make_pair(target, dtype), true);
  if (!fresh) return it->second;
  try {
    const Tensor empty = Tensor::zeros({0}, dtype);
    if (target == Target::npz || target == Target::npy) {
      (void)save_npy_to_bytes(empty);
    } else if (target == Target::gguf) {
      Dict one;
      one.set("t", empty);
      (void)save_gguf_to_bytes(Value(std::move(one)));
    } else {
      (void)save_safetensors_to_bytes(NamedTensors{{"t", empty}});
    }
  } catch (const Error&) {
    it->second = false;
  }
  return it->second;
}

/// The tensors of `v` as a flat format (name -> tensor: safetensors, npz, npy) holds them, and what it cannot hold:
/// values that are not tensors, the nesting of containers (names are paths joined by "/"), key types other than str,
/// dtypes the format lacks, tensors saved without data, and storage sharing. A name whose tensor is the very view of
/// an earlier one (tied weights) is written once and, with `metadata` (safetensors), recorded there as removed name ->
/// kept name, as the reference's save_model does; other sharers are written as copies.
NamedTensors flat_tensors(const Value& v, const std::filesystem::path& in, Target target, Losses& losses,
                          std::vector<std::pair<std::string, std::string>>* metadata) {
  const std::string format(target_name(target));
  StorageTags tags;
  tags.fallback = "cpu";
  const Description d = describe_value(v, tags, false);
  std::set<std::string> reported;
  for (const Dropped& dropped : losses.left_out) reported.insert(dropped.path);
  for (const ValueRecord& r : d.values) {
    if (reported.contains(r.path)) continue;  // code, already named (a list keeps None in its place)
    std::string text = r.text.size() > 60 ? r.text.substr(0, 57) + "..." : r.text;
    losses.left_out.push_back({r.path, fmt::format("{} {} ({} holds only tensors)", r.type, text, format)});
  }
  const NamedTensors named = named_tensors(v);
  if (target != Target::npy) {
    std::set<std::string> nested;  // the first keys of tensor paths with more than one step
    for (const auto& [path, tensor] : named) {
      if (const std::size_t slash = path.find('/'); slash != std::string::npos) nested.insert(path.substr(0, slash));
    }
    if (!named.empty() && named.front().first.empty()) {
      losses.changed.push_back({"", fmt::format("a bare tensor, written as the name \"{}\"", in.stem().string())});
    } else if (!v.is_dict() && !named.empty()) {
      losses.changed.push_back({"", "the root is not a dict; its tensors are named by their paths (0/..., 1/...)"});
    }
    for (const TreeNode& node : d.tree) {  // the root dict's containers that hold tensors are flattened
      if (v.is_dict() && node.depth == 1 && node.kind == TreeNode::Kind::container && nested.contains(node.label)) {
        losses.changed.push_back(
            {node.label, fmt::format("{}, flattened: its tensors are named {}/...", node.text, node.label)});
      }
    }
    if (v.is_dict()) {
      for (const auto& [key, item] : v.as_dict()) {
        if (!key.is_string() && (item.is_tensor() || nested.contains(key_text(key)))) {
          losses.changed.push_back({key_text(key), fmt::format("{} key, written as the name \"{}\"",
                                                               key.is_int() ? "an int" : "a non-str", key_text(key))});
        }
      }
    }
  }
  NamedTensors out;
  std::map<std::pair<const std::byte*, std::size_t>, std::size_t> first_user;  // storage -> index in `out`
  for (const auto& [path, tensor] : named) {
    std::string name = path.empty() ? in.stem().string() : path;
    if (!holds_dtype(target, tensor.dtype())) {
      losses.left_out.push_back({path, fmt::format("a {} tensor; {} has no {}", dtype_name(tensor.dtype()), format,
                                                   dtype_name(tensor.dtype()))});
      continue;
    }
    const Storage& s = tensor.storage();
    if (s.device().is_meta()) {
      losses.left_out.push_back({path, fmt::format("a tensor saved without data ({} needs the bytes)", format)});
      continue;
    }
    if (s.size_bytes() == 0) {
      out.emplace_back(std::move(name), tensor);
      continue;
    }
    const auto [it, fresh] = first_user.emplace(std::make_pair(s.data(), s.size_bytes()), out.size());
    if (fresh) {
      out.emplace_back(std::move(name), tensor);
      continue;
    }
    const auto& [kept, kept_tensor] = out[it->second];
    const bool same_view = kept_tensor.raw_data() == tensor.raw_data() && kept_tensor.sizes() == tensor.sizes() &&
                           kept_tensor.strides() == tensor.strides() && kept_tensor.dtype() == tensor.dtype();
    if (same_view && metadata != nullptr) {
      losses.changed.push_back({path, fmt::format("shared tensors: {} is {} (the same view); written once, "
                                                  "recorded in __metadata__ as {} -> {}",
                                                  name, kept, name, kept)});
      metadata->emplace_back(name, kept);
      continue;
    }
    losses.changed.push_back(
        {path, fmt::format("shared tensors: {} shares its storage with {}; written as a copy", name, kept)});
    out.emplace_back(std::move(name), tensor.contiguous().clone());
  }
  return out;
}

std::uint64_t tensor_bytes(const NamedTensors& tensors) {
  std::uint64_t total = 0;
  for (const auto& [name, tensor] : tensors) total += tensor.nbytes();
  return total;
}

/// A safetensors input's __metadata__ (kept), else {"format": "pt"} as transformers writes.
std::vector<std::pair<std::string, std::string>> safetensors_metadata_of(const Value& v) {
  std::vector<std::pair<std::string, std::string>> metadata;
  if (const Dict* kept = safetensors_metadata(v)) {
    for (const auto& [key, value] : *kept) {
      if (key.is_string() && value.is_string()) metadata.emplace_back(key.as_string(), value.as_string());
    }
  }
  if (metadata.empty()) metadata.emplace_back("format", "pt");
  return metadata;
}

/// IN loaded: every source as a Value, and a tensordict tree also as read (written to a tree as is).
struct Loaded {
  Value value;
  std::optional<TensorDict> tree;
};

/// IN read with the library's generic load, but for a tensordict tree: load_memmap keeps it a TensorDict (a tree
/// is written to a tree as is), and to_value() here names what it leaves out. A .npy's one tensor is named after
/// the file's stem, as .npz members are named, and `select` is asked that name.
Loaded load_source(const Checkpoint& checkpoint, const std::filesystem::path& in, const Args& args,
                   const LoadOptions& options, Target target, Losses& losses) {
  Loaded loaded;
  switch (checkpoint.format()) {
    case FileFormat::tensordict: {
      // Slices, and a remote tree, are read by the generic load; the tree is then written as to_tensordict().
      if (options.slice || is_url(in.native())) break;
      LoadOptions tree_options = options;
      tree_options.mmap = MapMode::read_only;
      tree_options.map_location = {};  // mapped on the host
      if (const auto where = args.value("map-location")) {
        Device device;
        try {
          device = Device::parse(*where);
        } catch (const ArgumentError& error) {
          throw UsageError("--map-location: a tensordict tree takes a device; " + error.reason());
        }
        if (!device.is_cpu()) tree_options.map_location = device;
      }
      loaded.tree = load_memmap(in, tree_options);
      if (target != Target::memmap) {
        std::vector<Dropped> dropped;
        loaded.value = to_value(*loaded.tree, in, dropped);
        add_not_data(losses, std::move(dropped));
      }
      return loaded;
    }
    case FileFormat::npy: {
      Dict dict;
      dict.ordered = true;
      const std::string name = std::filesystem::path(checkpoint.name()).stem().string();
      LoadOptions array_options = options;  // the one array is kept or not here, and sliced by its name
      array_options.select = {};
      array_options.select_drops = false;
      if (options.slice) {
        array_options.slice = [rule = options.slice, name](std::string_view, const Shape& shape) {
          return rule(name, shape);
        };
      }
      if (!options.select || options.select(name)) dict.set(name, load(in, array_options));
      loaded.value = Value(std::move(dict));
      return loaded;
    }
    default: break;
  }
  std::vector<Dropped> dropped;
  loaded.value = without_code(load(in, options), dropped);
  if (!dropped.empty() && dropped.front().path.empty()) {
    throw UnsupportedError("the root is a " + dropped.front().what + ", which is not data; nothing to write",
                           {.file = checkpoint.name()});
  }
  add_not_data(losses, std::move(dropped));
  return loaded;
}

/// convert's LoadOptions from its flags: mapped copy_on_write (tensors stream from the mapping as they are written)
/// unless --mmap says otherwise, pickles never strict (what is not data is left out and named, an error with
/// --strict).
LoadOptions load_options(const Args& args, const PathPatterns& selection) {
  LoadOptions options{.map_location = Device::cpu(),
                      .mmap = MapMode::copy_on_write,
                      .select = selection.select(),
                      .select_drops = !selection.empty(),
                      .strict = false,
                      .verify_crc = args.flag("verify-crc"),
                      .sharded = {.allow_unlisted = args.flag("allow-unlisted")}};
  if (const auto where = args.value("map-location")) options.map_location = parse_map_location(*where);
  if (const auto mode = args.value("mmap")) options.mmap = parse_map_mode(*mode);
  if (const auto reads = args.value("direct-reads")) options.direct_reads = parse_direct_reads(*reads);
  if (const auto pages = args.value("huge-pages")) options.huge_pages = parse_huge_pages(*pages);
  if (const auto threads = args.value("threads")) {
    options.threads = static_cast<std::size_t>(parse_integer(*threads, "threads", 1, 256));
  }
  const auto world = args.value("world");
  const auto rank = args.value("rank");
  const auto split = args.value("split");
  if (world || rank || split || args.value("even")) {
    if (!world || !rank || !split) throw UsageError("--world, --rank and --split go together; expected all three");
    ParallelPlan plan{.world = parse_integer(*world, "world", 1, 1 << 20)};
    plan.rank = parse_integer(*rank, "rank", 0, plan.world - 1);
    try {
      plan.rules = parse_parallel_rules(*split);
    } catch (const ArgumentError& error) {
      throw UsageError("--split: " + error.reason());
    }
    if (const auto even = args.value("even")) {
      if (*even == "chunk") {
        plan.even = EvenSplit::chunk;
      } else if (*even != "tensor_split") {
        throw UsageError(fmt::format("--even takes tensor_split or chunk, got '{}'", escape_controls(*even)));
      }
    }
    options.slice = parallel_slices(std::move(plan));
    options.mmap.reset();  // read each part into memory of its own: a view would write its whole storage to a .pt
  }
  return options;
}

}  // namespace

const CommandSpec convert_spec{
    .name = "convert",
    .operands = "IN OUT",
    .min_operands = 2,
    .max_operands = 2,
    .options = convert_options,
    .summary =
        "Convert between torch.save files, safetensors files and sharded checkpoints, NumPy .npz and .npy files\n"
        "and tensordict memmap trees, naming on stderr whatever the target cannot hold.",
    .details =
        "IN may be a URL (http://, https://, s3://; built with TENSORFILE_REMOTE, S3 from the AWS_* environment\n"
        "variables), read by the library's open() and load() without mapping (--mmap refused for it).\n"
        "\n"
        "IN is a torch file (zip or legacy), a safetensors file, a sharded checkpoint (a *.index.json, or a model\n"
        "directory holding one), a NumPy .npz or .npy file or a tensordict directory, detected from its contents.\n"
        "OUT is written beside its final name and renamed into place when complete; an existing OUT is replaced.\n"
        "\n"
        "Every tensor's dtype, shape and values are written as read. What the target cannot hold is left out or\n"
        "changed, one line on stderr each (\"tensorfile convert: left out PATH: ...\", \"changed PATH: ...\"), and\n"
        "--strict turns any of them into an error before anything is written.\n"
        "\n"
        "safetensors, .npz and .npy hold names and tensors only: other values (epoch, lr, a scheduler's state) are\n"
        "left out; nested containers are flattened into names (keys joined by /), keys that are not str written as\n"
        "text; dtypes the format lacks (NumPy: bfloat16, float8, complex32) and tensors saved without data are left\n"
        "out. A .npy holds one array: IN must hold exactly one tensor. requires_grad and Parameter are not kept.\n"
        "\n"
        "safetensors output: OUT.safetensors is one file; a directory OUT (any other name, or --max-shard-size)\n"
        "gets model-0000K-of-0000N.safetensors shards and model.safetensors.index.json as the Hugging Face tools\n"
        "write them (5GB shards by default), or model.safetensors when everything fits in one. Shards carry\n"
        "__metadata__ {\"format\": \"pt\"} (or a safetensors input's own). Tensors that share memory (tied\n"
        "weights) are reported: a name that is the very view of another is written once and recorded in\n"
        "__metadata__ as name -> kept name (as safetensors' save_model does); other sharers are copied (also to\n"
        ".npz).\n"
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
        "\n"
        "--select keeps only the tensors it names, and only they are read from IN (the others' bytes are never\n"
        "read: a few tensors of a large checkpoint convert in the time their bytes take). A pattern that matches\n"
        "no tensor is an error, and nothing is written.\n"
        "\n"
        "--world W --rank R --split RULES writes rank R's part of each tensor a rule splits (what\n"
        "t.tensor_split(W, dim)[R] keeps, or t.chunk(W, dim)[R] with --even chunk; an empty part for a rank chunk\n"
        "gives none) and every other tensor whole; where IN keeps a tensor's bytes in one place only the part's\n"
        "bytes are read (into memory: --mmap does not apply). A tensordict tree IN is then written as a converted\n"
        "tree.\n"
        "\n"
        "IN is read with the library's load() (a tensordict tree with load_memmap, so that a tree is written to a\n"
        "tree as is) and OUT written with its save(), a tensordict tree with save_memmap. The flags are the\n"
        "LoadOptions and SaveOptions fields of the same name: --map-location, --mmap, --select, --threads,\n"
        "--world, --rank, --split and --even (a ParallelPlan's world, rank, rules and even, as LoadOptions::slice),\n"
        "--direct-reads, --huge-pages, --verify-crc, --allow-unlisted (sharded.allow_unlisted), --max-shard-size\n"
        "(sharded.max_shard_size), --split-max-tensors and --split-max-size (gguf.split_max_tensors and\n"
        "gguf.split_max_size), --metadata (safetensors.metadata); --to is SaveOptions::format. --strict is\n"
        "the tool's own: torch pickles are always read with LoadOptions::strict off, and what they hold that is not\n"
        "data is left out and named (an error with --strict).",
};

int run_convert(const Args& args) {
  require_url_support(args.operands()[0]);
  const std::filesystem::path in = args.operands()[0];
  const bool url = is_url(in.native());
  const std::filesystem::path named = redacted_url(in.native());  // what messages call IN: a URL without secrets
  const std::filesystem::path out = args.operands()[1];
  std::optional<std::uint64_t> shard_size;
  if (const auto size = args.value("max-shard-size")) shard_size = parse_size(*size, "max-shard-size");
  const Target target = target_of(args, out, shard_size.has_value());
  SaveOptions::Gguf gguf_split;  // the split options alone
  if (const auto n = args.value("split-max-tensors")) {
    gguf_split.split_max_tensors = static_cast<std::uint64_t>(parse_integer(*n, "split-max-tensors", 1, 1LL << 40));
  }
  if (const auto size = args.value("split-max-size")) gguf_split.split_max_size = parse_size(*size, "split-max-size");
  const bool split = gguf_split.split_max_tensors != 0 || gguf_split.split_max_size != 0;
  if (split && target != Target::gguf) {
    throw UsageError(fmt::format("--split-max-tensors and --split-max-size write split gguf files, but OUT is to be {}",
                                 target_name(target)));
  }
  const bool quiet = args.flag("quiet");
  const bool strict = args.flag("strict");
  const PathPatterns selection(args.values("select"));
  std::vector<std::pair<std::string, std::string>> metadata_flags;
  for (const std::string& item : args.values("metadata")) {
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw UsageError(fmt::format("--metadata takes KEY=VALUE, got '{}'", escape_controls(item)));
    }
    metadata_flags.emplace_back(item.substr(0, equals), item.substr(equals + 1));
  }
  if (!metadata_flags.empty() && target != Target::safetensors && target != Target::sharded) {
    throw UsageError(
        fmt::format("--metadata sets safetensors' __metadata__, but OUT is to be {}", target_name(target)));
  }
  LoadOptions options = load_options(args, selection);
  if (url && !args.value("mmap")) options.mmap.reset();  // a remote object is read, never mapped
  // The library's one dispatch: what IN holds, from its contents.
  const Checkpoint checkpoint = open(in, {.strict = false, .sharded = options.sharded});

  Losses losses;
  const Loaded loaded = load_source(checkpoint, in, args, options, target, losses);
  selection.require_all_matched(named);
  const Value& v = loaded.value;
  const bool gguf_to_gguf = checkpoint.format() == FileFormat::gguf && target == Target::gguf;
  if (checkpoint.format() == FileFormat::gguf && !gguf_to_gguf) {  // block tensors leave GGUF as bytes
    for (const auto& [path, tensor] : named_tensors(v)) {
      const std::optional<GgmlType> type = gguf_tensor_type(v, path);
      if (type && ggml_type_info(*type).is_quantized()) {
        losses.changed.push_back(
            {path, fmt::format("{} blocks, written as their raw bytes (uint8)", ggml_type_name(*type))});
      }
    }
  }
  const std::string label = "writing " + escape_controls(out.filename().string());

  switch (target) {
    case Target::memmap: {
      // save_memmap, not the generic save: a tree read is written as is, and what to_tensordict() changes is named.
      const TensorDict td = loaded.tree ? *loaded.tree : to_tensordict(v, checkpoint.name(), losses.changed);
      report(losses, named, strict);
      ProgressBar progress(label, leaf_bytes(td), !quiet);
      save_memmap(td, out);
      progress.finish();
      return exit_ok;
    }
    case Target::pt: {
      report(losses, named, strict);
      ProgressBar progress(label, storage_bytes(v), !quiet);
      save(v, out, {.format = FileFormat::torch_zip});
      progress.finish();
      return exit_ok;
    }
    case Target::safetensors:
    case Target::sharded: {
      std::vector<std::pair<std::string, std::string>> metadata = safetensors_metadata_of(v);
      for (const auto& flag : metadata_flags) {  // a named pair, not a binding: clang 14 cannot capture those
        const auto same = [&flag](const auto& item) { return item.first == flag.first; };
        metadata.erase(std::remove_if(metadata.begin(), metadata.end(), same), metadata.end());
        metadata.push_back(flag);
      }
      const NamedTensors tensors = flat_tensors(v, named, target, losses, &metadata);
      report(losses, named, strict);
      ProgressBar progress(label, tensor_bytes(tensors), !quiet);
      const SaveOptions save_options{
          .format = FileFormat::safetensors,
          .safetensors = {.metadata = metadata},
          .sharded = {.max_shard_size = shard_size.value_or(SaveOptions::Sharded{}.max_shard_size)}};
      if (target == Target::safetensors) {
        save(tensors, out, save_options);
        progress.finish();
        return exit_ok;
      }
      save(tensors, out.native().ends_with('/') ? out.native() : out.native() + '/', save_options);  // shards
      progress.finish();
      if (!quiet) {
        const StateDictLayout written = resolve_state_dict(out);
        if (written.files.size() > 1) {
          fmt::print(stderr, "tensorfile convert: wrote {} shards and {}\n", written.files.size(),
                     escape_controls(written.index.filename().string()));
        }
      }
      return exit_ok;
    }
    case Target::gguf: {
      if (gguf_to_gguf) {  // as read: metadata, its types and block tensors kept
        report(losses, named, strict);
        ProgressBar progress(label, storage_bytes(v), !quiet);
        save(v, out, {.format = FileFormat::gguf, .gguf = gguf_split});
        progress.finish();
      } else {
        const NamedTensors tensors = flat_tensors(v, named, target, losses, nullptr);
        report(losses, named, strict);
        ProgressBar progress(label, tensor_bytes(tensors), !quiet);
        SaveOptions save_options{.format = FileFormat::gguf};
        save_options.gguf.split_max_tensors = gguf_split.split_max_tensors;
        save_options.gguf.split_max_size = gguf_split.split_max_size;
        save(tensors, out, save_options);
        progress.finish();
      }
      return exit_ok;
    }
    case Target::npz:
    case Target::npy: {
      const NamedTensors tensors = flat_tensors(v, named, target, losses, nullptr);
      if (target == Target::npy && tensors.size() != 1) {
        throw UnsupportedError(
            fmt::format("a .npy file holds one array; expected 1 tensor, got {} (write a .npz)", tensors.size()),
            {.file = named});
      }
      report(losses, named, strict);
      ProgressBar progress(label, tensor_bytes(tensors), !quiet);
      save(tensors, out, {.format = target == Target::npz ? FileFormat::npz : FileFormat::npy});
      progress.finish();
      return exit_ok;
    }
  }
  return exit_ok;
}

}  // namespace tensorfile::cli
