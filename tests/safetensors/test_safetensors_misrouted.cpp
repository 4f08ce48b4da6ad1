// SPDX-License-Identifier: MIT
// A loader given another format's file names the format it found and its loader (issue 39, item 15).
#include <tensorfile/formats/numpy/npy.hpp>
#include <tensorfile/formats/numpy/npz.hpp>
#include <tensorfile/formats/safetensors/header.hpp>
#include <tensorfile/formats/safetensors/load.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "tensorfile_catch.hpp"

namespace {

using tensorfile_test::sample;

/// The message of what `load` throws, or "" when it throws nothing.
template <typename Load>
std::string message_of(Load&& load) {
  try {
    (void)load();
  } catch (const tensorfile::FormatError& error) {
    return error.message();
  }
  return "";
}

}  // namespace

TEST_CASE("load_safetensors on another format names it") {
  const auto pt = sample("torch", "state_dict_linear_bn.pt");
  const std::string want = "tensorfile: " + pt.string() +
                           ": the file is torch-zip data, not safetensors; expected an 8-byte header length and a "
                           "JSON header, got torch-zip (read it with load_torch()) (at byte 0)";
  CHECK(message_of([&] { return tensorfile::load_safetensors(pt); }) == want);
  CHECK(message_of([&] { return tensorfile::load_safetensors(pt, {.mmap = tensorfile::MapMode::read_only}); }) == want);
  CHECK(message_of([&] { return tensorfile::read_safetensors_header(pt); }) == want);
  const auto npy = sample("numpy", "f4_c.npy");
  CHECK(message_of([&] { return tensorfile::load_safetensors(npy); }).find("the file is npy data, not safetensors") !=
        std::string::npos);
  const auto legacy = sample("torch", "legacy_format.pt");
  CHECK(message_of([&] {
          return tensorfile::load_safetensors(legacy);
        }).find("the file is torch-legacy data, not safetensors") != std::string::npos);
}

TEST_CASE("load_npz and load_npy on another format name it") {
  const auto npy = sample("numpy", "f4_c.npy");
  CHECK(message_of([&] { return tensorfile::load_npz(npy); }) ==
        "tensorfile: " + npy.string() +
            ": the file is npy data, not npz; expected a zip archive of .npy members, got npy (read it with "
            "load_npy()) (at byte 0)");
  CHECK(message_of([&] {
          return tensorfile::load_npz(npy, {.mmap = tensorfile::MapMode::read_only});
        }).find("the file is npy data, not npz") != std::string::npos);
  const auto npz = sample("numpy", "deflated.npz");
  CHECK(message_of([&] { return tensorfile::load_npy(npz); }) ==
        "tensorfile: " + npz.string() +
            ": the file is npz data, not npy; expected the .npy magic, got npz (read it with load_npz()) (at byte 0)");
  const auto st = sample("safetensors", "f.safetensors");
  CHECK(message_of([&] { return tensorfile::load_npy(st); }).find("the file is safetensors data, not npy") !=
        std::string::npos);
  CHECK(message_of([&] {
          return tensorfile::load_npz(st);
        }).find("not npz; expected a zip archive of .npy members, got safetensors (read it with load_safetensors())") !=
        std::string::npos);
}

TEST_CASE("a damaged file of the loader's own format keeps its own error") {
  // f.safetensors cut inside its header: still a safetensors error, not a claim of another format.
  const auto st = sample("safetensors", "f.safetensors");
  std::ifstream in(st, std::ios::binary);
  std::vector<std::byte> bytes(20);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(in.gcount() == 20);
  const std::string message = message_of([&] { return tensorfile::load_safetensors(bytes); });
  CHECK(message.find("the file is") == std::string::npos);
  CHECK(!message.empty());
}
