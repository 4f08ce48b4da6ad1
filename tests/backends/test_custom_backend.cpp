// SPDX-License-Identifier: MIT
// A user-defined backend (an arena handing out slices of one block) plugged into Storage and Tensor.
#include <tensorfile/core/storage.hpp>
#include <tensorfile/core/tensor.hpp>

#include <memory>
#include <vector>

#include "tensorfile_catch.hpp"

namespace {

/// A bump allocator: one block, slices handed out in order, freed all at once.
class Arena {
 public:
  explicit Arena(std::size_t bytes) : block_(bytes) {}
  std::span<std::byte> take(std::size_t bytes) {
    auto out = std::span<std::byte>(block_).subspan(used_, bytes);
    used_ += (bytes + 63) / 64 * 64;
    return out;
  }

 private:
  std::vector<std::byte> block_;
  std::size_t used_ = 0;
};

/// A backend for one arena slice; it keeps the whole arena alive.
class ArenaBackend {
 public:
  ArenaBackend(std::shared_ptr<Arena> arena, std::size_t bytes)
      : arena_(std::move(arena)), bytes_(arena_->take(bytes)) {}
  [[nodiscard]] std::byte* data() const noexcept { return bytes_.data(); }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return bytes_.size(); }
  [[nodiscard]] tensorfile::Device device() const noexcept { return tensorfile::Device::cpu(); }
  [[nodiscard]] bool writable() const noexcept { return true; }
  [[nodiscard]] std::string_view name() const noexcept { return "arena"; }
  [[nodiscard]] const Arena* arena() const noexcept { return arena_.get(); }

 private:
  std::shared_ptr<Arena> arena_;
  std::span<std::byte> bytes_;
};

static_assert(tensorfile::storage_backend<ArenaBackend>);

/// The smallest possible backend: no name(), read-only constant bytes.
struct ConstantBytes {
  [[nodiscard]] const std::byte* data() const noexcept { return bytes.data(); }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return bytes.size(); }
  [[nodiscard]] tensorfile::Device device() const noexcept { return tensorfile::Device::cpu(); }
  [[nodiscard]] bool writable() const noexcept { return false; }
  std::array<std::byte, 4> bytes{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
};

}  // namespace

TEST_CASE("A user backend plugs into Storage and Tensor without touching the library", "[storage][custom]") {
  auto arena = std::make_shared<Arena>(1024);
  const std::weak_ptr<Arena> watch = arena;
  tensorfile::Tensor a(tensorfile::Storage(ArenaBackend(arena, 16)), tensorfile::DType::Int32, {4});
  tensorfile::Tensor b(tensorfile::Storage(ArenaBackend(arena, 16)), tensorfile::DType::Int32, {2, 2});
  arena.reset();
  a.data<std::int32_t>()[3] = 42;
  b.data<std::int32_t>()[0] = 7;
  CHECK(a.storage().kind() == tensorfile::StorageKind::custom);
  CHECK(a.storage().name() == "arena");
  CHECK(a.data<const std::int32_t>()[3] == 42);
  CHECK(b.storage().data() - a.storage().data() == 64);
  CHECK(a.storage().backend<ArenaBackend>()->arena() == b.storage().backend<ArenaBackend>()->arena());
  CHECK_FALSE(watch.expired());
  a = {};
  b = {};
  CHECK(watch.expired());

  SECTION("a minimal read-only backend") {
    const tensorfile::Tensor c(tensorfile::Storage(ConstantBytes{}), tensorfile::DType::UInt8, {4});
    CHECK(c.storage().kind() == tensorfile::StorageKind::custom);
    CHECK(c.storage().name() == "custom");
    CHECK(c.data<const std::uint8_t>()[2] == 3);
    CHECK_THROWS_AS(c.data<std::uint8_t>(), tensorfile::ArgumentError);
  }
}
