# SPDX-License-Identifier: MIT
"""NumPy interop: a generated corpus of .npy/.npz files (every shared dtype, byte order, memory order,
version and shape including 0-d and empty) is loaded by tensorfile (numpy_driver) in every mode and
written back; np.load must read back the same values and dtype, and a rewritten .npy must be byte for
byte what np.save writes for the same array. With the tensorfile program also given, its inspect,
verify and convert on .npy/.npz files are checked against NumPy and torch.
Usage: check_with_numpy.py NUMPY_DRIVER [TENSORFILE_PROGRAM]"""
import io
import json
import os
import subprocess
import sys
import tempfile
import types
import warnings
import zipfile
import zlib

import numpy as np

DRIVER = sys.argv[1]
PROGRAM = sys.argv[2] if len(sys.argv) > 2 else None
CODES = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
SHAPES = [(), (0,), (5,), (2, 3), (2, 0, 3), (3, 4, 5), (1, 1), (7, 1, 2, 1)]
failures = []
checked = 0


def values(code, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    kind, size = code[0], int(code[1:])
    if kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif kind in "iu":
        info = np.iinfo(np.dtype(code))
        flat = rng.integers(info.min, info.max, n, dtype=np.dtype(code), endpoint=True)
    elif kind == "f":
        flat = rng.standard_normal(n).astype(code) * 1000
        special = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=code)
        flat[: min(n, 4)] = special[: min(n, 4)]
    else:
        part = "f%d" % (size // 2)
        flat = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(code)
        if n:
            flat[0] = complex(np.nan, 1.0)
            flat = flat.astype(code)
        del part
    return flat.astype(code).reshape(shape)


# One driver process answers every command (see numpy_driver.cpp); its stderr is this script's.
driver = subprocess.Popen([DRIVER, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def run(*args):
    assert len(args) == 4 and not any("\t" in a or "\n" in a for a in args)
    driver.stdin.write(("\t".join(args) + "\n").encode())
    driver.stdin.flush()
    head = driver.stdout.readline().split()
    if len(head) != 2:
        sys.exit("numpy_driver stopped (status %s) during: %s" % (driver.wait(), " ".join(args)))
    output = driver.stdout.read(int(head[1])).decode()
    return types.SimpleNamespace(returncode=int(head[0]), stdout=output, stderr="")


def fail(what):
    failures.append(what)
    print("FAIL:", what)


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


with tempfile.TemporaryDirectory() as tmp:
    case = 0
    for code in CODES:
        size = int(code[1:])
        orders = ["<", ">", "="] + (["|"] if size == 1 else [])
        for order in orders:
            for shape in SHAPES:
                for memory in ["C", "F"] if len(shape) >= 2 else ["C"]:
                    for version in [(1, 0), (2, 0), (3, 0)]:
                        if version != (1, 0) and (order != "<" or memory != "C") and shape != (2, 3):
                            continue  # versions only change the preamble: a few shapes suffice
                        case += 1
                        dtype = np.dtype(order + code)
                        array = values(code, shape, case).astype(dtype)
                        array = np.asfortranarray(array) if memory == "F" else np.ascontiguousarray(array) if array.ndim else array
                        assert array.shape == shape  # ascontiguousarray makes 0-d arrays 1-d
                        src = os.path.join(tmp, "in%d.npy" % case)
                        with open(src, "wb") as f:
                            np.lib.format.write_array(f, array, version=version)
                        native = array.astype(dtype.newbyteorder("="))  # keeps the memory order
                        expected_bytes = os.path.join(tmp, "np%d.npy" % case)
                        np.save(expected_bytes, native)
                        label = "%s%s shape=%s order=%s v%d" % (order, code, shape, memory, version[0])
                        swapped = dtype.byteorder == ">" and size > 1
                        for mode in ["heap", "r", "c", "meta"]:
                            out = os.path.join(tmp, "out%d_%s.npy" % (case, mode))
                            result = run("npy", mode, src, out)
                            checked += 1
                            if mode in ("r", "c") and swapped:
                                if result.returncode != 2 or "big-endian" not in result.stdout:
                                    fail("%s %s: expected a big-endian refusal, got %d %s" % (label, mode, result.returncode, result.stdout))
                                continue
                            if result.returncode != 0:
                                fail("%s %s: driver failed: %s %s" % (label, mode, result.stdout, result.stderr))
                                continue
                            if mode == "meta":
                                want = " ".join([{"b1": "bool", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
                                                  "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64",
                                                  "f2": "float16", "f4": "float32", "f8": "float64",
                                                  "c8": "complex64", "c16": "complex128"}[code]] + [str(s) for s in shape])
                                if result.stdout.strip() != want:
                                    fail("%s meta: got %r, expected %r" % (label, result.stdout.strip(), want))
                                continue
                            back = np.load(out)
                            if not same(back, native):
                                fail("%s %s: values differ after the round trip" % (label, mode))
                            if open(out, "rb").read() != open(expected_bytes, "rb").read():
                                fail("%s %s: bytes differ from np.save's" % (label, mode))
    # r+: writes through the mapping reach the file; here only that the mode loads and round-trips.
    array = np.arange(12, dtype="<i4").reshape(3, 4)
    src = os.path.join(tmp, "rplus.npy")
    np.save(src, array)
    result = run("npy", "r+", src, os.path.join(tmp, "rplus_out.npy"))
    checked += 1
    if result.returncode != 0 or not same(np.load(os.path.join(tmp, "rplus_out.npy")), array):
        fail("r+ mode: %s" % result.stdout)

    # .npz: np.savez (stored) and np.savez_compressed (deflated), every dtype, read heap and mapped.
    arrays = {}
    for i, code in enumerate(CODES):
        arrays["a_" + code] = values(code, (3, 4), 1000 + i)
        arrays["f_" + code] = np.asfortranarray(values(code, (2, 5), 2000 + i))
    arrays["scalar"] = np.float64(2.5)
    arrays["empty"] = np.zeros((0, 3), dtype="<i2")
    arrays["nested/name"] = np.arange(4, dtype="<u8")
    for writer in [np.savez, np.savez_compressed]:
        src = os.path.join(tmp, "%s.npz" % writer.__name__)
        writer(src, **arrays)
        reference = np.load(src)
        for mode in ["heap", "r", "c"]:
            out = os.path.join(tmp, "%s_%s_out.npz" % (writer.__name__, mode))
            result = run("npz", mode, src, out)
            checked += 1
            if result.returncode != 0:
                fail("%s %s: driver failed: %s" % (writer.__name__, mode, result.stdout))
                continue
            back = np.load(out)
            if list(back.keys()) != list(reference.keys()):
                fail("%s %s: names %s, expected %s" % (writer.__name__, mode, list(back.keys()), list(reference.keys())))
            for key in reference.keys():
                if not same(back[key], reference[key]):
                    fail("%s %s: array %s differs" % (writer.__name__, mode, key))
    # save_npz(.compress): every member deflated, read by np.load as np.savez_compressed's archives are.
    src = os.path.join(tmp, "savez.npz")
    out = os.path.join(tmp, "compressed_out.npz")
    result = run("npzc", "heap", src, out)
    checked += 1
    if result.returncode != 0:
        fail("save_npz compressed: driver failed: %s" % result.stdout)
    else:
        with zipfile.ZipFile(out) as archive:
            if archive.testzip() is not None or any(i.compress_type != zipfile.ZIP_DEFLATED for i in archive.infolist()):
                fail("save_npz compressed: members not all deflated with good CRCs")
        back = np.load(out)
        if list(back.keys()) != list(arrays.keys()):
            fail("save_npz compressed: names %s" % list(back.keys()))
        for key in arrays:
            if not same(back[key], np.asarray(arrays[key])):
                fail("save_npz compressed: array %s differs" % key)
    # The encoder alone: zlib inflates its raw streams of random and structured inputs to the same bytes.
    rng = np.random.default_rng(7)
    inputs = {
        "empty": b"",
        "one": b"x",
        "zeros": bytes(200000),
        "random": rng.integers(0, 256, 150000, dtype=np.uint8).tobytes(),
        "small alphabet": rng.integers(0, 4, 150000, dtype=np.uint8).tobytes(),
        "floats": np.cumsum(rng.standard_normal(40000)).astype("<f4").tobytes(),
        "period 32768": (rng.integers(0, 256, 32768, dtype=np.uint8).tobytes() * 5)[:150001],
        "text": open(__file__, "rb").read() * 20,
        "runs": b"".join(bytes([i % 256]) * int(n) for i, n in enumerate(rng.integers(1, 700, 2000))),
    }
    for name, data in inputs.items():
        raw = os.path.join(tmp, "deflate_in")
        with open(raw, "wb") as f:
            f.write(data)
        result = run("deflate", "-", raw, raw + ".z")
        checked += 1
        if result.returncode != 0:
            fail("deflate %s: driver failed" % name)
            continue
        with open(raw + ".z", "rb") as f:
            stream = f.read()
        try:
            if zlib.decompress(stream, -15) != data:
                fail("deflate %s: zlib inflates other bytes" % name)
        except zlib.error as e:
            fail("deflate %s: zlib refuses the stream: %s" % (name, e))
        if len(stream) > len(data) + 5 * (len(data) // 65000 + 1) + 8:
            fail("deflate %s: %d bytes from %d" % (name, len(stream), len(data)))

    # Format version 2.0: a header past 65535 bytes. NumPy arrays have at most 32 dimensions, so NumPy cannot
    # make one with a plain dtype; its header writer still decides the bytes for the same dict, and its 2.0
    # header reader parses the file tensorfile writes.
    for ndim in [3, 21000, 25000]:
        out = os.path.join(tmp, "ndim%d.npy" % ndim)
        result = run("ndim", "-", str(ndim), out)
        checked += 1
        if result.returncode != 0:
            fail("ndim %d: driver failed" % ndim)
            continue
        expected = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Stored array in format 2.0"
            np.lib.format._write_array_header(expected, {"descr": "<f4", "fortran_order": False, "shape": (1,) * ndim})
        with open(out, "rb") as f:
            written = f.read()
            f.seek(0)
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = np.lib.format._read_array_header(f, version, max_header_size=1 << 30)
            data = np.frombuffer(f.read(), dtype=dtype)
        if written[: len(expected.getvalue())] != expected.getvalue():
            fail("ndim %d: header differs from NumPy's" % ndim)
        numpy_version = (expected.getvalue()[6], 0)  # NumPy's choice: 1.0 while the header fits 16 bits
        if ndim == 25000 and numpy_version != (2, 0):
            fail("ndim %d: NumPy's writer chose %s; the test meant to reach 2.0" % (ndim, numpy_version))
        if version != numpy_version or shape != (1,) * ndim or fortran or list(data) != [2.5]:
            fail("ndim %d: read back version %s, %d dims, data %s" % (ndim, version, len(shape), data))

    # big-endian members: converted on a heap load, refused as views
    src = os.path.join(tmp, "big.npz")
    np.savez(src, x=np.arange(6, dtype=">f4"))
    result = run("npz", "heap", src, os.path.join(tmp, "big_out.npz"))
    checked += 2
    if result.returncode != 0 or not same(np.load(os.path.join(tmp, "big_out.npz"))["x"], np.arange(6, dtype="<f4")):
        fail("big-endian npz member on the heap: %s" % result.stdout)
    result = run("npz", "r", src, os.path.join(tmp, "big_out2.npz"))
    if result.returncode != 2 or "big-endian" not in result.stdout or "x.npy" not in result.stdout:
        fail("big-endian npz member mapped: expected a refusal naming the member, got %s" % result.stdout)

    if PROGRAM:
        def tool(*args):
            return subprocess.run([PROGRAM, *args], capture_output=True, text=True)

        src = os.path.join(tmp, "savez.npz")  # written above from `arrays`
        reference = np.load(src)
        checks = [
            ("verify npz", tool("verify", src), lambda r: r.returncode == 0 and "every CRC-32" in r.stdout),
            ("verify npy", tool("verify", os.path.join(tmp, "in1.npy")), lambda r: r.returncode == 0),
        ]
        described = tool("inspect", "--json", src)
        checked += 1
        try:
            tensors = json.loads(described.stdout)["tensors"]
            got = [(t["path"], t["dtype"], t["shape"]) for t in tensors]
            names = {"bool": "bool", "float16": "float16", "complex64": "complex64", "complex128": "complex128"}
            want = [(k, names.get(str(reference[k].dtype), str(reference[k].dtype)), list(reference[k].shape))
                    for k in reference.keys()]
            if got != want:
                fail("inspect --json: %s, expected %s" % (got, want))
        except (ValueError, KeyError) as error:
            fail("inspect --json: %s %s" % (error, described.stdout))
        tree = os.path.join(tmp, "tree")
        checks.append(("convert npz -> tree", tool("convert", src, tree), lambda r: r.returncode == 0))
        back = os.path.join(tmp, "back.npz")
        checks.append(("convert tree -> npz", tool("convert", tree, back), lambda r: r.returncode == 0))
        for what, result, ok in checks:
            checked += 1
            if not ok(result):
                fail("%s: %d %s %s" % (what, result.returncode, result.stdout, result.stderr))
        if os.path.exists(back):
            again = np.load(back)
            for key in reference.keys():
                if key == "nested/name":
                    continue  # a tensordict tree nests it: the path comes back as nested/name all the same
                if not same(again[key], reference[key]):
                    fail("npz -> tree -> npz: %s differs" % key)
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            model = os.path.join(tmp, "model.pt")
            state = {"w": torch.randn(3, 4), "b": torch.arange(5, dtype=torch.int64), "h": torch.ones(2, dtype=torch.float16)}
            torch.save(state, model)
            weights = os.path.join(tmp, "weights.npz")
            result = tool("convert", model, weights)
            checked += 1
            if result.returncode != 0:
                fail("convert model.pt weights.npz: %s" % result.stderr)
            else:
                loaded = np.load(weights)
                if list(loaded.keys()) != list(state.keys()) or not all(
                        np.array_equal(loaded[k], state[k].numpy()) and loaded[k].dtype == state[k].numpy().dtype
                        for k in state):
                    fail("convert model.pt weights.npz: arrays differ from torch's")

driver.stdin.close()
if driver.wait() != 0:  # a sanitizer's finding at exit (a leak) shows here
    fail("numpy_driver serve exited with status %d" % driver.returncode)
print("%d checks, %d failures" % (checked, len(failures)))
sys.exit(1 if failures else 0)
