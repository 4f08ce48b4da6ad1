#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Printing compared with real torch's repr (run by CTest with Debian's python3-torch).

Usage: print_reference.py PRINT_CHECKER

Builds a few hundred tensors (every dtype torch 1.13 saves, ranks 0-4, narrow and wide value ranges,
huge and tiny values, summarized sizes, views, requires_grad tensors and Parameters), saves them as
one list with torch.save (zip and legacy formats), writes each one's repr() (under the print options of its case) to a text
file, and runs PRINT_CHECKER, which loads the list with tensorfile and compares its text exactly.
"""
import itertools
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

CHECKER = sys.argv[1]
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
COMPLEX_DTYPES = [torch.complex64, torch.complex128]
DEFAULTS = dict(precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None)

g = torch.Generator().manual_seed(20261124)
cases = []  # (tensor, options dict)


def add(t, **options):
    cases.append((t, options))


def randn(*shape, dtype=torch.float32, scale=1.0, integral=False):
    t = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    return (t.round() if integral else t).to(dtype)


def ints(*shape, low, high, dtype):
    return torch.randint(low, high, shape, generator=g, dtype=torch.int64).to(dtype)


SHAPES = [(), (1,), (7,), (20,), (3, 4), (2, 3, 4), (2, 1, 3, 2), (0,), (2, 0), (0, 3, 1)]

# Floats: each shape with narrow, wide, huge, tiny, integral and special values.
for dtype in FLOAT_DTYPES:
    for shape in SHAPES:
        add(randn(*shape, dtype=dtype))
        add(randn(*shape, dtype=dtype, scale=1000.0, integral=True))  # integral values
        add(randn(*shape, dtype=dtype, scale=1e5))  # wide range -> scientific
    finfo = torch.finfo(dtype)
    add(torch.tensor([-0.0, 1.5], dtype=dtype))
    add(torch.tensor([-0.0, 0.0], dtype=dtype))
    add(torch.tensor([-0.0, 2.0, 100.0], dtype=dtype))
    add(torch.tensor([math.nan, -math.inf, math.inf, 1.0], dtype=dtype))
    add(torch.tensor([math.nan, -math.inf, 0.25, -1234.5], dtype=dtype))
    add(torch.tensor([math.nan, math.inf], dtype=dtype))
    add(torch.tensor([finfo.max, finfo.tiny, -finfo.max], dtype=dtype))
    add(torch.tensor([finfo.eps, 1.0, 1e-5], dtype=dtype))
    add(torch.tensor([1e-4, 2e-4, 9e-4], dtype=dtype))  # smallest < 1e-4 or not, depending on rounding
    add(torch.tensor([0.03125, 1.03125, 2.5], dtype=dtype))  # exact ties at 4 digits
    add(torch.tensor([1000.0, 1.0, 999.0], dtype=dtype))  # ratio exactly 1000: not scientific
    add(torch.tensor([1001.0, 1.0], dtype=dtype))
    add(torch.tensor(math.nan, dtype=dtype))
    add(torch.tensor(-0.0, dtype=dtype))
    add(torch.tensor(-math.inf, dtype=dtype))
    add(torch.tensor(123456.0, dtype=dtype))
    add(torch.tensor(1e-7, dtype=dtype) if dtype != torch.float16 else torch.tensor(6e-8, dtype=dtype))
    add(randn(1200, dtype=dtype))  # summarized 1-d
    add(randn(40, 30, dtype=dtype, scale=50.0))  # summarized 2-d
    add(randn(1001, dtype=dtype, scale=1e9))  # summarized, scientific
    big = randn(2000, dtype=dtype)
    big[500] = 1e6 if dtype != torch.float16 else 6e4  # hidden by summarization: must not widen columns
    add(big)
for dtype in [torch.float32, torch.float64]:
    add(torch.tensor([1e9, 1.0], dtype=dtype))
    add(torch.tensor([1e8, 3.0], dtype=dtype))
    add(torch.tensor([1.0e8, 1.0e8 + 4], dtype=dtype))
    add(torch.tensor([1e300, -1e-300], dtype=torch.float64))
    add(torch.tensor([5e-324, 1.0], dtype=torch.float64))
    add(torch.tensor([1e15, 1e16, 3e16], dtype=dtype))

# Integers and bools: widths from a digit to twenty, negatives, summarized.
for dtype in INT_DTYPES:
    info = torch.iinfo(dtype)
    for shape in SHAPES:
        add(ints(*shape, low=max(info.min, -5), high=10, dtype=dtype))
        add(ints(*shape, low=info.min, high=info.max, dtype=dtype))
    add(torch.tensor([info.min, 0, info.max], dtype=dtype))
    add(torch.tensor(info.min, dtype=dtype))
    add(torch.zeros(2000, dtype=dtype))
    add(torch.arange(3000).remainder(info.max).to(dtype).reshape(3, 1000))
    big = torch.zeros(1500, dtype=dtype)
    big[700] = info.max  # hidden
    add(big)
    add(ints(30, low=max(info.min, -1000), high=min(info.max, 1000), dtype=dtype))
for shape in SHAPES:
    add(ints(*shape, low=0, high=2, dtype=torch.bool))
add(torch.ones(5, dtype=torch.bool))
add(torch.zeros(3000, dtype=torch.bool))
add(torch.tensor(False))
add(torch.arange(2000, dtype=torch.int64))

# Complex: both parts' formatters, sign handling, scientific parts, summarized.
for dtype in COMPLEX_DTYPES:
    for shape in [(), (1,), (5,), (12,), (3, 4), (2, 2, 3), (0,), (0, 2)]:
        add(torch.complex(randn(*shape), randn(*shape)).to(dtype))
    add(torch.tensor([1 + 2j, 3 - 4j], dtype=dtype))
    add(torch.tensor([complex(1, -0.0), complex(-0.0, 0.0)], dtype=dtype))
    add(torch.tensor([1e10 + 1j, 1 - 1e-6j], dtype=dtype))
    add(torch.tensor([complex(math.nan, 1), complex(1, math.inf)], dtype=dtype))
    add(torch.complex(randn(1500), randn(1500, scale=1e6)).to(dtype))
    add(torch.tensor(2.5 - 0.5j, dtype=dtype))

# Views: transposes, steps, offsets, expanded strides, narrowed rows.
base = randn(6, 8, scale=10.0)
add(base.t())
add(base[1:5, 2:7])
add(base[:, ::3])
add(base[2])
add(base[:, 5])
add(base[3, 4])
add(randn(4, 1).expand(4, 6))
add(randn(2, 3, 4).permute(2, 0, 1))
add(randn(3, 4, 5, 6)[1:, ::2, 1, :])
add(torch.arange(40, dtype=torch.int32).reshape(5, 8)[::2, 1::3])
add(randn(50, 50).t()[::1, 10:])
add(randn(10, 200)[:, ::2].t())

# Ranks 3 and 4 summarized, and a long row of many lines.
add(randn(12, 10, 10))
add(randn(8, 2, 8, 10, dtype=torch.float64))
add(ints(7, 7, 7, 7, low=-100, high=100, dtype=torch.int64))
add(randn(300, scale=100.0))
add(randn(999, scale=1e-3))

# Summarization decided by the total size, applied only to the long dimensions, also on views.
add(randn(2, 600))
add(randn(3, 400, 2, dtype=torch.float64))
add(ints(2, 2, 1, 300, low=-50000, high=50000, dtype=torch.int32))
add(randn(1500, 2).t())
add(randn(40, 40, 2)[:, ::2, 1].t())
add(torch.complex(randn(50, 30), randn(50, 30)).t(), linewidth=60)

# requires_grad tensors (suffix wrapping) and Parameters.
add(randn(3).requires_grad_())
add(randn(2, 3, dtype=torch.float64).requires_grad_())
add(torch.tensor([123456.7, 0.5], dtype=torch.float64).requires_grad_())
add(randn(8, dtype=torch.float64).requires_grad_())  # the last line is nearly full: suffixes wrap
add(randn(7, dtype=torch.float16).requires_grad_())
add(torch.zeros(0, 3).requires_grad_())
add(torch.nn.Parameter(randn(4, 3)))
add(torch.nn.Parameter(randn(5, dtype=torch.float64)))
add(torch.nn.Parameter(randn(2, 2), requires_grad=False))
add(torch.nn.Parameter(torch.complex(randn(3), randn(3))))
add(torch.nn.Parameter(torch.tensor(1.25)))

# Meta tensors.
add(torch.empty(2, 3, device="meta"))
add(torch.empty(0, device="meta", dtype=torch.int64))
add(torch.empty((), device="meta", dtype=torch.float16))
add(torch.empty(4, device="meta").requires_grad_())

# Print options: precision, threshold, edgeitems, linewidth and sci_mode.
opt_inputs = [randn(20, scale=3.0), randn(4, 5, scale=1e4), torch.tensor([0.0, 0.0]), torch.arange(30),
              torch.tensor([1.0, 2.0, 300.0]), torch.complex(randn(9), randn(9)), randn(2, 3, 9),
              torch.tensor([math.nan, 0.03125, 1.0]), randn(8, dtype=torch.float64).requires_grad_()]
opt_sets = [dict(precision=2), dict(precision=0), dict(precision=8), dict(sci_mode=True), dict(sci_mode=False),
            dict(threshold=10), dict(threshold=10, edgeitems=1), dict(threshold=5, edgeitems=0), dict(linewidth=40),
            dict(linewidth=120), dict(linewidth=10), dict(precision=2, sci_mode=True, linewidth=60),
            dict(threshold=math.inf)]
for t, o in itertools.product(opt_inputs, opt_sets):
    add(t, **o)


def text(value):
    return "none" if value is None else str(int(value)) if isinstance(value, bool) else repr(value)


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    expected = bytearray()
    kept = []
    for t, options in cases:
        opts = dict(DEFAULTS, **options)
        torch.set_printoptions(**opts)
        try:
            r = repr(t).encode()
        except RuntimeError:  # torch 1.13 cannot print a summarized rank >= 2 tensor with edgeitems=0
            continue
        finally:
            torch.set_printoptions(profile="default")
        i = len(kept)
        kept.append(t)
        fields = [str(i), str(opts["precision"]), text(opts["threshold"]), str(opts["edgeitems"]),
                  str(opts["linewidth"]), text(opts["sci_mode"]), str(len(r))]
        expected += ("\t".join(fields) + "\n").encode() + r + b"\n"
    torch.save(kept, tmp / "tensors.pt")
    torch.save(kept, tmp / "legacy.pt", _use_new_zipfile_serialization=False)
    (tmp / "expected.txt").write_bytes(bytes(expected))
    print(f"print_reference: {len(kept)} tensors, torch {torch.__version__}", flush=True)
    failed = 0
    for name in ["tensors.pt", "legacy.pt"]:  # the zip format, and the legacy one (heap loads)
        print(f"== {name}", flush=True)
        failed += subprocess.run([CHECKER, str(tmp / name), str(tmp / "expected.txt")]).returncode != 0
    sys.exit(1 if failed else 0)
