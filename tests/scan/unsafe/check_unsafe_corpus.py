#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 39's corpus against real Python and the tensorfile program. The corpus (make_unsafe_corpus.py) is written
into a temporary folder; for each case, in a fresh process (forked from this one before anything was loaded, so
torch and numpy are imported once) whose current directory is a fresh temporary folder:
  (a) the consumer opens it as it would: torch.load(path, weights_only=False) for each file, or numpy.load(path,
      allow_pickle=True) and every member read; a malicious case must create the file "marker" (class 8: refused by
      weights_only=True; its Counter cases must also set the class attribute);
  (b) torch.load(path, weights_only=True), in another fresh process: accepted or not, and it must never run a
      payload;
  (c) `tensorfile scan --json PATH` and `tensorfile verify PATH` (a folder and an index where the case names them):
      "safe": false and a non-zero exit for every malicious case (class 9: the verdict "dangerous", verify's
      "UNSAFE:"), "safe": true and exit 0 for every benign one; whenever the tool calls a case safe, weights_only=True
      accepts its torch files (unless torch 1.13 lacks an opcode: protocol 4) and no marker was made.
One line per case ("marker ran" is the Counter attribute for those cases), then 'N passed, N failed'; the exit
status is 1 when a case failed.
Usage: check_unsafe_corpus.py TENSORFILE_EXE"""
import collections
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_unsafe_corpus  # noqa: E402

TIMEOUT = 30  # seconds for one load or one run of the tool


def load_as_consumer(case):
    """What the consumer of the case does with it; exceptions after a payload ran are expected."""
    for path in case["files"]:
        try:
            if case["consumer"] == "numpy":
                loaded = numpy.load(path, allow_pickle=True)  # an array, or an NpzFile read member by member
                for key in getattr(loaded, "files", []):
                    loaded[key]
            elif case["consumer"] in ("torch", "safetensors"):  # a benign safetensors file must run nothing either
                torch.load(path, weights_only=False)
        except Exception:  # noqa: BLE001 (the file is hostile; the marker says whether it ran)
            pass
    deadline = time.monotonic() + (3 if case.get("wait") else 0)
    while not os.path.exists(make_unsafe_corpus.MARKER) and time.monotonic() < deadline:
        time.sleep(0.02)  # a payload started on another thread
    attribute = case.get("counter_attribute")
    return {"marker": os.path.exists(make_unsafe_corpus.MARKER),
            "attribute": bool(attribute) and getattr(collections.Counter, attribute, None) == "set"}


def load_weights_only(case):
    """Whether torch.load(weights_only=True) accepts every file of the case, and whether anything ran."""
    accepted, why = True, ""
    for path in case["files"]:
        try:
            torch.load(path, weights_only=True)
        except Exception as error:  # noqa: BLE001
            accepted, why = False, f"{type(error).__name__}: {str(error).rpartition('error: ')[2][:160]}"
    time.sleep(0.2 if case.get("wait") else 0)
    attribute = case.get("counter_attribute")
    return {"accepted": accepted, "why": why, "marker": os.path.exists(make_unsafe_corpus.MARKER),
            "attribute": bool(attribute) and getattr(collections.Counter, attribute, None) == "set"}


def in_fresh_process(function, case):
    """function(case) in a forked child whose current directory is a new temporary folder; its JSON result."""
    read_end, write_end = os.pipe()
    folder = tempfile.mkdtemp(prefix="tensorfile_unsafe_")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 0
        try:
            os.close(read_end)
            os.chdir(folder)
            result = json.dumps(function(case)).encode()
            os.write(write_end, result)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + TIMEOUT
    while True:
        ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    shutil.rmtree(folder, ignore_errors=True)
    return json.loads(b"".join(chunks)) if chunks else None


def tool(exe, *args):
    run = subprocess.run([exe, *args], capture_output=True, text=True, timeout=TIMEOUT, check=False)
    return run.returncode, run.stdout, run.stderr


def tensorfile_verdicts(exe, case):
    """scan --json and verify on each of the case's targets: [(what ran, called it safe, called it dangerous)]."""
    verdicts = []
    for target in case["scan"]:
        code, out, _ = tool(exe, "scan", "--json", "--quiet", target)
        try:
            entries = json.loads(out)
        except ValueError:
            entries = []
        safe = code == 0 and bool(entries) and all(e.get("safe") is True for e in entries)
        dangerous = any(e.get("worst") == "dangerous" for e in entries)
        verdicts.append((f"scan {os.path.basename(target.rstrip('/'))} exit {code}", safe, dangerous))
    for target in case["verify"]:
        code, out, _ = tool(exe, "verify", target)
        verdicts.append((f"verify {os.path.basename(target.rstrip('/'))} exit {code}", code == 0, "UNSAFE:" in out))
    return verdicts


