// SPDX-License-Identifier: MIT
// Tests of <tensorfile/scan.hpp>: hand-built pickles naming globals in every opcode form, crafted-pickle anomalies,
// truncation, torch zip records, tensordict side files and the committed torch fixtures.
#include <tensorfile/scan.hpp>

#include <string>

#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using namespace std::string_literals;
using tensorfile_test::byte_span;

namespace {

ScanReport scan_text(const std::string& pickle, const ScanOptions& options = {}) {
  return scan(byte_span(pickle), options);
}

// GLOBAL os system, called on ('x',): protocol 0.
const std::string os_system = "cos\nsystem\n(S'x'\ntR.";

GlobalVerdict verdict(std::string_view module, std::string_view name) {
  return classify_global(module, name, std::string(module) + "." + std::string(name));
}

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
    const std::string pickle = std::string(
        "\x80\x02"
        "ctorch\nSize\n0"
        "Nr\xff\xff\xff\xffh\x03.",
        24);  // a global first
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
  CHECK(classify_global("torch", "float16", "torch.float16") == GlobalVerdict::allowed);
  CHECK(classify_global("torch", "Size", "torch.Size") == GlobalVerdict::allowed);
  CHECK(classify_global("numpy.core.multiarray", "_reconstruct", "numpy.core.multiarray._reconstruct") ==
        GlobalVerdict::unknown);
  CHECK(classify_global("os.path", "join", "os.path.join") == GlobalVerdict::dangerous);  // inside os
  CHECK(classify_global("osx", "thing", "osx.thing") == GlobalVerdict::unknown);          // not os
  CHECK(classify_global("torch", "load", "torch.load") == GlobalVerdict::dangerous);
  CHECK(classify_global("torch.hub", "load_state_dict_from_url", "torch.hub.load_state_dict_from_url") ==
        GlobalVerdict::dangerous);
  CHECK(classify_global("__builtin__", "getattr", "__builtin__.getattr") == GlobalVerdict::dangerous);
  CHECK(classify_global("torch.nn.parameter", "Parameter", "torch.nn.parameter.Parameter") == GlobalVerdict::allowed);
  CHECK(classify_global("torch.cuda.sparse", "HalfTensor", "torch.cuda.sparse.HalfTensor") == GlobalVerdict::allowed);
  CHECK(classify_global("torch.storage", "UntypedStorage", "torch.storage.UntypedStorage") ==
        GlobalVerdict::tensor_rebuild);
}

// The allow-list is torch 1.13's, exactly (tests/scan/scan_globals.cpp --allow-list prints it for a comparison with
// torch._weights_only_unpickler._get_allowed_globals()): names torch 2 added, and suffix or prefix look-alikes, are
// not on it.
TEST_CASE("scan allows exactly torch 1.13's weights_only globals", "[scan]") {
  SECTION("names weights_only refuses in torch 1.13") {
    CHECK(verdict("torch", "bfloat16") == GlobalVerdict::unknown);  // only ten dtypes are listed
    CHECK(verdict("builtins", "set") == GlobalVerdict::unknown);
    CHECK(verdict("collections", "Counter") == GlobalVerdict::unknown);
    CHECK(verdict("torch", "device") == GlobalVerdict::unknown);
    CHECK(verdict("_codecs", "encode") == GlobalVerdict::unknown);
    CHECK(verdict("torch._utils", "_rebuild_tensor_v3") == GlobalVerdict::unknown);
    CHECK(verdict("torch._utils", "_rebuild_qtensor") == GlobalVerdict::unknown);
  }
  SECTION("a suffix rule would let these through") {
    CHECK(verdict("torch", "ops.aten.add.Tensor") == GlobalVerdict::unknown);
    CHECK(verdict("torch", "_C._TensorBase.Tensor") == GlobalVerdict::unknown);
    CHECK(verdict("torch.cuda", "MyStorage") == GlobalVerdict::unknown);
    CHECK(verdict("torch", "nn.Module.FloatTensor") == GlobalVerdict::unknown);
  }
}

