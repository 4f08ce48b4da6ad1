// SPDX-License-Identifier: MIT
// Tests of save_torch()'s file modes and links: a replaced file keeps its permission bits, a new one gets
// 0666 less the umask, and a symbolic link is written through and stays a link, as torch.save does.
#include <tensorfile/formats/torch/load.hpp>
#include <tensorfile/formats/torch/save.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "file_modes.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
namespace fs = std::filesystem;

using tensorfile_test::names_in;

namespace {

using tensorfile_test::permissions_of;
using tensorfile_test::UmaskScope;

Value weights(float first) { return make_state_dict({{"w", Tensor::from_values<float>({first, 2, 3})}}); }

}  // namespace

TEST_CASE("save_torch() keeps the permission bits of the file it replaces", "[save][modes]") {
  const UmaskScope umask(022);
  const tensorfile_test::ScratchDir dir;
  const fs::path path = dir / "private.pt";
  save_torch(weights(1), path);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  save_torch(weights(2), path);
  CHECK(permissions_of(path) == 0600);  // a private checkpoint stays private
  CHECK(load_torch(path) == weights(2));
  REQUIRE(::chmod(path.c_str(), 0664) == 0);
  save_torch(weights(3), path);
  CHECK(permissions_of(path) == 0664);  // bits the umask would take are kept too
  REQUIRE(::chmod(path.c_str(), 0400) == 0);
  save_torch(weights(4), path);  // a read-only file is replaced, as a rename replaces it
  CHECK(permissions_of(path) == 0400);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"private.pt"});
}

TEST_CASE("save_torch() gives a new file 0666 less the umask", "[save][modes]") {
  const tensorfile_test::ScratchDir dir;
  for (const mode_t mask : {mode_t{022}, mode_t{077}, mode_t{002}, mode_t{0}}) {
    INFO("umask " << mask);
    const UmaskScope umask(mask);
    const fs::path path = dir / ("new-" + std::to_string(mask) + ".pt");
    save_torch(weights(1), path);
    CHECK(permissions_of(path) == (0666 & ~mask));
  }
}

TEST_CASE("save_torch() through a symbolic link replaces the file it leads to and keeps the link", "[save][modes]") {
  const UmaskScope umask(022);
  const tensorfile_test::ScratchDir dir;
  fs::create_directory(dir / "real");
  const fs::path target = dir / "real" / "model.pt";
  save_torch(weights(1), target);
  REQUIRE(::chmod(target.c_str(), 0600) == 0);

  SECTION("a relative link") {
    fs::create_symlink("real/model.pt", dir / "link.pt");
    save_torch(weights(2), dir / "link.pt");
    CHECK(fs::is_symlink(dir / "link.pt"));
    CHECK(fs::read_symlink(dir / "link.pt") == "real/model.pt");
    CHECK(load_torch(target) == weights(2));
    CHECK(permissions_of(target) == 0600);
    CHECK(names_in(dir / "real") == std::vector<std::string>{"model.pt"});  // no temporary left
  }
  SECTION("a chain of links, the last one absolute") {
    fs::create_symlink(target, dir / "second.pt");
    fs::create_symlink("second.pt", dir / "first.pt");
    save_torch(weights(3), dir / "first.pt");
    CHECK(fs::is_symlink(dir / "first.pt"));
    CHECK(fs::is_symlink(dir / "second.pt"));
    CHECK(load_torch(target) == weights(3));
    CHECK(load_torch(dir / "first.pt") == weights(3));
  }
  SECTION("a link to a file not there yet creates that file") {
    fs::create_symlink("real/later.pt", dir / "later-link.pt");
    save_torch(weights(4), dir / "later-link.pt");
    CHECK(fs::is_symlink(dir / "later-link.pt"));
    CHECK(load_torch(dir / "real" / "later.pt") == weights(4));
    CHECK(permissions_of(dir / "real" / "later.pt") == 0644);
  }
  SECTION("a loop of links is an IoError") {
    fs::create_symlink("loop-b.pt", dir / "loop-a.pt");
    fs::create_symlink("loop-a.pt", dir / "loop-b.pt");
    REQUIRE_THROWS_AS(save_torch(weights(5), dir / "loop-a.pt"), IoError);
    CHECK(fs::is_symlink(dir / "loop-a.pt"));
  }
}
