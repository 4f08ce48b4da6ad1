// SPDX-License-Identifier: MIT
/// @file
/// Storage: a block of bytes on a device with shared ownership, backed by any storage_backend.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"

namespace tensorfile {

/// Which backend holds a Storage's bytes. A backend written outside tensorfile is `custom`.
enum class StorageKind : std::uint8_t {
  heap,      ///< HeapBackend: owned host memory
  mmap,      ///< MmapBackend: a shared mapping of a file (its mode() says how)
  borrowed,  ///< BorrowedBackend: someone else's memory
  meta,      ///< MetaBackend: a size and no bytes
  cuda,      ///< CudaBackend: device memory
  custom,    ///< any other backend, and an empty Storage
};

/// The lower-case name of `kind` ("heap", "mmap", ...).
[[nodiscard]] constexpr std::string_view storage_kind_name(StorageKind kind) noexcept {
  switch (kind) {
    case StorageKind::heap: return "heap";
    case StorageKind::mmap: return "mmap";
    case StorageKind::borrowed: return "borrowed";
    case StorageKind::meta: return "meta";
    case StorageKind::cuda: return "cuda";
    case StorageKind::custom: break;
  }
  return "custom";
}

/// What a type must offer to back a Storage. A backend owns (or borrows) one byte range and is
/// kept alive by every Storage and Tensor cut from it. Optional: `name()` returning a
/// std::string_view names the backend in messages (default: its kind's name); `kind()` returning
/// a StorageKind is how tensorfile's own backends identify themselves (default: custom).
///
/// - `data()`: first byte, `std::byte*` or `const std::byte*`; null when size is 0 or on meta
/// - `size_bytes()`: number of bytes
/// - `device()`: where the bytes live; host code never dereferences non-CPU data
/// - `writable()`: whether the bytes may be written (must be false if data() is const)
template <class B>
concept storage_backend = std::move_constructible<B> && requires(const B& backend) {
  { backend.data() } -> std::convertible_to<const std::byte*>;
  { backend.size_bytes() } -> std::convertible_to<std::size_t>;
  { backend.device() } -> std::convertible_to<Device>;
  { backend.writable() } -> std::convertible_to<bool>;
};

/// Bytes with a device and a lifetime; copies share ownership (cheap). A default-constructed
/// Storage is empty (no backend). The backend's answers are read once, when the Storage is made.
class Storage {
 public:
  Storage() = default;

  /// Takes ownership of `backend` and shares it among all copies.
  template <class B>
  requires(!std::same_as<B, Storage> && storage_backend<B>)  // Storage itself first: keeps copies unconstrained
      explicit Storage(B backend) {
    auto owned = std::make_shared<Owned<B>>(std::move(backend));
    const B& owner = owned->backend;
    data_ = const_cast<std::byte*>(static_cast<const std::byte*>(owner.data()));
    size_ = static_cast<std::size_t>(owner.size_bytes());
    const Device device = owner.device();
    device_kind_ = device.kind;
    device_index_ = device.index;
    writable_ = owner.writable();
    Facts& facts = owned->facts;
    if constexpr (requires {
                    { owner.kind() } -> std::convertible_to<StorageKind>;
                  })
      facts.kind = owner.kind();
    if constexpr (requires { std::string_view{owner.name()}; }) {
      facts.name = owner.name();
    } else {
      facts.name = storage_kind_name(facts.kind);
    }
    facts.type_tag = &type_tag<B>;
    facts_ = &facts;
    owner_ = std::shared_ptr<void>(owned, &owned->backend);  // shares the block, points at the backend
  }

  /// Whether this Storage holds a backend.
  [[nodiscard]] bool defined() const noexcept { return owner_ != nullptr; }
  /// First byte for reading; null when empty or not on the host's address space (meta).
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  /// First byte for writing; throws ArgumentError when the storage is read-only.
  [[nodiscard]] std::byte* mutable_data() const {
    if (!writable_)
      throw ArgumentError("storage (" + std::string(name()) + ") is read-only; expected a writable storage");
    return data_;
  }
  /// Length in bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }
  /// Where the bytes live.
  [[nodiscard]] Device device() const noexcept { return {device_kind_, device_index_}; }
  /// Whether the bytes may be written.
  [[nodiscard]] bool writable() const noexcept { return writable_; }
  /// Which backend holds the bytes; custom for a backend written outside tensorfile and when empty.
  [[nodiscard]] StorageKind kind() const noexcept { return owner_ != nullptr ? facts_->kind : StorageKind::custom; }
  /// The backend's name in messages ("heap", "mmap_private", a custom backend's own), or "custom".
  [[nodiscard]] std::string_view name() const noexcept { return owner_ != nullptr ? facts_->name : "custom"; }
  /// How many Storage objects share the backend.
  [[nodiscard]] long use_count() const noexcept { return owner_.use_count(); }

  /// The backend object, when it is of type B; null otherwise.
  template <storage_backend B>
  [[nodiscard]] B* backend() const noexcept {
    return owner_ != nullptr && facts_->type_tag == &type_tag<B> ? static_cast<B*>(owner_.get()) : nullptr;
  }

  /// A Storage over bytes [offset, offset + bytes) of this one, sharing its owner.
  /// Precondition: the range lies inside this storage (throws ArgumentError otherwise).
  [[nodiscard]] Storage slice(std::size_t offset, std::size_t bytes) const {
    if (offset > size_ || bytes > size_ - offset) {
      throw ArgumentError("storage slice [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                          ") leaves the storage; expected at most " + std::to_string(size_) + " bytes");
    }
    Storage out = *this;
    out.data_ = data_ == nullptr ? nullptr : data_ + offset;
    out.size_ = bytes;
    return out;
  }

  /// The backend object's address: equal for every Storage sharing it (an identity, not for access).
  [[nodiscard]] const void* owner() const noexcept { return owner_.get(); }

  /// Whether both refer to the same backend object (so views of one share memory).
  [[nodiscard]] bool shares_owner_with(const Storage& other) const noexcept {
    return owner_ != nullptr && owner_ == other.owner_;
  }

 private:
  template <class B>
  static constexpr char type_tag = 0;

  // What every Storage of one backend shares, kept beside the backend in its block rather than in each Storage
  // (a load makes a Storage per tensor, and a Tensor holds one).
  struct Facts {
    StorageKind kind = StorageKind::custom;
    std::string_view name;
    const void* type_tag = nullptr;
  };
  template <class B>
  struct Owned {
    explicit Owned(B&& b) : backend(std::move(b)) {}
    Facts facts;
    B backend;
  };

  std::shared_ptr<void> owner_;  // the backend, in an Owned<B> block
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  const Facts* facts_ = nullptr;  // in owner_'s block: read only while owner_ holds it (a moved-from copy does not)
  // The device in parts, so that writable_ fills its padding: every tensor holds a Storage (48 bytes, not 56).
  Device::Kind device_kind_ = Device::Kind::CPU;
  bool writable_ = false;
  int device_index_ = -1;
};

}  // namespace tensorfile