TEST_CASE("scan judges _compat_pickle aliases and dotted names by what they reach", "[scan]") {
  SECTION("Python 2 names that protocols 0 to 2 rename") {
    CHECK(verdict("cPickle", "loads") == GlobalVerdict::dangerous);            // pickle.loads
    CHECK(verdict("__builtin__", "reduce") == GlobalVerdict::dangerous);       // functools.reduce
    CHECK(verdict("thread", "start_new_thread") == GlobalVerdict::dangerous);  // _thread
    CHECK(verdict("commands", "getoutput") == GlobalVerdict::dangerous);       // subprocess
    CHECK(verdict("urllib2", "urlopen") == GlobalVerdict::dangerous);          // urllib.request
    CHECK(verdict("__builtin__", "unicode") == GlobalVerdict::unknown);        // builtins.str: harmless, not allowed
  }
  SECTION("dotted attribute paths of protocol 4") {
    CHECK(verdict("torch", "serialization.os.system") == GlobalVerdict::dangerous);
    CHECK(verdict("torch", "hub.load") == GlobalVerdict::dangerous);
    CHECK(verdict("collections", "OrderedDict.__init__.__globals__") == GlobalVerdict::dangerous);
    CHECK(verdict("torch", "serialization.load") == GlobalVerdict::dangerous);
    CHECK(verdict("mymodule", "Outer.Inner") == GlobalVerdict::unknown);
  }
  SECTION("in a pickle: STACK_GLOBAL of a dotted name") {
    const std::string pickle =
        std::string("\x80\x04\x8c\x05torch\x8c\x17serialization.os.system\x93", 35) + "\x8c\x04true\x85R.";
    const ScanReport report = scan_text(pickle);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "torch.serialization.os.system");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  }
}

TEST_CASE("scan allows BUILD only where weights_only does", "[scan]") {
  SECTION("BUILD on an allowed class itself sets its attributes for the whole process") {
    // GLOBAL collections OrderedDict, then BUILD with (None, {'x': 1}): slot state set on the class.
    const ScanReport report = scan_text(
        "\x80\x02"
        "ccollections\nOrderedDict\nN}X\x01\x00\x00\x00xK\x01s\x86"
        "b."s);
    CHECK(report.worst() == GlobalVerdict::allowed);
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what.starts_with("BUILD on the global collections.OrderedDict itself"));
    CHECK_FALSE(report.safe());
  }
  SECTION("BUILD on the class Counter (not allowed in torch 1.13 either)") {
    const ScanReport report = scan_text(
        "\x80\x02"
        "ccollections\nCounter\n}b."s);
    CHECK(report.worst() == GlobalVerdict::unknown);
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what.starts_with("BUILD on the global collections.Counter itself"));
  }
  SECTION("BUILD on what an allowed global returns that weights_only does not update") {
    const ScanReport report = scan_text(
        "\x80\x02"
        "ctorch\nSize\n)R}b."s);
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what.starts_with("BUILD on what torch.Size returns"));
  }
  SECTION("BUILD on a new OrderedDict, as weights_only allows") {
    const ScanReport report = scan_text(
        "\x80\x02"
        "ccollections\nOrderedDict\n)R}b."s);
    CHECK(report.anomalies.empty());
    CHECK(report.safe());
  }
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
  // Each meets a global first (GLOBAL torch Size, POP: 15 bytes): a walk that breaks before any is data (below).
  const std::string global =
      "\x80\x02"
      "ctorch\nSize\n0";
  SECTION("no STOP") {
    const ScanReport report = scan_text(global + "N");
    REQUIRE(report.errors.size() == 1);
    CHECK(report.errors[0].what == "the pickle ends before its STOP opcode");
  }
  SECTION("a byte that is no opcode") {
    const ScanReport report = scan_text(global + "N\xff.");
    REQUIRE(report.errors.size() == 1);
    CHECK(report.errors[0].what == "byte 0xff is not a pickle opcode");
    CHECK(report.errors[0].offset == 16);
  }
  SECTION("stack underflow and missing memo") {
    CHECK(scan_text(global + "R.").errors.at(0).what == "stack underflow");
    CHECK(scan_text(global + "g7\n.").errors.at(0).what == "memo read of an index never written");
    CHECK(scan_text(global + "N1.").errors.at(0).what == "no MARK on the stack");
  }
  SECTION("a line without its newline") {
    const ScanReport report = scan_text("cos\nsystem");
    CHECK(report.errors.at(0).what == "the opcode's text line has no newline");
    // The unpickler imports os before the name lookup fails: the module is judged.
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "os.syste");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
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

