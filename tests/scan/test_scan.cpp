// SPDX-License-Identifier: MIT
// Tests of <tensorfile/scan.hpp>: hand-built pickles naming globals in every opcode form, crafted-pickle anomalies,
// truncation, torch zip records, tensordict side files and the committed torch fixtures.
#include <tensorfile/scan.hpp>

#include <string>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::byte_span;

namespace {

ScanReport scan_text(const std::string& pickle, const ScanOptions& options = {}) {
  return scan(byte_span(pickle), options);
}

// GLOBAL os system, called on ('x',): protocol 0.
const std::string os_system = "cos\nsystem\n(S'x'\ntR.";

}  // namespace

TEST_CASE("scan finds a GLOBAL and its call", "[scan]") {
  const ScanReport report = scan_text(os_system);
  REQUIRE(report.globals.size() == 1);
  const ScannedGlobal& global = report.globals[0];
  CHECK(global.full_name() == "os.system");
  CHECK(global.opcode == "GLOBAL");
  CHECK(global.offset == 0);
  CHECK(global.called);
  CHECK(global.verdict == GlobalVerdict::dangerous);
  CHECK(report.worst() == GlobalVerdict::dangerous);
  CHECK_FALSE(report.safe());
  CHECK(report.anomalies.empty());
  CHECK(report.errors.empty());
  CHECK(report.bytes_read == os_system.size());
}

TEST_CASE("scan resolves STACK_GLOBAL through memoised strings", "[scan]") {
  // \x8c SHORT_BINUNICODE, \x94 MEMOIZE, h BINGET, \x93 STACK_GLOBAL; the strings are fetched back from the memo.
  const std::string pickle = std::string(
                                 "\x80\x04\x8c\x08"
                                 "builtins\x94\x8c\x04"
                                 "eval\x94"
                                 "00h\x00h\x01\x93",
                                 27) +
                             "\x8c\x01x\x85R.";
  const ScanReport report = scan_text(pickle);
  REQUIRE(report.globals.size() == 1);
  CHECK(report.globals[0].full_name() == "builtins.eval");
  CHECK(report.globals[0].opcode == "STACK_GLOBAL");
  CHECK(report.globals[0].offset == 26);
  CHECK(report.globals[0].called);
  CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  CHECK(report.anomalies.empty());
}

TEST_CASE("scan follows memo indices written out of order", "[scan]") {
  SECTION("a far index, then MEMOIZE numbering after every index written") {
    // LONG_BINPUT 5 holds "os"; MEMOIZE then writes index 1 (the memo has one entry), as Python's unpickler does.
    const std::string pickle = std::string("\x80\x04\x8c\x02osr\x05\x00\x00\x00", 11) +
                               "0\x8c\x06system\x94"
                               "0h\x05h\x01\x93N\x85R.";
    const ScanReport report = scan_text(pickle);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "os.system");
    CHECK(report.globals[0].offset == 26);
    CHECK(report.globals[0].called);
    CHECK(report.anomalies.empty());
    CHECK(report.errors.empty());
  }
  SECTION("an index written out of order, then again in order, is written twice") {
    const ScanReport report = scan_text(std::string("\x80\x02Nr\x01\x00\x00\x00q\x00q\x01.", 13));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what == "memo index 1 written twice");
    CHECK(report.anomalies[0].offset == 10);
    CHECK(report.errors.empty());
  }
  SECTION("a far index never allocates up to it, and unwritten indices below it stay unwritten") {
    const std::string pickle = std::string("\x80\x02Nr\xff\xff\xff\xffh\x03.", 11);
    CHECK(scan_text(pickle).errors.at(0).what == "memo read of an index never written");
  }
}

TEST_CASE("scan finds INST and OBJ calls", "[scan]") {
  SECTION("INST") {
    const ScanReport report = scan_text("(S'rm -rf'\nisubprocess\nPopen\n.");
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "subprocess.Popen");
    CHECK(report.globals[0].opcode == "INST");
    CHECK(report.globals[0].called);
  }
  SECTION("OBJ") {
    const ScanReport report = scan_text("(c__builtin__\nexec\nS'x'\no.");
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "__builtin__.exec");  // read as builtins.exec
    CHECK(report.globals[0].called);
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  }
}

