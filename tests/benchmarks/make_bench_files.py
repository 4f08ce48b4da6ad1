# SPDX-License-Identifier: MIT
# Writes the load benchmark's files in every format; run with a python that has torch (here /usr/bin/python3).
"""Benchmark files for tests/benchmarks/bench_load and run_load_bench.sh.

Writes into --out, for each size SET (big_2000: 1 GiB of float32 data in 2,000 tensors of varied shapes;
big_2000_64mib: the same shapes scaled to 64 MiB, so that mmap time can be seen not to depend on size):
  SET.pt                  torch.save of an OrderedDict state_dict (zip format)
  SET_dict.pt             a plain-dict copy, for libtorch's torch::pickle_load (no OrderedDict)
  SET.safetensors         the same tensors, one safetensors file
  SET_st_shards/          model-0000K-of-00004.safetensors and model.safetensors.index.json (Hugging Face index)
  SET_bin_shards/         pytorch_model-0000K-of-00004.bin (torch.save zips) and pytorch_model.bin.index.json
  SET.npy                 every tensor's data as one float32 array (rows of 1,024)
  SET.npz                 numpy.savez (stored, not compressed) of the tensors, one member each
  SET_tensordict/         a tensordict memmap tree: layers/<block>/w<k>.memmap leaves and a meta.json per level
  SET.gguf                the tensors as GGUF version 3 F32 tensors, aligned to 32 (no metadata)
and small_5000.pt (+ _dict.pt): an OrderedDict of 5,000 float32 tensors of 16 to 256 elements.
--quick writes the 64 MiB set and the small file only; --torch-only the .pt files alone. Existing files are kept
unless --force.
"""
import argparse
import collections
import json
import os
import random
import shutil

import numpy as np
import torch

GIB = 1 << 30
SHARDS = 4


