// SPDX-License-Identifier: MIT
// Tests of the tensorfile program's hand-written argument parser (tools/tensorfile/args.hpp).
#include "tensorfile_catch.hpp"

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "formats.hpp"

namespace {

using namespace tensorfile::cli;

constexpr std::array test_options{
    OptionSpec{"json", "", "print JSON"},
    OptionSpec{"to", "FORMAT", "output format"},
    OptionSpec{"map-location", "WHERE", "where tensors go"},
    OptionSpec{"allow", "NAME", "may repeat", true},
};

const CommandSpec test_spec{
    .name = "demo",
    .operands = "IN [OUT]",
    .min_operands = 1,
    .max_operands = 2,
    .options = test_options,
    .summary = "A command for the tests.",
    .details = "More words.",
};

Args parse(std::vector<std::string_view> arguments) { return parse_args(test_spec, arguments); }

std::string usage_message(std::vector<std::string_view> arguments) {
  try {
    (void)parse(std::move(arguments));
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("parse_args") {
  SECTION("operands, flags and values in any order") {
    const Args args = parse({"--to", "pt", "in.pt", "--json", "out"});
    CHECK(args.operands() == std::vector<std::string>{"in.pt", "out"});
    CHECK(args.flag("json"));
    CHECK(args.value("to") == "pt");
    CHECK_FALSE(args.value("map-location").has_value());
    CHECK_FALSE(args.help());
  }
  SECTION("--name=value, and values that look like options") {
    const Args args = parse({"--map-location=cuda:1=cpu", "in", "--to", "--json"});
    CHECK(args.value("map-location") == "cuda:1=cpu");
    CHECK(args.value("to") == "--json");
    CHECK_FALSE(args.flag("json"));
  }
  SECTION("-- ends the options; - alone is an operand") {
    const Args args = parse({"--", "--json", "-"});
    CHECK(args.operands() == std::vector<std::string>{"--json", "-"});
    CHECK_FALSE(args.flag("json"));
  }
  SECTION("an empty value is a value") { CHECK(parse({"in", "--to="}).value("to") == ""); }
  SECTION("--help and -h win over every other problem") {
    CHECK(parse({"--help"}).help());
    CHECK(parse({"--bogus", "-h", "a", "b", "c"}).help());
    CHECK(parse({"in", "--to", "--help"}).help());
    const Args after_end = parse({"--", "--help"});  // after --, an operand
    CHECK_FALSE(after_end.help());
    CHECK(after_end.operands() == std::vector<std::string>{"--help"});
  }
  SECTION("errors name the problem") {
    CHECK(usage_message({"in", "--bogus"}) == "unknown option '--bogus'");
    CHECK(usage_message({"in", "-j"}) == "unknown option '-j'; options are spelled --name");
    CHECK(usage_message({"in", "--json=yes"}) == "option '--json' takes no value");
    CHECK(usage_message({"in", "--to"}) == "option '--to' needs a value (FORMAT)");
    CHECK(usage_message({"in", "--to", "a", "--to=b"}) == "option '--to' is given twice");
    const Args repeated = parse({"in", "--allow", "a.b", "--allow=c.d"});
    CHECK(repeated.values("allow") == std::vector<std::string>{"a.b", "c.d"});
    CHECK(repeated.value("allow") == "c.d");
    CHECK(repeated.values("to").empty());
    CHECK(usage_message({}) == "expected 1 to 2 operands (IN [OUT]), got 0");
    CHECK(usage_message({"a", "b", "c"}) == "expected 1 to 2 operands (IN [OUT]), got 3");
  }
}

TEST_CASE("help_text") {
  CHECK(help_text(test_spec) ==
        "usage: tensorfile demo [options] IN [OUT]\n"
        "\n"
        "A command for the tests.\n"
        "\n"
        "options:\n"
        "  --json                print JSON\n"
        "  --to FORMAT           output format\n"
        "  --map-location WHERE  where tensors go\n"
        "  --allow NAME          may repeat\n"
        "  -h, --help            show this help and exit\n"
        "\n"
        "More words.\n");
}

TEST_CASE("parse_integer") {
  CHECK(parse_integer("3", "repeat", 1, 10) == 3);
  CHECK(parse_integer("10", "repeat", 1, 10) == 10);
  for (const std::string_view bad : {"0", "11", "", "3x", "-1", " 3", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_integer(bad, "repeat", 1, 10), UsageError);
  }
  try {
    (void)parse_integer("x", "repeat", 1, 10);
  } catch (const UsageError& error) {
    CHECK(std::string(error.what()) == "option '--repeat' needs a whole number from 1 to 10, got 'x'");
  }
}

TEST_CASE("parse_map_location") {
  SECTION("a device") {
    const tensorfile::MapLocation where = parse_map_location("cpu");
    CHECK(where.target_tag("cuda:0") == "cpu");
    CHECK(parse_map_location("meta").all_meta());
  }
  SECTION("tag remaps; tags not listed keep their own value") {
    const tensorfile::MapLocation where = parse_map_location("cuda:1=cuda:0,cuda:2=cpu");
    CHECK(where.target_tag("cuda:1") == "cuda:0");
    CHECK(where.target_tag("cuda:2") == "cpu");
    CHECK(where.target_tag("cpu") == "cpu");
  }
  SECTION("wrong spellings are usage errors") {
    for (const std::string_view bad : {"gpu", "cuda:x", "cuda:1=", "=cpu", "cuda:1=gpu", "cpu,", ""}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(parse_map_location(bad), UsageError);
    }
  }
}
