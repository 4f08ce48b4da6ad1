#!/usr/bin/python3
"""Tests of the tensorfile program on safetensors files and sharded checkpoints, checked by real torch (1.13)
and a safetensors reader written here on the Python standard library (the safetensors package is not needed).

    /usr/bin/python3 tests/tools/sharded_cli_tests.py --tensorfile BUILD/tools/tensorfile/tensorfile --data tests/data

- convert the torch-written pytorch_model.bin shards (tests/data/sharded/torch_bin) to sharded safetensors with
  --max-shard-size; the index text must be what transformers writes (json.dumps(indent=2, sort_keys=True)), every
  shard must parse with the reader here and hold exactly the values torch.load finds in the .bin shards, and the
  shard split must follow huggingface_hub's rule; then back to one torch file (torch.load compares) and to a
  memmap tree (inspect compares)
- convert a torch file to one .safetensors file; tied weights are reported and recorded in __metadata__
- inspect --json names the format (safetensors, safetensors-sharded, torch-zip-sharded); verify of clean and
  damaged checkpoints (a shard missing a listed tensor, a shard path leaving the directory)
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_tests import Failures, run  # noqa: E402  (the other drivers' helpers)

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool, "C64": torch.complex64}


def read_safetensors(path):
    """(metadata, {name: tensor}) of a .safetensors file, parsed here; checks the tiling as the reference does."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", None)
    buffer = data[8 + n:]
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, stop = info["data_offsets"]
        assert begin == end, f"{path}: {name} starts at {begin}, expected {end}"
        end = stop
        raw = bytearray(buffer[begin:stop])
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(info["shape"])
    assert end == len(buffer), f"{path}: the data section has {len(buffer)} bytes, the tensors cover {end}"
    return metadata, tensors, n


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def hf_split(sizes, max_size):
    """huggingface_hub's split_state_dict_into_shards_factory, restated: lists of names per shard."""
    shards, current, current_size = [], [], 0
    for name, size in sizes:
        if size > max_size:
            shards.append([name])
            continue
        if current_size + size > max_size:
            shards.append(current)
            current, current_size = [], 0
        current.append(name)
        current_size += size
    if current:
        shards.append(current)
    return shards


