// SPDX-License-Identifier: MIT
/// @file
/// MapLocation: where loaded storages go, in torch.load's map_location forms; shared by every format's loader.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/config.hpp"
#include "tensorfile/core/device.hpp"
#include "tensorfile/core/storage.hpp"

namespace tensorfile {

/// Where loaded storages go, in any of torch.load's map_location forms:
/// - nothing: the device tag saved in the file ("cpu", "cuda:0", "meta")
/// - a Device or device string: every storage goes there
/// - a tag map {"cuda:1": "cuda:0"}: exact-string remap; tags not listed keep their own value
/// - a callable (storage, saved tag) -> optional storage: called once per storage with a CPU
///   storage holding the bytes; returning nullopt falls back to the saved tag
class MapLocation {
 public:
  /// The callable form.
  using Function = std::function<std::optional<Storage>(const Storage& cpu_bytes, std::string_view saved_tag)>;

  MapLocation();                                         ///< restore saved tags
  MapLocation(Device device);                            ///< everything to `device`
  MapLocation(const char* device);                       ///< "cpu", "cuda:1", "meta"
  MapLocation(const std::string& device);                ///< "cpu", "cuda:1", "meta"
  MapLocation(std::map<std::string, std::string> tags);  ///< tag remap
  MapLocation(Function function);                        ///< callable
  MapLocation(const MapLocation& other);                 ///< copies the form (and the map or callable)
  MapLocation(MapLocation&& other) noexcept;             ///< takes the form
  MapLocation& operator=(const MapLocation& other);      ///< copies the form (and the map or callable)
  MapLocation& operator=(MapLocation&& other) noexcept;  ///< takes the form
  ~MapLocation();                                        ///< releases the map or callable

  /// The tag a storage saved under `saved` goes to, before any callable is asked.
  [[nodiscard]] std::string target_tag(const std::string& saved) const;
  /// The callable form, or null.
  [[nodiscard]] const Function* function() const noexcept { return form_ == Form::function ? &function_ : nullptr; }
  /// Whether every storage is mapped to "meta" (then no storage bytes are read at all).
  [[nodiscard]] bool all_meta() const noexcept { return form_ == Form::fixed && fixed_ == "meta"; }
  /// The one device of a Device or device string form; nullopt when unset (the saved tags). For loaders that take
  /// one device (`reader` names the loader in the message): a tag map or a callable is an ArgumentError.
  [[nodiscard]] std::optional<Device> single_device(std::string_view reader) const;

 private:
  // One member per form rather than a std::variant, which would cost every including TU its instantiations; the
  // constructors, assignments and destructor are out of line for the same reason (inline, they would instantiate the
  // map's and the callable's in every TU whose options structs default a MapLocation).
  enum class Form : unsigned char { saved, fixed, tags, function };
  Form form_ = Form::saved;
  std::string fixed_;
  std::map<std::string, std::string> tags_;
  Function function_;
};

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS  // helpers that other headers' bodies use too
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/tensor.hpp"

namespace tensorfile {
namespace detail {

/// Sends one CPU storage where `where_to` says; `read` produces the bytes only when needed (never for
/// meta), `where` builds the error location only when throwing. CUDA goes through Tensor::to (the
/// installed device copy).
template <class Read, class Where>
Storage place_storage(const MapLocation& where_to, std::size_t bytes, const std::string& saved_tag, Read&& read,
                      Where&& where) {
  if (where_to.all_meta()) return meta_storage(bytes);
  Storage cpu;
  if (const auto* function = where_to.function()) {
    cpu = read();
    if (auto chosen = (*function)(cpu, saved_tag)) {
      // The tensors over it are laid out for the record's bytes: another size is the function's mistake.
      if (chosen->size_bytes() != bytes) {
        throw ArgumentError("the map_location function returned a storage of " + std::to_string(chosen->size_bytes()) +
                                " bytes for one of " + std::to_string(bytes) + " (saved tag \"" + saved_tag + "\")",
                            where());
      }
      return *std::move(chosen);
    }
  }
  const std::string tag = where_to.target_tag(saved_tag);
  Device device;
  try {
    device = Device::parse(tag);
  } catch (const ArgumentError&) {
    throw UnsupportedError(
        "don't know how to restore a storage tagged \"" + tag + "\"; map it with .map_location = \"cpu\" or a tag map",
        where());
  }
  if (device.is_meta()) return meta_storage(bytes);
  if (!cpu.defined()) cpu = read();
  if (device.is_cpu()) return cpu;
  try {
    return Tensor(cpu, DType::UInt8, {static_cast<std::int64_t>(cpu.size_bytes())}).to(device).storage();
  } catch (const DeviceError& error) {
    throw DeviceError("storage tagged \"" + saved_tag + "\": " + error.reason(), where());
  }
}

}  // namespace detail
}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS

#if TENSORFILE_DEFINITIONS_OF(formats_map_location)
namespace tensorfile {

TENSORFILE_ENTRY MapLocation::MapLocation() = default;
TENSORFILE_ENTRY MapLocation::MapLocation(Device device) : form_(Form::fixed), fixed_(device.str()) {}
TENSORFILE_ENTRY MapLocation::MapLocation(const char* device) : MapLocation(Device::parse(device)) {}
TENSORFILE_ENTRY MapLocation::MapLocation(const std::string& device) : MapLocation(Device::parse(device)) {}
TENSORFILE_ENTRY MapLocation::MapLocation(const MapLocation& other) = default;
TENSORFILE_ENTRY MapLocation::MapLocation(MapLocation&& other) noexcept = default;
TENSORFILE_ENTRY MapLocation& MapLocation::operator=(const MapLocation& other) = default;
TENSORFILE_ENTRY MapLocation& MapLocation::operator=(MapLocation&& other) noexcept = default;
TENSORFILE_ENTRY MapLocation::~MapLocation() = default;

TENSORFILE_ENTRY MapLocation::MapLocation(std::map<std::string, std::string> tags)
    : form_(Form::tags), tags_(std::move(tags)) {}

TENSORFILE_ENTRY MapLocation::MapLocation(Function function) : form_(Form::function), function_(std::move(function)) {}

TENSORFILE_ENTRY std::string MapLocation::target_tag(const std::string& saved) const {
  if (form_ == Form::fixed) return fixed_;
  if (form_ == Form::tags) {
    auto it = tags_.find(saved);
    return it == tags_.end() ? saved : it->second;
  }
  return saved;
}

TENSORFILE_ENTRY std::optional<Device> MapLocation::single_device(std::string_view reader) const {
  if (form_ == Form::saved) return std::nullopt;
  if (form_ == Form::fixed) return Device::parse(fixed_);
  throw ArgumentError(std::string(reader) + " takes map_location as one device (a Device or a device string); got " +
                      (form_ == Form::tags ? "a tag map" : "a callable"));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_map_location)
