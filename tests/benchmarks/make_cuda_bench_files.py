# SPDX-License-Identifier: MIT
# Writes the CUDA load benchmark's torch.save files; run with a python that has torch.
"""State dicts for tests/benchmarks/bench_cuda_load and run_cuda_bench.sh.

Writes into --out (existing files are kept unless --force):
  state_dict_4g.pt    OrderedDict of bf16/fp32 tensors shaped like a transformer's, 4 GiB of data
  state_dict_16g.pt   the same layout scaled to 16 GiB
--sizes picks which (default: 4g 16g).
"""
import argparse
import collections
import os

import torch

GIB = 1 << 30


def state_dict(total_bytes):
    """Transformer-like layers (attention, MLP, norms) in bf16 with fp32 norms until total_bytes."""
    hidden, mlp = 4096, 11008
    sd = collections.OrderedDict()
    done, layer = 0, 0
    sd["embed.weight"] = torch.ones(32000, hidden, dtype=torch.bfloat16)
    done += sd["embed.weight"].numel() * 2
    while done < total_bytes:
        p = f"layers.{layer}."
        for name, shape, dtype in (
            ("attn.q.weight", (hidden, hidden), torch.bfloat16),
            ("attn.k.weight", (hidden, hidden), torch.bfloat16),
            ("attn.v.weight", (hidden, hidden), torch.bfloat16),
            ("attn.o.weight", (hidden, hidden), torch.bfloat16),
            ("mlp.up.weight", (mlp, hidden), torch.bfloat16),
            ("mlp.gate.weight", (mlp, hidden), torch.bfloat16),
            ("mlp.down.weight", (hidden, mlp), torch.bfloat16),
            ("norm1.weight", (hidden,), torch.float32),
            ("norm2.weight", (hidden,), torch.float32),
        ):
            t = torch.empty(shape, dtype=dtype)
            t.fill_(float(layer % 7 + 1) / 8)
            n = t.numel() * t.element_size()
            if done + n > total_bytes and name.endswith("weight") and len(shape) == 2:
                rows = max(1, (total_bytes - done) // (shape[1] * t.element_size()))
                t = t[:rows].clone()
                n = t.numel() * t.element_size()
            sd[p + name] = t
            done += n
            if done >= total_bytes:
                break
        layer += 1
    return sd


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--sizes", nargs="+", default=["4g", "16g"])
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for size in args.sizes:
        path = os.path.join(args.out, f"state_dict_{size}.pt")
        if os.path.exists(path) and not args.force:
            print(f"kept {path}")
            continue
        sd = state_dict(int(size.rstrip("g")) * GIB)
        torch.save(sd, path + ".tmp")
        os.replace(path + ".tmp", path)
        print(f"wrote {path}: {len(sd)} tensors, {os.path.getsize(path) / GIB:.2f} GiB")
        del sd


if __name__ == "__main__":
    main()
