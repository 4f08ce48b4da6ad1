#!/usr/bin/python3
"""The tensorfile program checked by real torch (CTest: cli.torch, label interop).

    /usr/bin/python3 tests/tools/convert_with_torch.py --tensorfile BUILD/tools/tensorfile/tensorfile \\
        --data tests/data

For every fixture in tests/data/torch and tests/data/torch_gen, torch.load (through
tests/interop/torch_reference.py) describes:
  - the fixture, against `tensorfile inspect --json --hash` of it: equal (compare_reference.py's rules);
  - `tensorfile convert F OUT.pt` (a clean re-save): equal to the fixture, less the objects that are not
    data (numpy arrays, quantized and sparse tensors, layouts...) and with format torch-zip;
  - `tensorfile convert F TREE` then `tensorfile convert TREE BACK.pt`: equal to the fixture as a
    tensordict tree keeps it (each tensor a contiguous copy of its own, requires_grad false), for every
    fixture that has a tensordict form (the others must be refused, see REFUSED);
and for every tensordict tree in tests/data/tensordict, `tensorfile convert TREE OUT.pt` read by torch equals
`tensorfile inspect --json --hash TREE`; and an Adam checkpoint made here converts to a tree and back with its
int keys, OrderedDict, _metadata and tuple kept (--strict), accepted by a fresh optimizer. Run it with a python3 that imports torch
(tests/CMakeLists.txt's tensorfile_torch_python).
"""
import argparse
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "interop")


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cli_tests = load_module("cli_tests", os.path.join(HERE, "cli_tests.py"))
compare_reference = load_module("compare_reference", os.path.join(TOOLS, "compare_reference.py"))
torch_reference = load_module("torch_reference", os.path.join(TOOLS, "torch_reference.py"))

# Fixtures without a tensordict form: convert refuses them (root not a dict, bytes/complex/device values...).
REFUSED = {
    "torch/meta.pt", "torch/nested_containers.pt", "torch/noncontig_view.pt", "torch/subclass.pt",
    "torch/t_float32_2x3.pt", "torch/t_float32_2x3_buffer.pt", "torch/torch_objects.pt", "torch/whole_module.pt",
    "torch_gen/nested_containers.pt", "torch_gen/pickle_protocol_2.pt", "torch_gen/pickle_protocol_3.pt",
    "torch_gen/pickle_protocol_4.pt", "torch_gen/pickle_protocol_5.pt", "torch_gen/root_int.pt",
    "torch_gen/root_transposed_view.pt", "torch_gen/storage_bare.pt", "torch_gen/torch_objects.pt",
}
# Files whose root object is not data: nothing to re-save.
CODE_AT_ROOT = {"torch/subclass.pt", "torch/whole_module.pt"}


