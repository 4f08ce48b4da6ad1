#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Describe and check tensordict memmap trees with a reader independent of tensorfile.

usage: tensordict_check_tree.py [--tensordict] [--json] TREE [TREE...]

Reads each tree with the Python standard library only (a second implementation of the format, written from
the format notes): every leaf's nested key, dtype, shape and the SHA-256 of its numel * itemsize data bytes,
non-tensor data as JSON, pickle sidecars by SHA-256 (never unpickled). It checks what a tensordict 0.14 tree
must hold: one meta.json per directory, encoded file names, data files at least as long as their shapes,
no file for zero-element leaves. Exit status 1 on any problem.

--tensordict  also load each tree with tensordict.load_memmap (when importable; CI) and compare its leaves,
              dtypes, shapes and bytes with the independent reading.
--json        print the descriptions as JSON lines instead of text.
"""
import hashlib
import json
import math
import os
import sys

ITEMSIZE = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
    "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex32": 4, "complex64": 8,
    "complex128": 16, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1,
}
ESCAPED = set('/<>:"|?*\\ %')


def encode_key(key):
    """tensordict 0.14's file-name encoding of a key."""
    if key == "":
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    return "".join("%%%02X" % ord(c) if c in ESCAPED or ord(c) < 0x20 or ord(c) == 0x7F else c for c in key)


def safe_legacy(key, directory):
    if "/" in key or "\\" in key or "\0" in key or (len(key) >= 2 and key[1] == ":" and key[0].isalpha()):
        return False
    return not (directory and key in ("", ".", ".."))


class Problem(Exception):
    pass


def resolve(directory, key, suffix, is_dir):
    for name in (encode_key(key) + suffix, key + suffix if safe_legacy(key, is_dir) else None):
        if name is not None and os.path.lexists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    return None


def sha_of_file(path, nbytes):
    with open(path, "rb") as f:
        data = f.read(nbytes)
    if len(data) < nbytes:
        raise Problem(f"{path}: data file is too short: {len(data)} < {nbytes} bytes")
    return hashlib.sha256(data).hexdigest()


def read_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read())


def describe(directory, prefix, out):
    """Appends (nested key, description) pairs for the collection in `directory`."""
    meta_path = os.path.join(directory, "meta.json")
    if not os.path.isfile(meta_path):
        raise Problem(f"{meta_path}: missing")
    meta = read_json(meta_path)
    cls = meta.get("_type", "")
    name = cls[len("<class '"):-2].rsplit(".", 1)[-1] if cls.startswith("<class '") else cls
    if name in ("NonTensorData", "NonTensorStack") and ("data" in meta or name == "NonTensorData"):
        pickle = next((os.path.join(directory, p) for p in ("other.pickle", "pickle.pkl")
                       if os.path.exists(os.path.join(directory, p))), None)
        entry = {"kind": name, "data": meta.get("data")}
        if pickle:
            with open(pickle, "rb") as f:
                entry["pickle_sha256"] = hashlib.sha256(f.read()).hexdigest()
        out.append((prefix, entry))
        return
    if "stack_dim" in meta and "data" not in meta and "shape" not in meta:  # lazy stack: 0/, 1/...
        i = 0
        while os.path.isdir(os.path.join(directory, str(i))):
            describe(os.path.join(directory, str(i)), prefix + [str(i)], out)
            i += 1
        return
    if name != "TensorDict" and os.path.isdir(os.path.join(directory, "_tensordict")):
        describe(os.path.join(directory, "_tensordict"), prefix, out)  # a tensorclass: its fields
        return
    for key, entry in meta.items():
        if key in ("shape", "device", "_type") or not isinstance(entry, dict):
            continue
        if "type" in entry:
            sub = resolve(directory, key, "", True)
            if sub is None:
                raise Problem(f"{directory}: sub-collection {key!r} has no directory")
            describe(sub, prefix + [key], out)
        elif "dtype" in entry and "shape" in entry:
            dtype = entry["dtype"].removeprefix("torch.")
            if dtype not in ITEMSIZE or not entry["dtype"].startswith("torch."):
                raise Problem(f"{meta_path}: {key!r}: unknown dtype {entry['dtype']!r}")
            shape = entry["shape"]
            leaf = {"kind": "nested" if entry.get("is_nested") else "tensor", "dtype": dtype, "shape": shape}
            if entry.get("is_nested"):
                table = resolve(directory, key, ".shape.memmap", False)
                if table is None:
                    raise Problem(f"{directory}: nested leaf {key!r} has no .shape.memmap")
                with open(table, "rb") as f:
                    raw = f.read(8 * math.prod(shape))
                sizes = [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, len(raw), 8)]
                rank = shape[1] if len(shape) == 2 else 0
                rows = [sizes[i:i + rank] for i in range(0, len(sizes), rank)] if rank else [[]] * shape[0]
                numel = sum(math.prod(r) for r in rows)
                leaf["nested_sizes"] = rows
            else:
                numel = math.prod(shape)
            nbytes = numel * ITEMSIZE[dtype]
            path = resolve(directory, key, ".memmap", False)
            if nbytes == 0:
                leaf["sha256"] = hashlib.sha256(b"").hexdigest()
            elif path is None:
                raise Problem(f"{directory}: leaf {key!r} has no data file")
            else:
                leaf["sha256"] = sha_of_file(path, nbytes)
            out.append((prefix + [key], leaf))


def tensordict_view(tree):
    """The same description, from tensordict.load_memmap."""
    import tensordict  # noqa: F401  (CI only)
    import torch

    td = tensordict.TensorDict.load_memmap(tree)
    out = {}
    for key, value in td.items(include_nested=True, leaves_only=True):
        key = list(key) if isinstance(key, tuple) else [key]
        if isinstance(value, torch.Tensor) and not value.is_nested:
            data = value.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if value.numel() else b""
            out[tuple(key)] = {"dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                               "sha256": hashlib.sha256(data).hexdigest()}
    return out


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    use_tensordict = "--tensordict" in argv
    as_json = "--json" in argv
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    status = 0
    for tree in args:
        leaves = []
        try:
            describe(tree, [], leaves)
        except (Problem, OSError, ValueError) as e:
            print(f"FAIL {tree}: {e}")
            status = 1
            continue
        for key, leaf in leaves:
            if as_json:
                print(json.dumps({"tree": tree, "key": key, **leaf}, sort_keys=True))
            else:
                detail = {k: v for k, v in leaf.items() if k != "kind"}
                print(f"{tree}: {'/'.join(key)}: {leaf['kind']} {json.dumps(detail, sort_keys=True)}")
        if use_tensordict:
            try:
                theirs = tensordict_view(tree)
            except ImportError:
                print(f"SKIP {tree}: tensordict is not importable")
                continue
            ours = {tuple(k): {x: v[x] for x in ("dtype", "shape", "sha256")} for k, v in leaves if v["kind"] == "tensor"}
            if ours != theirs:
                print(f"FAIL {tree}: tensordict reads other tensors:\n  ours   {ours}\n  theirs {theirs}")
                status = 1
            else:
                print(f"OK {tree}: tensordict agrees on {len(ours)} tensors")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