TEST_CASE("scan gives each global its verdict", "[scan]") {
  CHECK(classify_global("torch._utils", "_rebuild_tensor_v2", "torch._utils._rebuild_tensor_v2") ==
        GlobalVerdict::tensor_rebuild);
  CHECK(classify_global("torch", "FloatStorage", "torch.FloatStorage") == GlobalVerdict::tensor_rebuild);
  CHECK(classify_global("collections", "OrderedDict", "collections.OrderedDict") == GlobalVerdict::allowed);
  CHECK(classify_global("torch", "bfloat16", "torch.bfloat16") == GlobalVerdict::allowed);
  CHECK(classify_global("torch", "Size", "torch.Size") == GlobalVerdict::allowed);
  CHECK(classify_global("numpy.core.multiarray", "_reconstruct", "numpy.core.multiarray._reconstruct") ==
        GlobalVerdict::unknown);
  CHECK(classify_global("os.path", "join", "os.path.join") == GlobalVerdict::dangerous);  // inside os
  CHECK(classify_global("osx", "thing", "osx.thing") == GlobalVerdict::unknown);          // not os
  CHECK(classify_global("torch", "load", "torch.load") == GlobalVerdict::dangerous);
  CHECK(classify_global("torch.hub", "load_state_dict_from_url", "torch.hub.load_state_dict_from_url") ==
        GlobalVerdict::dangerous);
  CHECK(classify_global("__builtin__", "getattr", "__builtin__.getattr") == GlobalVerdict::dangerous);
  CHECK(classify_global("builtins", "set", "builtins.set") == GlobalVerdict::allowed);
}

TEST_CASE("scan --allow turns an unknown global into an allowed one, never a dangerous one", "[scan]") {
  const std::string unknown = "cmymodule\nConfig\n)R.";
  CHECK(scan_text(unknown).worst() == GlobalVerdict::unknown);
  const ScanReport allowed = scan_text(unknown, {.allow = {"mymodule.Config"}});
  CHECK(allowed.worst() == GlobalVerdict::allowed);
  CHECK(allowed.safe());
  CHECK(scan_text(os_system, {.allow = {"os.system"}}).worst() == GlobalVerdict::dangerous);
}

TEST_CASE("scan flags what only a crafted pickle holds", "[scan]") {
  SECTION("STOP with an unsettled stack") {
    const ScanReport report = scan_text("NN.");
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what == "STOP leaves 2 items on the stack; expected 1");
    CHECK(report.anomalies[0].offset == 2);
  }
  SECTION("a memo index written twice") {
    const ScanReport report =
        scan_text(std::string("\x80\x02Nq\x00"
                              "0Nq\x00.",
                              10));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what == "memo index 0 written twice");
  }
  SECTION("an opcode above the declared protocol") {
    const ScanReport report = scan_text(std::string("\x80\x02\x8c\x01x.", 6));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what == "opcode 0x8c of protocol 4 in a protocol 2 pickle");
  }
  SECTION("PROTO after the first opcode") {
    const ScanReport report = scan_text(std::string("N\x80\x02.", 4));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what == "PROTO after the first opcode");
  }
  SECTION("STACK_GLOBAL on values that are not strings") {
    const ScanReport report = scan_text(std::string("\x80\x04NN\x93.", 6));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what == "STACK_GLOBAL on operands that are not strings");
    CHECK(report.worst() == GlobalVerdict::unknown);
  }
  SECTION("bytes after a zip record's STOP") {
    const std::string file =
        tensorfile_test::torch_zip("archive", {{"data.pkl", "N.cos\nsystem\n"}, {"version", "3\n"}});
    const ScanReport report = scan(byte_span(file));
    CHECK(report.format == FileFormat::torch_zip);
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].member == "archive/data.pkl");
    CHECK(report.anomalies[0].what == "11 bytes after STOP");
    CHECK_FALSE(report.safe());
  }
}

TEST_CASE("scan reports a broken pickle and keeps what it found before", "[scan]") {
  SECTION("truncated argument") {
    const ScanReport report = scan_text(std::string("cos\nsystem\nX\xff\xff\xff\x7f", 16));
    REQUIRE(report.errors.size() == 1);
    CHECK(report.errors[0].what == "the opcode's argument runs past the end (2147483647 bytes, 0 left)");
    CHECK(report.errors[0].offset == 11);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  }
  SECTION("no STOP") {
    const ScanReport report = scan_text("N");
    REQUIRE(report.errors.size() == 1);
    CHECK(report.errors[0].what == "the pickle ends before its STOP opcode");
  }
  SECTION("a byte that is no opcode") {
    const ScanReport report = scan_text("N\xff.");
    REQUIRE(report.errors.size() == 1);
    CHECK(report.errors[0].what == "byte 0xff is not a pickle opcode");
    CHECK(report.errors[0].offset == 1);
  }
  SECTION("stack underflow and missing memo") {
    CHECK(scan_text("R.").errors.at(0).what == "stack underflow");
    CHECK(scan_text("g7\n.").errors.at(0).what == "memo read of an index never written");
    CHECK(scan_text("N1.").errors.at(0).what == "no MARK on the stack");
  }
  SECTION("nothing at all") {
    CHECK(scan_text("").errors.at(0).what == "no pickle: the bytes are empty");
    CHECK_FALSE(scan_text("").safe());
  }
  SECTION("a line without its newline") {
    CHECK(scan_text("cos\nsystem").errors.at(0).what == "the opcode's text line has no newline");
  }
}