def sizes_totalling(count, total_elements, rng, quantum=64):
    """`count` element counts, multiples of `quantum`, spread over two decades, summing to total_elements."""
    weights = [10 ** rng.uniform(0, 2) for _ in range(count)]
    scale = total_elements / sum(weights)
    sizes = [max(quantum, int(w * scale) // quantum * quantum) for w in weights]
    sizes[-1] += total_elements - sum(sizes)
    assert sizes[-1] > 0 and sum(sizes) == total_elements
    return sizes


def shape_of(numel, rng):
    """A 1-D, 2-D or 4-D shape (bias, linear, conv) holding exactly `numel` elements."""
    kind = rng.randrange(4)
    if kind == 0 or numel % 64:
        return (numel,)
    if kind == 3 and numel % (64 * 9) == 0:
        return (64, numel // (64 * 9), 3, 3)
    cols = rng.choice([c for c in (64, 128, 256, 512, 1024) if numel % c == 0])
    return (numel // cols, cols)


def state_dict(sizes, rng, prefix):
    sd = collections.OrderedDict()
    for i, numel in enumerate(sizes):
        sd[f"{prefix}.{i // 4}.w{i % 4}"] = torch.randn(shape_of(numel, rng), dtype=torch.float32)
    sd._metadata = collections.OrderedDict((f"{prefix}.{i}", {"version": 1}) for i in range((len(sizes) + 3) // 4))
    return sd


def replace_into(path, write):
    """Runs write(tmp) and renames tmp to `path`, so that an interrupted run leaves no partial file or tree."""
    tmp = path + ".tmp"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    write(tmp)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.replace(tmp, path)


def size_of(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def nbytes(t):
    return t.numel() * t.element_size()


def write_safetensors(tensors, path):
    """The safetensors layout: an 8-byte little-endian header length, the JSON header padded with spaces to a
    multiple of 8, then every tensor's bytes in the header's order."""
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + nbytes(t)]}
        offset += nbytes(t)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(len(text).to_bytes(8, "little"))
        out.write(text)
        for t in tensors.values():
            out.write(memoryview(t.numpy()).cast("B"))


def split_shards(sd):
    """The state dict's names in SHARDS runs of about equal bytes, in order."""
    total = sum(nbytes(t) for t in sd.values())
    shards, done = [[] for _ in range(SHARDS)], 0
    for name, t in sd.items():
        shards[min(SHARDS - 1, done * SHARDS // total)].append(name)
        done += nbytes(t)
    return [s for s in shards if s]


def write_sharded(sd, folder, pattern, index_name, save_one):
    """A Hugging Face sharded checkpoint: the shards named by `pattern` and the index mapping names to them."""
    os.makedirs(folder)
    shards = split_shards(sd)
    weight_map = {}
    for k, names in enumerate(shards):
        shard = pattern.format(k + 1, len(shards))
        save_one(collections.OrderedDict((n, sd[n]) for n in names), os.path.join(folder, shard))
        weight_map.update((n, shard) for n in names)
    index = {"metadata": {"total_size": sum(nbytes(t) for t in sd.values())}, "weight_map": weight_map}
    with open(os.path.join(folder, index_name), "w") as out:
        json.dump(index, out, indent=2)


def write_tensordict(sd, folder):
    """tensordict's memmap layout (as TensorDict.memmap writes it): per level a meta.json naming each leaf's dtype
    and shape, or "TensorDict" for a sub-tree; each leaf's raw bytes in <key>.memmap. The names' dots become
    levels: layers.12.w3 -> layers/12/w3.memmap."""
    tree = {}
    for name, t in sd.items():
        node = tree
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = t

    def write_level(node, where):
        os.makedirs(where, exist_ok=True)
        meta = {}
        for key, value in node.items():
            if isinstance(value, dict):
                write_level(value, os.path.join(where, key))
                meta[key] = {"type": "TensorDict"}
            else:
                value.numpy().tofile(os.path.join(where, key + ".memmap"))
                meta[key] = {"device": "cpu", "shape": list(value.shape), "dtype": "torch.float32", "is_nested": False}
        meta.update({"shape": [], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})
        with open(os.path.join(where, "meta.json"), "w") as out:
            json.dump(meta, out)

    write_level(tree, folder)


def write_npy(sd, path):
    with open(path, "wb") as out:
        np.save(out, torch.cat([t.reshape(-1) for t in sd.values()]).numpy().reshape(-1, 1024))


def write_npz(sd, path):
    # numpy.savez adds ".npz" to a name without it; the temporary name keeps it.
    np.savez(path + ".npz", **{name: t.numpy() for name, t in sd.items()})
    os.replace(path + ".npz", path)


def write_gguf(sd, path):
    """GGUF version 3: the magic, version, tensor and key-value counts, then each tensor's info (name, dimensions
    innermost first, ggml type 0 = F32, offset in the data section), the data section aligned to 32 and each
    tensor's bytes at its offset (multiples of 32 here: every size is a multiple of 64 elements)."""
    alignment = 32
    with open(path, "wb") as out:
        out.write(b"GGUF" + (3).to_bytes(4, "little") + len(sd).to_bytes(8, "little") + (0).to_bytes(8, "little"))
        offset = 0
        for name, t in sd.items():
            encoded = name.encode()
            out.write(len(encoded).to_bytes(8, "little") + encoded + t.dim().to_bytes(4, "little"))
            for extent in reversed(t.shape):
                out.write(int(extent).to_bytes(8, "little"))
            out.write((0).to_bytes(4, "little") + offset.to_bytes(8, "little"))
            offset += -(-nbytes(t) // alignment) * alignment
        out.write(b"\0" * (-out.tell() % alignment))
        for t in sd.values():
            out.write(memoryview(t.numpy()).cast("B"))
            out.write(b"\0" * (-nbytes(t) % alignment))


def formats(sd):
    """(suffix, writer) for every format of one set."""
    return [
        (".pt", lambda p: torch.save(sd, p)),
        ("_dict.pt", lambda p: torch.save(dict(sd), p)),
        (".safetensors", lambda p: write_safetensors(sd, p)),
        ("_st_shards", lambda p: write_sharded(sd, p, "model-{:05d}-of-{:05d}.safetensors",
                                               "model.safetensors.index.json", write_safetensors)),
        ("_bin_shards", lambda p: write_sharded(sd, p, "pytorch_model-{:05d}-of-{:05d}.bin",
                                                "pytorch_model.bin.index.json", torch.save)),
        (".npy", lambda p: write_npy(sd, p)),
        (".npz", lambda p: write_npz(sd, p)),
        ("_tensordict", lambda p: write_tensordict(sd, p)),
        (".gguf", lambda p: write_gguf(sd, p)),
    ]


def save_set(make_sd, out, name, force, suffixes=None):
    """Writes the files of set `name` that are missing (all with `force`); `make_sd` runs only when one is."""
    sd = None
    for suffix, _ in formats({}):
        if suffixes is not None and suffix not in suffixes:
            continue
        path = os.path.join(out, name + suffix)
        if os.path.exists(path) and not force:
            print(f"kept {path}")
            continue
        if sd is None:
            sd = make_sd()
        replace_into(path, dict(formats(sd))[suffix])
        print(f"wrote {path}: {size_of(path) / 2**20:.1f} MiB, {len(sd)} tensors")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory to write into (created)")
    parser.add_argument("--force", action="store_true", help="rewrite files that exist")
    parser.add_argument("--quick", action="store_true", help="only the 64 MiB set and the small file")
    parser.add_argument("--torch-only", action="store_true", help="only the torch files (SET.pt, SET_dict.pt)")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    def make(total_bytes):
        # Each set's shapes come from the seed alone, so that both sets hold the same 2,000 tensors scaled.
        rng = random.Random(args.seed)
        sizes = sizes_totalling(2000, GIB // 4, rng)
        shapes_rng_state = rng.getstate()
        if total_bytes != GIB:
            sizes = sizes_totalling(2000, total_bytes // 4, random.Random(args.seed))
        rng.setstate(shapes_rng_state)
        torch.manual_seed(args.seed)
        return state_dict(sizes, rng, "layers")

    torch_files = {".pt", "_dict.pt"}
    suffixes = torch_files if args.torch_only else None
    if not args.quick:
        save_set(lambda: make(GIB), args.out, "big_2000", args.force, suffixes)
    save_set(lambda: make(GIB // 16), args.out, "big_2000_64mib", args.force, suffixes)

    def small():
        rng = random.Random(args.seed + 1)
        torch.manual_seed(args.seed + 1)
        return state_dict([rng.randint(1, 16) * 16 for _ in range(5000)], rng, "blocks")

    save_set(small, args.out, "small_5000", args.force, torch_files)


if __name__ == "__main__":
    main()
