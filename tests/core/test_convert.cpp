// SPDX-License-Identifier: MIT
// Tests of <tensorfile/core/convert.hpp> and Tensor::to(DType), to_vector, copy_into(span): torch's bytes from a
// committed torch-written corpus, the dtypes torch 1.13 lacks, layouts, devices and errors.
#include <tensorfile/core/convert.hpp>
#include <tensorfile/core/tensor.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "core/convert_corpus.hpp"
#include "tensorfile_catch.hpp"

using namespace tensorfile;

namespace {
std::uint8_t to_float8(float value, DType dtype) {
  const Tensor t = Tensor::from_values<float>({value}).to(dtype);
  return std::to_integer<std::uint8_t>(*t.raw_data());
}
}  // namespace

TEST_CASE("Tensor::to matches torch 1.13 on the committed corpus", "[convert]") {
  const auto cases = tensorfile_test::read_convert_corpus(tensorfile_test::data_dir() / "convert" / "small.corpus");
  REQUIRE(cases.size() == 169);  // every pair of torch 1.13's 13 dtypes
  // valgrind's CPU emulation converts int64 to float32 through float64, rounding twice (0x4000004000000001 gives
  // 0x5e800000, the CPU 0x5e800001), so under memcheck those two pairs are converted for the memory check only;
  // natively and under ASan+UBSan they are compared bit for bit like the rest.
  const bool under_valgrind = std::getenv("TENSORFILE_UNDER_VALGRIND") != nullptr;
  std::int64_t elements = 0;
  for (const auto& c : cases) {
    INFO(dtype_name(c.from) << " -> " << dtype_name(c.to));
    elements += c.count;
    if (under_valgrind && c.from == DType::Int64 && (c.to == DType::Float32 || c.to == DType::Complex64)) {
      WARN("not compared under valgrind (its int64 -> float32 rounds twice): " << dtype_name(c.to));
      CHECK(tensorfile_test::convert_case_source(c, 1).to(c.to).numel() == c.count);
      continue;
    }
    CHECK(tensorfile_test::check_convert_case(c) == 0);
  }
  CHECK(elements > 20000);
}

TEST_CASE("SIMD and portable kernels agree", "[convert]") {
  // The AVX2/F16C paths run when the CPU has them; the portable loops handle the tails and other CPUs.
  std::mt19937 rng(5);
  std::vector<float> floats;
  for (std::uint32_t bits : {0x7FC00001u, 0xFF812345u, 0x7F800000u, 0x00000001u, 0x477FF000u, 0x33000000u, 0x3F808000u,
                             0x3F818000u, 0x80000000u}) {
    floats.push_back(std::bit_cast<float>(bits));
  }
  for (int i = 0; i < 4000; ++i) floats.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  std::vector<std::uint16_t> halves(65536);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i);
  const std::size_t n = floats.size();
  std::vector<std::uint16_t> a(n), b(n);
  detail::convert_f32_to_f16(floats.data(), a.data(), n);
  for (std::size_t i = 0; i < n; ++i) b[i] = detail::float_to_half_bits(floats[i]);
  CHECK(a == b);
  detail::convert_f32_to_bf16(floats.data(), a.data(), n);
  const auto fast = Tensor::from_values(std::span<const float>(floats)).to(DType::BFloat16);
  CHECK(std::memcmp(fast.raw_data(), a.data(), n * 2) == 0);
  const auto fast_half = Tensor::from_values(std::span<const float>(floats)).to(DType::Float16);
  CHECK(std::memcmp(fast_half.raw_data(), b.data(), n * 2) == 0);
  std::vector<float> x(halves.size()), y(halves.size());
  detail::convert_f16_to_f32(halves.data(), x.data(), halves.size());
  const auto widened = Tensor(heap_storage(halves.size() * 2), DType::Float16, {65536});
  std::memcpy(widened.mutable_raw_data(), halves.data(), halves.size() * 2);
  widened.copy_into(std::span<float>(y));
  CHECK(std::memcmp(x.data(), y.data(), x.size() * 4) == 0);
}

