// SPDX-License-Identifier: MIT
// Tests of save_memmap()'s modes: new files and directories get 0666 / 0777 less the umask, and a
// replaced tree keeps its root directory's permission bits.
#include <tensorfile/formats/tensordict/load_memmap.hpp>
#include <tensorfile/formats/tensordict/save_memmap.hpp>

#include "file_modes.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
namespace fs = std::filesystem;

namespace {

using tensorfile_test::permissions_of;
using tensorfile_test::UmaskScope;

TensorDict sample(float first) {
  return TensorDict({{"a", Tensor::from_values<float>({first, 2})},
                     {"nested", TensorDict({{"b", Tensor::from_values<std::int64_t>({1, 2})}}, {2})}},
                    {2});
}

}  // namespace

TEST_CASE("save_memmap() honours the umask for every file and directory it makes", "[save_memmap][modes]") {
  const tensorfile_test::ScratchDir dir;
  for (const mode_t mask : {mode_t{022}, mode_t{027}, mode_t{077}}) {
    INFO("umask " << mask);
    const UmaskScope umask(mask);
    const fs::path tree = dir / ("tree-" + std::to_string(mask));
    save_memmap(sample(1), tree);
    CHECK(permissions_of(tree) == (0777 & ~mask));
    CHECK(permissions_of(tree / "nested") == (0777 & ~mask));
    CHECK(permissions_of(tree / "meta.json") == (0666 & ~mask));
    CHECK(permissions_of(tree / "a.memmap") == (0666 & ~mask));
    CHECK(permissions_of(tree / "nested" / "b.memmap") == (0666 & ~mask));
  }
}

TEST_CASE("save_memmap() over a tree keeps the permission bits of the tree's root", "[save_memmap][modes]") {
  const UmaskScope umask(022);
  const tensorfile_test::ScratchDir dir;
  const fs::path tree = dir / "private";
  save_memmap(sample(1), tree);
  REQUIRE(::chmod(tree.c_str(), 0700) == 0);
  save_memmap(sample(2), tree);
  CHECK(permissions_of(tree) == 0700);  // a private tree stays private
  CHECK(load_memmap(tree).get("a").as_tensor().select(0, 0).item<float>() == 2.0f);
  REQUIRE(::chmod(tree.c_str(), 0775) == 0);
  save_memmap(sample(3), tree);
  CHECK(permissions_of(tree) == 0775);
}
