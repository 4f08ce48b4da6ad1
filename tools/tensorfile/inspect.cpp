// SPDX-License-Identifier: MIT
// tensorfile inspect: what a checkpoint in any format holds, as a tree or as JSON, without reading tensor data.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <set>

#include <tensorfile/checkpoint.hpp>
#include <tensorfile/core/meta_backend.hpp>
#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/gguf/header.hpp>
#include <tensorfile/formats/gguf/load.hpp>
#include <tensorfile/formats/safetensors/header.hpp>
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/torch/archive.hpp>
#include <tensorfile/formats/torch/load.hpp>

#include "commands.hpp"
#include "describe.hpp"
#include "formats.hpp"
#include "numpy_commands.hpp"
#include "urls.hpp"

namespace tensorfile::cli {

namespace {

constexpr std::array inspect_options{
    OptionSpec{"json", "", "print one JSON object instead of the tree"},
    OptionSpec{"hash", "", "add the SHA-256 of every tensor's values (reads all tensor data)"},
    OptionSpec{"allow-unlisted", "", "sharded PATH: leave out a shard's tensors that its index does not list"},
};

/// Loads a torch file for describing: mapped, never strict, and (without hashes) reading no tensor data.
Description describe_torch_file(const std::filesystem::path& path, FileFormat format, bool hashes) {
  StorageTags tags;
  LoadOptions options{.mmap = MapMode::copy_on_write, .strict = false};
  if (format == FileFormat::torch_zip || hashes) {
    // Told each storage's saved tag; the bytes handed over are a view of the mapping (zip) that no one reads
    // unless hashing. Legacy files copy their bytes first, so they only come here when hashing anyway.
    options.map_location = MapLocation::Function([&tags, hashes](const Storage& bytes, std::string_view tag) {
      Storage chosen = hashes ? bytes : meta_storage(bytes.size_bytes());
      tags.add(chosen, tag);
      return std::optional<Storage>(chosen);
    });
  } else {
    options.map_location = Device::meta();
    // The library hands a legacy storage's tag only to a map_location callable, and only after copying its bytes.
    tags.fallback = "?";
  }
  return describe_value(load_torch(path, options), tags, hashes);
}

/// Loads safetensors files and shards through load_state_dict for describing: mapped, reading no tensor data
/// unless hashing (the map_location callable is told each tensor's bytes, a view of the mapping).
Description describe_weights(const std::filesystem::path& path, bool hashes, bool allow_unlisted) {
  StorageTags tags;
  std::mutex tags_lock;  // shards load on several threads
  LoadOptions options{.mmap = MapMode::read_only, .strict = false, .sharded = {.allow_unlisted = allow_unlisted}};
  options.map_location = MapLocation::Function([&](const Storage& bytes, std::string_view tag) {
    Storage chosen = hashes ? bytes : meta_storage(bytes.size_bytes());
    const std::lock_guard<std::mutex> lock(tags_lock);
    tags.add(chosen, tag);
    return std::optional<Storage>(chosen);
  });
  return describe_value(load_state_dict(path, options), tags, hashes);
}

/// A GGUF file described as load_gguf gives it (block tensors as uint8 raw blocks): mapped, reading no tensor data
/// unless hashing.
Description describe_gguf(const std::filesystem::path& path, bool hashes) {
  StorageTags tags;
  LoadOptions options{.mmap = MapMode::read_only};
  options.map_location = MapLocation::Function([&](const Storage& bytes, std::string_view tag) {
    Storage chosen = hashes ? bytes : meta_storage(bytes.size_bytes());
    tags.add(chosen, tag);
    return std::optional<Storage>(chosen);
  });
  return describe_value(load_gguf(path, options), tags, hashes);
}

/// What the tree of a GGUF file, or of a split model's parts (the first holds the metadata), does not show: each
/// metadata value (long ones cut) and each tensor's ggml type, shape in elements (torch order) and first byte (in
/// which part, for a split model).
std::string gguf_details(const std::vector<std::filesystem::path>& parts);

/// The first line of the tree for a sharded checkpoint.
std::string sharded_header_line(const std::string& shown, const StateDictLayout& layout) {
  std::string line =
      fmt::format("{}: {}, {} shard{}, index {}", shown, state_dict_format_name(layout), layout.files.size(),
                  layout.files.size() == 1 ? "" : "s", escape_controls(layout.index.filename().string()));
  if (layout.total_size) line += fmt::format(", metadata.total_size {}", *layout.total_size);
  return line;
}

/// The first line of the tree for a safetensors file.
std::string safetensors_header_line(const std::string& shown, const std::filesystem::path& file) {
  const SafetensorsHeader header = read_safetensors_header(file);
  std::string line = fmt::format("{}: safetensors, header {} B", shown, header.header_bytes);
  if (header.metadata) {
    std::string items;
    for (const auto& [key, value] : *header.metadata) {
      items += fmt::format("{}{}: {}", items.empty() ? "" : ", ", escape_controls(key), escape_controls(value));
    }
    line += ", __metadata__ {" + items + "}";
  }
  return line;
}

/// The first line of the tree; `shown` is the path as given, already escaped.
std::string header_line(const std::string& shown, FileFormat format, const std::filesystem::path& path) {
  switch (format) {
    case FileFormat::torch_zip: {
      const ArchiveInfo info = read_archive_info(path);
      return fmt::format("{}: torch-zip, version {}, {} records, archive prefix \"{}\"{}", shown, info.version,
                         info.records.size(), escape_controls(info.prefix), info.big_endian ? ", big-endian data" : "");
    }
    case FileFormat::torch_legacy: return fmt::format("{}: torch-legacy", shown);
    case FileFormat::tensordict: return fmt::format("{}: tensordict memmap tree", shown);
    case FileFormat::gguf: {
      const GgufHeader header = read_gguf_header(path);
      return fmt::format("{}: gguf, version {}, {} metadata keys, alignment {}", shown, header.version,
                         header.keys.size(), header.alignment);
    }
    case FileFormat::safetensors:  // safetensors_header_line
    case FileFormat::npy:          // inspect_numpy
    case FileFormat::npz:
    case FileFormat::unknown: break;
  }
  return shown;
}

/// Long values cut for the tree (inspect --json has them whole).
std::string shortened(const std::string& text) {
  constexpr std::size_t most = 100;
  if (text.size() <= most) return text;
  std::size_t cut = most - 20;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0u) == 0x80u) --cut;  // not inside a UTF-8 sequence
  return fmt::format("{}... ({} bytes)", text.substr(0, cut), text.size());
}

