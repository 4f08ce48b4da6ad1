// SPDX-License-Identifier: MIT
// tensorfile scan PATH...: the safety scan of files and whole folders (a Hugging Face cache, a model directory),
// files scanned in parallel, and a table or JSON of the verdicts. Also the scan wording verify shares.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <tensorfile/core/text.hpp>
#include <tensorfile/scan.hpp>

#include "commands.hpp"
#include "progress.hpp"
#include "scan_report.hpp"

namespace tensorfile::cli {

namespace {

std::string where(const std::string& member, std::uint64_t offset) {
  return member.empty() ? fmt::format("byte {}", offset) : fmt::format("{}, byte {}", escape_controls(member), offset);
}

}  // namespace

ScanOptions scan_options(const Args& args) {
  ScanOptions options;
  for (const std::string& allow : args.values("allow")) {
    std::string_view rest = allow;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      if (name.find('.') == std::string_view::npos) {
        throw UsageError(fmt::format("--allow takes MODULE.NAME, got \"{}\"", escape_controls(name)));
      }
      options.allow.emplace_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return options;
}

std::vector<std::string> unsafe_lines(const ScanReport& report) {
  std::vector<std::string> lines;
  for (const ScannedGlobal& global : report.globals) {
    const std::string name = escape_controls(global.full_name());
    if (global.verdict == GlobalVerdict::dangerous) {
      lines.push_back(fmt::format("UNSAFE: {} {} ({})", global.called ? "calls" : "references", name,
                                  where(global.member, global.offset)));
    } else if (global.verdict == GlobalVerdict::unknown) {
      lines.push_back(fmt::format("NOT SAFE FOR torch.load(weights_only=True): {} ({})", name,
                                  where(global.member, global.offset)));
    }
  }
  for (const ScanFinding& anomaly : report.anomalies) {
    lines.push_back(
        fmt::format("SUSPICIOUS: {} ({})", escape_controls(anomaly.what), where(anomaly.member, anomaly.offset)));
  }
  for (const ScanFinding& error : report.errors) {
    lines.push_back(
        fmt::format("UNREADABLE PICKLE: {} ({})", escape_controls(error.what), where(error.member, error.offset)));
  }
  return lines;
}

std::string worst_global(const ScanReport& report) {
  const auto worst =
      std::max_element(report.globals.begin(), report.globals.end(),
                       [](const ScannedGlobal& a, const ScannedGlobal& b) { return a.verdict < b.verdict; });
  if (worst == report.globals.end() || worst->verdict <= GlobalVerdict::allowed) return "-";
  return fmt::format("{} {}", verdict_name(worst->verdict), escape_controls(worst->full_name()));
}

std::string scan_json(const std::string& path, const ScanReport& report) {
  std::string out =
      fmt::format(R"({{"path": {}, "format": {}, "safe": {}, "worst": {}, "bytes_read": {}, )", json_string(path),
                  json_string(format_name(report.format)), report.safe() ? "true" : "false",
                  json_string(verdict_name(report.worst())), report.bytes_read);
  out += "\"globals\": [";
  for (std::size_t i = 0; i < report.globals.size(); ++i) {
    const ScannedGlobal& g = report.globals[i];
    out += fmt::format(R"({}{{"global": {}, "verdict": {}, "opcode": {}, "called": {}, "member": {}, "offset": {}}})",
                       i == 0 ? "" : ", ", json_string(g.full_name()), json_string(verdict_name(g.verdict)),
                       json_string(g.opcode), g.called ? "true" : "false", json_string(g.member), g.offset);
  }
  const auto findings = [&](const char* key, const std::vector<ScanFinding>& list) {
    out += fmt::format(R"(], "{}": [)", key);
    for (std::size_t i = 0; i < list.size(); ++i) {
      out += fmt::format(R"({}{{"what": {}, "member": {}, "offset": {}}})", i == 0 ? "" : ", ",
                         json_string(list[i].what), json_string(list[i].member), list[i].offset);
    }
  };
  findings("anomalies", report.anomalies);
  findings("errors", report.errors);
  return out + "]}";
}

namespace {

constexpr OptionSpec scan_option_list[] = {
    {"json", "", "print one JSON object per file (an array) instead of the table"},
    {"allow", "MODULE.NAME", "count this global as safe (repeatable; commas list several; never a dangerous one)",
     true},
    {"jobs", "N", "files scanned at once (default: the number of CPUs)"},
    {"quiet", "", "draw no progress bar (none is drawn with --json or when stderr is not a terminal)"},
};

bool scanned_file(const std::filesystem::path& path) {
  static constexpr std::string_view extensions[] = {".pt",     ".pth",         ".bin", ".ckpt", ".pkl",
                                                    ".pickle", ".safetensors", ".npz", ".npy",  ".tar"};
  const std::string extension = path.extension().string();
  return std::find(std::begin(extensions), std::end(extensions), extension) != std::end(extensions);
}

/// Whether `dir` is the root of a tensordict memmap tree (scanned as one target).
bool is_tree(const std::filesystem::path& dir) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(dir / "meta.json", ignored);
}

/// Whether `a` sorts before `b` component by component, as path::operator< orders the walk's paths ("x/y" before
/// "x-y"): their text compared with '/' below every other byte, which costs a folder of thousands of files far
/// less than comparing path objects.
bool path_before(const std::filesystem::path& a, const std::filesystem::path& b) {
  const std::string& x = a.native();
  const std::string& y = b.native();
  const auto [i, j] = std::mismatch(x.begin(), x.end(), y.begin(), y.end());
  if (j == y.end()) return false;  // b is a prefix of a, or equal
  if (i == x.end()) return true;
  const auto rank = [](char c) { return c == '/' ? 0 : static_cast<int>(static_cast<unsigned char>(c)) + 1; };
  return rank(*i) < rank(*j);
}

/// The files and tensordict trees under the operands, in a stable order.
std::vector<std::filesystem::path> scan_targets(const std::vector<std::string>& operands) {
  std::vector<std::filesystem::path> targets;
  for (const std::string& operand : operands) {
    const std::filesystem::path root = operand;
    if (!std::filesystem::is_directory(root) || is_tree(root)) {
      targets.push_back(root);
      continue;
    }
    const std::size_t first = targets.size();
    std::error_code error;
    auto it = std::filesystem::recursive_directory_iterator(
        root, std::filesystem::directory_options::follow_directory_symlink, error);
    for (; !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
      const std::filesystem::path& path = it->path();
      if (it->is_directory() && is_tree(path)) {
        targets.push_back(path);  // a memmap tree is one target
        it.disable_recursion_pending();
      } else if (it->is_regular_file() && scanned_file(path)) {  // HF cache blobs are reached through snapshots/
        targets.push_back(path);
      }
    }
    if (error) throw IoError("cannot list the folder", error.value(), {root});
    // Directory order is arbitrary.
    std::sort(targets.begin() + static_cast<std::ptrdiff_t>(first), targets.end(), path_before);
  }
  return targets;
}

struct Scanned {
  std::optional<ScanReport> report{};
  std::string error{};  // when the file could not be scanned at all
};

}  // namespace

const CommandSpec scan_spec{
    .name = "scan",
    .operands = "PATH...",
    .min_operands = 1,
    .max_operands = 1000000,
    .options = scan_option_list,
    .summary = "Tell whether checkpoints are safe to torch.load: every global their pickles reference, with a verdict.",
    .details =
        "Files and folders, recursively (.pt .pth .bin .ckpt .pkl .safetensors .npz .npy files and tensordict\n"
        "trees). Every pickle is walked opcode by opcode, never run; tensor data is not read. A global is a tensor\n"
        "rebuild, allowed (torch's weights_only allow-list), unknown (weights_only refuses it) or dangerous (runs\n"
        "code or touches the system: os.system, builtins.eval, subprocess...).\n"
        "\n"
        "Exit status 0 when every file is safe, 1 when one holds a dangerous or unknown global, a crafted or\n"
        "unreadable pickle, 2 for a wrong command line.",
};

int run_scan(const Args& args) {
  const ScanOptions options = scan_options(args);
  const std::vector<std::filesystem::path> targets = scan_targets(args.operands());
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const auto jobs = static_cast<unsigned>(args.value("jobs") ? parse_integer(*args.value("jobs"), "--jobs", 1, 256)
                                                             : static_cast<std::int64_t>(cpus));
  std::vector<Scanned> results(targets.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> scanned{0};
  ProgressBar progress("scanning", targets.size(), scanned, "files", !args.flag("quiet") && !args.flag("json"));
  const auto work = [&] {
    for (std::size_t i = next++; i < targets.size(); i = next++) {
      try {
        results[i].report = scan(targets[i], options);
      } catch (const Error& error) {
        results[i].error = error.message();
      }
      scanned.fetch_add(1, std::memory_order_relaxed);
    }
  };
  {
    std::vector<std::jthread> threads;
    for (unsigned t = 1; t < std::min<std::size_t>(jobs, targets.size()); ++t) threads.emplace_back(work);
    work();
  }
  progress.finish();
  bool unsafe = false;
  fmt::memory_buffer out;  // written at once: a line per file
  if (args.flag("json")) fmt::format_to(std::back_inserter(out), "[");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const std::string shown = escape_controls(targets[i].string());
    const Scanned& result = results[i];
    unsafe = unsafe || !result.report || !result.report->safe();
    if (args.flag("json")) {
      fmt::format_to(std::back_inserter(out), "{}{}", i == 0 ? "\n  " : ",\n  ",
                     result.report ? scan_json(targets[i].string(), *result.report)
                                   : fmt::format(R"({{"path": {}, "safe": false, "error": {}}})",
                                                 json_string(targets[i].string()), json_string(result.error)));
      continue;
    }
    if (!result.report) {
      fmt::format_to(std::back_inserter(out), "{}  -  -  UNREADABLE  {}\n", shown, escape_controls(result.error));
      continue;
    }
    const ScanReport& report = *result.report;
    const std::string verdict = report.safe()                                ? "safe"
                                : report.worst() == GlobalVerdict::dangerous ? "UNSAFE"
                                : report.worst() == GlobalVerdict::unknown   ? "NOT SAFE FOR weights_only"
                                                                             : "SUSPICIOUS";
    fmt::format_to(std::back_inserter(out), "{}  {}  {} tensor reference{}  {}  {}\n", shown,
                   format_name(report.format), report.persistent_ids, report.persistent_ids == 1 ? "" : "s", verdict,
                   worst_global(report));
  }
  if (args.flag("json")) fmt::format_to(std::back_inserter(out), "\n]\n");
  if (!args.flag("json")) {
    fmt::format_to(std::back_inserter(out), "{} file{} scanned, {}\n", targets.size(), targets.size() == 1 ? "" : "s",
                   unsafe ? "NOT ALL SAFE" : "all safe");
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return unsafe ? exit_file_error : exit_ok;
}

}  // namespace tensorfile::cli
