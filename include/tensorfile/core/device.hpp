// SPDX-License-Identifier: MIT
/// @file
/// Device: where a tensor's bytes live (cpu, cuda:N, or meta: nowhere), parsed from torch's spellings.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensorfile/core/error.hpp"

namespace tensorfile {

/// A device as torch names it: "cpu", "cuda", "cuda:1", "meta".
struct Device {
  /// The device family.
  enum class Kind : std::uint8_t { CPU, CUDA, Meta };

  Kind kind = Kind::CPU;  ///< family
  int index = -1;         ///< device ordinal, -1 when unspecified ("cuda" means the current device)

  /// The host.
  [[nodiscard]] static constexpr Device cpu() noexcept { return {Kind::CPU, -1}; }
  /// A CUDA device; -1 means the current one.
  [[nodiscard]] static constexpr Device cuda(int ordinal = -1) noexcept { return {Kind::CUDA, ordinal}; }
  /// The meta device: shapes and dtypes, no bytes.
  [[nodiscard]] static constexpr Device meta() noexcept { return {Kind::Meta, -1}; }

  /// Parses "cpu", "cuda", "cuda:N", "meta" (and "cpu:0", "meta:0" as torch does);
  /// throws ArgumentError on anything else.
  [[nodiscard]] static Device parse(std::string_view text) {
    const auto colon = text.find(':');
    const std::string_view type = text.substr(0, colon);
    Device device;
    if (type == "cpu") {
      device.kind = Kind::CPU;
    } else if (type == "cuda") {
      device.kind = Kind::CUDA;
    } else if (type == "meta") {
      device.kind = Kind::Meta;
    } else {
      throw ArgumentError("unknown device \"" + std::string(text) +
                          "\"; expected \"cpu\", \"cuda\", \"cuda:N\" or \"meta\"");
    }
    if (colon != std::string_view::npos) {
      const std::string_view digits = text.substr(colon + 1);
      int ordinal = -1;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
      if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || ordinal < 0 ||
          (digits.size() > 1 && digits.front() == '0')) {
        throw ArgumentError("invalid device index in \"" + std::string(text) +
                            "\"; expected a non-negative integer after ':'");
      }
      device.index = ordinal;
    }
    return device;
  }

  [[nodiscard]] constexpr bool is_cpu() const noexcept { return kind == Kind::CPU; }    ///< host memory
  [[nodiscard]] constexpr bool is_cuda() const noexcept { return kind == Kind::CUDA; }  ///< CUDA memory
  [[nodiscard]] constexpr bool is_meta() const noexcept { return kind == Kind::Meta; }  ///< no memory

  /// torch's spelling: "cpu", "cuda:1", "meta".
  [[nodiscard]] std::string str() const {
    std::string out = kind == Kind::CPU ? "cpu" : kind == Kind::CUDA ? "cuda" : "meta";
    if (index >= 0) out.append(":").append(std::to_string(index));
    return out;
  }

  /// Same kind and index ("cuda" and "cuda:0" differ).
  friend constexpr bool operator==(const Device&, const Device&) noexcept = default;
};

}  // namespace tensorfile