std::string shown_path(const std::string& path) { return path.empty() ? "(root)" : escape_controls(path); }

std::string gguf_details(const std::vector<std::filesystem::path>& parts) {
  std::string out = "metadata:\n";
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const GgufHeader header = read_gguf_header(parts[k]);
    if (k == 0) {
      for (const GgufKeyInfo& key : header.keys) {
        const Value* value = header.metadata.as_dict().find(key.key);
        out += fmt::format("  {} = {}\n", escape_controls(key.key),
                           escape_controls(shortened(value != nullptr ? python_repr(*value) : "?")));
      }
      out += "ggml types (shape in elements, first byte):\n";
    }
    const std::string part = parts.size() > 1 ? fmt::format("part {}, ", k + 1) : "";
    for (const GgufTensorInfo& info : header.tensors) {
      std::string shape;
      for (const std::int64_t extent : info.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(extent);
      out += fmt::format("  {}  {}  [{}]  {}byte {}\n", escape_controls(info.name), ggml_type_name(info.type), shape,
                         part, header.data_offset + info.offset);
    }
  }
  return out;
}

/// The tree for people: containers as headings, leaves in aligned columns, then totals and shared storages.
/// Text from the file (keys, tags, class names, values) is escaped: it must not drive the user's terminal.
std::string render_tree(const Description& d, const std::string& header) {
  const auto left_of = [](const TreeNode& node) {
    return std::string(2 * node.depth, ' ') + escape_controls(node.label);
  };
  std::size_t left = 0;
  std::size_t type = 0;
  std::size_t shape = 0;
  std::size_t tag = 0;
  std::size_t bytes = 0;
  for (const TreeNode& node : d.tree) {
    if (node.kind == TreeNode::Kind::container) continue;
    left = std::max(left, std::max<std::size_t>(left_of(node).size(), 6));
    if (node.kind == TreeNode::Kind::value) {
      type = std::max(type, d.values[node.index].type.size());
      continue;
    }
    const TensorRecord& r = d.tensors[node.index];
    type = std::max(type, dtype_name(r.tensor.dtype()).size());
    shape = std::max(shape, to_string(r.tensor.sizes()).size());
    tag = std::max(tag, escape_controls(r.tag).size());
    bytes = std::max(bytes, human_bytes(r.tensor.nbytes()).size());
  }
  left = std::min<std::size_t>(left, 60);

  std::vector<std::size_t> users(d.storage_bytes.size(), 0);
  for (const TensorRecord& r : d.tensors) {
    if (r.storage) ++users[*r.storage];
  }

  std::string out = header + "\n";
  for (const TreeNode& node : d.tree) {
    if (node.kind == TreeNode::Kind::container) {
      out += fmt::format("{}{}{}\n", left_of(node), node.label.empty() ? "" : ": ", escape_controls(node.text));
      continue;
    }
    const std::string name = node.depth == 0 && node.label.empty() ? "(root)" : left_of(node);
    if (node.kind == TreeNode::Kind::value) {
      const ValueRecord& r = d.values[node.index];
      out += fmt::format("{:<{}}  {:<{}}  {}\n", name, left, r.type, type, escape_controls(shortened(r.text)));
      continue;
    }
    const TensorRecord& r = d.tensors[node.index];
    std::string line = fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>{}}  ", name, left, dtype_name(r.tensor.dtype()),
                                   type, to_string(r.tensor.sizes()), shape, escape_controls(r.tag), tag,
                                   human_bytes(r.tensor.nbytes()), bytes);
    if (r.storage) {
      line += fmt::format("storage #{}{}", *r.storage, users[*r.storage] > 1 ? " (shared)" : "");
    } else {
      line += "no data (saved on meta)";
    }
    if (r.parameter) line += "  Parameter";
    if (r.tensor.requires_grad()) line += "  requires_grad";
    if (r.sha256) line += "  sha256 " + *r.sha256;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }

  std::uint64_t total = 0;
  for (const std::uint64_t b : d.storage_bytes) total += b;
  const auto meta = static_cast<std::size_t>(
      std::count_if(d.tensors.begin(), d.tensors.end(), [](const TensorRecord& r) { return !r.has_record; }));
  out += fmt::format("{} tensor{} on {} storage{}, {} of data{}", d.tensors.size(), d.tensors.size() == 1 ? "" : "s",
                     d.storage_bytes.size(), d.storage_bytes.size() == 1 ? "" : "s", human_bytes(total),
                     total >= 1024 ? fmt::format(" ({} B)", total) : "");
  if (meta != 0) out += fmt::format(", {} saved on meta without data", meta);
  out += fmt::format("; {} other value{}\n", d.values.size(), d.values.size() == 1 ? "" : "s");
  for (std::size_t id = 0; id < users.size(); ++id) {
    if (users[id] < 2) continue;
    std::string paths;
    std::size_t listed = 0;
    for (const TensorRecord& r : d.tensors) {
      if (r.storage != id) continue;
      if (listed++ == 8) {
        paths += ", ...";
        break;
      }
      paths += (paths.empty() ? "" : ", ") + shown_path(r.path);
    }
    out += fmt::format("storage #{} ({}) is shared by {} tensors: {}\n", id, human_bytes(d.storage_bytes[id]),
                       users[id], paths);
  }
  if (std::any_of(d.tensors.begin(), d.tensors.end(), [](const TensorRecord& r) { return r.tag == "?"; })) {
    out += "device tags marked ? are not read from legacy files without --hash\n";
  }
  return out;
}

