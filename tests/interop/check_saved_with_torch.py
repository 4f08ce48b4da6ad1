#!/usr/bin/python3
"""Check that real torch reads what tensorfile's save() writes (CTest: torch.save_interop, torch.save_zip64).

    /usr/bin/python3 tests/interop/check_saved_with_torch.py --save-corpus BUILD/save_corpus
        --describe BUILD/tools/tensorfile/tensorfile [--big] FIXTURE_DIR...

1. `save_corpus built` writes a corpus made in C++ (every dtype, views, 0-d, empty, parameters,
   nested containers, a state_dict with _metadata, 1500 tensors). torch.load reads each file with
   weights_only=True, except files named *floats* (torch 1.13's weights_only reads no Python
   float, complex, set, bytes or torch.device: those load with weights_only=False).
2. `save_corpus resave` loads every fixture that tensorfile reads in strict mode and saves it
   again (it checks load(save(v)) == v itself); torch.load must read each one.
3. Every saved file is then compared field by field with check_against_torch.py: what torch
   loads (dtypes, shapes, strides, offsets, values, storage sharing, requires_grad) equals what
   tensorfile loads, which equals what was saved.
With --big, only the > 4 GiB zip64 file is written and checked (a long test, run once in CI);
with less than 12 GiB of free disk it exits 77, which CTest reports as skipped.
Prints "N passed, M failed" last; exits 1 on any failure.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
STRICT_REFUSED = ("numpy_objects", "quantized", "sparse", "subclass", "whole_module", "fake_cuda0")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save-corpus", required=True)
    parser.add_argument("--describe", required=True)
    parser.add_argument("--big", action="store_true")
    parser.add_argument("fixtures", nargs="*")
    args = parser.parse_args()
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + what, flush=True)
        passed, failed = passed + ok, failed + (not ok)

    if args.big:
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if free < 12 << 30:  # the file (4 GiB) plus room; reported to CTest as skipped, never as passed
            print(f"SKIPPED: {free >> 30} GiB free in {tempfile.gettempdir()}; the zip64 test needs 12 GiB")
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        built, resaved = os.path.join(tmp, "built"), os.path.join(tmp, "resaved")
        os.mkdir(built)
        os.mkdir(resaved)
        if args.big:
            run = subprocess.run([args.save_corpus, "big", built], capture_output=True, text=True)
            check(run.returncode == 0, "save_corpus big " + run.stderr.strip())
        else:
            run = subprocess.run([args.save_corpus, "built", built], capture_output=True, text=True)
            check(run.returncode == 0, "save_corpus built " + run.stderr.strip())
            inputs = [os.path.join(d, f) for d in args.fixtures for f in sorted(os.listdir(d))
                      if f.endswith(".pt") and not f.startswith(STRICT_REFUSED)]
            run = subprocess.run([args.save_corpus, "resave", resaved, *inputs], capture_output=True, text=True)
            check(run.returncode == 0, f"save_corpus resave of {len(inputs)} fixtures {run.stderr.strip()}")

        for folder in (built, resaved):
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                weights_only = folder == built and "floats" not in name
                try:
                    torch.load(path, weights_only=weights_only)
                    check(True, f"torch.load(weights_only={weights_only}) {os.path.basename(folder)}/{name}")
                except Exception as error:  # noqa: BLE001 - any failure to load is the finding
                    check(False, f"torch.load {os.path.basename(folder)}/{name}: {type(error).__name__}: {error}")
            if os.listdir(folder):
                compare = subprocess.run(
                    [sys.executable, os.path.join(TOOLS, "check_against_torch.py"), "--describe", args.describe,
                     "--data", folder, "--no-regenerate"], capture_output=True, text=True)
                print(compare.stdout, end="")
                check(compare.returncode == 0, f"torch and tensorfile agree on every file in {os.path.basename(folder)}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
