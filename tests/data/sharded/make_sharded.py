#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the sharded-checkpoint fixtures of tests/data/sharded with real torch (1.13), as transformers lays
out a pytorch_model.bin checkpoint: shards written by torch.save, the index by json.dumps(indent=2,
sort_keys=True). Run from anywhere: python3 tests/data/sharded/make_sharded.py"""
import collections
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(14)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2, bias=False))
    model.eval()
    state = model.state_dict()
    state["2.weight"] = state["2.weight"].to(torch.float16)
    state["extra.bf16"] = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    names = list(state)
    shards = [names[:3], names[3:6], names[6:]]
    folder = os.path.join(HERE, "torch_bin")
    os.makedirs(folder, exist_ok=True)
    weight_map, total = {}, 0
    for k, keys in enumerate(shards):
        name = f"pytorch_model-{k + 1:05d}-of-{len(shards):05d}.bin"
        torch.save(collections.OrderedDict((key, state[key].clone()) for key in keys), os.path.join(folder, name))
        for key in keys:
            weight_map[key] = name
            total += state[key].numel() * state[key].element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(folder, "pytorch_model.bin.index.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    # The whole state dict in one file, to compare the merged load with.
    torch.save(state, os.path.join(HERE, "torch_bin_full.pt"))


if __name__ == "__main__":
    main()
