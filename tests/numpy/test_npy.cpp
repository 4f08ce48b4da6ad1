// SPDX-License-Identifier: MIT
// load_npy/save_npy and load_npz/save_npz on NumPy-written fixtures, hostile headers with their exact
// errors, and truncation at every byte.
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/numpy/npz.hpp>
#include <tensorfile/state_dict.hpp>
#include <tensorfile/verify.hpp>

#include <complex>
#include <string>
#include <vector>

#include "page_cache.hpp"
#include "tensorfile_catch.hpp"
#include "torch/torch_file_builder.hpp"

using namespace tensorfile;
using tensorfile_test::byte_span;
using tensorfile_test::file_bytes;
using tensorfile_test::sample;
using tensorfile_test::write_file;

namespace {

std::filesystem::path fixture(const std::string& name) { return sample("numpy", name); }

std::string as_string(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// A version 1.0 file with `dict` as its header (padded to 64 as NumPy pads) and `data` bytes after it.
std::string npy_of(const std::string& dict, std::size_t data, char major = 1) {
  std::string header = dict;
  const std::size_t preamble = major == 1 ? 10 : 12;
  header.append(64 - (preamble + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  if (major != 1) out += std::string(2, '\0');
  return out + header + std::string(data, '\x01');
}

std::string message_of(const std::string& bytes) {
  try {
    (void)load_npy(byte_span(bytes));
  } catch (const FormatError& error) {
    return std::string("FormatError: ") + error.what();
  } catch (const UnsupportedError& error) {
    return std::string("UnsupportedError: ") + error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("load_npy reads NumPy's files") {
  SECTION("C order, heap and mapped: the same values; the mapping is a view") {
    const Tensor heap = load_npy(fixture("f4_c.npy"));
    CHECK(heap.dtype() == DType::Float32);
    CHECK(heap.sizes() == Shape{3, 4});
    for (std::int64_t i = 0; i < 12; ++i) CHECK(heap.data<const float>()[i] == static_cast<float>(i) / 4);
    for (const MapMode mode : {MapMode::read_only, MapMode::copy_on_write, MapMode::shared}) {
      const Tensor mapped = load_npy(fixture("f4_c.npy"), {.mmap = mode});
      CHECK(mapped.storage().kind() == StorageKind::mmap);
      CHECK(mapped.is_writable() == (mode != MapMode::read_only));
      CHECK(mapped.equal(heap));
    }
  }
  SECTION("fortran_order: a column-major view of the file's bytes, no copy") {
    const Tensor t = load_npy(fixture("i8_fortran.npy"), {.mmap = MapMode::read_only});
    CHECK(t.sizes() == Shape{2, 3});
    CHECK(t.strides() == Shape{1, 2});
    for (std::int64_t i = 0; i < 2; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) CHECK(t.select(0, i).select(0, j).item<std::int64_t>() == 3 * i + j - 3);
    }
    CHECK(t.equal(load_npy(fixture("i8_fortran.npy"))));
  }
  SECTION("big-endian: converted on the heap (complex parts swapped separately), refused in place") {
    const Tensor f8 = load_npy(fixture("f8_big.npy"));
    CHECK(f8.data<const double>()[0] == 1.5);
    CHECK(f8.data<const double>()[1] == -2.0);
    CHECK(f8.data<const double>()[2] == 1e300);
    const Tensor c8 = load_npy(fixture("c8_big.npy"));
    CHECK(c8.data<const std::complex<float>>()[0] == std::complex<float>(1, 2));
    CHECK(c8.data<const std::complex<float>>()[1] == std::complex<float>(-3.5f, -0.25f));
    const std::string file = fixture("f8_big.npy").string();
    CHECK_THROWS_WITH(load_npy(fixture("f8_big.npy"), {.mmap = MapMode::read_only}),
                      "tensorfile: " + file +
                          ": the data is big-endian (descr '>f8'); it cannot be used in place on this little-endian "
                          "host; load it without .mmap to get a converted copy (at byte 128)");
    CHECK(load_npy(fixture("f8_big.npy"), {.map_location = "meta"}).sizes() == Shape{3});
  }
  SECTION("0-d, empty, versions 2.0 and 3.0, meta") {
    const Tensor scalar = load_npy(fixture("bool_0d.npy"));
    CHECK(scalar.dim() == 0);
    CHECK(scalar.item<bool>());
    const Tensor empty = load_npy(fixture("u2_empty.npy"), {.mmap = MapMode::read_only});
    CHECK(empty.sizes() == Shape{2, 0});
    CHECK(empty.dtype() == DType::UInt16);
    for (const char* name : {"i2_v2.npy", "i2_v3.npy"}) {
      const Tensor t = load_npy(fixture(name));
      CHECK(t.data<const std::int16_t>()[1] == -2);
      CHECK(t.data<const std::int16_t>()[2] == 300);
    }
    const Tensor meta = load_npy(fixture("f4_c.npy"), {.map_location = "meta"});
    CHECK(meta.device().is_meta());
    CHECK(meta.sizes() == Shape{3, 4});
  }
  SECTION("object, structured and string dtypes are refused by name, never unpickled") {
    const std::string dir = fixture("").string();
    CHECK_THROWS_WITH(
        load_npy(fixture("object.npy")),
        "tensorfile: " + dir +
            "object.npy: descr '|O' is the object dtype (pickled Python objects), never read (at byte 20)");
    CHECK_THROWS_WITH(load_npy(fixture("structured.npy")),
                      "tensorfile: " + dir +
                          "structured.npy: descr is a structured dtype (a list of fields); only plain numeric dtypes "
                          "are read (at byte 20)");
    CHECK_THROWS_AS(load_npy(fixture("unicode.npy")), UnsupportedError);
  }
}

TEST_CASE("load_npy of a path reads the data by several threads, around the page cache when asked", "[numpy][direct]") {
  const tensorfile_test::ScratchDir scratch;
  Tensor t(heap_storage(1000 * 1000 * 4), DType::Float32, {1000, 1000});
  for (std::int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = static_cast<float>(k);
  const auto path = scratch / "big.npy";
  save_npy(t, path);
  const bool direct_possible = tensorfile_test::direct_reads_possible(path);
  if (!direct_possible)
    WARN("the file system of " << scratch.path() << " refuses O_DIRECT: only the fallback is checked");
  for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
    INFO(threads << " threads");
    tensorfile_test::evict_from_page_cache(path);
    const Tensor loaded = load_npy(path, {.threads = threads, .direct_reads = DirectReads::always});
    CHECK(loaded.equal(t));
    CHECK(reinterpret_cast<std::uintptr_t>(loaded.raw_data()) % HeapBackend::alignment == 0);
    if (direct_possible) CHECK(tensorfile_test::cached_fraction_of(path) < 0.1);
    tensorfile_test::evict_from_page_cache(path);
    CHECK(load_npy(path, {.threads = threads, .direct_reads = DirectReads::never}).equal(t));
    CHECK(tensorfile_test::cached_fraction_of(path) > 0.9);
  }
}

TEST_CASE("save_npy writes what np.save writes") {
  for (const char* name : {"f4_c.npy", "i8_fortran.npy", "bool_0d.npy", "u2_empty.npy"}) {
    INFO(name);
    CHECK(as_string(save_npy_to_bytes(load_npy(fixture(name)))) == file_bytes(fixture(name)));
  }
  SECTION("a strided view goes out in C order; the file replaces the old one") {
    const Tensor t = load_npy(fixture("f4_c.npy")).transpose(0, 1).narrow(0, 1, 2);
    tensorfile_test::ScratchDir dir;
    write_file(dir / "t.npy", "old");
    save_npy(t, dir / "t.npy");
    const Tensor back = load_npy(dir / "t.npy");
    CHECK(back.equal(t.contiguous()));
  }
  SECTION("misuse") {
    CHECK_THROWS_WITH(save_npy_to_bytes(Tensor::zeros({2}, DType::BFloat16)),
                      "tensorfile: the tensor has dtype bfloat16, which NumPy has no name for");
    CHECK_THROWS_AS(save_npy_to_bytes(Tensor()), ArgumentError);
    CHECK_THROWS_AS(save_npy_to_bytes(Tensor::zeros({2}, DType::Float32, Device::meta())), ArgumentError);
  }
}

TEST_CASE("load_npy refuses hostile headers with their error and byte offset") {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  CHECK(load_npy(byte_span(npy_of(good, 8))).sizes() == Shape{2});
  const auto check = [](const std::string& bytes, const std::string& expected) {
    CHECK(message_of(bytes) == expected);
  };
  check(npy_of(good, 7),
        "FormatError: tensorfile: the data size disagrees with the header; expected 8 bytes of <f4 "
        "data, got 7 (at byte 128)");
  std::string long_header = npy_of(good, 8);
  long_header[8] = '\xff';
  long_header[9] = '\x7f';
  check(long_header,
        "FormatError: tensorfile: the header length 32767 runs past the end of the file (136 bytes) (at byte 8)");
  check(npy_of("['descr', '<f4']", 0),
        "FormatError: tensorfile: the header is not a Python dict literal; expected '{', got '[' (at byte 10)");
  check(npy_of("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8),
        "FormatError: tensorfile: fortran_order is not a bool; expected True or False, got '0' (at byte 44)");
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8),
        "FormatError: tensorfile: shape has a negative dimension (at byte 61)");
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8),
        "FormatError: tensorfile: the shape (4294967296, 4294967296) of <f4 overflows 64-bit byte counts (each 0 "
        "counted as 1, as numpy counts); expected at most 9223372036854775807 bytes (at byte 10)");
  // Issue 39: no data, but dimension 0 would step by 2^64 elements (numpy: "array is too big"; torch wraps it to 0).
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }", 0),
        "FormatError: tensorfile: the shape (0, 4294967296, 4294967296) of <f4 overflows 64-bit byte counts (each 0 "
        "counted as 1, as numpy counts); expected at most 9223372036854775807 bytes (at byte 10)");
  check(npy_of("{'descr': '<f4', 'fortran_order': True, 'shape': (4294967296, 4294967296, 0), }", 0),
        "FormatError: tensorfile: the shape (4294967296, 4294967296, 0) of <f4 overflows 64-bit byte counts (each 0 "
        "counted as 1, as numpy counts); expected at most 9223372036854775807 bytes (at byte 10)");
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8),
        "FormatError: tensorfile: a shape dimension does not fit in 64 bits (at byte 61)");
  check(npy_of("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 8),
        "FormatError: tensorfile: the shape (2305843009213693952,) of <f8 overflows 64-bit byte counts (each 0 "
        "counted as 1, as numpy counts); expected at most 9223372036854775807 bytes (at byte 10)");
  check(npy_of("{'descr': '<q9', 'fortran_order': False, 'shape': (2,), }", 8),
        "FormatError: tensorfile: unknown descr '<q9' (at byte 20)");
  check(npy_of("{'descr': '!f4', 'fortran_order': False, 'shape': (2,), }", 8),
        "FormatError: tensorfile: unknown descr '!f4'; expected a byte order '<', '>', '|' or '=' first (at byte 20)");
  check(npy_of("{'descr': '<f16', 'fortran_order': False, 'shape': (2,), }", 8),
        "UnsupportedError: tensorfile: descr '<f16' is a numeric dtype tensorfile has no equivalent for (at byte 20)");
  check(
      npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", 8),
      "FormatError: tensorfile: unknown key 'extra'; expected only 'descr', 'fortran_order' and 'shape' (at byte 66)");
  check(npy_of("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
        "FormatError: tensorfile: the key 'descr' is given twice (at byte 27)");
  check(npy_of("{'descr': '<f4', 'shape': (2,)}", 8),
        "FormatError: tensorfile: the header dict lacks 'fortran_order'; expected the keys 'descr', 'fortran_order' "
        "and 'shape' (at byte 64)");
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8),
        "FormatError: tensorfile: a one-element shape must be written (n,); got (n) (at byte 62)");
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 8),
        "FormatError: tensorfile: unexpected text after the header dict: 'x' (at byte 68)");
  check(npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, 4),
        "UnsupportedError: tensorfile: unknown .npy format version 4.0; expected 1.0, 2.0 or 3.0 (at byte 6)");
  check("PK\x03\x04 not npy",
        "FormatError: tensorfile: not a .npy file; expected the magic \"\\x93NUMPY\" first (at byte 0)");

  SECTION("an empty array within numpy's bound loads, with torch's strides") {
    for (const char* order : {"False", "True"}) {
      const Tensor t = load_npy(byte_span(npy_of(
          std::string("{'descr': '<f4', 'fortran_order': ") + order + ", 'shape': (0, 1073741824, 1073741824), }", 0)));
      CHECK(t.sizes() == Shape{0, 1 << 30, 1 << 30});
      CHECK(t.numel() == 0);
      CHECK(t.is_contiguous());
      CHECK(t.to_vector<float>().empty());
    }
  }
  SECTION("a path input names the file") {
    tensorfile_test::ScratchDir dir;
    write_file(dir / "bad.npy", npy_of("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8));
    CHECK_THROWS_WITH(load_npy(dir / "bad.npy"),
                      "tensorfile: " + (dir / "bad.npy").string() + ": shape has a negative dimension (at byte 61)");
  }
}

TEST_CASE("every truncation of a .npy or .npz file is a clean FormatError") {
  tensorfile_test::ScratchDir dir;
  for (const char* name :
       {"f4_c.npy", "i8_fortran.npy", "c8_big.npy", "bool_0d.npy", "i2_v3.npy", "stored.npz", "deflated.npz"}) {
    const std::string whole = file_bytes(fixture(name));
    const bool npz = std::string(name).ends_with(".npz");
    for (std::size_t size = 0; size < whole.size(); size += tensorfile_test::exhaustive_step()) {
      INFO(name << " cut to " << size << " bytes");
      const std::string cut = whole.substr(0, size);
      write_file(dir / "cut", cut);
      if (npz) {
        CHECK_THROWS_AS(load_npz(byte_span(cut)), FormatError);
        CHECK_THROWS_AS(load_npz(dir / "cut", {.mmap = MapMode::read_only}), FormatError);
        CHECK_THROWS_AS(load_npz(dir / "cut"), FormatError);
      } else {
        CHECK_THROWS_AS(load_npy(byte_span(cut)), FormatError);
        CHECK_THROWS_AS(load_npy(dir / "cut", {.mmap = MapMode::read_only}), FormatError);
        CHECK_THROWS_AS(load_npy(dir / "cut", {.map_location = "meta"}), FormatError);
        try {
          (void)load_npy(dir / "cut");
          FAIL("no error");
        } catch (const FormatError& error) {
          CHECK(error.path() == dir / "cut");
          CHECK(error.offset().has_value());
        }
      }
    }
  }
}

TEST_CASE("load_npz reads np.savez and np.savez_compressed archives") {
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    INFO(name);
    const bool stored = std::string(name) == "stored.npz";
    const Value heap = load_npz(fixture(name));
    const Value mapped = load_npz(fixture(name), {.mmap = MapMode::read_only});
    CHECK(heap == mapped);
    std::vector<std::string> names;
    for (const auto& [key, value] : named_tensors(mapped)) {
      names.push_back(key);
      CHECK(value.storage().kind() == (stored ? StorageKind::mmap : StorageKind::heap));
    }
    CHECK(names == std::vector<std::string>{"w", "b", "s"});
    const Tensor w = heap.as_dict().find(std::string_view("w"))->as_tensor();
    CHECK(w.sizes() == Shape{2, 3});
    CHECK(w.data<const float>()[5] == 5.0f);
    CHECK(heap.as_dict().find(std::string_view("s"))->as_tensor().item<double>() == 0.5);
  }
  SECTION("save_npz round trip, in order; misuse") {
    tensorfile_test::ScratchDir dir;
    const Value loaded = load_npz(fixture("deflated.npz"));
    save_npz(loaded, dir / "again.npz");
    CHECK(load_npz(dir / "again.npz", {.mmap = MapMode::read_only}) == loaded);
    const Tensor x = Tensor::zeros({2}, DType::Float32);
    CHECK_THROWS_WITH(save_npz_to_bytes(NamedTensors{{"a", x}, {"a", x}}),
                      "tensorfile: tensor \"a\": the name is given twice");
    CHECK_THROWS_AS(save_npz_to_bytes(NamedTensors{{"../a", x}}), ArgumentError);
    CHECK_THROWS_AS(save_npz_to_bytes(NamedTensors{{"", x}}), ArgumentError);
  }
  SECTION(".verify_crc checks each member's CRC-32, as np.load does") {
    std::string archive = file_bytes(fixture("stored.npz"));
    CHECK(load_npz(byte_span(archive), {.verify_crc = true}) == load_npz(fixture("stored.npz")));
    archive[archive.find("\x93NUMPY") + 130] ^= 1;  // a data byte of the first member, w
    CHECK_NOTHROW(load_npz(byte_span(archive)));
    try {
      (void)load_npz(byte_span(archive), {.verify_crc = true});
      FAIL("no error");
    } catch (const FormatError& error) {
      CHECK(error.reason().starts_with("CRC-32 mismatch"));
      CHECK(error.member() == "w.npy");
    }
    CHECK_THROWS_AS(load_npz(byte_span(archive), {.mmap = MapMode::read_only, .verify_crc = true}), FormatError);
  }
  SECTION("a member that is not an array, or a bad member, is named") {
    const Tensor x = Tensor::zeros({2}, DType::Float32);
    std::string archive = as_string(save_npz_to_bytes({{"x", x}}));
    archive.replace(archive.find("x.npy"), 5, "x.txt");  // local header
    archive.replace(archive.find("x.npy"), 5, "x.txt");  // central directory
    CHECK_THROWS_WITH(load_npz(byte_span(archive)),
                      "tensorfile: x.txt: the member is not a .npy array; expected only NAME.npy members in a .npz "
                      "(at byte 0)");
    std::string bad = as_string(save_npz_to_bytes({{"x", x}}));
    bad.replace(bad.find("'shape': (2,)"), 13, "'shape': (3,)");
    CHECK_THROWS_WITH(load_npz(byte_span(bad)),
                      "tensorfile: x.npy: the data size disagrees with the header; expected 12 bytes of <f4 data, "
                      "got 8 (at byte 128)");
  }
}