namespace {
// Every NaN class of a float format as unsigned bits: quiet and signalling, both signs, payload (the mantissa bits
// below the quiet bit) lowest, highest, all or none; each repeated so that the SIMD bodies, not only their tails,
// see it.
std::vector<std::uint64_t> nan_classes(int exponent_bits, int mantissa_bits) {
  const std::uint64_t quiet = std::uint64_t{1} << (mantissa_bits - 1);
  const std::uint64_t exponent = ((std::uint64_t{1} << exponent_bits) - 1) << mantissa_bits;
  const std::uint64_t sign = std::uint64_t{1} << (exponent_bits + mantissa_bits);
  std::vector<std::uint64_t> out;
  for (int round = 0; round < 4; ++round) {
    for (const std::uint64_t s : {std::uint64_t{0}, sign}) {
      for (const std::uint64_t q : {std::uint64_t{0}, quiet}) {
        for (const std::uint64_t payload : {std::uint64_t{0}, std::uint64_t{1}, quiet >> 1, quiet - 1}) {
          if ((q | payload) != 0) out.push_back(s | exponent | q | payload);
        }
      }
    }
  }
  return out;
}

// A tensor of `dtype` holding `bits`, contiguous (every = 1) or every other element of a longer storage.
Tensor from_bits(DType dtype, const std::vector<std::uint64_t>& bits, std::int64_t every) {
  const std::size_t elem = element_size(dtype);
  auto storage = heap_storage(bits.size() * elem * static_cast<std::size_t>(every));
  for (std::size_t i = 0; i < bits.size(); ++i) {
    std::memcpy(storage.mutable_data() + i * elem * static_cast<std::size_t>(every), &bits[i], elem);  // little-endian
  }
  return {std::move(storage), dtype, {static_cast<std::int64_t>(bits.size())}, {every}};
}

std::vector<std::byte> bytes_of(const Tensor& t) {
  std::vector<std::byte> out(t.nbytes());
  t.copy_into(std::span<std::byte>(out));
  return out;
}
}  // namespace