# torch 1.13's weights_only reader lacks protocol 4's opcodes (FRAME, SHORT_BINUNICODE, MEMOIZE...): it refuses every
# protocol 4 checkpoint for an opcode, not for a global; no scanner verdict is about that.
OPCODE_REFUSAL = "Unsupported operand"


def check(exe, case):
    """The case's line and its failures."""
    loaded = in_fresh_process(load_as_consumer, case)
    weights_only = in_fresh_process(load_weights_only, case) if case["consumer"] == "torch" else None
    verdicts = tensorfile_verdicts(exe, case)
    failures = []
    if loaded is None:
        failures.append("the consumer's load crashed or timed out")
        loaded = {"marker": False, "attribute": False}
    ran = loaded["marker"] or loaded["attribute"]
    if weights_only is None and case["consumer"] == "torch":
        failures.append("torch.load(weights_only=True) crashed or timed out")
    if weights_only and (weights_only["marker"] or weights_only["attribute"]):
        failures.append("torch.load(weights_only=True) ran the payload")
    refused = weights_only is not None and not weights_only["accepted"]
    if case["malicious"]:
        if case.get("counter_attribute") and not loaded["attribute"]:
            failures.append(f"Counter.{case['counter_attribute']} was not set by weights_only=False")
        if not case.get("refused_only") and not case.get("counter_attribute") and not loaded["marker"]:
            failures.append("the payload did not run: the corpus is wrong")
        if (case.get("refused_only") or case.get("counter_attribute")) and not refused:
            failures.append("torch.load(weights_only=True) accepted it")
        for what, safe, dangerous in verdicts:
            if safe:
                failures.append(f"{what}: tensorfile called a malicious file safe")
            elif case.get("dangerous") and not dangerous:
                failures.append(f"{what}: tensorfile's verdict is not \"dangerous\"")
    else:
        failures += [f"{what}: tensorfile called a benign file unsafe" for what, safe, _ in verdicts if not safe]
        # The promise, for a benign file tensorfile calls safe (a malicious one called safe has failed above).
        if any(safe for _, safe, _ in verdicts) and ran:
            failures.append("the promise broke: tensorfile says safe, yet a payload ran")
        if any(safe for _, safe, _ in verdicts) and refused and OPCODE_REFUSAL not in weights_only["why"]:
            failures.append(f"the promise broke: tensorfile says safe, yet weights_only=True refused it "
                            f"({weights_only['why']})")
    accepted = "-" if weights_only is None else "n" if refused else "y"
    if refused and OPCODE_REFUSAL in weights_only["why"]:
        accepted += " (an opcode torch 1.13 lacks)"
    kind = f"class {case['klass']}" if case["malicious"] else "benign "
    said = ", ".join(f"{what} {'safe' if safe else 'UNSAFE'}" for what, safe, _ in verdicts)
    line = (f"{'FAIL' if failures else 'ok  '}  {kind}  {case['variant']:<40} marker ran {'y' if ran else 'n'}  "
            f"weights_only accepted {accepted}  tensorfile: {said}")
    return line, failures


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    exe = os.path.abspath(sys.argv[1])
    started = time.monotonic()
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="tensorfile_unsafe_corpus_") as folder:
        cases = make_unsafe_corpus.build(folder)
        for case in cases:
            line, failures = check(exe, case)
            print(line)
            for failure in failures:
                print(f"      {failure}")
            passed, failed = passed + (not failures), failed + bool(failures)
    print(f"{passed} passed, {failed} failed ({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
