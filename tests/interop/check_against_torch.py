#!/usr/bin/python3
"""Check tensorfile against real torch on every .pt fixture (CTest: torch.reference).

    /usr/bin/python3 tests/interop/check_against_torch.py --describe BUILD/tools/tensorfile/tensorfile
        [--data DIR ...] [--no-regenerate] [--no-hash]

For each .pt file in tests/data/torch and tests/data/torch_gen (or the --data folders),
except those in EXCLUDED below, torch_reference.py (real torch.load) and
tensorfile inspect --json (tensorfile::load) describe the file and compare_reference.py's rules
compare the two. Unless --no-regenerate, the corpus is also rewritten into a temporary
folder by make_torch_fixtures.py with the torch installed here and those files are
checked too: this is how CI checks tensorfile against the torch it has, not only the
torch that wrote the committed files.

Prints one line per file (PASS/FAIL/SKIP and the name; a failure also prints its
differences), then a final line "N passed, M failed"; exits 1 on any failure.
Run it with a python3 that imports torch (tests/CMakeLists.txt's tensorfile_torch_python).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(TOOLS), "data")
DEFAULT_DIRS = [os.path.join(DATA, "torch"), os.path.join(DATA, "torch_gen")]
TIMEOUT_S = 600

# Fixtures left out of the comparison, by "<folder>/<file>", with the reason. Regenerated
# files use the folder name "torch_gen". Currently none: the files with unsupported objects
# (numpy_objects.pt, quantized.pt, quantized_qdtypes.pt, sparse.pt, subclass.pt,
# whole_module.pt) are refused by tensorfile's default strict load, as designed, but
# tensorfile inspect --json loads with strict = false and names each opaque object by the type
# torch gives it, which matches torch_reference.py exactly, so they stay in.
EXCLUDED = {
    # "torch/example.pt": "reason",
}


def load_compare_module():
    spec = importlib.util.spec_from_file_location(
        "compare_reference", os.path.join(TOOLS, "compare_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def json_lines(text):
    """The JSON objects of a one-object-per-line output; raises ValueError when one is malformed."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run(command):
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=TIMEOUT_S, check=False)


def describe_with_torch(files, hashes):
    """torch_reference.py's object for each file (one torch import for all of them)."""
    command = [sys.executable, os.path.join(TOOLS, "torch_reference.py")]
    command += [] if hashes else ["--no-hash"]
    result = run(command + files)
    try:
        objects = json_lines(result.stdout)
    except ValueError as e:
        raise RuntimeError(f"torch_reference.py printed malformed JSON: {e}\n{result.stderr}") from e
    if len(objects) != len(files):
        raise RuntimeError(f"torch_reference.py described {len(objects)} of {len(files)} files "
                           f"(exit status {result.returncode}):\n{result.stderr}")
    return objects


def describe_with_tensorfile(describe, path, hashes):
    """tensorfile inspect --json's object for one file, or a problem text."""
    command = [describe, "inspect", "--json"] + (["--hash"] if hashes else []) + [path]
    try:
        result = run(command)
    except subprocess.TimeoutExpired:
        return None, f"tensorfile inspect --json timed out after {TIMEOUT_S} s"
    if result.returncode not in (0, 1):  # 1 is a load error, reported in the JSON
        return None, f"tensorfile inspect --json exited with status {result.returncode}: {result.stderr.strip()}"
    try:
        objects = json_lines(result.stdout)
    except ValueError as e:
        return None, f"tensorfile inspect --json printed malformed JSON: {e}"
    if len(objects) != 1:
        return None, f"tensorfile inspect --json printed {len(objects)} objects; expected 1"
    return objects[0], None


def check_folder(label, folder, describe, hashes, compare, tally):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".pt"))
    if not names:
        print(f"FAIL {label}/: no .pt files in {folder}")
        tally["failed"] += 1
        return
    checked = []
    for name in names:
        key = f"{label.removeprefix('regenerated-')}/{name}"
        if key in EXCLUDED:
            print(f"SKIP {label}/{name}: {EXCLUDED[key]}")
        else:
            checked.append(name)
    try:
        references = describe_with_torch([os.path.join(folder, n) for n in checked], hashes)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        for name in checked:
            print(f"FAIL {label}/{name}: no reference: {e}")
        tally["failed"] += len(checked)
        return
    for name, reference in zip(checked, references):
        ours, problem = describe_with_tensorfile(describe, os.path.join(folder, name), hashes)
        problems = [problem] if problem else []
        if ours is not None:
            compare.compare(reference, ours, "torch vs tensorfile", problems.append)
        if problems:
            print(f"FAIL {label}/{name}")
            for line in problems:
                print(f"    {line}")
            tally["failed"] += 1
        else:
            print(f"PASS {label}/{name}")
            tally["passed"] += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--describe", required=True, help="the tensorfile program (its inspect --json describes a file)")
    ap.add_argument("--data", action="append", metavar="DIR",
                    help="a fixture folder (repeatable; default tests/data/torch and tests/data/torch_gen)")
    ap.add_argument("--no-regenerate", action="store_true",
                    help="skip rewriting the corpus with the installed torch")
    ap.add_argument("--no-hash", action="store_true", help="compare without sha256 digests")
    args = ap.parse_args()
    compare = load_compare_module()
    hashes = not args.no_hash
    tally = {"passed": 0, "failed": 0}

    for folder in args.data or DEFAULT_DIRS:
        check_folder(os.path.basename(os.path.normpath(folder)), folder, args.describe, hashes,
                     compare, tally)

    if not args.no_regenerate:
        with tempfile.TemporaryDirectory(prefix="tensorfile-torch-gen-") as out:
            try:
                result = run([sys.executable, os.path.join(TOOLS, "make_torch_fixtures.py"),
                              "--out", out])
                made = result.returncode == 0
                why = f"exit status {result.returncode}:\n{result.stderr}"
            except subprocess.TimeoutExpired:
                made, why = False, f"timed out after {TIMEOUT_S} s"
            if made:
                check_folder("regenerated-torch_gen", out, args.describe, hashes, compare, tally)
            else:
                print(f"FAIL regenerated-torch_gen/: make_torch_fixtures.py failed: {why}")
                tally["failed"] += 1

    print(f"{tally['passed']} passed, {tally['failed']} failed")
    return 1 if tally["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