TEST_CASE("scan walks every .pkl record of a zip file", "[scan]") {
  const std::string file = tensorfile_test::torch_zip(
      "archive", {{"data.pkl", "ccollections\nOrderedDict\n)R."}, {"extra/hook.pkl", os_system}, {"version", "3\n"}});
  const ScanReport report = scan(byte_span(file));
  REQUIRE(report.globals.size() == 2);
  CHECK(report.pickles == std::vector<std::string>{"archive/data.pkl", "archive/extra/hook.pkl"});
  CHECK(report.globals[0].verdict == GlobalVerdict::allowed);
  CHECK(report.globals[1].member == "archive/extra/hook.pkl");
  CHECK(report.globals[1].verdict == GlobalVerdict::dangerous);
}

TEST_CASE("scan passes every committed torch fixture", "[scan]") {
  for (const auto& path : tensorfile_test::torch_fixtures()) {
    INFO(path.string());
    const ScanReport report = scan(path);
    CHECK(report.errors.empty());
    CHECK(report.anomalies.empty());
    CHECK(report.worst() <= GlobalVerdict::unknown);  // fixtures may hold numpy arrays or modules, never code calls
    CHECK_FALSE(report.pickles.empty());
  }
}

TEST_CASE("scan walks a tensordict tree's pickle side files", "[scan]") {
  const std::filesystem::path fixture = tensorfile_test::data_dir() / "tensordict" / "s05_nontensor";
  const ScanReport report = scan(fixture);
  CHECK(report.format == FileFormat::tensordict);
  REQUIRE(report.globals.size() == 1);
  CHECK(report.globals[0].full_name() == "__main__.Opaque");  // the fixture's pickled non-tensor class
  CHECK(report.globals[0].member == "obj/other.pickle");
  CHECK(report.globals[0].verdict == GlobalVerdict::unknown);

  tensorfile_test::ScratchDir dir;
  std::filesystem::copy(fixture, dir / "td", std::filesystem::copy_options::recursive);
  tensorfile_test::write_text(dir / "td" / "obj" / "pickle.pkl", os_system);
  const ScanReport hostile = scan(dir / "td");
  CHECK(hostile.worst() == GlobalVerdict::dangerous);
  CHECK(hostile.pickles.size() == 2);
}

TEST_CASE("scan walks the pickle after an object .npy header, and nothing in a numeric one", "[scan]") {
  // np.save of an object array: the .npy header (descr '|O'), then the array pickled; np.load(allow_pickle=True)
  // runs it. The header is padded with spaces and a newline to 128 bytes (a multiple of 64) as NumPy pads it.
  const auto npy = [](const std::string& descr, const std::string& data) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }";
    header.append(128 - 10 - header.size() - 1, ' ');
    header += '\n';
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header + data;
  };
  const std::string objects = npy("|O", os_system);
  const ScanReport report = scan(byte_span(objects));
  CHECK(report.format == FileFormat::npy);
  REQUIRE(report.globals.size() == 1);
  CHECK(report.globals[0].full_name() == "os.system");
  CHECK(report.globals[0].offset == 128);  // offsets count from the file's start
  CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  CHECK(report.errors.empty());

  const ScanReport numeric = scan(byte_span(npy("<f4", std::string(4, '\0'))));
  CHECK(numeric.format == FileFormat::npy);
  CHECK(numeric.pickles.empty());
  CHECK(numeric.safe());

  const ScanReport broken = scan(byte_span(npy("|O", os_system).replace(11, 7, "'dtype'")));
  REQUIRE(broken.errors.size() == 1);
  CHECK(broken.errors[0].what.find("descr") != std::string::npos);
  CHECK_FALSE(broken.safe());
}

TEST_CASE("scan keeps a long global name cut, once per reference, and never as a listed name", "[scan][hostile]") {
  // A 10,000-byte module name memoized once, then named by 20 STACK_GLOBALs of 6 bytes each (BINGET 0, BINGET 1).
  const std::string module = "os" + std::string(9998, 'x');
  std::string pickle = "\x80\x04";
  pickle += "X";  // BINUNICODE: 4-byte little-endian length
  for (int i = 0; i < 4; ++i) pickle += static_cast<char>((module.size() >> (8 * i)) & 0xff);
  pickle += module + "\x94";
  pickle += std::string("\x8c\x06system\x94", 9);
  for (int i = 0; i < 20; ++i) pickle += std::string("h\x00h\x01\x93\x30", 6);  // STACK_GLOBAL, POP
  pickle += "N.";
  const ScanReport report = scan_text(pickle);
  REQUIRE(report.errors.empty());
  REQUIRE(report.globals.size() == 20);
  for (const ScannedGlobal& global : report.globals) {
    CHECK(global.module == module.substr(0, 256) + "...(10000 bytes)");
    CHECK(global.name == "system");
    CHECK(global.verdict == GlobalVerdict::unknown);
  }
  REQUIRE_FALSE(report.anomalies.empty());
  CHECK(report.anomalies[0].what == "a global's name of 10000 bytes, cut to its first 256");
}
