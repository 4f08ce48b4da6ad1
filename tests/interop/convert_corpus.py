#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a dtype-conversion corpus with real torch's `.to()` results, and optionally checks tensorfile on it.

Usage: convert_corpus.py [--small] --write CORPUS            (write the corpus only)
       convert_corpus.py --check CONVERT_DRIVER              (write to a temporary file, run the driver on it)

For every pair of dtypes torch 1.13 has (bool, uint8, int8..int64, float16, bfloat16, float32, float64,
complex32, complex64, complex128) the corpus holds source values that include every rounding edge (ties,
subnormals, +-0, NaN payloads, inf, max/min, values just past each integer range; all 65536 float16 and
bfloat16 bit patterns unless --small; every NaN class of every float width: quiet and signalling, both signs,
lowest, highest and all payload bits) and the bytes torch's `.to()` gives for them. The driver converts the same
values with tensorfile (contiguous and strided) and reports every byte difference.

torch 1.13 converts a NaN to bfloat16 as 0x7FC0 (c10::BFloat16) on its element-wise path, but as 0xFFFF in its AVX2
kernels for contiguous float32 sources and for the 16-element blocks of contiguous float64 ones; which elements take
which path depends on the tensor's layout, length and torch's thread count. The corpus holds the element-wise
results, and this script checks that torch's bulk results equal them everywhere else: for every other pair and
value, and for every non-NaN value of those two.

