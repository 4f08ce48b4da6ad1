#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Builds the raw seed corpora from the test fixtures (tests/data): whole files for the zip and load
# harnesses, each archive's data.pkl for the pickle harness, tensordict trees packed into the
# tensordict harness's input format. The committed corpora are these seeds after fuzzing and
# `-merge=1` minimization; rerun this to start over:  python3 tests/fuzz/make_seeds.py OUT_DIR
import hashlib, os, sys, zipfile

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "data")
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "seeds")

def put(harness, blob):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(blob).hexdigest()), "wb") as f:
        f.write(blob)

for sub in ("torch", "torch_gen", "zip"):
    folder = os.path.join(data, sub)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not (name.endswith(".pt") or name.endswith(".zip")) or os.path.getsize(path) > 64 * 1024:
            continue
        blob = open(path, "rb").read()
        put("zip", blob)
        put("load", blob)
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for info in z.infolist():
                    if info.filename.endswith(".pkl"):
                        put("pickle", z.read(info))
        else:
            put("pickle", blob[blob.find(b"\x80"):] if b"\x80" in blob else blob)

for name in sorted(os.listdir(os.path.join(data, "safetensors"))):
    if name.endswith(".safetensors"):
        put("safetensors", open(os.path.join(data, "safetensors", name), "rb").read())

td = os.path.join(data, "tensordict")
for tree in sorted(os.listdir(td)):
    root = os.path.join(td, tree)
    if not os.path.isdir(root):
        continue
    parts = [open(os.path.join(root, "meta.json"), "rb").read()]
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if rel == "meta.json":
                continue
            blob = open(os.path.join(dirpath, name), "rb").read()[:4096]
            parts.append(b"\0F" + rel.encode() + b"\n" + blob)
    put("tensordict", b"".join(parts))

for seed in (b"", b"\x00" * 32, bytes(range(256)), b"\x05" + b"\xff" * 40):
    put("from_buffer", seed)
    put("roundtrip", seed)

# numpy: the committed NumPy fixtures (.npy and .npz).
for name in sorted(os.listdir(os.path.join(data, "numpy"))):
    if name.endswith(".npy") or name.endswith(".npz"):
        put("numpy", open(os.path.join(data, "numpy", name), "rb").read())
