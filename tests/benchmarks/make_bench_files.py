# SPDX-License-Identifier: MIT
# Writes the load benchmark's torch.save files; run with a python that has torch (here /usr/bin/python3).
"""Benchmark files for tests/benchmarks/bench_load and run_load_bench.sh.

Writes into --out:
  big_2000.pt          OrderedDict state_dict: 2,000 float32 tensors, 1 GiB of data in all, varied shapes
  big_2000_64mib.pt    the same 2,000 tensors' shapes scaled to 64 MiB (mmap time must not depend on size)
  small_5000.pt        OrderedDict state_dict: 5,000 float32 tensors of 16 to 256 elements
  *_dict.pt            plain-dict copies of each, for libtorch's torch::pickle_load (no OrderedDict)
Existing files are kept unless --force.
"""
import argparse
import collections
import os
import random

import torch

GIB = 1 << 30


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


def save(sd, out, name, force):
    for path, obj in ((os.path.join(out, name + ".pt"), sd), (os.path.join(out, name + "_dict.pt"), dict(sd))):
        if os.path.exists(path) and not force:
            print(f"kept {path}")
            continue
        torch.save(obj, path + ".tmp")
        os.replace(path + ".tmp", path)
        print(f"wrote {path}: {os.path.getsize(path) / 2**20:.1f} MiB, {len(sd)} tensors")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory to write into (created)")
    parser.add_argument("--force", action="store_true", help="rewrite files that exist")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)

    big = sizes_totalling(2000, GIB // 4, rng)
    shapes_rng_state = rng.getstate()
    save(state_dict(big, rng, "layers"), args.out, "big_2000", args.force)
    rng.setstate(shapes_rng_state)
    save(state_dict(sizes_totalling(2000, GIB // 16 // 4, random.Random(args.seed)), rng, "layers"),
         args.out, "big_2000_64mib", args.force)
    small = [rng.randint(1, 16) * 16 for _ in range(5000)]
    save(state_dict(small, rng, "blocks"), args.out, "small_5000", args.force)


if __name__ == "__main__":
    main()