TEST_CASE("scan reads a structured .npy descr for object fields, and a string dtype as holding no pickle", "[scan]") {
  // np.save pickles a whole structured array when any field is an object ([('a', '<i4'), ('b', '|O')]).
  const auto npy = [](const std::string& descr, const std::string& data) {
    std::string header = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }";
    header.append(128 - 10 - header.size() - 1, ' ');
    header += '\n';
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header + data;
  };
  // numpy reads 'O8' and 'object' as the object dtype too (review: '|O8' was taken for data).
  for (const char* descr : {"[('a', '<i4'), ('b', [('c', '|O')], (2,))]", "'|O8'", "'<O8'", "[('a', '|O8')]",
                            "[('a', 'object')]", "[('a', 'object_')]"}) {
    const ScanReport objects = scan(byte_span(npy(descr, os_system)));
    INFO(descr);
    REQUIRE(objects.globals.size() == 1);
    CHECK(objects.globals[0].full_name() == "os.system");
    CHECK_FALSE(objects.safe());
  }
  CHECK_FALSE(scan(byte_span(npy("'object'", os_system))).safe());  // no byte order: unreadable, never safe
  const ScanReport fields = scan(byte_span(npy("[('a', '<i4'), ('b', '<f8', (2,))]", std::string(20, '\0'))));
  CHECK(fields.pickles.empty());
  CHECK(fields.safe());
  const ScanReport unbalanced = scan(byte_span(npy("[('a', '<i4')))]", os_system)));
  CHECK_FALSE(unbalanced.safe());
  // Real files np.save wrote (tests/data/numpy/PROVENANCE.md): a structured and a str array hold no pickle.
  for (const char* name : {"structured.npy", "unicode.npy"}) {
    const ScanReport real = scan(tensorfile_test::data_dir() / "numpy" / name);
    INFO(name);
    CHECK(real.format == FileFormat::npy);
    CHECK(real.anomalies.empty());
    CHECK(real.errors.empty());
    CHECK(real.safe());
  }
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

namespace {

// A safetensors file whose 8-byte header length starts a pickle: SHORT_BINSTRING ('U') swallows the rest of the
// length, the '{' and the JSON text up to a string's contents, where `payload` sits; torch.load, seeing no zip
// magic, unpickles from byte 0. The header length is 'U' + (skip << 8).
std::string safetensors_and_pickle(const std::string& payload) {
  const std::string before = R"({"__metadata__":{"p":")";
  const std::string json = before + payload + R"("},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const std::size_t skip = 6 + before.size();  // bytes 2..7 of the length, then the JSON up to the payload
  std::string file = "U";
  file += static_cast<char>(skip);
  file += std::string(6, '\0');
  const std::uint64_t length = 'U' | (skip << 8);
  file += json;
  file.append(length > json.size() ? length - json.size() : 0, ' ');  // the header padded to its declared length
  return file + std::string(4, '\0');
}

// A 512-byte tar header as Python's tarfile accepts it: V7 (no "ustar" magic), octal fields, checksum computed as
// tarfile does (unsigned sum with the checksum field read as spaces).
std::string tar_header(const std::string& name, std::size_t size) {
  std::string block(512, '\0');
  const auto put = [&](std::size_t at, const std::string& text) { block.replace(at, text.size(), text); };
  put(0, name.substr(0, 100));
  put(100, "0000644");
  put(108, "0000000");
  put(116, "0000000");
  char field[13];
  std::snprintf(field, sizeof field, "%011o", static_cast<unsigned>(size));
  put(124, field);
  put(136, "00000000000");
  block[156] = '0';
  put(148, std::string(8, ' '));
  unsigned sum = 0;
  for (char c : block) sum += static_cast<unsigned char>(c);
  std::snprintf(field, sizeof field, "%06o", sum);
  put(148, std::string(field, 6) + '\0');
  return block;
}

std::string tar_member(const std::string& name, const std::string& data) {
  return tar_header(name, data.size()) + data + std::string((512 - data.size() % 512) % 512, '\0');
}

}  // namespace

