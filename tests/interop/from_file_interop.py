#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Interop of from_file and from_buffer with real torch (run by CTest with Debian's python3-torch).

Usage: from_file_interop.py INTEROP_DRIVER

Checks, for every dtype torch can write: files written by numpy's tofile and by
torch.from_file(shared=True) read back identically through tensorfile; tensorfile's shared
writes are seen by torch.from_file; and tensorfile.from_buffer accepts and rejects exactly the
(length, dtype, count, offset) cases torch.frombuffer does, with the same element count.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

DRIVER = sys.argv[1]
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
results = {"passed": 0, "failed": 0}


def check(condition, what):
    if condition:
        results["passed"] += 1
    else:
        results["failed"] += 1
        print(f"FAILED: {what}", flush=True)


def short(dtype):
    return str(dtype).removeprefix("torch.")


def raw_bytes(t):
    """The bytes of a contiguous tensor, for any dtype (bfloat16 has no numpy type)."""
    t = t.contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def sample(dtype, n):
    g = torch.Generator().manual_seed(1234)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_complex:
        return torch.randn(n, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), (n,), generator=g, dtype=dtype)


def driver(*args):
    done = subprocess.run([DRIVER, *map(str, args)], capture_output=True, text=True)
    return done.returncode, done.stdout.strip()


def check_files(tmp):
    for dtype in DTYPES:
        name = short(dtype)
        values = sample(dtype, 7)
        path = tmp / f"{name}.bin"
        path.write_bytes(raw_bytes(values))  # the bytes t.numpy().tofile() writes
        code, out = driver("read", path, name)
        check(code == 0 and out == f"7 {raw_bytes(values).hex()}", f"tensorfile reads tofile bytes of {name}")
        theirs = torch.from_file(str(path), shared=False, size=7, dtype=dtype)
        check(torch.equal(theirs, values) or dtype.is_floating_point and torch.equal(theirs.isnan(), values.isnan()),
              f"torch reads the same {name} file")

        # torch writes through a shared mapping; tensorfile reads the file.
        shared_path = tmp / f"{name}.shared"
        mapped = torch.from_file(str(shared_path), shared=True, size=5, dtype=dtype)
        mapped.copy_(values[:5])
        del mapped
        code, out = driver("read", shared_path, name, 5)
        check(code == 0 and out == f"5 {raw_bytes(values[:5]).hex()}", f"tensorfile sees torch's shared {name} writes")

        # tensorfile writes through a shared mapping; torch reads the file.
        element = raw_bytes(values[6:7]).hex()
        code, _ = driver("write", shared_path, name, 5, 2, element)
        seen = torch.from_file(str(shared_path), shared=False, size=5, dtype=dtype)
        check(code == 0 and raw_bytes(seen[2:3]).hex() == element, f"torch sees tensorfile's shared {name} write")

        # tensorfile creates and grows files exactly as torch does.
        grown = tmp / f"{name}.grown"
        code, _ = driver("write", grown, name, 9, 0, element)
        check(code == 0 and grown.stat().st_size == 9 * values.element_size(), f"tensorfile grows a {name} file")
        check(torch.equal(torch.from_file(str(grown), size=9, dtype=dtype)[1:],
                          torch.zeros(8, dtype=dtype)), f"grown {name} file is zero-filled")


def check_frombuffer():
    cases = []
    for length in (0, 1, 3, 8, 10, 16):
        for dtype in (torch.uint8, torch.int16, torch.float32, torch.float64, torch.complex128):
            for count in (-1, -3, 0, 1, 2, 3, 5):
                for offset in (-1, 0, 1, 2, 8, 9, 10, 16):
                    cases.append((length, dtype, count, offset))
    agree = 0
    for length, dtype, count, offset in cases:
        data = bytes(range(length))
        try:
            theirs = torch.frombuffer(bytearray(data), dtype=dtype, count=count, offset=offset)
            expected = f"ok {theirs.numel()} {raw_bytes(theirs).hex()}"
        except (ValueError, RuntimeError):
            expected = "error"
        code, out = driver("frombuffer", data.hex() or "", short(dtype), count, offset)
        ours = out if code == 0 else "error"
        if ours == expected:
            agree += 1
        else:
            check(False, f"frombuffer len={length} {short(dtype)} count={count} offset={offset}: "
                         f"torch {expected!r}, tensorfile {out!r}")
    check(agree == len(cases), f"frombuffer agrees with torch on {agree}/{len(cases)} cases")
    print(f"frombuffer: tensorfile and torch {torch.__version__} agree on {agree} of {len(cases)} cases")


with tempfile.TemporaryDirectory() as tmp:
    check_files(Path(tmp))
check_frombuffer()
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
