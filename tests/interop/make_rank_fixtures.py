#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fixtures of tensor-parallel loads to several devices (tests/cuda/ring/test_ring_ranks.cpp): weights written by
torch.save, and every rank's part of each as torch itself cuts it, for groups of 1 to 4 ranks.

    /usr/bin/python3 tests/interop/make_rank_fixtures.py --out tests/data/ranks

weights.pt holds the weights (one zip record each; `transposed` a view with strides of its own, `scalar` 0-d).
parts.pt holds "<world>/<even>/<rank>/<name>" -> the part, contiguous: t.tensor_split(world, dim)[rank] (even
"tensor_split"), t.chunk(world, dim)[rank] or an empty narrow where chunk gives the rank none (even "chunk"),
t.split(sizes, dim)[rank] for the explicit sizes, t itself for the replicated ones. The rules, as
parse_parallel_rules() reads them, are rules_for(world) below; the test spells them the same.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_parallel_with_torch import expected_part  # noqa: E402  (the one copy of torch's cut)


def weights():
    torch.manual_seed(44)
    return {
        "q.weight": torch.randn(10, 6),                        # dim 0, uneven for 3 and 4
        "o.weight": torch.randn(6, 10),                        # dim 1: a run per row
        "bias": torch.randn(10),
        "norm": torch.randn(6),                                # replicated
        "tiny": torch.arange(10, dtype=torch.int64).reshape(2, 5),  # dim 0: ranks 2 and 3 of 4 get nothing
        "int": torch.arange(5 * 3 * 4, dtype=torch.int32).reshape(5, 3, 4),  # the middle dimension
        "half": torch.randn(7, 9).to(torch.float16),           # dim -1
        "transposed": torch.randn(6, 4).t(),                   # strides of its own: read on the host
        "scalar": torch.tensor(3.5, dtype=torch.float64),      # 0-d, replicated
        "sizes": torch.randn(8, 3),                            # explicit sizes
        "wide": torch.randn(300, 20),                          # dim 1: many runs, gaps shorter than a page
    }


def sizes_for(world):
    return [5, 3] if world == 2 else [8] + [0] * (world - 1)


def rules_for(world):
    return {"q.weight": (0, None), "o.weight": (1, None), "bias": (0, None), "norm": None, "tiny": (0, None),
            "int": (1, None), "half": (-1, None), "transposed": (0, None), "scalar": None,
            "sizes": (0, sizes_for(world)), "wide": (1, None)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    sd = weights()
    torch.save(sd, os.path.join(out, "weights.pt"))
    parts = {}
    for world in (1, 2, 3, 4):
        how = rules_for(world)
        for even in ("tensor_split", "chunk"):
            for rank in range(world):
                for name, tensor in sd.items():
                    parts["%d/%s/%d/%s" % (world, even, rank, name)] = expected_part(tensor, how[name], world, rank,
                                                                                    even).contiguous().clone()
    torch.save(parts, os.path.join(out, "parts.pt"))


if __name__ == "__main__":
    main()