TEST_CASE("scan reads a file that is two formats at once as every reader does", "[scan][hostile]") {
  SECTION("safetensors and a pickle that calls os.system") {
    const std::string file = safetensors_and_pickle("0cos\nsystem\n(S'true'\ntR.");
    const ScanReport report = scan(byte_span(file));
    CHECK(report.format == FileFormat::safetensors);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "os.system");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
    CHECK(report.errors.empty());  // the JSON after the pickle's STOP is no second pickle, but data
    REQUIRE_FALSE(report.anomalies.empty());
    CHECK(report.anomalies.back().what ==
          "the bytes are a safetensors file and a pickle stream: readers disagree on what the file holds");
    CHECK_FALSE(report.safe());
  }
  SECTION("safetensors and a harmless complete pickle: still ambiguous") {
    const ScanReport report = scan(byte_span(safetensors_and_pickle("0N.")));
    CHECK(report.globals.empty());
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what.starts_with("the bytes are a safetensors file and a pickle stream"));
    CHECK_FALSE(report.safe());
  }
  SECTION("the committed safetensors fixtures are one format, and safe") {
    for (const auto& entry : std::filesystem::directory_iterator(tensorfile_test::data_dir() / "safetensors")) {
      if (entry.path().extension() != ".safetensors") continue;
      INFO(entry.path().string());
      const ScanReport report = scan(entry.path());
      CHECK(report.format == FileFormat::safetensors);
      CHECK(report.pickles.empty());
      CHECK(report.safe());
    }
  }
}

TEST_CASE("scan reads a tar that Python's tarfile accepts as torch.load does, magic or not", "[scan][hostile]") {
  SECTION("five harmless pickles in the first name, the payload in storages") {
    const std::string decoy = "\x80\x02N.\x80\x02N.\x80\x02N.\x80\x02N.\x80\x02N.";
    const std::string file = tar_member(decoy, "") + tar_member("storages", os_system) + std::string(1024, '\0');
    const ScanReport report = scan(byte_span(file));
    CHECK(report.format == FileFormat::torch_legacy);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "os.system");
    CHECK(report.globals[0].member == "storages");
    CHECK(report.globals[0].offset == 1024);  // the member's data (its header at 512), counted from the file's start
    CHECK(report.worst() == GlobalVerdict::dangerous);
    CHECK(report.anomalies.size() == 2);  // a tar checkpoint, and one that is also a pickle stream
    CHECK_FALSE(report.safe());
  }
  SECTION("the payload in the member pickle; the last member of a name is the one read") {
    const std::string file = tar_member("pickle", "\x80\x02N.") + tar_member("pickle", os_system);
    const ScanReport report = scan(byte_span(file));
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].member == "pickle");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  }
  SECTION("a harmless tar checkpoint is still never called safe") {
    const ScanReport report = scan(byte_span(tar_member("pickle", "\x80\x02N.")));
    CHECK(report.globals.empty());
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what.starts_with("torch.load reads the file as a tar checkpoint"));
    CHECK_FALSE(report.safe());
  }
  SECTION("a wrong checksum is no tar") {
    std::string file = tar_member("pickle", os_system);
    file[148] = '7';
    const ScanReport report = scan(byte_span(file));
    CHECK(report.globals.empty());  // 'p' (PUT) without a number breaks the walk at byte 0: data
    CHECK(report.safe());
  }
}

