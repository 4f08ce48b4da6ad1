// SPDX-License-Identifier: MIT
/// @file
/// Printing tensors exactly as torch 1.13's repr does, with torch's set_printoptions as PrintOptions.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"

namespace tensorfile {

/// How tensors print; the defaults are torch's (torch.set_printoptions(profile="default")).
struct PrintOptions {
  int precision = 4;               ///< digits after the point (fixed) or of the mantissa (scientific); >= 0
  double threshold = 1000;         ///< more elements than this are summarized (INFINITY: never)
  std::int64_t edgeitems = 3;      ///< items kept at each end of a summarized dimension; >= 0
  std::int64_t linewidth = 80;     ///< characters per line before 1-d rows and suffixes wrap
  std::optional<bool> sci_mode{};  ///< force scientific (true) or positional (false); chosen per tensor when empty
};

/// torch's repr of `t` (torch 1.13, default dtype float32): values wrapped at `linewidth`, summarized
/// above `threshold` elements, and the device, size, dtype and requires_grad suffixes torch shows.
/// Tensors on a device without a host copy hook print "..." with their size. Throws ArgumentError for
/// negative precision or edgeitems.
[[nodiscard]] TENSORFILE_ENTRY std::string to_string(const Tensor& t, const PrintOptions& options = {});

/// A tensor paired with print options, for streams and fmt: `out << tensorfile::printed(t, {.precision = 2})`.
struct PrintedTensor {
  const Tensor& tensor;  ///< borrowed; must outlive this object
  PrintOptions options;  ///< how to print it
};

/// Pairs `t` with `options` for operator<< or fmt::format; borrows `t`.
[[nodiscard]] inline PrintedTensor printed(const Tensor& t, const PrintOptions& options = {}) { return {t, options}; }

/// Writes to_string(t) with default options.
TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const Tensor& t);

/// Writes to_string(p.tensor, p.options).
TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const PrintedTensor& p);

}  // namespace tensorfile

