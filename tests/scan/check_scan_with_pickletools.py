#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cross-checks tensorfile's scan() against Python's pickletools, the disassembler of the reference pickle
implementation. A corpus is generated in a temporary folder: benign torch.save checkpoints (zip and legacy, several
pickle protocols and object shapes), pickles the Python pickler writes for objects whose reduction calls a dangerous
function (protocols 0 to 5, nested in tuples, dicts and BUILD states), and hand-built pickles naming each dangerous
global through GLOBAL, STACK_GLOBAL with memoised strings, INST and OBJ, and NumPy object arrays (.npy, and .npz
stored and deflated). For every file the set of globals
tensorfile reports must equal the set pickletools.genops yields (STACK_GLOBAL operands resolved with a stack model
built from pickletools' own per-opcode stack effects), and the verdicts must be what the lists say. Nothing is ever
unpickled. Usage: check_scan_with_pickletools.py SCAN_GLOBALS_EXE"""
import _compat_pickle
import collections
import io
import os
import pickle
import pickletools
import subprocess
import sys
import tempfile
import zipfile

import numpy
import numpy.lib.format
import torch

MARK = object()


def genops_globals(data, start):
    """The globals of the pickle at `start`, and the offset after its STOP, from pickletools.genops."""
    stack, memo, found = [], {}, set()
    stream = io.BytesIO(data)
    stream.seek(start)
    for op, arg, _ in pickletools.genops(stream):
        name = op.name
        if name in ("GLOBAL", "INST"):
            module, _, attr = arg.partition(" ")
            found.add(f"{module}.{attr}")
        if name == "STACK_GLOBAL":
            attr, module = stack.pop(), stack.pop()
            found.add(f"{module}.{attr}")
            stack.append(None)
        elif name == "MARK":
            stack.append(MARK)
        elif name == "DUP":
            stack.append(stack[-1])
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo[arg])
        elif name in ("STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
                      "BINUNICODE8"):
            stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
        else:  # every other opcode by the stack effect pickletools documents for it
            before = op.stack_before
            if pickletools.markobject in before:
                while stack.pop() is not MARK:
                    pass
                for _ in range(before.index(pickletools.markobject)):
                    stack.pop()
            else:
                for _ in range(len(before)):
                    stack.pop()
            stack.extend([None] * len(op.stack_after))
        if name == "STOP":
            return found, stream.tell()
    raise AssertionError("no STOP")


def npy_globals(data):
    """The globals of the pickle np.save writes after an object array's header (none for other dtypes), the header
    read by NumPy's own reader."""
    stream = io.BytesIO(data)
    version = numpy.lib.format.read_magic(stream)
    _, _, dtype = numpy.lib.format._read_array_header(stream, version)
    return genops_globals(data, stream.tell())[0] if dtype.hasobject else set()


def reference_globals(path):
    """Every global of every pickle tensorfile should walk in `path`, by pickletools."""
    found = set()
    if path.endswith(".npy"):
        return npy_globals(open(path, "rb").read())
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if member.endswith(".pkl"):
                    found |= genops_globals(archive.read(member), 0)[0]
                elif path.endswith(".npz") and member.endswith(".npy"):
                    found |= npy_globals(archive.read(member))
        return found
    data = open(path, "rb").read()
    start = 0
    for _ in range(5):  # the legacy format's five pickles (a bare pickle file holds one)
        if start >= len(data):
            break
        more, start = genops_globals(data, start)
        found |= more
    return found


class Calls:
    """Pickles as a call of `function` on `args` (the pickler writes a reference to the function; nothing runs)."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return (self.function, self.args)


class WithState:
    """Pickles as OrderedDict() whose BUILD state holds `inner`."""

    def __init__(self, inner):
        self.inner = inner

    def __reduce__(self):
        return (collections.OrderedDict, (), {"state": self.inner})


import builtins  # noqa: E402
import importlib  # noqa: E402
import runpy  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import webbrowser  # noqa: E402
import torch.hub  # noqa: E402

# Real callables the pickler names by reference (dangerous by the lists in global_verdicts.hpp).
DANGEROUS_CALLABLES = [os.system, builtins.eval, builtins.exec, builtins.compile, builtins.open, builtins.getattr,
                       builtins.__import__, builtins.breakpoint, subprocess.Popen, subprocess.check_output,
                       shutil.rmtree, webbrowser.open, pickle.loads, importlib.import_module, socket.socket,
                       runpy.run_path, torch.load, torch.hub.load]
# Hand-built globals, including modules that need not be installed here.
DANGEROUS_NAMES = ["os.system", "posix.system", "nt.system", "subprocess.Popen", "builtins.eval", "builtins.exec",
                   "builtins.getattr", "builtins.__import__", "runpy._run_code", "socket.create_connection",
                   "shutil.rmtree", "webbrowser.open", "pickle.loads", "_pickle.loads", "dill.loads",
                   "importlib.import_module", "ctypes.CDLL", "torch.load", "torch.hub.load", "sys.modules"]


def text(s, proto):
    """A string opcode the protocol has."""
    raw = s.encode()
    if proto < 2:
        return b"S'" + raw + b"'\n"
    if proto < 4:
        return b"X" + len(raw).to_bytes(4, "little") + raw
    return b"\x8c" + bytes([len(raw)]) + raw + b"\x94"  # SHORT_BINUNICODE, MEMOIZE


def hand_built(full, form, proto):
    module, _, name = full.rpartition(".")
    head = b"\x80" + bytes([proto]) if proto >= 2 else b""
    arg = text("x", proto)
    if form == "GLOBAL":
        body = b"c" + module.encode() + b"\n" + name.encode() + b"\n(" + arg + b"tR"
    elif form == "INST":
        body = b"(" + arg + b"i" + module.encode() + b"\n" + name.encode() + b"\n"
    elif form == "OBJ":
        body = b"(c" + module.encode() + b"\n" + name.encode() + b"\n" + arg + b"o"
    else:  # STACK_GLOBAL with memoised strings: the names are written once and fetched with BINGET twice
        body = (text(module, proto) + text(name, proto) + b"0" + b"0" + b"h\x00h\x01\x93\x94(" + arg + b"tR")
        body = b"(" + body + b"h\x00h\x01\x93" + b"N\x86" + b"t"  # the second reference sits in a tuple
    return head + body + b"."


def build_corpus(folder):
    files, expected = [], {}  # path -> set of names that must be dangerous

    def add(path, dangerous=()):
        files.append(path)
        expected[path] = set(dangerous)

    benign = {
        "state_dict": collections.OrderedDict(w=torch.zeros(3, 4), b=torch.ones(4, dtype=torch.float16)),
        "nested": {"a": [torch.arange(5), (torch.eye(2, dtype=torch.float64), 3)], "n": 7, "s": "text", "f": 1.5},
        "param": {"p": torch.nn.Parameter(torch.randn(2, 2)), "i8": torch.tensor([1, -2], dtype=torch.int8)},
        "views": (lambda t: {"t": t, "v": t[1:], "tr": t.t()})(torch.arange(12.0).reshape(3, 4)),
        "dtypes": {"bf": torch.zeros(2, dtype=torch.bfloat16), "bool": torch.tensor([True]),
                   "size": torch.Size([2, 3]), "dtype": torch.float32, "dev": torch.device("cpu")},
        "empty": {},
    }
    for name, obj in benign.items():
        for proto in (2, 3, 4, 5):
            path = os.path.join(folder, f"benign_{name}_p{proto}.pt")
            torch.save(obj, path, pickle_protocol=proto)
            add(path)
        path = os.path.join(folder, f"benign_{name}_legacy.pt")
        torch.save(obj, path, _use_new_zipfile_serialization=False)
        add(path)

    for i, function in enumerate(DANGEROUS_CALLABLES):
        reference = f"{function.__module__}.{function.__qualname__}"
        # Protocols 0 to 2 write Python 2's names where Python 3's moved (builtins -> __builtin__...).
        module_2 = _compat_pickle.REVERSE_IMPORT_MAPPING.get(function.__module__, function.__module__)
        module_2, name_2 = _compat_pickle.REVERSE_NAME_MAPPING.get((function.__module__, function.__qualname__),
                                                                  (module_2, function.__qualname__))
        spellings = [reference, f"{module_2}.{name_2}"]
        shapes = {"bare": Calls(function, "x"), "tuple": (1, (Calls(function, "x"),)),
                  "dict": {"k": [Calls(function, "x")]}, "build": WithState(Calls(function, "x"))}
        for shape, obj in shapes.items():
            for proto in range(6):
                path = os.path.join(folder, f"pickler_{i}_{shape}_p{proto}.pkl")
                with open(path, "wb") as out:
                    pickle.dump(obj, out, protocol=proto)
                add(path, spellings)
        path = os.path.join(folder, f"torch_{i}.pt")
        torch.save({"w": torch.zeros(2), "x": Calls(function, "x")}, path)
        add(path, spellings)
        path = os.path.join(folder, f"torch_{i}_legacy.pt")
        torch.save({"w": torch.zeros(2), "x": Calls(function, "x")}, path, _use_new_zipfile_serialization=False)
        add(path, spellings)
        # NumPy object arrays: np.save pickles them after the .npy header; np.savez and np.savez_compressed hold
        # such .npy members beside numeric ones.
        objects = numpy.array([Calls(function, "x"), 3], dtype=object)
        path = os.path.join(folder, f"numpy_{i}.npy")
        numpy.save(path, objects, allow_pickle=True)
        add(path, spellings)
        for save in (numpy.savez, numpy.savez_compressed):
            path = os.path.join(folder, f"numpy_{i}_{save.__name__}.npz")
            save(path, weights=numpy.arange(6.0), objects=objects)
            add(path, spellings)

    for i, full in enumerate(DANGEROUS_NAMES):
        for form in ("GLOBAL", "INST", "OBJ", "STACK_GLOBAL"):
            for proto in range(6):
                if form == "STACK_GLOBAL" and proto < 4:
                    continue
                path = os.path.join(folder, f"hand_{i}_{form}_p{proto}.pkl")
                with open(path, "wb") as out:
                    out.write(hand_built(full, form, proto))
                add(path, [full])
    return files, expected


def main():
    exe = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        files, expected = build_corpus(folder)
        weights_only_allowed = set(torch._weights_only_unpickler._get_allowed_globals())
        # scan()'s allow-list is the installed torch's, name for name.
        listed = subprocess.run([exe, "--allow-list"], capture_output=True, text=True, check=False).stdout.split()
        if set(listed) != weights_only_allowed or len(listed) != len(set(listed)):
            failures.append(f"scan's allow-list differs from torch's _get_allowed_globals(): only ours "
                            f"{sorted(set(listed) - weights_only_allowed)}, only torch's "
                            f"{sorted(weights_only_allowed - set(listed))}")
        result = subprocess.run([exe, *files], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            failures.append(f"scan_globals exited {result.returncode}: {result.stdout[-2000:]}{result.stderr}")
        found = {path: {} for path in files}
        problems = collections.defaultdict(list)
        for line in result.stdout.splitlines():
            kind, path, *rest = line.split("\t")
            if kind == "G":
                verdict, called = found[path].get(rest[0], (rest[1], False))  # called if any reference is
                found[path][rest[0]] = (verdict, called or rest[2] == "1")
            else:
                problems[path].append(f"{kind} {rest}")
        for path in files:
            name = os.path.basename(path)
            reference = reference_globals(path)
            if set(found[path]) != reference:
                failures.append(f"{name}: tensorfile {sorted(found[path])} != pickletools {sorted(reference)}")
            if problems[path]:
                failures.append(f"{name}: unexpected findings {problems[path]}")
            for global_name, (verdict, called) in found[path].items():
                want_dangerous = global_name in expected[path]
                if want_dangerous and (verdict != "dangerous" or not called):
                    failures.append(f"{name}: {global_name} is {verdict}, called={called}; expected dangerous, called")
                # An object array's own reconstruction (numpy.core.multiarray._reconstruct, numpy.ndarray,
                # numpy.dtype) is not on weights_only's list: unknown, as torch.load would say.
                numpy_own = name.startswith("numpy_") and global_name.startswith("numpy.") and verdict == "unknown"
                if want_dangerous or numpy_own:
                    continue
                # Anything else is allowed exactly when torch's own weights_only list holds it (torch.device and
                # torch.bfloat16 are not on torch 1.13's), else unknown.
                if global_name in weights_only_allowed and verdict not in ("tensor-rebuild", "allowed"):
                    failures.append(f"{name}: {global_name} is {verdict}; expected tensor-rebuild or allowed")
                if global_name not in weights_only_allowed and verdict != "unknown":
                    failures.append(f"{name}: {global_name} is {verdict}; torch's weights_only list lacks it")
        print(f"{len(files)} files, {sum(len(g) for g in found.values())} globals compared with pickletools")
    for failure in failures[:50]:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
