// SPDX-License-Identifier: MIT
/// @file
/// from_buffer: a 1-d tensor sharing a caller's memory, as torch.frombuffer makes it.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"

namespace tensorfile {

/// Options of from_buffer; use designated initializers: `{.dtype = DType::Int32, .offset = 8}`.
struct FromBufferOptions {
  DType dtype = DType::Float32;  ///< element type
  std::int64_t count = -1;       ///< elements to take; negative: all bytes after offset (a whole number of elements)
  std::int64_t offset = 0;       ///< bytes to skip at the start of the buffer
};

namespace detail {

/// The byte range torch.frombuffer would take, with its rejections; returns {offset, bytes}.
inline std::pair<std::size_t, std::size_t> frombuffer_range(std::size_t length, const FromBufferOptions& options) {
  const auto len = static_cast<std::int64_t>(length);
  const auto elem = static_cast<std::int64_t>(element_size(options.dtype));
  const std::string type_name(dtype_name(options.dtype));
  if (len == 0) throw ArgumentError("buffer is empty; expected at least 1 byte");
  if (options.count == 0) throw ArgumentError("count is 0; expected a positive count, or -1 for the whole buffer");
  if (options.offset < 0 || options.offset >= len) {
    throw ArgumentError("offset is outside the buffer; expected 0 to " + std::to_string(len - 1) + ", got " +
                        std::to_string(options.offset));
  }
  const std::int64_t rest = len - options.offset;
  std::int64_t count = options.count;
  if (count < 0) {
    if (rest % elem != 0) {
      throw ArgumentError("buffer length after offset is not a whole number of " + type_name +
                          " elements; expected a multiple of " + std::to_string(elem) + " bytes, got " +
                          std::to_string(rest));
    }
    count = rest / elem;
  }
  const auto bytes = checked_mul(count, elem);
  if (!bytes || *bytes > rest) {
    throw ArgumentError(std::to_string(count) + " " + type_name + " elements after offset " +
                        std::to_string(options.offset) + " do not fit the buffer; expected at most " +
                        std::to_string(rest) + " bytes, got " +
                        (bytes ? std::to_string(*bytes) : std::string("an overflow")));
  }
  return {static_cast<std::size_t>(options.offset), static_cast<std::size_t>(*bytes)};
}

template <class Span>
Tensor from_buffer_impl(Span buffer, std::shared_ptr<const void> keep_alive, const FromBufferOptions& options) {
  const auto [offset, bytes] = frombuffer_range(buffer.size(), options);
  Storage storage(BorrowedBackend(buffer.subspan(offset, bytes), std::move(keep_alive)));
  return {std::move(storage), options.dtype, Shape{static_cast<std::int64_t>(bytes / element_size(options.dtype))}};
}

}  // namespace detail

/// Memory from_buffer accepts: anything that converts to a span of bytes (std::span<std::byte>,
/// std::span<const std::byte>, std::vector<std::byte>, std::array<std::byte, N>...).
template <class Buffer>
concept byte_buffer = std::convertible_to<Buffer, std::span<const std::byte>>;

/// A 1-d tensor sharing `buffer` (torch.frombuffer), without copying. Writable when the bytes
/// are (a span of std::byte), read-only for const bytes: writing then throws (torch only warns).
/// The caller keeps the memory alive. Throws ArgumentError for the cases torch rejects: empty
/// buffer, count 0, offset outside the buffer, a remainder that is not whole elements, or count
/// elements that do not fit.
template <byte_buffer Buffer>
[[nodiscard]] Tensor from_buffer(Buffer&& buffer, FromBufferOptions options = {}) {
  return from_buffer(std::forward<Buffer>(buffer), nullptr, options);
}

/// As above; the tensor and every view of it keep `keep_alive` (the buffer's owner) alive.
template <byte_buffer Buffer>
[[nodiscard]] Tensor from_buffer(Buffer&& buffer, std::shared_ptr<const void> keep_alive,
                                 FromBufferOptions options = {}) {
  if constexpr (std::convertible_to<Buffer, std::span<std::byte>>) {
    return detail::from_buffer_impl(std::span<std::byte>(buffer), std::move(keep_alive), options);
  } else {
    return detail::from_buffer_impl(std::span<const std::byte>(buffer), std::move(keep_alive), options);
  }
}

}  // namespace tensorfile