Corpus format: b"TFCONV1\\n", then per pair: u8 length + source dtype name, u8 length + destination dtype
name, u64 little-endian count, count source elements, count destination elements.
"""
import argparse
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

torch.set_num_threads(1)
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128]
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
INT_RANGES = [(0, 255), (-128, 127), (-32768, 32767), (-2**31, 2**31 - 1), (-2**63, 2**63 - 1),
              (0, 2**16 - 1), (0, 2**32 - 1), (0, 2**64 - 1)]


def short(dtype):
    return str(dtype).removeprefix("torch.")


def raw_bytes(t):
    t = t.contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def f32_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f32_from_bits(values):
    return torch.tensor([b - 2**32 if b >= 2**31 else b for b in values], dtype=torch.int32).view(torch.float32)


def f64_from_bits(values):
    return torch.tensor([b - 2**64 if b >= 2**63 else b for b in values], dtype=torch.int64).view(torch.float64)


def real_edges():
    """Finite float64 values at every rounding edge tensorfile must handle like torch."""
    v = [0.0, 1.0, -1.0, 0.5, -0.5, 0.9999, -0.9999, 1.5, -1.5, 2.5, -2.5, 3.5, 1e-30, -1e-30, 123.456, -987.25]
    # float16: ties and near-ties on the mantissa, overflow edges, subnormal edges
    for sign in (1, -1):
        for x in (1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-23, 1 + 2**-11 - 2**-24, 65504, 65519, 65519.99,
                  65520, 65536, 2**-14, 2**-14 - 2**-25, 2**-24, 2**-25, 2**-25 + 2**-40, 3 * 2**-26,
                  3 * 2**-25, 2**-26, 6e-8, 2048 + 1, 2048 + 3,
                  # bfloat16 ties, overflow
                  1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-23, 1 + 2**-8 - 2**-24, 3.3895313892515355e38,
                  3.3961775292304e38, f32_bits(0x7F7FFFFF), f32_bits(0x00800000), f32_bits(0x007FFFFF),
                  f32_bits(0x00000001), f32_bits(0x00018000), f32_bits(0x00008000),
                  # float32 ties from float64, double rounding into float16/bfloat16
                  1 + 2**-24, 1 + 3 * 2**-24, 1 + 2**-24 + 2**-50, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40,
                  2**-150, 3 * 2**-150, 2**-149, 2**-151, 1e-46, 3.4028235677973366e38, 3.5e38, 1e300, 5e-324,
                  2.2250738585072014e-308, 1.7976931348623157e308):
            v.append(sign * x)
    # integer ranges: each bound, half a unit and one unit past it, and a little further
    for lo, hi in INT_RANGES:
        for x in (lo, hi, lo - 0.5, hi + 0.5, lo - 1, hi + 1, lo - 1.5, hi + 1.9, hi + 256, lo - 256, 2.0 * hi + 2):
            v.append(float(x))
    for k in (15, 16, 24, 31, 32, 53, 62, 63, 64, 65):
        v += [2.0**k, -2.0**k, 2.0**k + 2.0**(k - 8), 5000000001.0]
    v += [9223372036854774784.0, -9223372036854774784.0, 18446744073709549568.0, 3e9, -3e9, 1e10, -1e10,
          1e19, -1e19, 4294967553.0, 70000.0, -40000.0, 300.0, -129.5, 255.9, 256.0, -0.9]
    return v


def random_reals(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        scale = 10.0 ** rng.randint(-10, 12)
        out.append(rng.gauss(0.0, 1.0) * scale)
    return out


NAN32 = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC00001, 0x7FFFFFFF, 0xFF812345, 0x7F801000,
         0x7FA00000, 0x7F800000, 0xFF800000, 0x80000000]
NAN64 = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8000000000123, 0xFFF0000020000000,
         0x7FF4000000000000, 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000, 0x8000000000000000]


def nan_classes(exponent_bits, mantissa_bits):
    """The bits of every NaN class of a float format: quiet and signalling, both signs, and the payload (the
    mantissa bits below the quiet bit) lowest bit, highest bit, all bits or none (a signalling NaN needs one)."""
    width = 1 + exponent_bits + mantissa_bits
    quiet_bit = 1 << (mantissa_bits - 1)
    payloads = {0, 1, quiet_bit >> 1, quiet_bit - 1, 0x5 & (quiet_bit - 1)}
    out = set()
    for sign in (0, 1 << (width - 1)):
        for quiet in (0, quiet_bit):
            for payload in payloads:
                if quiet | payload:
                    out.add(sign | (((1 << exponent_bits) - 1) << mantissa_bits) | quiet | payload)
    return sorted(out)


def int_view(bits, width, dtype):
    """The float tensor of `dtype` whose elements have the unsigned `bits` (of `width` bits)."""
    signed = {16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
    return torch.tensor([b - 2**width if b >= 2**(width - 1) else b for b in bits], dtype=signed).view(dtype)


def source_values(dtype, small):
    """A 1-d tensor of source values of `dtype`."""
    reals = real_edges() + random_reals(0 if small else 400, 7)
    if dtype == torch.bool:
        return torch.tensor([False, True, True, False])
    if dtype in INT_DTYPES:
        info = torch.iinfo(dtype)
        ints = {0, 1, -1, 2, -2, 7, 100, -100, info.min, info.max, info.min + 1, info.max - 1}
        for lo, hi in INT_RANGES:
            ints |= {lo, hi, lo - 1, hi + 1}
        ints |= {2**24 + 1, 2**24 + 3, 2**53 + 1, 2**62 + 2**38 + 1, 2**31 - 64, 2**31 - 65, 2**63 - 1, 2**63 - 512,
                 2**63 - 513, 2**63 - 2**39 - 1, 65505, 65519, 65520, 2049, 2051, 257, 259, 16777217, -16777217}
        rng = random.Random(11)
        ints |= {rng.randint(info.min, info.max) for _ in range(8 if small else 300)}
        ints = sorted(i for i in ints if info.min <= i <= info.max)
        return torch.tensor(ints, dtype=dtype)
    if dtype in (torch.float16, torch.bfloat16):
        if small:
            bits = sorted({0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7D01, 0xFC01, 0x7E55, 0x7F80, 0xFF80, 0x7FC0,
                           0x7F81, 0xFF81, 0x7FC5, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x3C01,
                           0x4B80, 0x5A00, 0x5F00, 0x7F7F, 0x0080, 0x007F, 0x4F00, 0xCF00, 0x4F80, 0xDF00, 0x5F80,
                           0x477F, 0x4780, 0x6400, 0x7000})
        else:
            bits = list(range(65536))
        exponent_bits = 5 if dtype == torch.float16 else 8
        bits = sorted(set(bits) | set(nan_classes(exponent_bits, 15 - exponent_bits)))
        return int_view(bits, 16, dtype)
    if dtype == torch.float32:
        return torch.cat([torch.tensor(reals, dtype=torch.float64).to(torch.float32), f32_from_bits(NAN32),
                          int_view(nan_classes(8, 23), 32, torch.float32), torch.tensor(reals, dtype=torch.float32)])
    if dtype == torch.float64:
        return torch.cat([torch.tensor(reals, dtype=torch.float64), f64_from_bits(NAN64),
                          int_view(nan_classes(11, 52), 64, torch.float64), f32_from_bits(NAN32).to(torch.float64)])
    # complex: the real edges as real parts, imaginary parts that differ (so dropping them shows)
    part = torch.complex64 if dtype == torch.complex32 else dtype
    real_dtype = torch.float64 if part == torch.complex128 else torch.float32
    re = source_values(real_dtype, True)
    if small:
        re = re[::3]
    im = torch.flip(re, [0])
    values = torch.complex(torch.cat([re, torch.zeros_like(re), im]), torch.cat([im, re, torch.zeros_like(re)]))
    if dtype == torch.complex32:
        halves = source_values(torch.float16, True).to(torch.float32)
        values = torch.cat([values.to(torch.complex64), torch.complex(halves, torch.flip(halves, [0]))])
        pairs = torch.stack([halves.to(torch.float16), torch.flip(halves, [0]).to(torch.float16)], 1)
        return torch.cat([values.to(torch.complex32), pairs.view(torch.complex32).reshape(-1)])
    return values


def is_nan(x):
    return torch.isnan(x.real) | torch.isnan(x.imag) if x.is_complex() else torch.isnan(x)


def torch_convert(x, dtype):
    """torch's element-wise `.to(dtype)` of x: x is read as every other element of a twice longer tensor, which
    torch converts one element at a time. Its bulk (vectorised) results, from x followed by padding so that no value
    falls into the tail it converts one by one, must be the same bytes except for NaN -> bfloat16 from float32 and
    float64 (see the top of this file); AssertionError otherwise."""
    spread = torch.zeros(2 * x.numel(), dtype=x.dtype)
    spread[::2] = x
    one_by_one = spread[::2].to(dtype)
    bulk = torch.cat([x, torch.zeros(64, dtype=x.dtype)]).to(dtype)[: x.numel()]
    kept = torch.ones(x.numel(), dtype=torch.bool)
    if dtype == torch.bfloat16 and x.dtype in (torch.float32, torch.float64):
        kept = ~is_nan(x)
        assert bool((bulk[~kept].view(torch.int16) == -1).all()), f"{x.dtype} NaN -> bfloat16 in bulk is not 0xFFFF"
    assert raw_bytes(bulk[kept]) == raw_bytes(one_by_one[kept]), f"{x.dtype} -> {dtype}: bulk and one by one differ"
    return one_by_one


def write_corpus(path, small):
    out = bytearray(b"TFCONV1\n")
    pairs = 0
    for src in DTYPES:
        x = source_values(src, small)
        for dst in DTYPES:
            y = torch_convert(x, dst)
            for name in (short(src), short(dst)):
                out += bytes([len(name)]) + name.encode()
            out += struct.pack("<Q", x.numel()) + raw_bytes(x) + raw_bytes(y)
            pairs += 1
    Path(path).write_bytes(bytes(out))
    return pairs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--write")
    parser.add_argument("--check")
    args = parser.parse_args()
    import warnings
    warnings.filterwarnings("ignore")
    if args.write:
        pairs = write_corpus(args.write, args.small)
        print(f"wrote {pairs} dtype pairs to {args.write} (torch {torch.__version__})")
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "convert.corpus"
            pairs = write_corpus(corpus, args.small)
            print(f"torch {torch.__version__}: {pairs} dtype pairs", flush=True)
            done = subprocess.run([args.check, str(corpus)])
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