TEST_CASE("scan never calls an ambiguous zip safe", "[scan][hostile]") {
  SECTION("bytes between the central directory and its end record: zipfile reads the directory elsewhere") {
    // Python's zipfile locates the directory at the end record minus its size and shifts every member by the gap
    // (review: an .npz so built ran a pickle under numpy.load while scan read a numeric member and said safe).
    std::string file = tensorfile_test::torch_zip("arrays", {{"a.npy", "\x80\x02N."}});
    const std::size_t end = file.rfind(std::string("PK\x05\x06", 4));
    REQUIRE(end != std::string::npos);
    CHECK(scan(byte_span(file)).anomalies.empty());
    file.insert(end, std::string(16, '\0'));
    const ScanReport report = scan(byte_span(file));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what.find("does not end where the end records begin") != std::string::npos);
    CHECK_FALSE(report.safe());
  }
  SECTION("names that differ only in case: both walked, the pair reported") {
    const std::string file = tensorfile_test::torch_zip(
        "archive", {{"data.pkl", "\x80\x02N."}, {"data.PKL", os_system}, {"version", "3\n"}});
    const ScanReport report = scan(byte_span(file));
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].member == "archive/data.PKL");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].what ==
          "the zip names 'archive/data.PKL' and 'archive/data.pkl' differ only in case: torch's reader may take "
          "either");
  }
  SECTION("harmless records whose names collide but for case") {
    const std::string file = tensorfile_test::torch_zip(
        "archive", {{"data.pkl", "\x80\x02N."}, {"Data.pkl", "\x80\x02N."}, {"version", "3\n"}});
    const ScanReport report = scan(byte_span(file));
    CHECK(report.pickles.size() == 2);
    CHECK(report.anomalies.size() == 1);
    CHECK_FALSE(report.safe());
  }
  // The real end record's comment holds a second signature, which readers that take the last one read.
  const auto with_second_end = [](std::string file, std::size_t extra) {
    std::string fake = std::string("PK\x05\x06", 4) + std::string(16, '\0') + std::string("\x05\x00", 2);
    fake += std::string(extra, 'x');
    const std::size_t comment = fake.size();
    file[file.size() - 2] = static_cast<char>(comment & 0xff);
    file[file.size() - 1] = static_cast<char>(comment >> 8);
    return file + fake;
  };
  const std::string good = tensorfile_test::torch_file("\x80\x02N.", std::string(4, '\0'));
  SECTION("two end records, the second one last") {
    const std::string file = with_second_end(good, 0);
    const ScanReport report = scan(byte_span(file));
    REQUIRE(report.anomalies.size() == 1);
    CHECK(report.anomalies[0].offset == good.size());
    CHECK(report.anomalies[0].what.starts_with("2 end-of-central-directory signatures"));
    CHECK_FALSE(report.safe());
  }
  SECTION("two end records, bytes after the second") {
    const ScanReport report = scan(byte_span(with_second_end(good, 40)));
    REQUIRE(report.anomalies.size() == 1);
    CHECK_FALSE(report.safe());
  }
  SECTION("one end record") { CHECK(scan(byte_span(good)).safe()); }
}

TEST_CASE("scan reads every member of an .npz that starts as a .npy file, whatever its name", "[scan]") {
  std::string header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  const std::string objects =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header + os_system;
  SECTION("a member with no .npy suffix") {
    const ScanReport report = scan(byte_span(tensorfile_test::torch_zip("arrays", {{"payload", objects}})));
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].member == "arrays/payload");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  }
  SECTION("a member named .bin beside a .npy one") {
    const ScanReport report =
        scan(byte_span(tensorfile_test::torch_zip("arrays", {{"a.npy", objects}, {"b.bin", objects}})));
    CHECK(report.globals.size() == 2);
    CHECK(report.globals[1].member == "arrays/b.bin");
  }
}

TEST_CASE("scan of a folder reads every regular file by its content", "[scan][hostile]") {
  tensorfile_test::ScratchDir dir;
  SECTION("a meta.json makes no file of a model folder data") {
    std::filesystem::create_directories(dir / "model");
    tensorfile_test::write_text(dir / "model" / "meta.json", "{}");
    tensorfile_test::write_file(dir / "model" / "pytorch_model.bin",
                                tensorfile_test::torch_file(os_system, std::string(4, '\0')));
    const ScanReport report = scan(dir / "model");
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].member == "pytorch_model.bin/archive/data.pkl");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
  }
  SECTION("a shard named .data, beside text and tensor data") {
    std::filesystem::create_directories(dir / "ckpt" / "sub");
    tensorfile_test::write_text(dir / "ckpt" / "pytorch_model.bin.index.json",
                                R"({"weight_map": {"w": "sub/model-00001.data"}})");
    tensorfile_test::write_text(dir / "ckpt" / "sub" / "model-00001.data", os_system);
    tensorfile_test::write_file(dir / "ckpt" / "weights.memmap", std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
    tensorfile_test::write_text(dir / "ckpt" / "README.md", "# a model\n");
    tensorfile_test::write_text(dir / "ckpt" / "empty", "");
    const ScanReport report = scan(dir / "ckpt");
    CHECK(report.pickles == std::vector<std::string>{"sub/model-00001.data"});
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
    CHECK(report.errors.empty());
  }
  SECTION("the committed tensordict trees: data files are data") {
    for (const auto& entry : std::filesystem::directory_iterator(tensorfile_test::data_dir() / "tensordict")) {
      if (!entry.is_directory()) continue;
      INFO(entry.path().string());
      const ScanReport report = scan(entry.path());
      CHECK(report.errors.empty());
      CHECK(report.anomalies.empty());
      CHECK(report.worst() <= GlobalVerdict::unknown);
    }
  }
}

