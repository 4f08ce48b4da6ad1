#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tensor-parallel parts against torch's own slicing.

Files written here by torch (zip and legacy torch.save, torch .bin shards with their index) and by numpy (.npy,
.npz) are cut by `tensorfile convert IN OUT.pt --world W --rank R --split RULES [--even chunk]` for every rank of
several group sizes; torch.load reads each part back, and every tensor must equal what t.tensor_split(W, dim)[R],
t.chunk(W, dim)[R] (an empty part where chunk gives the rank none) or t.split(sizes, dim)[R] keeps, or the whole
tensor for the replicated ones.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


def weights():
    torch.manual_seed(0)
    return {
        "layers.0.q.weight": torch.randn(10, 6),
        "layers.0.o.weight": torch.randn(6, 10),
        "layers.0.q.bias": torch.randn(10),
        "norm.weight": torch.randn(6),
        "emb": torch.arange(5 * 3 * 4, dtype=torch.int32).reshape(5, 3, 4),
        "half": torch.randn(7, 9).to(torch.float16),
        "bf": torch.randn(4, 8).to(torch.bfloat16),
        # Parts of dimensions other than 0 read several rows per call through gaps shorter than a page, in 256 KiB
        # reads: 400-byte rows straddle them (the last partial), 13-byte rows give runs of a few bytes, 12,000-byte
        # rows have gaps longer than a page (a read per row).
        "wide": torch.randn(3000, 100),
        "bytes": torch.randint(-128, 128, (40000, 13), dtype=torch.int8),
        "tall": torch.randn(6, 3000),
        "conv": torch.randn(16, 40, 3, 3),
    }


def rules_for(world):
    """The split text and, per pattern-free name, how it splits: (dim, sizes) or None to replicate."""
    sizes = [4] + [0] * (world - 1)  # everything on rank 0, none elsewhere
    text = ("*.q.weight=0,*.o.weight=1,*.q.bias=0,emb=1,half=-1,bf=0:" + "/".join(map(str, sizes)) +
            ",wide=1,bytes=-1,tall=1,conv=1,*=replicate")
    how = {"layers.0.q.weight": (0, None), "layers.0.o.weight": (1, None), "layers.0.q.bias": (0, None),
           "emb": (1, None), "half": (-1, None), "bf": (0, sizes), "norm.weight": None,
           "wide": (1, None), "bytes": (-1, None), "tall": (1, None), "conv": (1, None)}
    return text, how


def expected_part(tensor, how, world, rank, even):
    if how is None:
        return tensor
    dim, sizes = how
    if sizes is not None:
        return tensor.split(sizes, dim)[rank]
    if even == "chunk":
        chunks = tensor.chunk(world, dim)
        if rank < len(chunks):
            return chunks[rank]
        return tensor.narrow(dim, tensor.shape[dim], 0)
    return tensor.tensor_split(world, dim)[rank]


def write_inputs(folder, sd):
    inputs = {}
    inputs["zip"] = os.path.join(folder, "sd.pt")
    torch.save(sd, inputs["zip"])
    inputs["legacy"] = os.path.join(folder, "legacy.pt")
    torch.save(sd, inputs["legacy"], _use_new_zipfile_serialization=False)
    shards = os.path.join(folder, "shards")
    os.mkdir(shards)
    names = list(sd)
    parts = [names[:3], names[3:]]
    weight_map = {}
    for k, part in enumerate(parts):
        file = "pytorch_model-%05d-of-%05d.bin" % (k + 1, len(parts))
        torch.save({name: sd[name] for name in part}, os.path.join(shards, file))
        weight_map.update({name: file for name in part})
    with open(os.path.join(shards, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    inputs["shards"] = shards
    inputs["npy"] = os.path.join(folder, "emb.npy")
    np.save(inputs["npy"], sd["emb"].numpy())
    inputs["npz"] = os.path.join(folder, "arrays.npz")
    np.savez(inputs["npz"], **{name: t.numpy() for name, t in sd.items() if t.dtype != torch.bfloat16})
    return inputs


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tool", required=True, help="the tensorfile program")
    args = parser.parse_args()
    sd = weights()
    checked = 0
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        inputs = write_inputs(folder, sd)
        for label, path in inputs.items():
            for world in (2, 3, 4):
                text, how = rules_for(world)
                for even in ("tensor_split", "chunk"):
                    for rank in range(world):
                        out = os.path.join(folder, "part.pt")
                        command = [args.tool, "convert", path, out, "--world", str(world), "--rank", str(rank),
                                   "--split", text, "--even", even, "--quiet"]
                        run = subprocess.run(command, capture_output=True, text=True)
                        where = "%s world %d rank %d %s" % (label, world, rank, even)
                        if run.returncode != 0:
                            failures.append("%s: exit %d: %s" % (where, run.returncode, run.stderr.strip()))
                            continue
                        got = torch.load(out)
                        names = ["emb"] if label == "npy" else [n for n in sd if label != "npz" or n != "bf"]
                        if sorted(got) != sorted(names):
                            failures.append("%s: names %s, expected %s" % (where, sorted(got), sorted(names)))
                            continue
                        for name in names:
                            want = expected_part(sd[name], how[name], world, rank, even)
                            part = got[name]
                            if part.dtype != want.dtype or part.shape != want.shape or not torch.equal(part, want):
                                failures.append("%s: %s is %s %s, expected %s %s" % (
                                    where, name, part.dtype, tuple(part.shape), want.dtype, tuple(want.shape)))
                            checked += 1
    for failure in failures:
        print("FAIL " + failure)
    print("%d parts checked against torch, %d failures" % (checked, len(failures)))
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