/// The first line of the tree for a URL: the format, a sharded checkpoint's shard count, safetensors' __metadata__.
std::string url_header_line(const std::string& shown, const Checkpoint& checkpoint) {
  std::string line = fmt::format("{}: {}", shown, format_label(checkpoint));
  if (checkpoint.sharded()) {
    std::set<std::string> shards;
    for (const CheckpointEntry& entry : checkpoint.entries()) {
      if (entry.location) shards.insert(entry.location->file.string());
    }
    line += fmt::format(", {} shard{}", shards.size(), shards.size() == 1 ? "" : "s");
  }
  if (checkpoint.format() == FileFormat::safetensors && checkpoint.metadata().is_dict()) {
    std::string items;
    for (const auto& [key, value] : checkpoint.metadata().as_dict()) {
      items += fmt::format("{}{}: {}", items.empty() ? "" : ", ", escape_controls(key_text(key)),
                           escape_controls(value.is_string() ? value.as_string() : python_repr(value)));
    }
    line += ", __metadata__ {" + items + "}";
  }
  return line;
}

/// inspect of a URL: the library reads it (a torch or .npz file whole, the others by ranges), so the tree comes from
/// the handle: its meta tree, or with --hash (and for torch files, whose bytes the handle holds) a load whose
/// map_location callable is told each storage's saved tag.
int inspect_url(const Args& args, const std::string& url) {
  const bool hashes = args.flag("hash");
  StorageTags tags;
  std::mutex tags_lock;  // shards load on several threads
  LoadOptions options{.strict = false, .sharded = {.allow_unlisted = args.flag("allow-unlisted")}};
  options.map_location = MapLocation::Function([&](const Storage& bytes, std::string_view tag) {
    Storage chosen = hashes ? bytes : meta_storage(bytes.size_bytes());
    const std::lock_guard<std::mutex> lock(tags_lock);
    tags.add(chosen, tag);
    return std::optional<Storage>(chosen);
  });
  const Checkpoint checkpoint = open(url, options);
  const FileFormat format = checkpoint.format();
  if (format == FileFormat::npy || format == FileFormat::npz) {  // listed as inspect_numpy lists a file
    const Value loaded = hashes ? checkpoint.load_all() : checkpoint.values();
    if (format == FileFormat::npz) return inspect_numpy_value(args, loaded, format);
    Dict dict;
    dict.ordered = true;
    dict.set(std::filesystem::path(checkpoint.name()).stem().string(), loaded);
    return inspect_numpy_value(args, Value(std::move(dict)), format);
  }
  const bool torch = format == FileFormat::torch_zip || format == FileFormat::torch_legacy;
  tags.fallback = "cpu";  // what the other formats' tensors load as
  const Description description =
      describe_value(hashes || torch ? checkpoint.load_all() : checkpoint.values(), tags, hashes);
  const std::string out =
      args.flag("json") ? description_json(description, format_label(checkpoint), hashes) + "\n"
                        : render_tree(description, url_header_line(escape_controls(redacted_url(url)), checkpoint));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return exit_ok;
}

}  // namespace

