#!/usr/bin/python3
"""Describe .pt files as real torch sees them, as JSON (the reference for tensorfile's tests).

    /usr/bin/python3 tests/interop/torch_reference.py [--no-hash] FILE.pt...

Each file is loaded with torch.load(path, map_location='cpu') (weights_only=False) and
printed as ONE JSON object on one line, in argument order. The shape is the one that
`tensorfile inspect --json --hash` prints, so CI runs both and checks them with
compare_reference.py.

    {"format": "torch-zip" | "torch-legacy",
     "tensors": [{"path", "dtype", "shape", "stride", "storage_offset", "requires_grad",
                  "device", "storage", "sha256"}, ...],
     "values":  [{"path", "type", "value"}, ...]}

Rules:
- format: "torch-zip" when the file starts with PK\\3\\4, else "torch-legacy".
- Walk: depth first from the loaded object; dicts in insertion order, lists and tuples
  (incl. torch.Size and namedtuples) in order. A path is "" for the root, and its steps
  joined by "/" below it ("optim/state/0/exp_avg"), as tensorfile's named_tensors() and
  --select spell them; a step is a str key as is, an int key in decimal, a list/tuple
  index, any other key as Python repr(). Steps are not escaped.
- Sets and frozensets: elements sorted by (type name, value) -- type names compare as
  bytes (bool < bytes < complex < device < dtype < float < int < none < str < tuple);
  numbers numerically, str by code point, bytes bytewise, complex by (re, im), dtype by
  name, device by its text, tuples element by element with the same rule -- then walked
  like a list. A set holding anything else is one unsupported value "builtins.set".
- An OrderedDict's `_metadata` attribute (state_dicts) is not a key and is left out.
  Containers make no entry of their own, so empty ones leave no trace.
- Tensors (torch.Tensor and Parameter, strided layout, not quantized) go to "tensors";
  a tensor reached twice is listed twice. dtype: short name ("float32"); device: str()
  after map_location='cpu': "cpu" whatever the saved tag (e.g. cuda:0), or "meta". storage: an int, numbered 0,1,2.. in first-visit order, equal for
  entries sharing one storage; null for meta tensors. sha256: hex digest of the values in
  C order, little-endian (the bytes of t.contiguous(), conj/neg bits resolved); null for
  meta tensors; left out entirely with --no-hash.
- A bare storage is listed in "tensors" as a 1-D view of all of it: dtype its dtype,
  shape [size], stride [1], storage_offset 0, requires_grad false.
- Values: type none (null), bool, int (exact JSON integer of any size), float, complex
  ([re, im]), str, bytes (bytes or bytearray, lowercase hex), device (str(): "cuda:1",
  "cpu"), dtype (short name). Non-finite floats (also complex parts) are the strings
  "nan", "inf", "-inf".
  Scalar types are matched exactly, so numpy.float64 (a float subclass) is unsupported.
- Anything else is {"path", "type": "unsupported", "value": name}: name is
  "tensor:quantized", "tensor:<layout>" (e.g. "tensor:sparse_coo") for non-strided
  tensors, else "<module>.<qualname>" of its type ("numpy.ndarray", "torch.layout",
  "__main__.MyT" for a tensor subclass, "torch.nn.modules.linear.Linear"). It is not
  descended into. Classes missing at load time are replaced by Tensor-subclass stubs of
  the same name so files saved from a __main__ still load.
- Output is ASCII JSON (non-ASCII text as \\u escapes), one object per line.
- A file torch cannot load prints {"format": ..., "error": "<Exception>: <message>"} and
  the exit status becomes 1.
"""
import argparse
import functools
import hashlib
import json
import math
import pickle
import sys
import types
import unittest.mock

import torch

SCALARS = {type(None): "none", bool: "bool", int: "int", float: "float", complex: "complex",
           str: "str", bytes: "bytes", bytearray: "bytes", torch.device: "device",
           torch.dtype: "dtype"}


@functools.cache
def _stub(module, name):
    return type(name, (torch.Tensor,), {"__module__": module, "__qualname__": name})


class _LenientUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (AttributeError, ImportError):
            return _stub(module, name)


