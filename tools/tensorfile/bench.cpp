// SPDX-License-Identifier: MIT
// tensorfile bench: load times, GB/s and peak memory of heap, mmap, meta (and device) loads of one file.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tensorfile/checkpoint.hpp>
#include <tensorfile/core/meta_backend.hpp>
#include <tensorfile/core/text.hpp>
#include <tensorfile/core/value_print.hpp>
#include <tensorfile/formats/tensordict/load_memmap.hpp>

#include "commands.hpp"
#include "formats.hpp"
#include "urls.hpp"

namespace tensorfile::cli {

namespace {

constexpr std::array bench_options{
    OptionSpec{"map-location", "DEVICE", "also load straight to DEVICE (cuda:N); needs tensorfile built with CUDA"},
    OptionSpec{"repeat", "N", "loads per mode (default 3)"},
    OptionSpec{"threads", "N", "threads reading at once (a file's data, or shards); default: the library's choice"},
    OptionSpec{"huge-pages", "WHEN",
               "advise heap loads' memory for huge pages: on, or off (default, unless TENSORFILE_HUGE_PAGES=1)"},
    OptionSpec{"allow-unlisted", "", "sharded PATH: leave out a shard's tensors that its index does not list"},
};

/// The host storages of a loaded tree, each once.
std::vector<Storage> host_storages(const std::vector<Tensor>& tensors) {
  std::map<std::pair<const std::byte*, std::size_t>, Storage> unique;
  for (const Tensor& t : tensors) {
    if (t.device().is_cpu()) unique.emplace(std::make_pair(t.storage().data(), t.storage().size_bytes()), t.storage());
  }
  std::vector<Storage> out;
  for (auto& [key, storage] : unique) out.push_back(std::move(storage));
  return out;
}

std::vector<Tensor> tensors_of(const Value& v) {
  std::vector<Tensor> out;
  for (auto& [path, t] : named_tensors(v)) out.push_back(std::move(t));
  return out;
}

std::vector<Tensor> tensors_of(const TensorDict& td) {
  std::vector<Tensor> out;
  td.for_each_leaf([&](const NestedKey&, const Entry& leaf) {
    if (leaf.is_tensor()) out.push_back(leaf.as_tensor());
    if (leaf.is_nested_tensor()) {
      out.push_back(leaf.as_nested_tensor().values);
      out.push_back(leaf.as_nested_tensor().nested_sizes);
    }
  });
  return out;
}

/// Reads one byte of every page of every storage, so a mapping is made resident.
void touch(const std::vector<Tensor>& tensors) {
  for (const Storage& s : host_storages(tensors)) {
    const auto* p = reinterpret_cast<const volatile unsigned char*>(s.data());
    for (std::size_t i = 0; i < s.size_bytes(); i += 4096) (void)p[i];  // a volatile read is never left out
  }
}

/// Resets the peak resident size (VmHWM; Linux >= 4.0); false where that is not possible.
bool reset_peak_memory() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

/// The peak resident size since the last reset: VmHWM, which clear_refs resets (getrusage's ru_maxrss,
/// which it does not, would carry one mode's peak into the next mode's row).
std::uint64_t peak_memory_bytes() {
  std::ifstream status("/proc/self/status");
  std::string field;
  std::uint64_t kib = 0;
  while (status >> field) {
    if (field == "VmHWM:" && status >> kib) return kib * 1024;
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

std::string duration_text(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.1f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.3f} s", seconds);
}

struct Mode {
  std::string name;
  bool reads_data;            // GB/s is meaningful
  std::function<void()> run;  // one load (and what the mode does with it)
};

struct Result {
  std::vector<double> seconds;
  std::uint64_t peak = 0;
};

Result measure(const Mode& mode, std::int64_t repeat, bool& peak_reset) {
  Result result;
  peak_reset = reset_peak_memory() && peak_reset;
  for (std::int64_t i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    mode.run();
    result.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  result.peak = peak_memory_bytes();
  return result;
}

}  // namespace

const CommandSpec bench_spec{
    .name = "bench",
    .operands = "PATH",
    .min_operands = 1,
    .max_operands = 1,
    .options = bench_options,
    .summary =
        "Time loading a torch, safetensors (single or sharded), .npz or .npy file or a tensordict tree: heap,\n"
        "mmap, meta (and a device), GB/s and peak memory.",
    .details =
        "PATH may be a URL (http://, https://, s3://; built with TENSORFILE_REMOTE, S3 from the AWS_* environment\n"
        "variables): then the modes are heap (every tensor fetched, each load), meta and --map-location's device.\n"
        "\n"
        "Modes: heap (every byte read into memory; for a tensordict tree, mapped then copied), mmap (views of a\n"
        "mapping, nothing read yet), mmap+touch (the mapping made resident, one byte a page), meta (shapes and\n"
        "dtypes only), and with --map-location the load straight to that device. Each runs --repeat times. The table\n"
        "shows the first load apart from the repeats: the first fills memory the process has not used before\n"
        "(as a program that loads a model once does), the repeats reuse memory the allocator kept from the load\n"
        "before, so they are usually faster. GB/s: 10^9 bytes of tensor data a second, of the first load and of\n"
        "the best repeat. Peak RSS: the peak resident memory during that mode alone (VmHWM, reset between\n"
        "modes where Linux allows it). The first load of the first mode may read from disk; later ones usually\n"
        "from the page cache.\n"
        "\n"
        "Without CUDA support built in, --map-location cuda:N prints the library's DeviceError and exits 1.",
};

int run_bench(const Args& args) {
  require_url_support(args.operands()[0]);
  const std::filesystem::path path = args.operands()[0];
  const bool url = is_url(path.native());
  const std::string shown = escape_controls(redacted_url(args.operands()[0]));
  const std::int64_t repeat = args.value("repeat") ? parse_integer(*args.value("repeat"), "repeat", 1, 1000) : 3;
  std::optional<Device> device;
  if (const auto text = args.value("map-location")) {
    try {
      device = Device::parse(*text);
    } catch (const ArgumentError& error) {
      throw UsageError("--map-location: " + error.reason());
    }
    if (!device->is_cuda())
      throw UsageError(fmt::format("--map-location takes a CUDA device (cuda:N), got '{}'", *text));
    (void)Tensor::zeros({1}, DType::UInt8).to(*device);  // the library's DeviceError when CUDA is not built in
  }

  const std::size_t threads =
      args.value("threads") ? static_cast<std::size_t>(parse_integer(*args.value("threads"), "threads", 1, 256)) : 0;
  const bool allow_unlisted = args.flag("allow-unlisted");
  const HugePages pages =
      args.value("huge-pages") ? parse_huge_pages(*args.value("huge-pages")) : HugePages::from_environment;
  const Checkpoint checkpoint = open(path, {.strict = false, .sharded = {.allow_unlisted = allow_unlisted}});
  std::vector<Mode> modes;
  std::uint64_t data_bytes = 0;
  std::size_t tensor_count = 0;
  if (checkpoint.format() == FileFormat::tensordict) {
    // A tree is timed as the TensorDict it loads as (the generic load adds to_value's walk to every mode).
    const auto load_tree = [path, threads, pages](LoadOptions options) {
      options.mmap = MapMode::read_only;
      options.threads = threads;
      options.huge_pages = pages;
      return load_memmap(path, options);
    };
    const TensorDict shapes = load_tree({.map_location = Device::meta()});
    for (const Tensor& t : tensors_of(shapes)) data_bytes += t.nbytes();
    tensor_count = tensors_of(shapes).size();
    modes.push_back({"heap (copy)", true, [=] { (void)load_tree({}).clone(); }});
    modes.push_back({"mmap", false, [=] { (void)load_tree({}); }});
    modes.push_back({"mmap+touch", true, [=] { touch(tensors_of(load_tree({}))); }});
    modes.push_back({"meta", false, [=] { (void)load_tree({.map_location = Device::meta()}); }});
    if (device) modes.push_back({device->str(), true, [=] { (void)load_tree({.map_location = *device}); }});
  } else if (url) {
    // A remote object is read, never mapped: the heap mode reads every tensor over the network each time, meta only
    // what open() reads.
    const auto load_url = [path, threads, pages, allow_unlisted](MapLocation where) {
      return load(path, {.map_location = std::move(where),
                         .threads = threads,
                         .huge_pages = pages,
                         .strict = false,
                         .sharded = {.allow_unlisted = allow_unlisted}});
    };
    for (const CheckpointEntry& entry : checkpoint.entries()) data_bytes += entry.nbytes;
    tensor_count = checkpoint.entries().size();
    modes.push_back({"heap", true, [=] { (void)load_url(Device::cpu()); }});
    modes.push_back({"meta", false, [=] { (void)load_url(Device::meta()); }});
    if (device) modes.push_back({device->str(), true, [=] { (void)load_url(*device); }});
  } else {
    // Every other format through the library's generic load.
    const auto load_file = [path, threads, pages, allow_unlisted](MapLocation where, bool mmap) {
      return load(path, {.map_location = std::move(where),
                         .mmap = mmap ? std::optional(MapMode::copy_on_write) : std::nullopt,
                         .threads = threads,
                         .huge_pages = pages,
                         .strict = false,
                         .sharded = {.allow_unlisted = allow_unlisted}});
    };
    std::atomic<std::uint64_t> stored{0};  // each storage's bytes once, told to the callable (shards load in parallel)
    tensor_count = named_tensors(load_file(MapLocation::Function([&stored](const Storage& bytes, std::string_view) {
                                             stored += bytes.size_bytes();
                                             return std::optional<Storage>(meta_storage(bytes.size_bytes()));
                                           }),
                                           true))
                       .size();
    data_bytes = stored;
    modes.push_back({"heap", true, [=] { (void)load_file(Device::cpu(), false); }});
    modes.push_back({"mmap", false, [=] { (void)load_file(Device::cpu(), true); }});
    modes.push_back({"mmap+touch", true, [=] { touch(tensors_of(load_file(Device::cpu(), true))); }});
    modes.push_back({"meta", false, [=] { (void)load_file(Device::meta(), true); }});
    if (device) modes.push_back({device->str(), true, [=] { (void)load_file(*device, false); }});
  }

  fmt::print("{}: {}, {} tensor{}, {} of tensor data; {} load{} per mode\n", shown, format_label(checkpoint),
             tensor_count, tensor_count == 1 ? "" : "s", human_bytes(data_bytes), repeat, repeat == 1 ? "" : "s");
  fmt::print("{:<12}  {:>10}  {:>8}  {:>12}  {:>14}  {:>8}  {:>10}\n", "mode", "first load", "GB/s", "repeats best",
             "repeats median", "GB/s", "peak RSS");
  bool peak_reset = true;
  for (const Mode& mode : modes) {
    const Result r = measure(mode, repeat, peak_reset);
    const auto rate = [&](double seconds) {
      return mode.reads_data && seconds > 0 && data_bytes > 0
                 ? fmt::format("{:.2f}", static_cast<double>(data_bytes) / seconds / 1e9)
                 : std::string("-");
    };
    const double first = r.seconds.front();
    std::vector<double> repeats(r.seconds.begin() + 1, r.seconds.end());
    std::sort(repeats.begin(), repeats.end());
    const bool any = !repeats.empty();
    fmt::print("{:<12}  {:>10}  {:>8}  {:>12}  {:>14}  {:>8}  {:>10}\n", mode.name, duration_text(first), rate(first),
               any ? duration_text(repeats.front()) : "-", any ? duration_text(repeats[repeats.size() / 2]) : "-",
               any ? rate(repeats.front()) : "-", human_bytes(r.peak));
  }
  if (!peak_reset) fmt::print("(peak RSS could not be reset between modes: each is the peak since the start)\n");
  return exit_ok;
}

}  // namespace tensorfile::cli
