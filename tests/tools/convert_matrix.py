#!/usr/bin/python3
"""convert between every pair of formats (issue 39, item 14), each output read by its real peer.

    /usr/bin/python3 tests/tools/convert_matrix.py --tensorfile BUILD/tools/tensorfile/tensorfile --data tests/data

Sources: a torch.save zip and legacy file, an np.savez archive and an np.save file (written here by torch and
numpy), a safetensors file of the reference implementation (tests/data/safetensors), a sharded safetensors
checkpoint (the torch-written tests/data/sharded/torch_bin shards, resharded by the tool: its index and its
directory), and a tensordict tree of real tensordict (tests/data/tensordict/s02_dtypes: bfloat16 and complex too).
Targets: pt, npz, npy, safetensors, sharded safetensors and memmap. Outputs are read by torch.load, numpy.load,
the stdlib safetensors reader of sharded_cli_tests.py, and trees by inspect --json --hash (no Python tensordict
here). Every source tensor must come out with its dtype, shape and bytes, or be named "left out" on stderr; a
source the target holds whole must give no loss line; each conversion with a loss is rerun with --strict, which
must exit 1 and leave no file or directory. Then a training checkpoint (epoch, lr, an optimizer, a scheduler, int
keys) into the flat formats, and a source of many tensors into .npy.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import tempfile

import numpy
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_tests import Failures, run  # noqa: E402
from sharded_cli_tests import read_safetensors  # noqa: E402

# torch 1.13 has no uint16/uint32: a tensor of these cannot be checked by torch here.
TORCH_VIEW = {torch.bfloat16: torch.int16, torch.bool: torch.uint8}


def torch_record(t):
    """(dtype name, shape, sha256 of the values in C order, little-endian) as inspect --hash gives them."""
    t = t.detach().contiguous()
    raw = t.view(TORCH_VIEW[t.dtype]) if t.dtype in TORCH_VIEW else t
    data = raw.numpy().tobytes() if t.numel() else b""
    return str(t.dtype).replace("torch.", ""), list(t.shape), hashlib.sha256(data).hexdigest()


def numpy_record(a):
    return torch_record(torch.from_numpy(a.copy(order="C")))  # ascontiguousarray makes 0-d 1-d


def flat(value, prefix=""):
    """{path: tensor} of a torch object tree, keys and indices joined by "/" as the tool names them."""
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    out = {}
    for key, item in items:
        out.update(flat(item, f"{prefix}/{key}" if prefix else str(key)))
    return out


def read_output(tool, target, path):
    """{name: record} of an output, read by the real peer (trees by the tool's inspect)."""
    if target == "pt":
        return {k: torch_record(v) for k, v in flat(torch.load(path)).items()}
    if target == "npz":
        with numpy.load(path) as archive:
            return {k: numpy_record(archive[k]) for k in archive.files}
    if target == "npy":
        return {"(the array)": numpy_record(numpy.load(path))}
    if target == "safetensors":
        return {k: torch_record(v) for k, v in read_safetensors(path)[1].items()}
    if target == "sharded":
        index = os.path.join(path, "model.safetensors.index.json")
        files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else \
            ["model.safetensors"]
        out = {}
        for name in files:
            out.update({k: torch_record(v) for k, v in read_safetensors(os.path.join(path, name))[1].items()})
        return out
    described = json.loads(run(tool, "inspect", "--json", "--hash", path).stdout)
    return {t["path"]: (t["dtype"], t["shape"], t["sha256"]) for t in described["tensors"]}


def sources(tool, data, scratch, failures):
    """(name, path, {tensor name: record}) of every source kind."""
    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "d": torch.tensor([1.5, -2.25]),
             "h": torch.tensor([0.5, 1.0, -3.0], dtype=torch.float16), "i": torch.tensor([-7, 2**40]),
             "i32": torch.tensor([3, -4], dtype=torch.int32), "i8": torch.tensor([-1, 5], dtype=torch.int8),
             "u8": torch.tensor([0, 255], dtype=torch.uint8), "b": torch.tensor([True, False, True]),
             "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4)}
    want = {k: torch_record(v) for k, v in state.items()}
    out = []
    pt = os.path.join(scratch, "src_zip.pt")
    torch.save(state, pt)
    out.append(("pt-zip", pt, want))
    legacy = os.path.join(scratch, "src_legacy.pt")
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    out.append(("pt-legacy", legacy, want))
    npz = os.path.join(scratch, "src.npz")
    numpy.savez(npz, **{k: v.numpy() for k, v in state.items()})
    out.append(("npz", npz, want))
    npy = os.path.join(scratch, "src_array.npy")
    numpy.save(npy, state["w"].numpy())
    out.append(("npy", npy, {"src_array": want["w"]}))
    single = os.path.join(data, "safetensors", "f.safetensors")
    out.append(("safetensors", single, {k: torch_record(v) for k, v in read_safetensors(single)[1].items()}))
    bins = os.path.join(data, "sharded", "torch_bin")
    index = json.load(open(os.path.join(bins, "pytorch_model.bin.index.json")))
    sharded_want = {}
    for shard in sorted(set(index["weight_map"].values())):
        sharded_want.update({k: torch_record(v) for k, v in torch.load(os.path.join(bins, shard)).items()})
    sharded = os.path.join(scratch, "src_sharded")
    result = run(tool, "convert", os.path.join(bins, "pytorch_model.bin.index.json"), sharded, "--to", "safetensors",
                 "--max-shard-size", "40B")
    if failures.check(result.returncode == 0 and os.path.isfile(os.path.join(sharded, "model.safetensors.index.json")),
                      f"making the sharded source: {result.stderr}"):
        out.append(("sharded-index", os.path.join(sharded, "model.safetensors.index.json"), sharded_want))
        out.append(("sharded-dir", sharded, sharded_want))
    tree = os.path.join(data, "tensordict", "s02_dtypes")
    out.append(("tensordict", tree, read_output(tool, "memmap", tree)))
    return out


TARGETS = (("pt", "out.pt", []), ("npz", "out.npz", []), ("npy", "out.npy", []),
           ("safetensors", "out.safetensors", []), ("sharded", "out_shards", ["--to", "safetensors",
                                                                             "--max-shard-size", "16B"]),
           ("memmap", "out_tree", []))
# The dtypes each target has no name for (NumPy: bfloat16; safetensors: complex128).
LACKS = {"npz": ("bfloat16",), "npy": ("bfloat16",), "safetensors": ("complex128",), "sharded": ("complex128",)}
LEFT_OUT = re.compile(r"^tensorfile convert: left out (\S+): ", re.M)
LOSS = re.compile(r"^tensorfile convert: (left out|changed) ", re.M)


def check_matrix(tool, data, scratch, failures):
    for source_name, source, want in sources(tool, data, scratch, failures):
        for target, out_name, extra in TARGETS:
            what = f"{source_name} -> {target}"
            out = os.path.join(scratch, f"{source_name}_{out_name}")
            result = run(tool, "convert", source, out, "--quiet", *extra)
            if target == "npy" and len(want) != 1:
                failures.check(result.returncode == 1 and "a .npy file holds one array; expected 1 tensor, got "
                               in result.stderr and not os.path.exists(out),
                               f"{what}: {len(want)} tensors: exit {result.returncode}: {result.stderr}")
                continue
            if not failures.check(result.returncode == 0 and os.path.exists(out),
                                  f"{what}: exit {result.returncode}: {result.stderr}"):
                continue
            got = read_output(tool, target, out)
            left_out = set(LEFT_OUT.findall(result.stderr))
            if target == "npy":
                failures.check(list(got.values()) == list(want.values()), f"{what}: {got} != {want}")
            else:
                for name, record in want.items():
                    if name in left_out:
                        failures.check(name not in got, f"{what}: {name} named left out, but written")
                        continue
                    failures.check(got.get(name) == record, f"{what}: {name}: {got.get(name)}, expected {record}")
                failures.check(set(got) <= set(want), f"{what}: names the source lacks: {set(got) - set(want)}")
            # Each tensor of a dtype the target lacks is named left out, and nothing else is lost from a flat source.
            lacking = {name for name, record in want.items() if record[0] in LACKS.get(target, ())}
            failures.check(left_out == lacking, f"{what}: left out {sorted(left_out)}, expected {sorted(lacking)}")
            if source_name != "tensordict":
                failures.check(len(LOSS.findall(result.stderr)) == len(lacking),
                               f"{what}: a loss reported:\n{result.stderr}")
            if LOSS.search(result.stderr):
                os.makedirs(os.path.join(scratch, "strict"), exist_ok=True)
                strict_out = os.path.join(scratch, "strict", os.path.basename(out))
                strict = run(tool, "convert", source, strict_out, "--quiet", "--strict", *extra)
                failures.check(strict.returncode == 1 and "--strict: the conversion would leave out or change" in
                               strict.stderr and not os.path.exists(strict_out),
                               f"{what} --strict: exit {strict.returncode}, exists {os.path.exists(strict_out)}: "
                               f"{strict.stderr}")


def check_checkpoint(tool, scratch, failures):
    """A training checkpoint into the flat formats: each value left out is named; --strict writes nothing."""
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 3)
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                  "scheduler": scheduler.state_dict(), "epoch": 7, "lr": 0.25, 3: torch.ones(2)}
    source = os.path.join(scratch, "ckpt.pt")
    torch.save(checkpoint, source)
    tensors = {k: torch_record(v) for k, v in flat(checkpoint).items()}
    for target, out_name in (("safetensors", "ckpt.safetensors"), ("npz", "ckpt.npz")):
        out = os.path.join(scratch, out_name)
        strict = run(tool, "convert", source, out, "--strict")
        failures.check(strict.returncode == 1 and not os.path.exists(out) and "nothing was written" in strict.stderr,
                       f"checkpoint -> {target} --strict: exit {strict.returncode}: {strict.stderr}")
        result = run(tool, "convert", source, out)
        if not failures.check(result.returncode == 0, f"checkpoint -> {target}: {result.stderr}"):
            continue
        for path in ("epoch: int 7", "lr: float 0.25", "scheduler/step_size: int 3",
                     "optimizer/param_groups/0/lr: float 0.001"):
            failures.check(f"tensorfile convert: left out {path} ({target} holds only tensors)" in result.stderr,
                           f"checkpoint -> {target}: {path} not named:\n{result.stderr}")
        for path in ("model: OrderedDict", "optimizer: dict", "3: an int key, written as the name \"3\""):
            failures.check(f"tensorfile convert: changed {path}" in result.stderr,
                           f"checkpoint -> {target}: change of {path} not named:\n{result.stderr}")
        failures.check(strict.stderr.count("\n") == result.stderr.count("\n") + 1,
                       f"checkpoint -> {target}: --strict names other losses:\n{strict.stderr}")
        got = read_output(tool, target, out)
        failures.check(got == tensors, f"checkpoint -> {target}: {sorted(got)} != {sorted(tensors)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tensorfile", required=True)
    parser.add_argument("--data", required=True)
    opts = parser.parse_args()
    failures = Failures()
    with tempfile.TemporaryDirectory() as scratch:
        check_matrix(opts.tensorfile, opts.data, scratch, failures)
        check_checkpoint(opts.tensorfile, scratch, failures)
    for item in failures.items:
        print(f"FAIL: {item}")
    print(f"convert matrix: {len(failures.items)} failure(s)")
    return 1 if failures.items else 0


if __name__ == "__main__":
    sys.exit(main())