const CommandSpec inspect_spec{
    .name = "inspect",
    .operands = "PATH",
    .min_operands = 1,
    .max_operands = 1,
    .options = inspect_options,
    .summary =
        "Show what a torch.save file (zip or legacy), a safetensors file, a sharded checkpoint (*.index.json or a\n"
        "model directory), a .npy, .npz or GGUF file or a tensordict memmap directory holds: every tensor's dtype,\n"
        "shape, device tag, bytes and storage, the other values, totals, and the format (GGUF: then its metadata\n"
        "and each tensor's ggml type, shape in elements and first byte; block tensors show as their raw uint8).",
    .details =
        "PATH may be a URL (http://, https://, s3://: a file, a *.index.json or a model folder ending in '/'), read\n"
        "with ranged GETs where the tool is built with TENSORFILE_REMOTE (S3: the AWS_* environment variables).\n"
        "A URL's tree comes from the library's handle (its first line names the format only); torch and .npz files\n"
        "are downloaded whole into memory, the other formats read their headers alone.\n"
        "\n"
        "The format is found by the library's open(), from the contents, never from the name. No tensor data is\n"
        "read unless --hash is given (the file is mapped; torch files load on the meta device, tensordict leaves\n"
        "are not opened).\n"
        "\n"
        "A sharded checkpoint is shown as the one dict load_state_dict merges, in the index's order.\n"
        "\n"
        "--json prints {\"format\": \"torch-zip\" | \"torch-legacy\" | \"tensordict\" | \"safetensors\" | \"npy\" | "
        "\"npz\" |\n"
        "\"safetensors-sharded\" | \"torch-zip-sharded\" | ..., \"tensors\": [{\"path\",\n"
        "\"dtype\", \"shape\", \"stride\", \"storage_offset\", \"requires_grad\", \"device\", \"storage\",\n"
        "\"sha256\" (with --hash)}], \"values\": [{\"path\", \"type\", \"value\"}]}: a path is \"\" for the root and\n"
        "the keys and indices below it joined by \"/\" (\"optim/state/0/exp_avg\"), as --select takes it and the\n"
        "library's named_tensors() gives it, keys unescaped; \"device\" is where the\n"
        "tensor loads with map_location \"cpu\" (\"meta\" for tensors saved without data); \"storage\" is an id\n"
        "shared by the tensors of one storage; sha256 hashes the values in C order, little-endian.\n"
        "The JSON follows tests/interop/torch_reference.py, which prints the same for real torch.",
};