def check_sharded_conversion(opts, failures, scratch):
    tool, source = opts.tensorfile, os.path.join(opts.data, "sharded", "torch_bin")
    with open(os.path.join(source, "pytorch_model.bin.index.json")) as f:
        bin_index = json.load(f)
    expected = {}
    for shard in sorted(set(bin_index["weight_map"].values())):
        expected.update(torch.load(os.path.join(source, shard)))
    out = os.path.join(scratch, "st")
    result = run(tool, "convert", os.path.join(source, "pytorch_model.bin.index.json"), out, "--to", "safetensors",
                 "--max-shard-size", "40B")
    if not failures.check(result.returncode == 0, f"convert index -> safetensors: {result.stderr}"):
        return
    with open(os.path.join(out, "model.safetensors.index.json")) as f:
        text = f.read()
    index = json.loads(text)
    failures.check(text == json.dumps(index, indent=2, sort_keys=True) + "\n",
                   f"the index is not laid out as transformers writes it:\n{text}")
    total = sum(t.numel() * t.element_size() for t in expected.values())
    failures.check(index["metadata"] == {"total_size": total}, f"metadata {index['metadata']}, total {total}")
    # The order the tool saw the tensors in: the merged load follows the index (sorted names).
    order = list(bin_index["weight_map"])
    split = hf_split([(k, expected[k].numel() * expected[k].element_size()) for k in order], 40)
    files = sorted(set(index["weight_map"].values()))
    failures.check(files == [f"model-{i + 1:05d}-of-{len(split):05d}.safetensors" for i in range(len(split))],
                   f"shard files {files}, expected {len(split)} as huggingface_hub names them")
    for i, names in enumerate(split):
        for name in names:
            failures.check(index["weight_map"].get(name) == files[i] if i < len(files) else False,
                           f"{name} is in {index['weight_map'].get(name)}, huggingface_hub's split puts it in shard "
                           f"{i + 1}")
    got = {}
    for name in files:
        metadata, tensors, header_bytes = read_safetensors(os.path.join(out, name))
        failures.check(metadata == {"format": "pt"}, f"{name}: __metadata__ {metadata}")
        failures.check(header_bytes % 8 == 0, f"{name}: header of {header_bytes} bytes is not padded to 8")
        for key in tensors:
            failures.check(index["weight_map"].get(key) == name, f"{key} is in {name}, the index says otherwise")
        got.update(tensors)
    failures.check(set(got) == set(expected), f"names {sorted(got)}, expected {sorted(expected)}")
    for key, tensor in expected.items():
        failures.check(key in got and same(got[key], tensor), f"{key}: safetensors shard differs from torch's .bin")

    # and back: one torch file torch.load reads, and a memmap tree
    back = os.path.join(scratch, "back.pt")
    result = run(tool, "convert", out, back)
    if failures.check(result.returncode == 0, f"convert sharded safetensors -> torch: {result.stderr}"):
        loaded = torch.load(back)
        failures.check(list(loaded) == order, f"torch file order {list(loaded)}, expected the index's {order}")
        for key, tensor in expected.items():
            failures.check(key in loaded and same(loaded[key], tensor), f"{key}: the torch file differs")
    tree = os.path.join(scratch, "tree")
    result = run(tool, "convert", os.path.join(out, "model.safetensors.index.json"), tree, "--to", "memmap")
    if failures.check(result.returncode == 0 and os.path.isfile(os.path.join(tree, "meta.json")),
                      f"convert sharded safetensors -> memmap: {result.stderr}"):
        described = json.loads(run(tool, "inspect", "--json", "--hash", tree).stdout)
        reference = json.loads(run(tool, "inspect", "--json", "--hash", out).stdout)
        failures.check([t["sha256"] for t in described["tensors"]] == [t["sha256"] for t in reference["tensors"]],
                       "the memmap tree's values differ from the shards'")
    # One shard when everything fits: model.safetensors and no index, as the Hugging Face tools write.
    single = os.path.join(scratch, "single")
    result = run(tool, "convert", source, single, "--to", "safetensors")
    failures.check(result.returncode == 0 and sorted(os.listdir(single)) == ["model.safetensors"],
                   f"convert to one shard: {result.stderr} {os.listdir(single) if os.path.isdir(single) else ''}")


def check_single_file(opts, failures, scratch):
    tool = opts.tensorfile
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
    model[1].weight = model[0].weight  # tied weights, as language models tie embeddings
    state = model.state_dict()
    source = os.path.join(scratch, "tied.pt")
    torch.save(state, source)
    out = os.path.join(scratch, "tied.safetensors")
    result = run(tool, "convert", source, out)
    if not failures.check(result.returncode == 0, f"convert tied.pt: {result.stderr}"):
        return
    failures.check("shared tensors: 1.weight is 0.weight (the same view)" in result.stderr,
                   f"the tied weights were not reported: {result.stderr!r}")
    metadata, tensors, _ = read_safetensors(out)
    failures.check(metadata == {"format": "pt", "1.weight": "0.weight"}, f"__metadata__ {metadata}")
    failures.check(list(tensors) == ["0.weight"] and same(tensors["0.weight"], state["0.weight"]),
                   f"tensors {list(tensors)}")
    described = json.loads(run(tool, "inspect", "--json", out).stdout)
    failures.check(described["format"] == "safetensors", f"inspect --json format {described['format']}")


