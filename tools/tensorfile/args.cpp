// SPDX-License-Identifier: MIT
// The tensorfile program's command-line parsing.
#include "args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace tensorfile::cli {

std::optional<std::string> Args::value(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(std::string_view name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

Args parse_args(const CommandSpec& spec, std::span<const std::string_view> arguments) {
  Args args;
  for (const std::string_view argument : arguments) {
    if (argument == "--") break;
    if (argument == "-h" || argument == "--help") {
      args.help_ = true;
      return args;
    }
  }
  bool options_ended = false;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string_view argument = arguments[i];
    if (options_ended || argument == "-" || !argument.starts_with("-")) {
      args.operands_.emplace_back(argument);
      continue;
    }
    if (argument == "--") {
      options_ended = true;
      continue;
    }
    if (!argument.starts_with("--")) {
      throw UsageError(fmt::format("unknown option '{}'; options are spelled --name", argument));
    }
    const std::string_view body = argument.substr(2);
    const std::size_t equals = body.find('=');
    const std::string_view name = body.substr(0, equals);
    const auto option =
        std::find_if(spec.options.begin(), spec.options.end(), [&](const OptionSpec& o) { return o.name == name; });
    if (option == spec.options.end()) throw UsageError(fmt::format("unknown option '--{}'", name));
    if (!option->repeatable && args.values_.contains(name))
      throw UsageError(fmt::format("option '--{}' is given twice", name));
    std::string value;
    if (option->value_name.empty()) {
      if (equals != std::string_view::npos) throw UsageError(fmt::format("option '--{}' takes no value", name));
    } else if (equals != std::string_view::npos) {
      value = body.substr(equals + 1);
    } else if (i + 1 < arguments.size()) {
      value = arguments[++i];
    } else {
      throw UsageError(fmt::format("option '--{}' needs a value ({})", name, option->value_name));
    }
    args.values_[std::string(name)].push_back(std::move(value));
  }
  const std::size_t count = args.operands_.size();
  if (count < spec.min_operands || count > spec.max_operands) {
    const std::string expected = spec.min_operands == spec.max_operands
                                     ? std::to_string(spec.min_operands)
                                     : fmt::format("{} to {}", spec.min_operands, spec.max_operands);
    throw UsageError(fmt::format("expected {} operand{} ({}), got {}", expected, spec.max_operands == 1 ? "" : "s",
                                 spec.operands, count));
  }
  return args;
}

std::string help_text(const CommandSpec& spec) {
  std::string out = fmt::format("usage: tensorfile {} [options] {}\n\n{}\n", spec.name, spec.operands, spec.summary);
  std::size_t width = std::string_view("-h, --help").size();
  const auto spelled = [](const OptionSpec& o) {
    return o.value_name.empty() ? fmt::format("--{}", o.name) : fmt::format("--{} {}", o.name, o.value_name);
  };
  for (const OptionSpec& option : spec.options) width = std::max(width, spelled(option).size());
  out += "\noptions:\n";
  for (const OptionSpec& option : spec.options)
    out += fmt::format("  {:<{}}  {}\n", spelled(option), width, option.help);
  out += fmt::format("  {:<{}}  {}\n", "-h, --help", width, "show this help and exit");
  if (!spec.details.empty()) out += fmt::format("\n{}\n", spec.details);
  return out;
}

std::int64_t parse_integer(std::string_view text, std::string_view option, std::int64_t min, std::int64_t max) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value < min || value > max) {
    throw UsageError(fmt::format("option '--{}' needs a whole number from {} to {}, got '{}'", option, min, max, text));
  }
  return value;
}

}  // namespace tensorfile::cli