TEST_CASE("NaN classes convert to the same bits on the SIMD, portable and element-wise paths", "[convert]") {
  // Contiguous sources take the fast kernels (AVX2/F16C where the CPU has them); strided ones go element by element.
  // The interop.convert test checks the element-wise bits against real torch.
  struct Source {
    DType dtype;
    int exponent_bits;
    int mantissa_bits;
  };
  const Source sources[] = {
      {DType::Float16, 5, 10}, {DType::BFloat16, 8, 7}, {DType::Float32, 8, 23}, {DType::Float64, 11, 52}};
  const DType targets[] = {DType::Float16,     DType::BFloat16,        DType::Float32,         DType::Float64,
                           DType::Complex32,   DType::Complex64,       DType::Complex128,      DType::Float8_e4m3fn,
                           DType::Float8_e5m2, DType::Float8_e4m3fnuz, DType::Float8_e5m2fnuz, DType::Float8_e8m0fnu};
  for (const Source& source : sources) {
    const auto bits = nan_classes(source.exponent_bits, source.mantissa_bits);
    const Tensor dense = from_bits(source.dtype, bits, 1);
    const Tensor strided = from_bits(source.dtype, bits, 2);
    for (const DType target : targets) {
      INFO(dtype_name(source.dtype) << " -> " << dtype_name(target));
      const Tensor a = dense.to(target);
      CHECK(bytes_of(a) == bytes_of(strided.to(target)));
      // The same dtype is the tensor itself, bits kept.
      if (target == source.dtype || (target != DType::BFloat16 && target != DType::Float16)) continue;
      std::vector<std::uint16_t> got(bits.size()), expected(bits.size());
      std::memcpy(got.data(), bytes_of(a).data(), got.size() * 2);
      for (std::size_t i = 0; i < bits.size(); ++i) {
        const bool negative = (bits[i] >> (source.exponent_bits + source.mantissa_bits)) != 0;
        // bfloat16: torch's c10::BFloat16 gives one NaN whatever the sign and payload; float16: sign | 0x7E00.
        expected[i] = target == DType::BFloat16 ? 0x7FC0 : (negative ? 0xFE00 : 0x7E00);
      }
      CHECK(got == expected);
    }
  }
  // The kernels themselves, against the element-wise codecs, whichever of them convert_contiguous_fast picked.
  const auto f32_bits = nan_classes(8, 23);
  std::vector<float> f32(f32_bits.size());
  for (std::size_t i = 0; i < f32.size(); ++i) f32[i] = std::bit_cast<float>(static_cast<std::uint32_t>(f32_bits[i]));
  std::vector<std::uint16_t> portable(f32.size());
  detail::convert_f32_to_bf16(f32.data(), portable.data(), f32.size());
  CHECK(portable == std::vector<std::uint16_t>(f32.size(), 0x7FC0));
  detail::convert_f32_to_f16(f32.data(), portable.data(), f32.size());
  for (std::size_t i = 0; i < f32.size(); ++i) CHECK(portable[i] == detail::float_to_half_bits(f32[i]));
#if defined(TENSORFILE_CONVERT_X86)
  if (detail::cpu_has_avx2_f16c()) {
    std::vector<std::uint16_t> simd(f32.size());
    detail::convert_f32_to_bf16_avx2(f32.data(), simd.data(), f32.size());
    CHECK(simd == std::vector<std::uint16_t>(f32.size(), 0x7FC0));
    detail::convert_f32_to_f16_avx2(f32.data(), simd.data(), f32.size());
    CHECK(simd == portable);
    std::vector<double> wide(f32.size()), wide_simd(f32.size());
    detail::convert_f32_to_f64(f32.data(), wide.data(), f32.size());
    detail::convert_f32_to_f64_avx2(f32.data(), wide_simd.data(), f32.size());
    CHECK(std::memcmp(wide.data(), wide_simd.data(), wide.size() * 8) == 0);
    const auto f64_bits = nan_classes(11, 52);
    std::vector<double> f64(f64_bits.size());
    for (std::size_t i = 0; i < f64.size(); ++i) f64[i] = std::bit_cast<double>(f64_bits[i]);
    std::vector<float> narrow(f64.size()), narrow_simd(f64.size());
    detail::convert_f64_to_f32(f64.data(), narrow.data(), f64.size());
    detail::convert_f64_to_f32_avx2(f64.data(), narrow_simd.data(), f64.size());
    CHECK(std::memcmp(narrow.data(), narrow_simd.data(), narrow.size() * 4) == 0);
    const auto h_bits = nan_classes(5, 10);
    std::vector<std::uint16_t> h(h_bits.begin(), h_bits.end());
    std::vector<float> hf(h.size()), hf_simd(h.size());
    detail::convert_f16_to_f32(h.data(), hf.data(), h.size());
    detail::convert_f16_to_f32_avx2(h.data(), hf_simd.data(), h.size());
    CHECK(std::memcmp(hf.data(), hf_simd.data(), hf.size() * 4) == 0);
  } else {
    WARN("this CPU lacks AVX2/F16C: the SIMD kernels were not compared");
  }
#endif
}