def check_formats_and_verify(opts, failures, scratch):
    tool, data = opts.tensorfile, opts.data
    for path, name in ((os.path.join(data, "sharded", "torch_bin"), "torch-zip-sharded"),
                       (os.path.join(data, "safetensors", "samples.safetensors.index.json"), "safetensors-sharded"),
                       (os.path.join(data, "safetensors", "overall.safetensors"), "safetensors")):
        result = run(tool, "inspect", "--json", path)
        ok = failures.check(result.returncode == 0, f"inspect --json {path}: {result.stderr}")
        if ok:
            failures.check(json.loads(result.stdout)["format"] == name, f"inspect --json {path}: not {name}")
        result = run(tool, "verify", path)
        failures.check(result.returncode == 0 and f": OK: {name}" in result.stdout,
                       f"verify {path}: exit {result.returncode}: {result.stdout}{result.stderr}")
    broken = os.path.join(scratch, "broken")
    shutil.copytree(os.path.join(data, "sharded", "torch_bin"), broken)
    index_path = os.path.join(broken, "pytorch_model.bin.index.json")
    with open(index_path) as f:
        index = json.load(f)
    index["weight_map"]["ghost"] = "pytorch_model-00002-of-00003.bin"
    with open(index_path, "w") as f:
        json.dump(index, f)
    result = run(tool, "verify", broken)
    failures.check(result.returncode == 1 and "tensor \"ghost\" is listed in the index but missing" in result.stderr,
                   f"verify of an index listing a missing tensor: {result.returncode}: {result.stderr}")
    # One name listed but missing and one held but unlisted: verify reports both (issue 39 saw only one).
    del index["weight_map"]["0.weight"]
    with open(index_path, "w") as f:
        json.dump(index, f)
    result = run(tool, "verify", broken)
    failures.check(result.returncode == 1 and "tensor \"ghost\" is listed in the index but missing" in result.stderr
                   and "holds tensor \"0.weight\", which the index does not list" in result.stderr
                   and "(or --allow-unlisted)" in result.stderr and ": 2 errors found" in result.stderr,
                   f"verify of an index with a missing and an unlisted tensor: {result.returncode}: {result.stderr}")
    result = run(tool, "verify", "--allow-unlisted", broken)
    failures.check(result.returncode == 1 and "\"ghost\" is listed in the index but missing" in result.stderr
                   and "0.weight" not in result.stderr and ": 1 error found" in result.stderr,
                   f"verify --allow-unlisted: {result.returncode}: {result.stderr}")
    # A hidden temporary a killed save left: verify and scan of the folder note it; the verdict is unchanged.
    leftover = os.path.join(broken, ".pytorch_model-00001-of-00003.bin.tmp-0123456789abcdef")
    shutil.copyfile(os.path.join(broken, "pytorch_model-00001-of-00003.bin"), leftover)
    result = run(tool, "scan", broken)
    failures.check(result.returncode == 0 and f"NOTE: {leftover} is a temporary an interrupted save left"
                   in result.stdout, f"scan of a folder with a leftover temporary: {result.stdout}")
    os.remove(leftover)
    clean = os.path.join(scratch, "clean")
    shutil.copytree(os.path.join(data, "sharded", "torch_bin"), clean)
    leftover = os.path.join(clean, ".pytorch_model-00002-of-00003.bin.tmp-fedcba9876543210")
    with open(leftover, "wb") as f:
        f.write(b"\0" * 64)
    result = run(tool, "verify", clean)
    failures.check(result.returncode == 0 and f"NOTE: {leftover} is a temporary an interrupted save left" in
                   result.stdout and ": OK: " in result.stdout,
                   f"verify of a folder with a leftover temporary: {result.returncode}: {result.stdout}{result.stderr}")
    index["weight_map"]["0.weight"] = "pytorch_model-00001-of-00003.bin"
    del index["weight_map"]["ghost"]
    index["weight_map"]["0.bias"] = "../torch_bin/pytorch_model-00001-of-00003.bin"
    with open(index_path, "w") as f:
        json.dump(index, f)
    result = run(tool, "inspect", broken)
    failures.check(result.returncode == 1 and "leaves the index's directory" in result.stderr,
                   f"inspect of a shard path leaving the directory: {result.returncode}: {result.stderr}")
    result = run(tool, "convert", broken, os.path.join(scratch, "x.pt"), "--max-shard-size", "5XB")
    failures.check(result.returncode == 2 and "--max-shard-size takes a size such as 5GB" in result.stderr,
                   f"a bad --max-shard-size: {result.returncode}: {result.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensorfile", required=True)
    ap.add_argument("--data", required=True)
    opts = ap.parse_args()
    opts.tensorfile, opts.data = os.path.abspath(opts.tensorfile), os.path.abspath(opts.data)
    failures = Failures()
    with tempfile.TemporaryDirectory() as scratch:
        check_sharded_conversion(opts, failures, scratch)
        check_single_file(opts, failures, scratch)
        check_formats_and_verify(opts, failures, scratch)
    for failure in failures.items:
        print("FAIL:", failure)
    print(f"sharded: {len(failures.items)} failure(s)" if failures.items else "sharded: all passed")
    return 1 if failures.items else 0


if __name__ == "__main__":
    sys.exit(main())
