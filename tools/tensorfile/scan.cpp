// SPDX-License-Identifier: MIT
// tensorfile scan PATH...: the safety scan of files and whole folders (a Hugging Face cache, a model directory),
// files scanned in parallel, and a table or JSON of the verdicts. Also the scan wording verify shares.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <tensorfile/core/text.hpp>
#include <tensorfile/scan.hpp>
#include <tensorfile/state_dict.hpp>

#include "commands.hpp"
#include "formats.hpp"
#include "progress.hpp"
#include "scan_report.hpp"
#include "urls.hpp"

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

std::vector<std::string> leftover_lines(const std::filesystem::path& folder) {
  std::vector<std::string> lines;
  try {
    for (const std::filesystem::path& file : leftover_save_temporaries(folder)) {
      lines.push_back(
          fmt::format("NOTE: {} is a temporary an interrupted save left (the next save to the folder "
                      "removes it)",
                      escape_controls(file.string())));
    }
  } catch (const Error&) {  // an unreadable folder is the scan's or the check's error already
  }
  return lines;
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
  if (worst != report.globals.end() && worst->verdict > GlobalVerdict::allowed) {
    return fmt::format("{} {}", verdict_name(worst->verdict), escape_controls(worst->full_name()));
  }
  // No global is the reason: the first crafted construct or broken pickle is.
  const std::vector<ScanFinding>& findings = report.anomalies.empty() ? report.errors : report.anomalies;
  if (findings.empty()) return "-";
  return fmt::format("{} ({})", escape_controls(findings.front().what),
                     where(findings.front().member, findings.front().offset));
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
    {"threads", "N", "files scanned at once (default: twice the number of CPUs)"},
    {"quiet", "", "draw no progress bar (none is drawn with --json or when stderr is not a terminal)"},
};

/// Sorts paths component by component, as path::operator< orders them ("x/y" before "x-y"): the text compared with
/// '/' below every other byte. A path holds no NUL, so '/' becomes NUL for a plain (memcmp) sort and comes back after:
/// a folder of thousands of files sorts several times faster than with a byte-by-byte comparison.
void sort_paths(std::span<std::string> paths) {
  const auto swap_separator = [&](char from, char to) {
    for (std::string& path : paths) std::replace(path.begin(), path.end(), from, to);
  };
  swap_separator('/', '\0');
  std::sort(paths.begin(), paths.end());
  swap_separator('\0', '/');
}

/// The regular files under the operands, in a stable order (as text: each becomes a path on the thread that scans
/// it). Every file is a target, whatever its name: torch.load and numpy.load read a file by its bytes, and a
/// folder's meta.json makes none of its files data.
std::vector<std::string> scan_targets(const std::vector<std::string>& operands) {
  std::vector<std::string> targets;
  for (const std::string& operand : operands) {
    require_url_support(operand);
    if (is_url(operand)) {  // one object, read by ranges when scanned
      targets.push_back(operand);
      continue;
    }
    const std::filesystem::path root = operand;
    if (!std::filesystem::is_directory(root)) {
      targets.push_back(operand);
      // A sharded index: every file it names is scanned too, whatever its name (a JSON index holds no pickle).
      std::optional<StateDictLayout> layout;
      try {
        layout = resolve_state_dict(root);
      } catch (const Error&) {  // not an index: the file's own scan says what it is
      }
      if (layout && layout->sharded()) {
        for (const std::filesystem::path& shard : layout->files) targets.push_back(shard.native());
      }
      continue;
    }
    const std::size_t first = targets.size();
    std::error_code error;
    auto it = std::filesystem::recursive_directory_iterator(
        root, std::filesystem::directory_options::follow_directory_symlink, error);
    for (; !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
      std::error_code ignored;
      if (it->is_regular_file(ignored)) targets.push_back(it->path().native());
    }
    if (error) throw IoError("cannot list the folder", error.value(), {root});
    // Directory order is arbitrary.
    sort_paths(std::span(targets).subspan(first));
  }
  return targets;
}

/// One file's entry in the output, written by the thread that scanned it (a report is formatted and freed in
/// parallel, not one after another at the end).
struct ScanEntry {
  std::string text{};  // a table line, or a JSON object
  bool safe = false;
};