int run_inspect(const Args& args) {
  require_url_support(args.operands()[0]);
  if (is_url(args.operands()[0])) return inspect_url(args, args.operands()[0]);
  const std::filesystem::path path = args.operands()[0];
  const bool hashes = args.flag("hash");
  const bool allow_unlisted = args.flag("allow-unlisted");
  // The library's one dispatch; the handle reads only the index (a torch pickle's storages as stand-ins).
  const Checkpoint checkpoint = open(path, {.strict = false, .sharded = {.allow_unlisted = allow_unlisted}});
  const FileFormat format = checkpoint.format();
  const std::filesystem::path file = checkpoint.name();  // a model directory's file, a sharded checkpoint's index
  if (format == FileFormat::npy || format == FileFormat::npz) return inspect_numpy(args, file, format);
  const std::string shown = escape_controls(args.operands()[0]);
  std::string out;
  if (format == FileFormat::safetensors || checkpoint.sharded()) {
    const Description description = describe_weights(path, hashes, allow_unlisted);
    if (args.flag("json")) {
      out = description_json(description, format_label(checkpoint), hashes) + "\n";
    } else {
      // The index's shards and metadata, which the handle does not keep.
      const StateDictLayout layout = checkpoint.sharded() ? resolve_state_dict(path) : StateDictLayout{};
      out = render_tree(description, checkpoint.sharded() ? sharded_header_line(shown, layout)
                                                          : safetensors_header_line(shown, file));
      if (format == FileFormat::gguf) out += gguf_details(layout.files);  // a split model's parts
    }
  } else {
    Description description;
    if (format == FileFormat::tensordict) {
      LoadOptions options{.mmap = MapMode::read_only};
      if (!hashes) options.map_location = Device::meta();
      description = describe_tensordict(load_memmap(file, options), hashes);
    } else if (format == FileFormat::gguf) {
      description = describe_gguf(file, hashes);
    } else {
      description = describe_torch_file(file, format, hashes);
    }
    out = args.flag("json") ? description_json(description, format_label(checkpoint), hashes) + "\n"
                            : render_tree(description, header_line(shown, format, file));
    if (format == FileFormat::gguf && !args.flag("json")) out += gguf_details({file});
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return exit_ok;
}

}  // namespace tensorfile::cli