def check_optimizer_round_trip(tool, scratch, problems):
    """An Adam checkpoint through a tensordict tree and back: int state keys, the OrderedDict state_dict and its
    _metadata, lists and tuples come back as torch wrote them, and a fresh optimizer accepts the state. A key
    that has no tensordict form is named on stderr, and --strict refuses it with nothing written."""
    import collections
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    source = os.path.join(scratch, "adam.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "pair": (torch.ones(2), torch.zeros(2)), "epoch": 3}, source)
    tree, back = os.path.join(scratch, "adam_tree"), os.path.join(scratch, "adam_back.pt")
    # Adam's betas is a tuple inside JSON data: the one change, named on stderr, and refused by --strict.
    betas = "tensorfile convert: changed optimizer/param_groups/0/betas: the tuple becomes a list (JSON has no tuples)"
    result = cli_tests.run(tool, "convert", source, tree, "--strict")
    if result.returncode != 1 or betas not in result.stderr or os.path.exists(tree):
        problems.append(f"adam: --strict should refuse the betas tuple: exit {result.returncode}: {result.stderr}")
    for args in (("convert", source, tree), ("convert", tree, back, "--strict")):
        result = cli_tests.run(tool, *args)
        if result.returncode != 0 or (args[1] == source and result.stderr.strip() != betas):
            problems.append(f"adam: convert {args[1]}: exit {result.returncode}: {result.stderr}")
            return 0
    before, after = torch.load(source), torch.load(back)
    for group in before["optimizer"]["param_groups"]:
        group["betas"] = list(group["betas"])
    state = after["optimizer"]["state"]
    if sorted(state) != sorted(before["optimizer"]["state"]) or not all(type(k) is int for k in state):
        problems.append(f"adam: optimizer state keys came back as {list(state)}")
    if after["optimizer"]["param_groups"] != before["optimizer"]["param_groups"]:
        problems.append("adam: param_groups differ")
    if not isinstance(after["model"], collections.OrderedDict):
        problems.append(f"adam: the model state_dict came back a {type(after['model']).__name__}")
    if getattr(after["model"], "_metadata", None) != before["model"]._metadata:
        problems.append("adam: the state_dict's _metadata differs")
    if not isinstance(after["pair"], tuple) or after["epoch"] != 3:
        problems.append("adam: the tuple or the epoch differs")
    fresh = torch.optim.Adam(model.parameters(), lr=0.01)
    fresh.load_state_dict(after["optimizer"])
    for key, entry in before["optimizer"]["state"].items():
        for name, value in entry.items():
            if not torch.equal(fresh.state_dict()["state"][key][name], value):
                problems.append(f"adam: state {key}/{name} differs after load_state_dict")

    odd = os.path.join(scratch, "odd_key.pt")
    torch.save({"w": {2.5: torch.ones(1)}}, odd)
    odd_tree = os.path.join(scratch, "odd_tree")
    result = cli_tests.run(tool, "convert", odd, odd_tree, "--strict")
    if result.returncode != 1 or os.path.exists(odd_tree) or "--strict" not in result.stderr:
        problems.append(f"odd key: --strict gave exit {result.returncode}: {result.stderr}")
    result = cli_tests.run(tool, "convert", odd, odd_tree)
    expected = "tensorfile convert: changed w/2.5: the float key 2.5 becomes the str key '2.5'"
    if result.returncode != 0 or expected not in result.stderr:
        problems.append(f"odd key: expected '{expected}' on stderr, got exit {result.returncode}: {result.stderr}")
    return 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensorfile", required=True)
    ap.add_argument("--data", required=True)
    opts = ap.parse_args()
    tool, data = os.path.abspath(opts.tensorfile), os.path.abspath(opts.data)
    problems = []

    def differ(what, a, b):
        found = []
        compare_reference.compare(a, b, what, found.append)
        problems.extend(found)
        return not found

    def torch_sees(path):
        seen = torch_reference.describe(path)
        if "error" in seen:
            problems.append(f"torch cannot load {path}: {seen['error']}")
        return seen

    checked = 0
    with tempfile.TemporaryDirectory() as scratch:
        for folder in ("torch", "torch_gen"):
            for name in sorted(n for n in os.listdir(os.path.join(data, folder)) if n.endswith(".pt")):
                rel = f"{folder}/{name}"
                source = os.path.join(data, folder, name)
                reference = torch_sees(source)
                differ(f"{rel}: inspect", reference, cli_tests.describe(tool, source))
                expected = dict(cli_tests.without_unsupported(reference), format="torch-zip")

                resaved = os.path.join(scratch, f"{folder}_{name}")
                result = cli_tests.run(tool, "convert", source, resaved)
                if rel in CODE_AT_ROOT:
                    if result.returncode != 1:
                        problems.append(f"{rel}: convert of code at the root: exit {result.returncode}")
                    continue
                if result.returncode != 0:
                    problems.append(f"{rel}: convert: {result.stderr}")
                    continue
                differ(f"{rel}: torch -> torch", expected, torch_sees(resaved))

                tree = os.path.join(scratch, f"{folder}_{name[:-3]}_tree")
                result = cli_tests.run(tool, "convert", source, tree, "--to", "memmap")
                if rel in REFUSED:
                    if result.returncode != 1:
                        problems.append(f"{rel}: expected convert to refuse a tensordict tree, got exit "
                                        f"{result.returncode}")
                    continue
                back = os.path.join(scratch, f"{folder}_{name[:-3]}_back.pt")
                result = result if result.returncode else cli_tests.run(tool, "convert", tree, back)
                if result.returncode != 0:
                    problems.append(f"{rel}: torch -> tensordict -> torch: {result.stderr}")
                    continue
                differ(f"{rel}: torch -> tensordict -> torch", cli_tests.as_tensordict_keeps_it(expected),
                       cli_tests.as_tensordict_keeps_it(torch_sees(back)))
                checked += 1

        folder = os.path.join(data, "tensordict")
        for name in sorted(n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n))):
            source = os.path.join(folder, name)
            out = os.path.join(scratch, f"tensordict_{name}.pt")
            result = cli_tests.run(tool, "convert", source, out)
            if result.returncode != 0:
                problems.append(f"tensordict/{name}: convert: {result.stderr}")
                continue
            expected = dict(cli_tests.without_unsupported(cli_tests.describe(tool, source)), format="torch-zip")
            differ(f"tensordict/{name}: tensordict -> torch", expected, torch_sees(out))
            checked += 1

    with tempfile.TemporaryDirectory() as scratch:
        checked += check_optimizer_round_trip(tool, scratch, problems)

    for problem in problems:
        print("FAIL:", problem)
    print(f"{len(problems)} problem(s)" if problems else f"OK: {checked} round trips match torch")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
