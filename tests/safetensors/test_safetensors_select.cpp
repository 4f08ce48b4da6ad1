// SPDX-License-Identifier: MIT
// Tests of LoadOptions::select: kept tensors equal a full load, the others are meta tensors of
// the same dtype and shape or left out, and the bytes of unselected tensors are never read.
#include <tensorfile/formats/safetensors/load.hpp>
#include <tensorfile/formats/safetensors/save.hpp>

#include <string>
#include <vector>

#include "dict_helpers.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;
using tensorfile_test::keys_of;
using tensorfile_test::tensor_at;

namespace {

/// Checks that `part` (a select load) has `full`'s tensors: those `select` keeps equal, on the cpu; the
/// others meta of the same dtype and shape, or absent when `drops`.
void check_selected(const Value& full, const Value& part, const TensorSelect& select, bool drops) {
  std::vector<std::string> expected;
  for (const auto& [key, value] : full.as_dict()) {
    const std::string& name = key.as_string();
    const Value* got = part.as_dict().find(std::string_view(name));
    INFO(name);
    if (select(name)) {
      REQUIRE(got != nullptr);
      CHECK(got->as_tensor().device().is_cpu());
      CHECK(got->as_tensor().equal(value.as_tensor()));
    } else if (drops) {
      CHECK(got == nullptr);
      continue;
    } else {
      REQUIRE(got != nullptr);
      CHECK(got->as_tensor().device().is_meta());
      CHECK(got->as_tensor().dtype() == value.as_tensor().dtype());
      CHECK(got->as_tensor().sizes() == value.as_tensor().sizes());
    }
    expected.push_back(name);
  }
  CHECK(keys_of(part) == expected);  // the header's order kept
}

}  // namespace

TEST_CASE("safetensors select: kept tensors as a full load, the rest meta or dropped, in every mode",
          "[safetensors][select]") {
  const auto path = tensorfile_test::data_dir() / "safetensors" / "overall.safetensors";
  const Value full = load_safetensors(path);
  REQUIRE(full.as_dict().size() >= 3);
  const std::string first = keys_of(full).front();
  const TensorSelect select = select_paths({first, "*_pos*"});
  const std::string text = tensorfile_test::read_text(path);
  const std::span<const std::byte> bytes = std::as_bytes(std::span(text));
  for (const bool drops : {false, true}) {
    for (const std::optional<MapMode> mmap : {std::optional<MapMode>(), std::optional<MapMode>(MapMode::read_only)}) {
      INFO("drops " << drops << " mmap " << mmap.has_value());
      const LoadOptions options{.mmap = mmap, .select = select, .select_drops = drops};
      check_selected(full, load_safetensors(path, options), select, drops);
      check_selected(full, load_safetensors(bytes, options), select, drops);
    }
  }
  // metadata is kept; "meta" everywhere still drops the unselected
  const Value none = load_safetensors(path, {.select = [](std::string_view) { return false; }, .select_drops = true});
  CHECK(none.as_dict().size() == 0);
  CHECK((safetensors_metadata(none) != nullptr) == (safetensors_metadata(full) != nullptr));
  const Value meta = load_safetensors(path, {.map_location = "meta", .select = select, .select_drops = true});
  CHECK(meta.as_dict().size() < full.as_dict().size());
}

TEST_CASE("safetensors select reads only the kept tensors' bytes, the header is still validated whole",
          "[safetensors][select]") {
  tensorfile_test::ScratchDir dir;
  const auto path = dir / "big.safetensors";
  Tensor small = Tensor::zeros({4}, DType::Int32);
  for (int i = 0; i < 4; ++i) small.data<std::int32_t>()[i] = 10 * i + 1;
  save_safetensors(NamedTensors{{"big.a", Tensor::zeros({1 << 20}, DType::Float32)},  // 4 MiB each
                                {"small", small},
                                {"big.b", Tensor::zeros({1 << 20}, DType::Float32)}},
                   path, {.sync = false});
  const std::uint64_t before = tensorfile_test::bytes_read_so_far();
  const Value part = load_safetensors(path, {.select = select_paths({"small"})});
  const std::uint64_t read = tensorfile_test::bytes_read_so_far() - before;
  CHECK(read < 64 * 1024);  // the header and 16 bytes, not 8 MiB
  CHECK(tensor_at(part, "small").equal(small));
  CHECK(tensor_at(part, "big.a").device().is_meta());
  const std::uint64_t before_full = tensorfile_test::bytes_read_so_far();
  (void)load_safetensors(path);
  CHECK(tensorfile_test::bytes_read_so_far() - before_full >= 8u << 20);  // the counter does see data reads

  // mmap: only the kept tensor is a view of the mapping
  const Value mapped = load_safetensors(path, {.mmap = MapMode::read_only, .select = select_paths({"big.b"})});
  CHECK(tensor_at(mapped, "big.b").device().is_cpu());
  CHECK(tensor_at(mapped, "big.a").device().is_meta());
  CHECK(tensor_at(mapped, "small").device().is_meta());

  // a truncated file is refused by the header check even when only an early tensor is selected
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  CHECK_THROWS_AS(load_safetensors(path, {.select = select_paths({"small"})}), FormatError);
}