/// fmt support: `fmt::format("{}", tensor)`.
template <>
struct fmt::formatter<tensorfile::Tensor> : fmt::formatter<std::string_view> {
  /// Writes to_string(t) under the spec, as a string is written.
  template <class Context>
  auto format(const tensorfile::Tensor& t, Context& ctx) const {
    const std::string text = tensorfile::to_string(t);
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};

/// fmt support: `fmt::format("{}", tensorfile::printed(t, {.precision = 2}))`.
template <>
struct fmt::formatter<tensorfile::PrintedTensor> : fmt::formatter<std::string_view> {
  /// Writes to_string(p.tensor, p.options) under the spec, as a string is written.
  template <class Context>
  auto format(const tensorfile::PrintedTensor& p, Context& ctx) const {
    const std::string text = tensorfile::to_string(p.tensor, p.options);
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};

#if TENSORFILE_DEFINITIONS_OF(core_print)
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <ostream>
#include <vector>

namespace tensorfile {

namespace detail {

/// One element of any host dtype as a double (f16/bf16/float8 widened as torch widens them to float).
inline double element_as_double(DType dtype, const std::byte* p, bool imaginary = false) {
  const auto load = [p](auto value) {
    std::memcpy(&value, p, sizeof value);
    return value;
  };
  switch (dtype) {
    case DType::Float16: return static_cast<float>(load(Half{}));
    case DType::BFloat16: return static_cast<float>(load(BFloat16{}));
    case DType::Float32: return load(0.0f);
    case DType::Float64: return load(0.0);
    case DType::Complex32: {
      const auto c = load(ComplexHalf{});
      return static_cast<float>(imaginary ? c.imag : c.real);
    }
    case DType::Complex64: return imaginary ? load(std::complex<float>{}).imag() : load(std::complex<float>{}).real();
    case DType::Complex128:
      return imaginary ? load(std::complex<double>{}).imag() : load(std::complex<double>{}).real();
    case DType::Float8_e4m3fn: return decode_float8(load(std::uint8_t{}), 4, false);
    case DType::Float8_e5m2: return decode_float8(load(std::uint8_t{}), 5, false);
    case DType::Float8_e4m3fnuz: return decode_float8(load(std::uint8_t{}), 4, true);
    case DType::Float8_e5m2fnuz: return decode_float8(load(std::uint8_t{}), 5, true);
    case DType::Float8_e8m0fnu: {
      const auto e = load(std::uint8_t{});
      return e == 0xFF ? std::nan("") : std::ldexp(1.0, e - 127);
    }
    default: return 0.0;
  }
}

/// Python's str() of one bool or integer element.
inline std::string integer_text(DType dtype, const std::byte* p) {
  const auto load = [p](auto value) {
    std::memcpy(&value, p, sizeof value);
    return value;
  };
  switch (dtype) {
    case DType::Bool: return load(std::uint8_t{}) ? "True" : "False";
    case DType::Int8:
    case DType::QInt8: return std::to_string(load(std::int8_t{}));
    case DType::Int16: return std::to_string(load(std::int16_t{}));
    case DType::Int32:
    case DType::QInt32: return std::to_string(load(std::int32_t{}));
    case DType::Int64: return std::to_string(load(std::int64_t{}));
    case DType::UInt16: return std::to_string(load(std::uint16_t{}));
    case DType::UInt32: return std::to_string(load(std::uint32_t{}));
    case DType::UInt64: return std::to_string(load(std::uint64_t{}));
    default: return std::to_string(load(std::uint8_t{}));
  }
}

/// Python's format() of a float with spec ".{precision}f", ".{precision}e" or ".0f": NaN has no sign.
inline std::string python_format(double v, char kind, int precision) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return kind == 'e' ? fmt::format("{:.{}e}", v, precision) : fmt::format("{:.{}f}", v, precision);
}

/// torch's _Formatter: one column width and one style (integral, positional or scientific) per tensor,
/// chosen from the values shown.
class ElementFormatter {
 public:
  /// Floating formatter over `values` (the real or imaginary parts shown).
  ElementFormatter(const std::vector<double>& values, const PrintOptions& options)
      : floating_(true), precision_(options.precision) {
    double largest = 0;
    double smallest = INFINITY;
    bool any = false;
    for (const double v : values) {
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      int_mode_ = int_mode_ && v == std::ceil(v);
      largest = std::max(largest, std::fabs(v));
      smallest = std::min(smallest, std::fabs(v));
    }
    if (!any) return;  // as torch: nothing to measure, and sci_mode is not even forced
    const bool wide = largest / smallest > 1000.0 || largest > 1.0e8;
    sci_mode_ = int_mode_ ? wide : wide || smallest < 1.0e-4;
    for (const double v : values) {
      if (!std::isfinite(v) || v == 0) continue;
      const std::size_t length = sci_mode_   ? python_format(v, 'e', precision_).size()
                                 : int_mode_ ? python_format(v, 'f', 0).size() + 1
                                             : python_format(v, 'f', precision_).size();
      width_ = std::max(width_, length);
    }
    if (options.sci_mode) sci_mode_ = *options.sci_mode;
  }

  /// Integer or bool formatter over the texts shown.
  explicit ElementFormatter(const std::vector<std::string>& texts) {
    for (const auto& text : texts) width_ = std::max(width_, text.size());
  }

  [[nodiscard]] std::size_t width() const { return width_; }

  [[nodiscard]] std::string format(double v) const {
    std::string text;
    if (sci_mode_) {
      text = python_format(v, 'e', precision_);
    } else if (int_mode_) {
      text = python_format(v, 'f', 0);
      if (std::isfinite(v)) text += '.';
    } else {
      text = python_format(v, 'f', precision_);
    }
    return pad(std::move(text));
  }

  [[nodiscard]] std::string pad(std::string text) const {
    if (text.size() < width_) text.insert(0, width_ - text.size(), ' ');
    return text;
  }

