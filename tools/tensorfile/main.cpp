// SPDX-License-Identifier: MIT
// tensorfile: inspect, convert, verify, scan and benchmark checkpoints in every format the library reads (torch zip
// and legacy, safetensors, sharded indexes and model folders, .npy, .npz, tensordict trees), without Python. What
// a PATH holds is found by the library (open(), or resolve_state_dict() where a damaged file must still reach a
// check); option flags are the LoadOptions / SaveOptions fields in kebab-case. PATH and IN may also be URLs
// (http://, https://, s3://) where the tool is built with TENSORFILE_REMOTE: urls.cpp includes <tensorfile/remote.hpp>,
// which registers the library's URL opener; S3 takes the AWS_* environment variables; messages name a URL without
// its user information and query. Without TENSORFILE_REMOTE a URL is an error that names the build option.
//
//   tensorfile inspect PATH [--json] [--hash] [--allow-unlisted]
//   tensorfile convert IN OUT [--to pt|memmap|safetensors|npz|npy] [--max-shard-size SIZE] [--metadata KEY=VALUE]...
//                     [--map-location WHERE] [--mmap MODE] [--select PATTERN]... [--threads N] [--direct-reads WHEN]
//                     [--huge-pages WHEN] [--verify-crc] [--allow-unlisted] [--strict] [--quiet]
//                     [--world W --rank R --split RULES [--even tensor_split|chunk]]
//   tensorfile verify PATH [--allow MODULE.NAME]... [--json] [--allow-unlisted]
//   tensorfile bench PATH [--map-location DEVICE] [--repeat N] [--threads N] [--huge-pages WHEN] [--allow-unlisted]
//   tensorfile scan PATH... [--json] [--allow MODULE.NAME]... [--threads N] [--quiet]
//
// Exit status: 0 success, 1 a file error (the library's message on stderr), 2 a wrong command line.
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tensorfile/core/error.hpp>
#include <tensorfile/core/text.hpp>
#include <tensorfile/version.hpp>

#include "commands.hpp"
#include "formats.hpp"
#include "urls.hpp"

namespace {

using namespace tensorfile::cli;

struct Command {
  const CommandSpec& spec;
  int (*run)(const Args&);
};

const std::array<Command, 5> commands{{
    {inspect_spec, run_inspect},
    {convert_spec, run_convert},
    {verify_spec, run_verify},
    {bench_spec, run_bench},
    {scan_spec, run_scan},
}};

std::string program_help() {
  std::string out =
      "usage: tensorfile COMMAND [options] ARGS...\n\n"
      "Read and write torch.save, safetensors, NumPy and tensordict files without Python.\n\ncommands:\n";
  for (const Command& command : commands) {
    // The whole summary, its lines (wrapped where the spec breaks them) indented under the first.
    std::string summary(command.spec.summary);
    for (std::size_t at = summary.find('\n'); at != std::string::npos; at = summary.find('\n', at + 1)) {
      summary.insert(at + 1, 12, ' ');
    }
    out += fmt::format("  {:<8}  {}\n", command.spec.name, summary);
  }
  out += fmt::format(
      "\nPATH and IN may be URLs (http://, https://, s3://; S3 credentials from the AWS_* environment variables){}.\n"
      "Run 'tensorfile COMMAND --help' for a command's options.\n"
      "Exit status: 0 success, 1 a file error (message on stderr), 2 a wrong command line.\n",
      urls_supported() ? "" : "; this build has no URL support: rebuild with -DTENSORFILE_REMOTE=ON and libcurl");
  return out;
}

int usage_error(std::string_view command, std::string_view message) {
  const std::string where = command.empty() ? "tensorfile" : fmt::format("tensorfile {}", command);
  fmt::print(stderr, "{}: {}\nRun '{} --help' for usage.\n", where, tensorfile::escape_controls(message), where);
  return exit_usage;
}

int run(int argc, char** argv) {
  const std::vector<std::string_view> arguments(argv + 1, argv + argc);
  if (arguments.empty()) {
    std::fputs(program_help().c_str(), stderr);
    return exit_usage;
  }
  const std::string_view name = arguments.front();
  if (name == "-h" || name == "--help" || name == "help") {
    std::fputs(program_help().c_str(), stdout);
    return exit_ok;
  }
  if (name == "--version") {
    fmt::print("tensorfile {}.{}.{}\n", TENSORFILE_VERSION_MAJOR, TENSORFILE_VERSION_MINOR, TENSORFILE_VERSION_PATCH);
    return exit_ok;
  }
  for (const Command& command : commands) {
    if (command.spec.name != name) continue;
    try {
      const Args args = parse_args(command.spec, std::span(arguments).subspan(1));
      if (args.help()) {
        std::fputs(help_text(command.spec).c_str(), stdout);
        return exit_ok;
      }
      return command.run(args);
    } catch (const UsageError& error) {
      return usage_error(name, error.what());
    }
  }
  return usage_error("", fmt::format("unknown command '{}'", name));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int status = run(argc, argv);
    if (std::fflush(stdout) != 0) {
      std::perror("tensorfile: cannot write the output");
      return exit_file_error;
    }
    return status;
  } catch (const tensorfile::Error& error) {
    std::fflush(stdout);
    fmt::print(stderr, "{}\n", tensorfile::escape_controls(with_flag_names(error.message())));  // what() stops at NUL
  } catch (const std::filesystem::filesystem_error& error) {
    std::fflush(stdout);
    fmt::print(stderr, "tensorfile: {}\n", tensorfile::escape_controls(error.what()));
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "tensorfile: out of memory\n");
  } catch (const std::exception& error) {
    std::fflush(stdout);
    fmt::print(stderr, "tensorfile: {}\n", tensorfile::escape_controls(error.what()));
  }
  return exit_file_error;
}