TEST_CASE("conversions torch 1.13 cannot check", "[convert]") {
  SECTION("unsigned 16/32/64-bit integers") {
    const Tensor f = Tensor::from_values<double>({-1.0, 65536.5, 3e9, -3e9, 1.8e19, 2e19, std::nan(""), 7.9});
    CHECK(f.to_vector<std::uint16_t>() == std::vector<std::uint16_t>{0xFFFF, 0, 0, 0, 0, 0, 0, 7});
    CHECK(f.to_vector<std::uint32_t>() ==
          std::vector<std::uint32_t>{0xFFFFFFFFu, 65536, 3000000000u, 1294967296u, 0, 0, 0, 7});
    CHECK(f.to_vector<std::uint64_t>() == std::vector<std::uint64_t>{0xFFFFFFFFFFFFFFFFull, 65536, 3000000000ull,
                                                                     0xFFFFFFFF4D2FA200ull, 18000000000000000000ull,
                                                                     0x8000000000000000ull, 0x8000000000000000ull, 7});
    const Tensor u = Tensor::from_values<std::uint64_t>({0xFFFFFFFFFFFFFFFFull, 1ull << 63, 300});
    CHECK(u.to_vector<double>() == std::vector<double>{18446744073709551616.0, 9223372036854775808.0, 300.0});
    CHECK(u.to_vector<std::int8_t>() == std::vector<std::int8_t>{-1, 0, 44});
    CHECK(u.to_vector<bool>() == std::vector<bool>{true, true, true});
  }
  SECTION("float8_e4m3fn: round to nearest even, NaN past 464 (rounds beyond 448)") {
    CHECK(to_float8(1.0f, DType::Float8_e4m3fn) == 0x38);
    CHECK(to_float8(448.0f, DType::Float8_e4m3fn) == 0x7E);
    CHECK(to_float8(464.0f, DType::Float8_e4m3fn) == 0x7E);  // tie between 448 and 480: even mantissa
    CHECK(to_float8(464.5f, DType::Float8_e4m3fn) == 0x7F);
    CHECK(to_float8(480.0f, DType::Float8_e4m3fn) == 0x7F);
    CHECK(to_float8(-1e9f, DType::Float8_e4m3fn) == 0xFF);
    CHECK(to_float8(INFINITY, DType::Float8_e4m3fn) == 0x7F);
    CHECK(to_float8(0x1p-9f, DType::Float8_e4m3fn) == 0x01);   // smallest subnormal
    CHECK(to_float8(0x1p-10f, DType::Float8_e4m3fn) == 0x00);  // half of it: tie to even zero
    CHECK(to_float8(0x3p-10f, DType::Float8_e4m3fn) == 0x02);  // 1.5 units: tie to even 2
    CHECK(to_float8(-0.0f, DType::Float8_e4m3fn) == 0x80);
    CHECK(to_float8(1.0625f, DType::Float8_e4m3fn) == 0x38);  // 1 + 1/16: tie to even 1
    CHECK(to_float8(1.1875f, DType::Float8_e4m3fn) == 0x3A);  // 1 + 3/16: tie to even 1.25
  }
  SECTION("float8_e5m2: infinities kept, overflow gives inf") {
    CHECK(to_float8(57344.0f, DType::Float8_e5m2) == 0x7B);
    CHECK(to_float8(61439.0f, DType::Float8_e5m2) == 0x7B);
    CHECK(to_float8(61440.0f, DType::Float8_e5m2) == 0x7C);
    CHECK(to_float8(-INFINITY, DType::Float8_e5m2) == 0xFC);
    CHECK(to_float8(std::nanf(""), DType::Float8_e5m2) == 0x7F);
    CHECK(to_float8(0x1p-16f, DType::Float8_e5m2) == 0x01);
  }
  SECTION("fnuz kinds: one NaN (0x80), no negative zero, no infinity") {
    CHECK(to_float8(240.0f, DType::Float8_e4m3fnuz) == 0x7F);
    CHECK(to_float8(256.0f, DType::Float8_e4m3fnuz) == 0x80);
    CHECK(to_float8(-0.0f, DType::Float8_e4m3fnuz) == 0x00);
    CHECK(to_float8(-1e-30f, DType::Float8_e5m2fnuz) == 0x00);
    CHECK(to_float8(INFINITY, DType::Float8_e5m2fnuz) == 0x80);
    CHECK(to_float8(57344.0f, DType::Float8_e5m2fnuz) == 0x7F);
    CHECK(to_float8(1.0f, DType::Float8_e5m2fnuz) == 0x40);
  }
  SECTION("float8_e8m0fnu: powers of two, exponent rounded to nearest even") {
    CHECK(to_float8(1.0f, DType::Float8_e8m0fnu) == 127);
    CHECK(to_float8(1.4f, DType::Float8_e8m0fnu) == 127);
    CHECK(to_float8(1.6f, DType::Float8_e8m0fnu) == 128);
    CHECK(to_float8(1.5f, DType::Float8_e8m0fnu) == 128);  // tie: exponent 127 is odd, rounds to 128
    CHECK(to_float8(3.0f, DType::Float8_e8m0fnu) == 128);  // tie: exponent 128 is even, stays
    CHECK(to_float8(-1.0f, DType::Float8_e8m0fnu) == 0xFF);
    CHECK(to_float8(std::nanf(""), DType::Float8_e8m0fnu) == 0xFF);
  }
  SECTION("every float8 byte decodes and re-encodes to itself (NaNs to the canonical NaN)") {
    for (const DType dtype : {DType::Float8_e4m3fn, DType::Float8_e5m2, DType::Float8_e4m3fnuz, DType::Float8_e5m2fnuz,
                              DType::Float8_e8m0fnu}) {
      auto bytes = Tensor::zeros({256}, dtype);
      for (int i = 0; i < 256; ++i) bytes.mutable_raw_data()[i] = static_cast<std::byte>(i);
      const Tensor back = bytes.to(DType::Float32).to(dtype);
      const std::vector<float> values = bytes.to_vector<float>();
      const std::vector<float> again = back.to_vector<float>();
      for (std::size_t i = 0; i < 256; ++i) {
        INFO(dtype_name(dtype) << " byte " << i);
        if (std::isnan(values[i])) {
          CHECK(std::isnan(again[i]));
        } else {
          CHECK(std::to_integer<std::size_t>(back.raw_data()[i]) == i);
        }
      }
    }
  }
}