  [[nodiscard]] bool floating() const { return floating_; }

 private:
  bool floating_ = false;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int precision_ = 4;
  std::size_t width_ = 1;
};

/// Prints one host tensor's values as torch's _tensor_str does.
class TensorPrinter {
 public:
  TensorPrinter(const Tensor& t, const PrintOptions& options)
      : tensor_(t), options_(options), summarize_(static_cast<double>(t.numel()) > options.threshold) {}

  /// The bracketed values, continuation lines indented by `indent` + 1 + depth.
  std::string values(std::size_t indent) {
    const DType dtype = tensor_.dtype();
    complex_ = is_complex(dtype);
    floating_ = complex_ || is_floating_point(dtype);
    gather(0, 0);
    if (floating_) {
      std::vector<double> real;
      std::vector<double> imag;
      for (const auto* p : shown_) {
        real.push_back(element_as_double(dtype, p));
        if (complex_) imag.push_back(element_as_double(dtype, p, true));
      }
      real_.emplace(real, options_);
      if (complex_) imag_.emplace(imag, options_);
    } else {
      std::vector<std::string> texts;
      for (const auto* p : shown_) texts.push_back(integer_text(dtype, p));
      real_.emplace(texts);
    }
    next_ = 0;
    return block(0, indent);
  }

 private:
  // The indices shown along dimension `d`: all, or the edges around a gap (-1). As torch, a 1-d
  // row with edgeitems == 0 shows its whole tail (Python's x[-0:]).
  [[nodiscard]] std::vector<std::int64_t> shown(std::size_t d) const {
    const std::int64_t extent = tensor_.sizes()[d];
    const std::int64_t edge = options_.edgeitems;
    std::vector<std::int64_t> out;
    if (summarize_ && extent > 0 && edge <= (extent - 1) / 2) {  // extent > 2 * edge, without overflow
      for (std::int64_t i = 0; i < edge; ++i) out.push_back(i);
      out.push_back(-1);
      const std::int64_t tail = (edge == 0 && d + 1 == tensor_.dim()) ? extent : edge;
      for (std::int64_t i = extent - tail; i < extent; ++i) out.push_back(i);
    } else {
      for (std::int64_t i = 0; i < extent; ++i) out.push_back(i);
    }
    return out;
  }

  void gather(std::size_t d, std::int64_t offset) {
    if (d == tensor_.dim()) {
      shown_.push_back(tensor_.raw_data() + offset * static_cast<std::int64_t>(tensor_.element_size()));
      return;
    }
    for (const std::int64_t i : shown(d)) {
      if (i >= 0) gather(d + 1, offset + i * tensor_.strides()[d]);
    }
  }

  std::string element() {
    const std::byte* p = shown_[next_++];
    const DType dtype = tensor_.dtype();
    if (!floating_) return real_->pad(integer_text(dtype, p));
    std::string text = real_->format(element_as_double(dtype, p));
    if (!complex_) return text;
    std::string imag = imag_->format(element_as_double(dtype, p, true));
    imag.erase(0, imag.find_first_not_of(' '));
    if (imag.front() != '+' && imag.front() != '-') text += '+';
    return text.append(imag).append("j");
  }

  std::string block(std::size_t d, std::size_t indent) {
    if (d == tensor_.dim()) return element();
    const std::size_t rank = tensor_.dim() - d;
    std::vector<std::string> items;
    for (const std::int64_t i : shown(d)) {
      if (i >= 0) {
        items.push_back(block(d + 1, indent + 1));
      } else {
        items.emplace_back(rank == 1 ? " ..." : "...");
      }
    }
    std::string out = "[";
    if (rank == 1) {
      std::size_t element_length = real_->width() + 2;
      if (complex_) element_length += imag_->width() + 1;
      const double room = std::floor(static_cast<double>(options_.linewidth - static_cast<std::int64_t>(indent)) /
                                     static_cast<double>(element_length));
      const auto per_line = static_cast<std::size_t>(std::max(1.0, room));
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out.append(i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ");
        out += items[i];
      }
    } else {
      std::string separator = ",";
      separator.append(rank - 1, '\n').append(indent + 1, ' ');
      for (std::size_t i = 0; i < items.size(); ++i) out.append(i > 0 ? separator : "").append(items[i]);
    }
    return out + "]";
  }