TEST_CASE("scan takes bytes that hold no pickle for data, not an error", "[scan]") {
  SECTION("an empty file runs nothing") {
    const ScanReport report = scan_text("");
    CHECK(report.errors.empty());
    CHECK(report.pickles.empty());
    CHECK(report.safe());
  }
  SECTION("tensor bytes and text") {
    for (const std::string& data : {std::string("\x00\x00\x80\x3f", 4), std::string("# README\n"),
                                    std::string("{\"a\": 1}\n"), std::string("N\xff.")}) {
      const ScanReport report = scan_text(data);
      CHECK(report.format == FileFormat::unknown);
      CHECK(report.pickles.empty());
      CHECK(report.safe());
    }
  }
  SECTION("a walk that meets a global before it breaks is a pickle") {
    const ScanReport report = scan_text("cbuiltins\neval\n\xff");
    CHECK(report.format == FileFormat::torch_legacy);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
    CHECK(report.errors.size() == 1);
  }
  SECTION("one whose global names no module Python could import is data") {
    CHECK(scan_text("c\x01\x02\n\x03\n\xff").safe());
  }
}

TEST_CASE("scan reads PUT and GET indices as CPython does, so a lenient index hides nothing", "[scan][hostile]") {
  // CPython takes ' 0', '+0', '0_1', '007' and '1\0x' as indices; a walk that stopped there took the rest for data
  // (review: 'Np 0\n0cos\nsystem\n...' was safe, and torch.load ran it).
  const std::string call = "cos\nsystem\n(S'true'\ntR.";
  for (const std::string& head : {std::string("Np 0\n0"), std::string("Np0\n0g+0\n0"), std::string("Np0_1\n0g01\n0"),
                                  std::string("Np1\0x\n0g\t1 \n0", 13)}) {
    const ScanReport report = scan(byte_span(head + call));
    INFO(head);
    REQUIRE(report.globals.size() == 1);
    CHECK(report.globals[0].full_name() == "os.system");
    CHECK(report.globals[0].verdict == GlobalVerdict::dangerous);
    CHECK_FALSE(report.safe());
  }
  // Indices CPython refuses stop its walk too: what follows is never run, so the bytes are data.
  for (const std::string& head : {std::string("Np_1\n0"), std::string("Np1__2\n0"), std::string("Np-1\n0")}) {
    INFO(head);
    CHECK(scan(byte_span(head + call)).globals.empty());
  }
}

TEST_CASE("scan caps the anomalies of a file of many pickles", "[scan][hostile]") {
  // Each record writes memo index 0 seventy times: 64 anomalies each (the walk's own cap), 320 in all.
  std::string noisy = "\x80\x02";
  for (int i = 0; i < 70; ++i) noisy += std::string("Nq\x00", 3);
  noisy += "0.";
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 5; ++i) records.emplace_back("r" + std::to_string(i) + ".pkl", noisy);
  const ScanReport report = scan(byte_span(tensorfile_test::torch_zip("archive", records)));
  REQUIRE(report.anomalies.size() == 257);
  CHECK(report.anomalies.back().what == "more anomalies, not listed");
  CHECK(report.pickles.size() == 5);
}

TEST_CASE("scan judges a broken walk that named a global through copyreg's registry", "[scan]") {
  // EXT1 code 1, called, then a byte that is no opcode: no GLOBAL, but the registry may map the code to one.
  const ScanReport report = scan_text("\x82\x01)R\xff");
  CHECK(report.pickles.size() == 1);
  CHECK(report.errors.size() == 1);
  CHECK_FALSE(report.safe());
}