# torch 1.13.0a0 (Debian) ignores torch.load's pickle_module argument when weights_only is
# False, so the lenient unpickler goes in by patching the `pickle` that serialization.py uses.
LENIENT_PICKLE = types.ModuleType("pickle")
LENIENT_PICKLE.__dict__.update(pickle.__dict__)
LENIENT_PICKLE.Unpickler = _LenientUnpickler
LENIENT_PICKLE.load = lambda f, **kw: _LenientUnpickler(f, **kw).load()


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def json_float(x):
    return x if math.isfinite(x) else str(x)  # "nan", "inf", "-inf"


def scalar_value(x, kind):
    if kind == "bytes":
        return x.hex()
    if kind == "complex":
        return [json_float(x.real), json_float(x.imag)]
    if kind == "float":
        return json_float(x)
    if kind == "device":
        return str(x)
    if kind == "dtype":
        return dtype_name(x)
    return x


def sort_key(x):
    """Key for set elements; raises TypeError for elements that have no defined order."""
    if type(x) is tuple:
        return ("tuple", tuple(sort_key(e) for e in x))
    kind = SCALARS.get(type(x))
    if kind is None:
        raise TypeError(type(x))
    if kind == "none":
        return (kind, 0)
    if kind == "complex":
        return (kind, (x.real, x.imag))
    return (kind, scalar_value(x, kind) if kind in ("device", "dtype") else x)


def type_name(x):
    if isinstance(x, torch.Tensor) and type(x) in (torch.Tensor, torch.nn.Parameter):
        return "tensor:quantized" if x.is_quantized else "tensor:" + dtype_name(x.layout)
    return f"{type(x).__module__}.{type(x).__qualname__}"


class Describer:
    def __init__(self, hashes):
        self.hashes = hashes
        self.storage_ids = {}
        self.tensors = []
        self.values = []

    def storage_id(self, untyped):
        return self.storage_ids.setdefault(untyped._cdata, len(self.storage_ids))

    def add_tensor(self, path, t):
        meta = t.device.type == "meta"
        entry = {"path": path, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                 "stride": list(t.stride()), "storage_offset": t.storage_offset(),
                 "requires_grad": t.requires_grad, "device": str(t.device),
                 "storage": None if meta else self.storage_id(t.storage()._storage)}
        if self.hashes:
            data = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
            entry["sha256"] = None if meta else \
                hashlib.sha256(data.view(torch.uint8).numpy().tobytes()).hexdigest()
        self.tensors.append(entry)

    def walk(self, x, path=""):
        kind = SCALARS.get(type(x))
        if kind is not None:
            self.values.append({"path": path, "type": kind, "value": scalar_value(x, kind)})
        elif type(x) in (torch.Tensor, torch.nn.Parameter) and x.layout == torch.strided \
                and not x.is_quantized:
            self.add_tensor(path, x)
        elif isinstance(x, torch.storage.TypedStorage):  # a bare storage: view all of it
            self.add_tensor(path, torch.tensor([], dtype=x.dtype, device=x.device).set_(x))
        elif isinstance(x, dict):
            for k, v in x.items():
                self.walk(v, child(path, step(k)))
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                self.walk(v, child(path, str(i)))
        elif isinstance(x, (set, frozenset)):
            try:
                items = sorted(x, key=sort_key)
            except TypeError:
                self.values.append({"path": path, "type": "unsupported", "value": "builtins.set"})
                return
            for i, v in enumerate(items):
                self.walk(v, child(path, str(i)))
        else:
            self.values.append({"path": path, "type": "unsupported", "value": type_name(x)})


def step(key):
    return key if type(key) is str else str(key) if type(key) is int else repr(key)


def child(path, step_text):
    return f"{path}/{step_text}" if path else step_text


def describe(path, hashes=True):
    with open(path, "rb") as f:
        fmt = "torch-zip" if f.read(4) == b"PK\x03\x04" else "torch-legacy"
    try:
        with unittest.mock.patch.object(torch.serialization, "pickle", LENIENT_PICKLE):
            obj = torch.load(path, map_location="cpu", pickle_module=LENIENT_PICKLE)
    except Exception as e:  # report and go on with the other files
        return {"format": fmt, "error": f"{type(e).__name__}: {e}"}
    d = Describer(hashes)
    d.walk(obj)
    return {"format": fmt, "tensors": d.tensors, "values": d.values}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-hash", action="store_true", help="leave out sha256")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    status = 0
    for path in args.files:
        result = describe(path, hashes=not args.no_hash)
        status |= "error" in result
        print(json.dumps(result))
    return status


if __name__ == "__main__":
    sys.exit(main())