TEST_CASE("Tensor::to(DType) on layouts and devices", "[convert]") {
  const Tensor t = Tensor::from_values<float>({1.5f, -2.5f, 3.75f, 300.0f, -0.0f, 65520.0f}, {2, 3});
  SECTION("same dtype is the tensor itself (no copy)") {
    const Tensor same = t.to(DType::Float32);
    CHECK(same.raw_data() == t.raw_data());
    CHECK(same.storage().data() == t.storage().data());
  }
  SECTION("a transposed view converts in C order of the view") {
    const Tensor v = t.transpose(0, 1);
    const Tensor d = v.to(DType::Float64);
    CHECK(d.is_contiguous());
    CHECK(d.sizes() == Shape{3, 2});
    CHECK(d.to_vector<double>() == std::vector<double>{1.5, 300.0, -2.5, -0.0, 3.75, 65520.0});
    CHECK(v.to_vector<std::int16_t>() == std::vector<std::int16_t>{1, 300, -2, 0, 3, -16});
    CHECK(v.to(DType::Float16).to_vector<float>() == std::vector<float>{1.5f, 300.0f, -2.5f, -0.0f, 3.75f, INFINITY});
  }
  SECTION("expanded and 0-d tensors") {
    const Tensor e = Tensor::from_values<std::int32_t>({7}, {1}).expand({4});
    CHECK(e.to_vector<float>() == std::vector<float>{7, 7, 7, 7});
    const Tensor scalar = Tensor::from_values<double>({2.5}, {1}).reshape({});
    CHECK(scalar.to(DType::Int64).item<std::int64_t>() == 2);
    CHECK(Tensor::zeros({0, 3}, DType::Float32).to(DType::BFloat16).sizes() == Shape{0, 3});
  }
  SECTION("complex") {
    const Tensor c = Tensor::from_values<std::complex<float>>({{0.0f, 1.0f}, {2.5f, -3.0f}});
    CHECK(c.to_vector<bool>() == std::vector<bool>{false, true});  // the real part only, as torch
    CHECK(c.to_vector<double>() == std::vector<double>{0.0, 2.5});
    CHECK(c.to_vector<std::complex<double>>() == std::vector<std::complex<double>>{{0.0, 1.0}, {2.5, -3.0}});
    CHECK(t.to_vector<std::complex<float>>()[1] == std::complex<float>(-2.5f, 0.0f));
  }
  SECTION("requires_grad kept for floating results only") {
    Tensor g = t;
    g.set_requires_grad(true);
    CHECK(g.to(DType::Float16).requires_grad());
    CHECK_FALSE(g.to(DType::Int32).requires_grad());
  }
  SECTION("meta tensors give meta tensors of the new dtype") {
    const Tensor m = Tensor::zeros({2, 5}, DType::Float32, Device::meta());
    const Tensor h = m.to(DType::BFloat16);
    CHECK(h.device().is_meta());
    CHECK(h.dtype() == DType::BFloat16);
    CHECK(h.sizes() == Shape{2, 5});
    CHECK(h.nbytes() == 20);
    const Tensor m2 = t.to(Device::meta(), DType::Int8);
    CHECK(m2.device().is_meta());
    CHECK(m2.dtype() == DType::Int8);
    REQUIRE_THROWS_WITH(m.to_vector<float>(),
                        "tensorfile: tensor is on meta and has no data; expected a tensor in "
                        "host memory (a meta tensor holds only sizes and dtype)");
  }
  SECTION("to(Device, DType) on the host") {
    const Tensor i = t.to(Device::cpu(), DType::Int32);
    CHECK(i.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 3, 300, 0, 65520});
    CHECK(t.to(Device::cpu(), DType::Float32).raw_data() == t.raw_data());
  }
  SECTION("quantized dtypes are refused") {
    const Tensor q = Tensor::zeros({2}, DType::QInt8);
    REQUIRE_THROWS_WITH(q.to(DType::Float32),
                        "tensorfile: cannot convert qint8 to float32: quantized values need "
                        "their scale and zero point; expected a non-quantized dtype");
    CHECK_THROWS_AS(t.to(DType::QUInt8), UnsupportedError);
    CHECK_THROWS_AS(q.to_vector<float>(), UnsupportedError);
  }
  SECTION("an undefined tensor") { CHECK_THROWS_AS(Tensor().to_vector<float>(), ArgumentError); }
}