  const Tensor& tensor_;
  const PrintOptions& options_;
  bool summarize_;
  bool complex_ = false;
  bool floating_ = false;
  std::vector<const std::byte*> shown_;
  std::size_t next_ = 0;
  std::optional<ElementFormatter> real_;
  std::optional<ElementFormatter> imag_;
};

/// torch's _add_suffixes: ", suffix" while it fits in linewidth, else ",\n" and the indent.
inline std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes, std::size_t indent,
                                std::int64_t linewidth) {
  const std::size_t newline = text.rfind('\n');
  // torch measures len(s) - s.rfind("\n") + 1, which is the last line's length + 2 (rfind gives -1 when absent)
  auto last_line =
      static_cast<std::int64_t>(newline == std::string::npos ? text.size() + 2 : text.size() - newline + 1);
  for (const auto& suffix : suffixes) {
    const auto length = static_cast<std::int64_t>(suffix.size());
    if (last_line + length + 2 > linewidth) {
      text.append(",\n").append(indent, ' ').append(suffix);
      last_line = static_cast<std::int64_t>(indent) + length;
    } else {
      text.append(", ").append(suffix);
      last_line += length + 2;
    }
  }
  return text + ")";
}

inline void check_print_options(const PrintOptions& options) {
  if (options.precision < 0 || options.precision > 100)
    throw ArgumentError("PrintOptions.precision must be in [0, 100], got " + std::to_string(options.precision));
  if (options.edgeitems < 0)
    throw ArgumentError("PrintOptions.edgeitems must be >= 0, got " + std::to_string(options.edgeitems));
  if (std::isnan(options.threshold)) throw ArgumentError("PrintOptions.threshold must not be NaN");
}

}  // namespace detail

TENSORFILE_ENTRY std::string to_string(const Tensor& t, const PrintOptions& options) {
  detail::check_print_options(options);
  if (!t.defined()) return "tensor(undefined)";
  constexpr std::size_t indent = 7;  // "tensor("
  const DType dtype = t.dtype();
  const Device device = t.device();
  std::vector<std::string> suffixes;
  if (!device.is_cpu()) suffixes.push_back("device='" + device.str() + "'");
  const bool default_dtype =
      dtype == DType::Float32 || dtype == DType::Complex64 || dtype == DType::Int64 || dtype == DType::Bool;
  std::string body;
  Tensor host = t;
  if (!device.is_cpu() && !device.is_meta() && detail::device_copy_hook().copy != nullptr) host = t.to(Device::cpu());
  if (!host.device().is_cpu()) {
    body = "...";
    suffixes.push_back("size=" + detail::shape_string(t.sizes()));
    if (dtype != DType::Float32) suffixes.push_back("dtype=" + torch_name(dtype));
  } else if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + detail::shape_string(t.sizes()));
    if (dtype != DType::Float32) suffixes.push_back("dtype=" + torch_name(dtype));
  } else {
    if (!default_dtype) suffixes.push_back("dtype=" + torch_name(dtype));
    body = detail::TensorPrinter(host, options).values(indent);
  }
  if (t.requires_grad()) suffixes.emplace_back("requires_grad=True");
  std::string text = "tensor(";
  text += body;
  return detail::add_suffixes(std::move(text), suffixes, indent, options.linewidth);
}

TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << to_string(t); }

TENSORFILE_ENTRY std::ostream& operator<<(std::ostream& out, const PrintedTensor& p) {
  return out << to_string(p.tensor, p.options);
}

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(core_print)
