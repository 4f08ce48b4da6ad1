// SPDX-License-Identifier: MIT
// Printing tensors the way torch's repr does: tensor([[0., 1.], [2., 3.]], dtype=torch.float64).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "tensorfile/core/tensor.hpp"

namespace tensorfile {

namespace detail {

/// How torch prints floats of one tensor: all integral, fixed with 4 decimals, or scientific.
enum class FloatStyle { integral, fixed, scientific };

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

inline std::string float_text(double v, FloatStyle style) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  switch (style) {
    case FloatStyle::integral: return fmt::format("{:.0f}.", v);
    case FloatStyle::fixed: return fmt::format("{:.4f}", v);
    case FloatStyle::scientific: return fmt::format("{:.4e}", v);
  }
  return {};
}

/// Chooses torch's float style from the finite values shown: scientific when the largest
/// magnitude exceeds 1e8 or is over 1000 times the smallest non-zero one (or that is below 1e-4).
class FloatStyleChooser {
 public:
  void add(double v) {
    if (!std::isfinite(v)) return;
    integral_ = integral_ && v == std::trunc(v);
    const double magnitude = std::fabs(v);
    if (magnitude == 0) return;
    largest_ = std::max(largest_, magnitude);
    smallest_ = std::min(smallest_, magnitude);
  }
  [[nodiscard]] FloatStyle style() const {
    if (largest_ == 0) return integral_ ? FloatStyle::integral : FloatStyle::fixed;
    const bool wide = largest_ / smallest_ > 1000.0 || largest_ > 1e8;
    if (integral_) return wide ? FloatStyle::scientific : FloatStyle::integral;
    return wide || smallest_ < 1e-4 ? FloatStyle::scientific : FloatStyle::fixed;
  }

 private:
  bool integral_ = true;
  double largest_ = 0;
  double smallest_ = INFINITY;
};

/// Prints a host tensor as torch does; above 1000 elements only 3 items at each edge are shown.
class TensorPrinter {
 public:
  explicit TensorPrinter(const Tensor& t) : tensor_(t), summarize_(t.numel() > 1000) {}

  std::string print() {
    const DType dtype = tensor_.dtype();
    const bool host = tensor_.device().is_cpu();
    std::string body;
    std::string suffix;
    if (!host) suffix += ", device='" + tensor_.device().str() + "'";
    if (!host) {
      body = "...";
      suffix += ", size=" + shape_string(tensor_.sizes());
    } else if (tensor_.numel() == 0) {
      body = "[]";
      if (tensor_.dim() != 1) suffix += ", size=" + shape_string(tensor_.sizes());
    } else {
      format_elements();
      std::size_t next = 0;
      body = block(tensor_.sizes(), 0, next);
    }
    const bool implied = dtype == DType::Int64 || dtype == DType::Bool || dtype == DType::Complex64;
    if (dtype != DType::Float32 && (!host || tensor_.numel() == 0 || !implied))
      suffix += ", dtype=" + torch_name(dtype);
    if (tensor_.requires_grad()) suffix += ", requires_grad=True";
    return "tensor(" + body + suffix + ")";
  }

 private:
  // The indices shown along a dimension; -1 stands for the "..." gap.
  std::vector<std::int64_t> shown(std::int64_t extent) const {
    std::vector<std::int64_t> out;
    if (summarize_ && extent > 6) return {0, 1, 2, -1, extent - 3, extent - 2, extent - 1};
    for (std::int64_t i = 0; i < extent; ++i) out.push_back(i);
    return out;
  }

  void collect(const Tensor& t, std::vector<const std::byte*>& out) const {
    if (t.dim() == 0) {
      out.push_back(t.raw_data());
      return;
    }
    for (std::int64_t i : shown(t.size(0))) {
      if (i >= 0) collect(t.select(0, i), out);
    }
  }

  // Formats every shown element once, padded to a common width, in display order.
  void format_elements() {
    std::vector<const std::byte*> elements;
    collect(tensor_, elements);
    const DType dtype = tensor_.dtype();
    const bool complex = is_complex(dtype);
    if (complex || is_floating_point(dtype)) {
      FloatStyleChooser real;
      FloatStyleChooser imag;
      for (const auto* p : elements) {
        real.add(element_as_double(dtype, p));
        if (complex) imag.add(element_as_double(dtype, p, true));
      }
      for (const auto* p : elements) {
        const double re = element_as_double(dtype, p);
        std::string text = float_text(re, real.style());
        bool finite = std::isfinite(re);
        if (complex) {
          const double im = element_as_double(dtype, p, true);
          text.append(std::signbit(im) ? "-" : "+").append(float_text(std::fabs(im), imag.style())).append("j");
          finite = finite && std::isfinite(im);
        }
        if (finite) width_ = std::max(width_, text.size());  // as torch: nan and inf do not widen columns
        texts_.push_back(std::move(text));
      }
    } else {
      for (const auto* p : elements) texts_.push_back(integer_text(dtype, p));
      for (const auto& text : texts_) width_ = std::max(width_, text.size());
    }
    width_ = std::max<std::size_t>(width_, summarize_ ? 3 : 0);
  }

  std::string padded(const std::string& text) const {
    return std::string(width_ > text.size() ? width_ - text.size() : 0, ' ') + text;
  }

  std::string block(std::span<const std::int64_t> sizes, std::size_t depth, std::size_t& next) const {
    if (sizes.empty()) return padded(texts_[next++]);
    std::string out = "[";
    const std::string indent(7 + depth + 1, ' ');
    const std::string row_break = sizes.size() == 1 ? ", " : "," + std::string(sizes.size() - 1, '\n') + indent;
    bool first = true;
    for (std::int64_t i : shown(sizes[0])) {
      if (!first) out += row_break;
      first = false;
      out +=
          i < 0 ? (sizes.size() == 1 ? padded("...") : std::string("...")) : block(sizes.subspan(1), depth + 1, next);
    }
    return out + "]";
  }

  const Tensor& tensor_;
  bool summarize_;
  std::vector<std::string> texts_;
  std::size_t width_ = 0;
};

}  // namespace detail

/// torch-style text of `t`: values, and dtype, device, size and requires_grad where torch shows them.
[[nodiscard]] inline std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  return detail::TensorPrinter(t).print();
}

/// Writes to_string(t).
inline std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << to_string(t); }

}  // namespace tensorfile

/// fmt support: `fmt::format("{}", tensor)`.
template <>
struct fmt::formatter<tensorfile::Tensor> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(const tensorfile::Tensor& t, Context& ctx) const {
    const std::string text = tensorfile::to_string(t);
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};