TEST_CASE("Tensor::copy_into(span)", "[convert]") {
  const Tensor t = Tensor::from_values<std::int16_t>({1, -2, 300, 4}, {2, 2}).transpose(0, 1);
  SECTION("converts into a span of the right size") {
    std::vector<float> out(4);
    t.copy_into(std::span<float>(out));
    CHECK(out == std::vector<float>{1, 300, -2, 4});
    std::array<std::uint8_t, 4> bytes{};
    t.copy_into(std::span(bytes));
    CHECK(bytes == std::array<std::uint8_t, 4>{1, 44, 254, 4});
    std::array<bool, 4> flags{};
    Tensor::from_values<float>({0.0f, -0.0f, std::nanf(""), 1e-40f}).copy_into(std::span(flags));
    CHECK(flags == std::array<bool, 4>{false, false, true, true});
  }
  SECTION("a size mismatch is an ArgumentError and writes nothing") {
    std::vector<double> small(3, 9.0);
    REQUIRE_THROWS_WITH(t.copy_into(std::span<double>(small)),
                        "tensorfile: copy_into needs a span of exactly 4 elements; got 3");
    CHECK(small == std::vector<double>(3, 9.0));
    std::vector<double> big(5);
    CHECK_THROWS_AS(t.copy_into(std::span<double>(big)), ArgumentError);
  }
  SECTION("raw bytes, bounds-checked") {
    std::vector<std::byte> raw(8);
    t.copy_into(std::span<std::byte>(raw));
    std::int16_t second = 0;
    std::memcpy(&second, raw.data() + 2, 2);
    CHECK(second == 300);
    std::vector<std::byte> short_raw(7);
    REQUIRE_THROWS_WITH(t.copy_into(std::span<std::byte>(short_raw)),
                        "tensorfile: copy_into needs a span of exactly 8 bytes; got 7");
  }
}

TEST_CASE("Half and BFloat16 give torch's scalar NaN bits", "[convert]") {
  // One codec: the scalar types and the conversion kernels share it (torch's c10::Half / c10::BFloat16 results).
  CHECK(Half(std::bit_cast<float>(0x7FC00001u)).bits == 0x7E00);
  CHECK(Half(std::bit_cast<float>(0xFF812345u)).bits == 0xFE00);
  CHECK(BFloat16(std::bit_cast<float>(0xFF812345u)).bits == 0x7FC0);
  CHECK(std::bit_cast<std::uint32_t>(static_cast<float>(Half::from_bits(0x7D01))) == 0x7FE02000u);
  CHECK(Half(1.0f + 0x1p-11f).bits == detail::float_to_half_bits(1.0f + 0x1p-11f));
}
