// SPDX-License-Identifier: MIT
// The tensorfile program's command-line parsing: a command's options and positionals, checked, no dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tensorfile::cli {

/// Exit statuses of every command.
inline constexpr int exit_ok = 0;          ///< success
inline constexpr int exit_file_error = 1;  ///< a file could not be read, written or verified
inline constexpr int exit_usage = 2;       ///< the command line is wrong

/// A wrong command line; main() prints it with a pointer to --help and exits with exit_usage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One option of a command, always spelled `--name` (`--name VALUE` or `--name=VALUE` when it takes one).
struct OptionSpec {
  std::string_view name{};        ///< without the dashes: "json"
  std::string_view value_name{};  ///< placeholder shown in help ("DEVICE"); empty for a flag
  std::string_view help{};        ///< one line
  bool repeatable = false;        ///< may be given more than once (read with Args::values)
};

/// What a command accepts, and its help text.
struct CommandSpec {
  std::string_view name{};                ///< "inspect"
  std::string_view operands{};            ///< positionals as shown in usage: "PATH", "IN OUT"
  std::size_t min_operands = 0;           ///< fewest positionals
  std::size_t max_operands = 0;           ///< most positionals
  std::span<const OptionSpec> options{};  ///< options besides --help
  std::string_view summary{};             ///< one line, for `tensorfile --help`
  std::string_view details{};             ///< paragraphs after the option list
};

/// A parsed command line: positionals in order, flags and option values by name.
class Args {
 public:
  /// Positional arguments in order.
  [[nodiscard]] const std::vector<std::string>& operands() const noexcept { return operands_; }
  /// Whether flag `name` was given.
  [[nodiscard]] bool flag(std::string_view name) const { return values_.contains(std::string(name)); }
  /// The value of option `name`, if given (the last one of a repeatable option).
  [[nodiscard]] std::optional<std::string> value(std::string_view name) const;
  /// Every value of option `name` in the order given (empty when absent).
  [[nodiscard]] std::vector<std::string> values(std::string_view name) const;
  /// Whether --help (or -h) was given; nothing else was checked then.
  [[nodiscard]] bool help() const noexcept { return help_; }

 private:
  friend Args parse_args(const CommandSpec& spec, std::span<const std::string_view> arguments);
  std::vector<std::string> operands_;
  std::map<std::string, std::vector<std::string>, std::less<>> values_;  // flags map to {""}
  bool help_ = false;
};

/// Parses the arguments after the command name against `spec`. `--` ends the options; `-` alone is an
/// operand. Throws UsageError for an unknown option, one given twice that is not repeatable, a missing or unexpected
/// value, or a wrong number of operands. -h or --help anywhere before `--` wins over every other problem.
[[nodiscard]] Args parse_args(const CommandSpec& spec, std::span<const std::string_view> arguments);

/// The --help text of a command: usage line, summary, options, details.
[[nodiscard]] std::string help_text(const CommandSpec& spec);

/// A whole number in [min, max] given to option `option`; throws UsageError naming the option otherwise.
[[nodiscard]] std::int64_t parse_integer(std::string_view text, std::string_view option, std::int64_t min,
                                         std::int64_t max);

}  // namespace tensorfile::cli