ScanEntry scan_entry(const std::string& target, const ScanOptions& options, bool json) {
  ScanReport report;
  const std::string shown = redacted_url(target);  // a URL without its credentials and query
  try {
    if (is_url(target)) {
      const std::unique_ptr<RangeReader> reader = open_url_reader(target);
      report = scan(*reader, options);
    } else {
      report = scan(std::filesystem::path(target), options);
    }
  } catch (const Error& error) {
    return {json ? fmt::format(R"({{"path": {}, "safe": false, "error": {}}})", json_string(shown),
                               json_string(error.message()))
                 : fmt::format("{}  -  -  UNREADABLE  {}\n", escape_controls(shown), escape_controls(error.message())),
            false};
  }
  if (json) return {scan_json(shown, report), report.safe()};
  const std::string_view verdict = report.safe()                                ? "safe"
                                   : report.worst() == GlobalVerdict::dangerous ? "UNSAFE"
                                   : report.worst() == GlobalVerdict::unknown   ? "NOT SAFE FOR weights_only"
                                                                                : "SUSPICIOUS";
  return {fmt::format("{}  {}  {} tensor reference{}  {}  {}\n", escape_controls(shown), format_name(report.format),
                      report.persistent_ids, report.persistent_ids == 1 ? "" : "s", verdict, worst_global(report)),
          report.safe()};
}

}  // namespace

const CommandSpec scan_spec{
    .name = "scan",
    .operands = "PATH...",
    .min_operands = 1,
    .max_operands = 1000000,
    .options = scan_option_list,
    .summary = "Tell whether checkpoints are safe to torch.load: every global their pickles reference, with a verdict.",
    .details =
        "A PATH may be the URL of one file (http://, https://, s3://; built with TENSORFILE_REMOTE, S3 from the\n"
        "AWS_* environment variables), read by ranges: a zip's directory and pickles, another file's first MiB\n"
        "(more only while a pickle walk needs it). An index URL's shards are not followed: give their URLs.\n"
        "\n"
        "Files and folders, recursively: every regular file, read by its content as torch.load and\n"
        "numpy.load(allow_pickle=True) read it, whatever its name. Every pickle is walked opcode by opcode, never\n"
        "run; tensor data is not read. A global is a tensor rebuild, allowed (torch 1.13's weights_only\n"
        "allow-list), unknown (weights_only refuses it) or dangerous (runs code or touches the system: os.system,\n"
        "builtins.eval, subprocess...). Bytes two readers read differently (two formats at once, two zip end\n"
        "records, zip names equal but for case) are SUSPICIOUS; a file that holds no pickle is safe.\n"
        "\n"
        "Exit status 0 when every file is safe, 1 when one holds a dangerous or unknown global, a crafted or\n"
        "unreadable pickle, 2 for a wrong command line.",
};

int run_scan(const Args& args) {
  const ScanOptions options = scan_options(args);
  const std::vector<std::string> targets = scan_targets(args.operands());
  // Twice the CPUs: a file not in the page cache leaves its thread waiting on the disk, and a thread the
  // scheduler first queues behind another (seen for a few ms on a 2-CPU VM) leaves a CPU idle. 1,000 small
  // checkpoints there: 15.8 ms with 2 threads, 11.6 ms with 4, 13.5 ms with 8. At most 64.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const auto jobs =
      static_cast<unsigned>(args.value("threads") ? parse_integer(*args.value("threads"), "--threads", 1, 256)
                                                  : std::min<std::int64_t>(std::int64_t{2} * cpus, 64));
  const bool json = args.flag("json");
  std::vector<ScanEntry> entries(targets.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> scanned{0};
  ProgressBar progress("scanning", targets.size(), scanned, "files", !args.flag("quiet") && !json);
  const auto work = [&] {
    for (std::size_t i = next++; i < targets.size(); i = next++) {
      entries[i] = scan_entry(targets[i], options, json);
      scanned.fetch_add(1, std::memory_order_relaxed);
    }
  };
  {
    std::vector<std::jthread> threads;
    for (unsigned t = 1; t < std::min<std::size_t>(jobs, targets.size()); ++t) threads.emplace_back(work);
    work();
  }
  progress.finish();
  const bool unsafe = std::any_of(entries.begin(), entries.end(), [](const ScanEntry& entry) { return !entry.safe; });
  std::string out;  // written at once: a line per file
  if (json) out += "[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (json) out += i == 0 ? "\n  " : ",\n  ";
    out += entries[i].text;
  }
  if (json) {
    out += "\n]\n";
  } else {
    // Hidden files are where saves write; each folder holding one is asked once.
    std::set<std::filesystem::path> folders;
    for (const std::string& target : targets) {
      if (is_url(target)) continue;
      const std::filesystem::path file = target;
      if (file.filename().native().starts_with('.')) folders.insert(file.parent_path());
    }
    for (const std::filesystem::path& folder : folders) {
      for (const std::string& line : leftover_lines(folder)) out += line + "\n";
    }
    out += fmt::format("{} file{} scanned, {}\n", targets.size(), targets.size() == 1 ? "" : "s",
                       unsafe ? "NOT ALL SAFE" : "all safe");
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return unsafe ? exit_file_error : exit_ok;
}

}  // namespace tensorfile::cli
