// SPDX-License-Identifier: MIT
/// @file
/// tensorfile::Error and its subclasses: every failure names the file, the member and the byte offset.
#pragma once

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace tensorfile {

/// What kind of failure an Error reports.
enum class ErrorCode {
  io,                ///< the operating system refused (open, read, mmap, write...)
  format,            ///< the bytes do not follow the format
  unsupported,       ///< a valid construct tensorfile does not read (yet)
  dtype,             ///< wrong or unknown element type
  invalid_argument,  ///< the caller asked for something impossible
  limit,             ///< a resource limit (nesting, memo, sizes) was reached
  device,            ///< the device is missing or not built in
};

/// The code's name as spelled in the enum: "io", "format", "unsupported", "dtype", "invalid_argument", "limit",
/// "device" ("unknown" for a value outside the enum).
[[nodiscard]] constexpr std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::io: return "io";
    case ErrorCode::format: return "format";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::dtype: return "dtype";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::limit: return "limit";
    case ErrorCode::device: return "device";
  }
  return "unknown";
}

/// Where an error happened: the file, the member inside it (an archive record), the byte offset.
struct ErrorLocation {
  std::filesystem::path file{};           ///< empty for in-memory input
  std::string member{};                   ///< archive member or key; empty if none
  std::optional<std::uint64_t> offset{};  ///< byte offset inside the member (or file)
};

/// Base of every exception tensorfile throws. The message reads
/// `tensorfile: <file>: <member>: <what went wrong> (at byte N)`, leaving out the parts that are unknown.
class Error : public std::runtime_error {
 public:
  /// An error of kind `code`: `reason` says what went wrong, `where` where (its empty parts stay out of what()).
  Error(ErrorCode code, const std::string& reason, ErrorLocation where = {})
      : std::runtime_error(compose(reason, where)), code_(code), reason_(reason), where_(std::move(where)) {}

  /// The kind of failure.
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }
  /// The file involved, empty for in-memory input.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return where_.file; }
  /// The archive member or key involved, empty if none.
  [[nodiscard]] const std::string& member() const noexcept { return where_.member; }
  /// The byte offset, when one is known.
  [[nodiscard]] std::optional<std::uint64_t> offset() const noexcept { return where_.offset; }
  /// The message without the location parts.
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
  /// The whole message, as what() words it; unlike what() (a C string) not cut at a NUL a key or path holds.
  [[nodiscard]] std::string message() const { return compose(reason_, where_); }

 private:
  static std::string compose(const std::string& reason, const ErrorLocation& where) {
    std::string message = "tensorfile: ";
    if (!where.file.empty()) message += where.file.string() + ": ";
    if (!where.member.empty()) message += where.member + ": ";
    message += reason;
    if (where.offset) message += " (at byte " + std::to_string(*where.offset) + ")";
    return message;
  }

  ErrorCode code_;
  std::string reason_;
  ErrorLocation where_;
};

/// The bytes do not follow the format (truncated, corrupt or hostile input).
class FormatError : public Error {
 public:
  /// An Error of code ErrorCode::format.
  explicit FormatError(const std::string& reason, ErrorLocation where = {})
      : Error(ErrorCode::format, reason, std::move(where)) {}
};

/// A valid construct that tensorfile does not read; the message names it.
class UnsupportedError : public Error {
 public:
  /// An Error of code ErrorCode::unsupported.
  explicit UnsupportedError(const std::string& reason, ErrorLocation where = {})
      : Error(ErrorCode::unsupported, reason, std::move(where)) {}
};

/// A dtype mismatch or an unknown dtype name.
class DTypeError : public Error {
 public:
  /// An Error of code ErrorCode::dtype.
  explicit DTypeError(const std::string& reason, ErrorLocation where = {})
      : Error(ErrorCode::dtype, reason, std::move(where)) {}
};

/// The caller asked for something impossible (bad option, out-of-range size).
class ArgumentError : public Error {
 public:
  /// An Error of code ErrorCode::invalid_argument.
  explicit ArgumentError(const std::string& reason, ErrorLocation where = {})
      : Error(ErrorCode::invalid_argument, reason, std::move(where)) {}
};

/// A configured resource limit was reached.
class LimitError : public Error {
 public:
  /// An Error of code ErrorCode::limit.
  explicit LimitError(const std::string& reason, ErrorLocation where = {})
      : Error(ErrorCode::limit, reason, std::move(where)) {}
};

/// A device is missing, not built in, or failed.
class DeviceError : public Error {
 public:
  /// An Error of code ErrorCode::device.
  explicit DeviceError(const std::string& reason, ErrorLocation where = {})
      : Error(ErrorCode::device, reason, std::move(where)) {}
};

/// The operating system refused; keeps errno. The reason ends in ": <strerror(errno)>".
class IoError : public Error {
 public:
  /// An Error of code ErrorCode::io whose reason gets ": <strerror(error_number)>" appended.
  IoError(const std::string& reason, int error_number, ErrorLocation where = {})
      : Error(ErrorCode::io, reason + ": " + std::generic_category().message(error_number), std::move(where)),
        errno_(error_number) {}

  /// The errno value the system call reported.
  [[nodiscard]] int error_number() const noexcept { return errno_; }

 private:
  int errno_;
};

}  // namespace tensorfile