TEST_CASE("detect_format, verify and load_state_dict know .npy and .npz by their bytes", "[npy][npz][format]") {
  for (const char* name : {"f4_c.npy", "i2_v3.npy", "object.npy"})
    CHECK(detect_format(fixture(name)) == FileFormat::npy);
  for (const char* name : {"stored.npz", "deflated.npz"}) CHECK(detect_format(fixture(name)) == FileFormat::npz);
  CHECK(detect_format(byte_span(std::string("PK\x05\x06", 4))) == FileFormat::npz);  // np.savez() of nothing
  CHECK(format_name(FileFormat::npz) == "npz");

  const VerifyReport npz = verify(fixture("stored.npz"));
  CHECK(npz.ok());
  CHECK(npz.format == FileFormat::npz);
  CHECK(npz.tensors == named_tensors(load_npz(fixture("stored.npz"))).size());
  CHECK(verify(fixture("f4_c.npy")).ok());
  CHECK_FALSE(verify(fixture("object.npy")).ok());  // object arrays are refused, never unpickled

  const Value weights = load_state_dict(fixture("deflated.npz"));
  const Value direct = load_npz(fixture("deflated.npz"));
  REQUIRE(weights.size() == direct.size());
  for (const auto& [key, tensor] : direct.as_dict())
    CHECK(weights[key.as_string()].as_tensor().equal(tensor.as_tensor()));
}
