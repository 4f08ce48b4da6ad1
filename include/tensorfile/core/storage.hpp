// SPDX-License-Identifier: MIT
// Storage: a block of bytes on a device with shared ownership, backed by any storage_backend.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/error.hpp"

namespace tensorfile {

/// What a type must offer to back a Storage. A backend owns (or borrows) one byte range and is
/// kept alive by every Storage and Tensor cut from it. Optional: `kind()` returning a
/// std::string_view names the backend in messages ("heap", "mmap_shared"...).
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
    auto owner = std::make_shared<B>(std::move(backend));
    data_ = const_cast<std::byte*>(static_cast<const std::byte*>(owner->data()));
    size_ = static_cast<std::size_t>(owner->size_bytes());
    device_ = owner->device();
    writable_ = owner->writable();
    if constexpr (requires { std::string_view{owner->kind()}; }) kind_ = owner->kind();
    type_tag_ = &type_tag<B>;
    owner_ = std::move(owner);
  }

  /// Whether this Storage holds a backend.
  [[nodiscard]] bool defined() const noexcept { return owner_ != nullptr; }
  /// First byte for reading; null when empty or not on the host's address space (meta).
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  /// First byte for writing; throws ArgumentError when the storage is read-only.
  [[nodiscard]] std::byte* mutable_data() const {
    if (!writable_) throw ArgumentError("storage (" + std::string(kind_) + ") is read-only; expected a writable storage");
    return data_;
  }
  /// Length in bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }
  /// Where the bytes live.
  [[nodiscard]] Device device() const noexcept { return device_; }
  /// Whether the bytes may be written.
  [[nodiscard]] bool writable() const noexcept { return writable_; }
  /// The backend's name ("heap", "mmap_private", ...), or "custom".
  [[nodiscard]] std::string_view kind() const noexcept { return kind_; }
  /// How many Storage objects share the backend.
  [[nodiscard]] long use_count() const noexcept { return owner_.use_count(); }

  /// The backend object, when it is of type B; null otherwise.
  template <storage_backend B>
  [[nodiscard]] B* backend() const noexcept {
    return type_tag_ == &type_tag<B> ? static_cast<B*>(owner_.get()) : nullptr;
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

  std::shared_ptr<void> owner_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  Device device_ = Device::cpu();
  bool writable_ = false;
  std::string_view kind_ = "custom";
  const void* type_tag_ = nullptr;
};

}  // namespace tensorfile
