#!/usr/bin/python3
"""Tests of the tensorfile program (tools/tensorfile); the Python standard library is all they need.

    python3 tests/tools/cli_tests.py SUITE --tensorfile BUILD/tools/tensorfile/tensorfile \\
        --data tests/data --golden tests/tools/golden [--regenerate]

Suites (CTest runs each as cli.<suite>):
  golden    inspect's tree and JSON (--json --hash) for every fixture in tests/data/torch/*.pt and
            tests/data/tensordict/*, against the files in tests/tools/golden/; inspect --json without
            --hash must equal the golden JSON less its sha256 fields
  usage     --help of each command, --version, and exit status 2 for wrong command lines, 1 for
            file errors with the library's message on stderr
  verify    every fixture verifies clean; crafted bad files (truncated, CRC flipped, view out of
            bounds, record size mismatch, short tensordict leaf, missing or broken meta.json...)
            each fail with the error named
  progress  convert's and scan's progress bars are drawn on a pseudo-terminal, and not on a pipe or with --quiet
            (nor with scan --json)
  convert   torch -> torch (clean re-save) and torch -> tensordict -> torch round trips of every
            fixture, and tensordict -> torch, compared with inspect --json --hash; the refusals; a lazy
            (_PermutedTensorDict) tree: inspect names its op, convert materialises it; --select to every
            output kind, and a pattern matching nothing
  formats   every command on every kind of input (torch zip and legacy, safetensors, an index, a model folder,
            .npy, .npz, a tensordict tree): the format open() found, verify, scan, bench, convert to torch keeping
            every tensor's values; the flags named after LoadOptions / SaveOptions fields (--mmap, --threads,
            --direct-reads, --verify-crc, --metadata)
  hostile   a torch file and a tensordict tree written here with keys, tags, class names and values
            holding terminal escapes, NUL, BEL, DEL and C1 controls: inspect, verify, convert and the
            error messages print them escaped (no raw control byte; golden/hostile/), inspect --json
            keeps them exactly

Regenerating the golden files after an intended change of inspect's output:

    python3 tests/tools/cli_tests.py golden --regenerate --tensorfile BUILD/tools/tensorfile/tensorfile \\
        --data tests/data --golden tests/tools/golden

then review `git diff tests/tools/golden` before committing.
"""
import argparse
import hashlib
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

TIMEOUT_S = 300


class Failures:
    def __init__(self):
        self.items = []

    def check(self, ok, what):
        if not ok:
            self.items.append(what)
        return ok


def run(tool, *args, cwd=None, env=None):
    return subprocess.run([tool, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, errors="replace", timeout=TIMEOUT_S, check=False)


def torch_fixtures(data):
    folder = os.path.join(data, "torch")
    return sorted(os.path.join("torch", n) for n in os.listdir(folder) if n.endswith(".pt"))


def tensordict_fixtures(data):
    folder = os.path.join(data, "tensordict")
    return sorted(os.path.join("tensordict", n) for n in os.listdir(folder)
                  if os.path.isdir(os.path.join(folder, n)))


def without_hashes(text):
    obj = json.loads(text)
    for t in obj["tensors"]:
        t.pop("sha256", None)
    return obj


# ---- golden -------------------------------------------------------------------------------------

def suite_golden(opts, failures):
    """inspect's output for every fixture, run from the data folder so paths print as torch/x.pt."""
    for rel in torch_fixtures(opts.data) + tensordict_fixtures(opts.data):
        outputs = {".txt": run(opts.tensorfile, "inspect", rel, cwd=opts.data),
                   ".json": run(opts.tensorfile, "inspect", "--json", "--hash", rel, cwd=opts.data)}
        for suffix, result in outputs.items():
            golden = os.path.join(opts.golden, rel + suffix)
            if not failures.check(result.returncode == 0 and result.stderr == "",
                                  f"inspect {rel} ({suffix}): exit {result.returncode}: {result.stderr}"):
                continue
            if opts.regenerate:
                os.makedirs(os.path.dirname(golden), exist_ok=True)
                with open(golden, "w", encoding="utf-8", newline="") as f:
                    f.write(result.stdout)
                continue
            try:
                with open(golden, encoding="utf-8", newline="") as f:
                    expected = f.read()
            except FileNotFoundError:
                failures.check(False, f"{golden} is missing (run with --regenerate)")
                continue
            failures.check(result.stdout == expected,
                           f"inspect {rel} ({suffix}) differs from {golden}:\n--- got\n{result.stdout}--- expected\n"
                           f"{expected}")
        plain = run(opts.tensorfile, "inspect", "--json", rel, cwd=opts.data)
        if outputs[".json"].returncode == 0:
            failures.check(plain.returncode == 0 and json.loads(plain.stdout) == without_hashes(outputs[".json"].stdout),
                           f"inspect --json {rel}: differs from --json --hash beyond sha256:\n{plain.stdout}")


# ---- usage and exit statuses ----------------------------------------------------------------------

def suite_usage(opts, failures):
    tool = opts.tensorfile
    fixture = os.path.join(opts.data, "torch", "t_float32_2x3.pt")

    def expect(args, status, stdout_has=None, stderr_has=None):
        result = run(tool, *args)
        shown = " ".join(["tensorfile", *args])
        ok = failures.check(result.returncode == status,
                            f"{shown}: exit {result.returncode}, expected {status}\n{result.stdout}{result.stderr}")
        if ok and stdout_has is not None:
            failures.check(stdout_has in result.stdout, f"{shown}: stdout lacks {stdout_has!r}:\n{result.stdout}")
        if ok and stderr_has is not None:
            failures.check(stderr_has in result.stderr, f"{shown}: stderr lacks {stderr_has!r}:\n{result.stderr}")
        return result

    expect([], 2, stderr_has="usage: tensorfile COMMAND")
    expect(["--help"], 0, stdout_has="commands:\n  inspect ")
    expect(["--version"], 0, stdout_has="tensorfile ")
    expect(["frobnicate"], 2, stderr_has="tensorfile: unknown command 'frobnicate'\nRun 'tensorfile --help' for usage.")
    for command in ("inspect", "convert", "verify", "bench", "scan"):
        expect([command, "--help"], 0, stdout_has=f"usage: tensorfile {command} [options] ")
        expect([command, "-h"], 0, stdout_has="  -h, --help")
    expect(["scan", "--help"], 0, stdout_has="  --quiet ")
    expect(["scan", "--quiet", fixture], 0, stdout_has="1 file scanned, all safe")
    expect(["scan", "--quiet=yes", fixture], 2, stderr_has="option '--quiet' takes no value")
    expect(["inspect"], 2, stderr_has="tensorfile inspect: expected 1 operand (PATH), got 0")
    expect(["inspect", fixture, fixture], 2, stderr_has="expected 1 operand (PATH), got 2")
    expect(["inspect", "--bogus", fixture], 2, stderr_has="tensorfile inspect: unknown option '--bogus'\n"
                                                         "Run 'tensorfile inspect --help' for usage.")
    expect(["inspect", "--json=1", fixture], 2, stderr_has="option '--json' takes no value")
    expect(["convert", fixture], 2, stderr_has="expected 2 operands (IN OUT), got 1")
    expect(["convert", fixture, "out", "--to", "zip"], 2,
           stderr_has="--to must be pt, memmap, safetensors, npz, npy or gguf, got 'zip'")
    # A suffix that names another format than --to is a wrong command line, never a directory named Y.safetensors.
    for out, to in (("Y.safetensors", "memmap"), ("Y.pt", "safetensors"), ("Y.npz", "pt"), ("Y.npy", "npz")):
        expect(["convert", fixture, out, "--to", to], 2, stderr_has=f"--to {to} contradicts OUT's suffix ")
    expect(["convert", fixture, "Y.safetensors", "--max-shard-size", "1MB"], 2,
           stderr_has="--max-shard-size writes a directory of shards; OUT ends in .safetensors")
    # The top-level help gives each command's whole summary, never cut mid-sentence.
    result = expect(["--help"], 0)
    summaries = {}
    for line in result.stdout.split("commands:\n")[-1].split("\n\n")[0].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, text = line.strip().partition("  ")
            summaries[name] = text.strip()
        elif summaries:
            summaries[name] += " " + line.strip()
    for command in ("inspect", "convert", "verify", "bench", "scan"):
        whole = summaries.get(command, "")
        failures.check(whole.endswith("."), f"--help cuts the summary of {command}: {whole!r}")
    expect(["convert", fixture, "out", "--map-location", "gpu"], 2,
           stderr_has="--map-location: unknown device \"gpu\"")
    expect(["convert", fixture, "out.pt", "--mmap", "private"], 2,
           stderr_has="--mmap takes read-only, copy-on-write, shared or off, got 'private'")
    expect(["convert", fixture, "out.pt", "--direct-reads", "yes"], 2,
           stderr_has="--direct-reads takes automatic, always or never, got 'yes'")
    expect(["convert", fixture, "out.pt", "--threads", "0"], 2, stderr_has="option '--threads' needs a whole number")
    expect(["convert", fixture, "out.npz", "--metadata", "a=b"], 2,
           stderr_has="--metadata sets safetensors' __metadata__, but OUT is to be npz")
    expect(["convert", fixture, "out.safetensors", "--metadata", "ab"], 2, stderr_has="--metadata takes KEY=VALUE")
    expect(["bench", fixture, "--repeat", "0"], 2, stderr_has="option '--repeat' needs a whole number from 1 to 1000")
    expect(["bench", fixture, "--map-location", "cpu"], 2, stderr_has="--map-location takes a CUDA device (cuda:N), got 'cpu'")
    # bench takes every format inspect takes (it refused safetensors, npz and shards with wrong-format messages).
    for path, name in ((("safetensors", "overall.safetensors"), "safetensors, 9 tensors"),
                       (("numpy", "deflated.npz"), "npz, 3 tensors"), (("numpy", "f4_c.npy"), "npy, 1 tensor"),
                       (("safetensors", "samples.safetensors.index.json"), "safetensors-sharded, 3 tensors")):
        expect(["bench", os.path.join(opts.data, *path), "--repeat", "1"], 0, stdout_has=f": {name}, ")
    # Without CUDA built in, the library's DeviceError, as it words it.
    expect(["bench", fixture, "--map-location", "cuda:0"], 1,
           stderr_has="tensorfile: cannot move a tensor to cuda:0: tensorfile was built without CUDA")

    with tempfile.TemporaryDirectory() as scratch:
        missing = os.path.join(scratch, "missing.pt")
        for command in ("inspect", "verify", "bench"):
            result = expect([command, missing], 1)
            failures.check(result.stderr.startswith(f"tensorfile: {missing}: ") and
                           "No such file or directory" in result.stderr,
                           f"{command} of a missing file: message not in the library's shape: {result.stderr!r}")
        text = os.path.join(scratch, "notes.txt")
        with open(text, "w") as f:
            f.write("not a tensor file\n")
        for command in ("inspect", "convert", "bench"):  # the library's one dispatch, open(), says what it is not
            expect([command, text] + ([os.path.join(scratch, "out.pt")] if command == "convert" else []), 1,
                   stderr_has=f"tensorfile: {text}: not a format tensorfile reads; expected a torch, safetensors, "
                              ".npy, .npz or GGUF file (at byte 0)")
        expect(["convert", fixture, os.path.join(scratch, "td")], 1,
               stderr_has="the root is of type Tensor; expected a dict, or a list of tensors")
        result = expect(["inspect", fixture], 0)
        failures.check(result.stderr == "", f"inspect wrote to stderr: {result.stderr!r}")


# ---- verify ----------------------------------------------------------------------------------------

def zip_members(data):
    """(name, central header offset, local header offset, data offset, size) of each zip entry."""
    end = data.rfind(b"PK\x05\x06")
    count, _, directory = struct.unpack_from("<HII", data, end + 10)
    members, at = [], directory
    for _ in range(count):
        flags, _, _, _, _, _, size, name_len, extra_len, comment_len = struct.unpack_from("<HHHHIIIHHH", data, at + 8)
        local = struct.unpack_from("<I", data, at + 42)[0]
        name = data[at + 46:at + 46 + name_len].decode()
        local_name, local_extra = struct.unpack_from("<HH", data, local + 26)
        members.append({"name": name, "central": at, "local": local, "flags": flags, "size": size,
                        "data": local + 30 + local_name + local_extra})
        at += 46 + name_len + extra_len + comment_len
    return members


def patch_member(data, suffix, change, fix_crc=True):
    """`data` with the record whose name ends in `suffix` replaced by change(bytes) (same length); its
    CRC-32 is updated everywhere the archive records it unless fix_crc is False."""
    data = bytearray(data)
    member = next(m for m in zip_members(bytes(data)) if m["name"].endswith(suffix))
    start, size = member["data"], member["size"]
    new = change(bytes(data[start:start + size]))
    assert len(new) == size, "a patch must keep the record's length"
    data[start:start + size] = new
    if fix_crc:
        crc = zlib.crc32(new)
        struct.pack_into("<I", data, member["central"] + 16, crc)
        if struct.unpack_from("<I", data, member["local"] + 14)[0] != 0:
            struct.pack_into("<I", data, member["local"] + 14, crc)
        if member["flags"] & 8:  # a data descriptor follows the data, with or without its signature
            at = start + size
            struct.pack_into("<I", data, at + 4 if data[at:at + 4] == b"PK\x07\x08" else at, crc)
    return bytes(data)


def replace_once(pattern, replacement):
    def change(old):
        assert old.count(pattern) == 1, f"{pattern!r} must occur once in the record"
        return old.replace(pattern, replacement)
    return change


def suite_verify(opts, failures):
    tool = opts.tensorfile
    # Fixtures whose pickles name globals torch.load(weights_only=True) refuses: verify says so and exits 1,
    # and passes once --allow lists exactly those globals.
    # The sets are what torch 1.13's _get_allowed_globals() lacks (it has no set, bytes, device, quantized
    # rebuild or subclass rebuild); suite_verify_against_torch checks each verdict with torch itself.
    not_weights_only = {
        "torch/nested_containers.pt": {"__builtin__.set", "_codecs.encode"},
        "torch/numpy_objects.pt": {"_codecs.encode", "numpy.core.multiarray._reconstruct",
                                   "numpy.core.multiarray.scalar", "numpy.dtype", "numpy.ndarray"},
        "torch/quantized.pt": {"torch._utils._rebuild_qtensor", "torch.per_channel_affine",
                               "torch.per_tensor_affine"},
        "torch/subclass.pt": {"__main__.MyT", "torch._tensor._rebuild_from_type_v2"},
        "torch/torch_objects.pt": {"torch.device"},
        "torch/whole_module.pt": {"__builtin__.set", "torch.nn.modules.linear.Linear"},
        "tensordict/s05_nontensor": {"__main__.Opaque"},
        "tensordict/s07_tensorclass": {"__main__.Opaque"},
    }
    for rel in torch_fixtures(opts.data) + tensordict_fixtures(opts.data):
        result = run(tool, "verify", rel, cwd=opts.data)
        unknown = not_weights_only.get(rel)
        if unknown is None:
            failures.check(result.returncode == 0 and result.stdout.startswith(f"{rel}: OK: ") and result.stderr == "",
                           f"verify {rel}: exit {result.returncode}\n{result.stdout}{result.stderr}")
            continue
        prefix = f"{rel}: NOT SAFE FOR torch.load(weights_only=True): "
        named = {line[len(prefix):].split(" (")[0] for line in result.stdout.splitlines() if line.startswith(prefix)}
        failures.check(result.returncode == 1 and named == unknown,
                       f"verify {rel}: exit {result.returncode}, named {named}; expected 1, {unknown}\n{result.stdout}")
        # --allow repeated, one global each, and once with a comma-separated list: the same verdict.
        repeated = [word for name in sorted(unknown) for word in ("--allow", name)]
        for allow in (repeated, ["--allow", ",".join(sorted(unknown))]):
            result = run(tool, "verify", *allow, rel, cwd=opts.data)
            failures.check(result.returncode == 0 and result.stdout.startswith(f"{rel}: OK: "),
                           f"verify {' '.join(allow)} {rel}: exit {result.returncode}\n{result.stdout}{result.stderr}")

    # The promise behind each verdict, checked with torch itself where it is installed: a fixture named above is
    # refused by torch.load(weights_only=True), and one verify calls OK is accepted, or refused only for what runs
    # nothing (an opcode torch 1.13's weights_only unpickler lacks: BINFLOAT, protocol 4's; a CUDA location).
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        torch = None
    for rel in torch_fixtures(opts.data) if torch is not None else []:
        try:
            torch.load(os.path.join(opts.data, rel), weights_only=True)
            refusal = None
        except Exception as error:  # pylint: disable=broad-except
            refusal = str(error)
        if rel in not_weights_only:
            failures.check(refusal is not None, f"{rel}: torch.load(weights_only=True) accepts what verify refuses")
        else:
            failures.check(refusal is None or "Unsupported operand" in refusal or "CUDA" in refusal,
                           f"{rel}: verify says OK but torch.load(weights_only=True) refuses it: {refusal}")

    # A pickle that calls os.system: UNSAFE with the member and byte offset, exit 1; --allow cannot clear it.
    with tempfile.TemporaryDirectory() as scratch:
        rce = os.path.join(scratch, "rce.pt")
        pickle_bytes = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
        with zipfile.ZipFile(rce, "w") as archive:
            archive.writestr("rce/data.pkl", pickle_bytes)
            archive.writestr("rce/version", "3\n")
        for extra in ([], ["--allow", "os.system"]):
            result = run(tool, "verify", *extra, rce)
            failures.check(result.returncode == 1 and result.stdout == f"{rce}: UNSAFE: calls os.system (rce/data.pkl, "
                                                                       "byte 2)\n",
                           f"verify {extra} rce.pt: exit {result.returncode}\n{result.stdout}{result.stderr}")
        result = run(tool, "verify", "--json", rce)
        report = json.loads(result.stdout.splitlines()[0])
        failures.check(report["worst"] == "dangerous" and report["globals"][0]["global"] == "os.system",
                       f"verify --json rce.pt: {result.stdout}")
        result = run(tool, "scan", scratch, os.path.join(opts.data, "torch", "t_float32_2x3.pt"))
        failures.check(result.returncode == 1 and "UNSAFE  dangerous os.system" in result.stdout and
                       "t_float32_2x3.pt  torch-zip  1 tensor reference  safe  -" in result.stdout,
                       f"scan: exit {result.returncode}\n{result.stdout}{result.stderr}")
        result = run(tool, "scan", os.path.join(opts.data, "torch", "t_float32_2x3.pt"))
        failures.check(result.returncode == 0, f"scan of a clean file: exit {result.returncode}\n{result.stdout}")

    # A folder's files are listed in path order, component by component: m/x.pt, then m-x.pt, then m.pt.
    with tempfile.TemporaryDirectory() as scratch:
        os.mkdir(os.path.join(scratch, "m"))
        order = [os.path.join("m", "x.pt"), "m-x.pt", "m.pt"]
        for rel in reversed(order):
            shutil.copy(os.path.join(opts.data, "torch", "t_float32_2x3.pt"), os.path.join(scratch, rel))
        result = run(tool, "scan", "--threads", "3", scratch)
        listed = [line.split("  ")[0] for line in result.stdout.splitlines()[:-1]]
        expected = [os.path.join(scratch, rel) for rel in order]
        failures.check(result.returncode == 0 and listed == expected, f"scan order: {listed}; expected {expected}")

    with open(os.path.join(opts.data, "torch", "t_float32_2x3.pt"), "rb") as f:
        good = f.read()  # data.pkl: ('storage', FloatStorage, '0', 'cpu', 6), offset 0, size (2, 3), stride (3, 1)
    with open(os.path.join(opts.data, "torch", "legacy_format.pt"), "rb") as f:
        legacy = f.read()
    flip = lambda old: bytes([old[0] ^ 0xFF]) + old[1:]  # noqa: E731
    crafted = {
        "truncated.pt": (good[:len(good) // 2], ["not a zip archive: no end-of-central-directory record; it starts "
                                                 "like a zip archive, so it is probably truncated"]),
        "crc_flipped.pt": (patch_member(good, "data/0", flip, fix_crc=False),
                           ["t_float32_2x3/data/0: CRC-32 mismatch; expected 0x91e79017"]),
        "two_crcs_flipped.pt": (patch_member(patch_member(good, "data/0", flip, fix_crc=False), "/version",
                                             replace_once(b"3\n", b"3 "), fix_crc=False),
                                ["data/0: CRC-32 mismatch", "version: CRC-32 mismatch", "2 errors found"]),
        "view_out_of_bounds.pt": (patch_member(good, "data.pkl", replace_once(b"QK\x00K\x02K\x03", b"QK\x01K\x02K\x03")),
                                  ["view with sizes (2, 3), strides (3, 1) and offset 1 leaves its storage; "
                                   "expected at most 24 bytes, got 28"]),
        "record_size_mismatch.pt": (patch_member(good, "data.pkl", replace_once(b"K\x06t", b"K\x07t")),
                                    ["storage 0 declares 7 float32 elements; expected 28 bytes in its record, got 24"]),
        "legacy_truncated.pt": (legacy[:-8], ["file ends inside storage"]),
        "empty.pt": (b"", ["file is empty"]),
    }
    with tempfile.TemporaryDirectory() as scratch:
        for name, (content, messages) in crafted.items():
            path = os.path.join(scratch, name)
            with open(path, "wb") as f:
                f.write(content)
            result = run(tool, "verify", path)
            ok = failures.check(result.returncode == 1 and result.stdout == "",
                                f"verify {name}: exit {result.returncode}, expected 1\n{result.stdout}{result.stderr}")
            for message in messages if ok else []:
                failures.check(message in result.stderr, f"verify {name}: stderr lacks {message!r}:\n{result.stderr}")
            if ok:
                failures.check(result.stderr.startswith(f"tensorfile: {path}"),
                               f"verify {name}: not the library's message shape: {result.stderr!r}")

        # inspect reads no tensor data, so a flipped data byte passes it; verify reads everything.
        result = run(tool, "inspect", os.path.join(scratch, "crc_flipped.pt"))
        failures.check(result.returncode == 0, f"inspect of a file with a bad CRC: exit {result.returncode}")

        source = os.path.join(opts.data, "tensordict", "s01_basic")
        trees = {
            "short_leaf": (lambda t: os.truncate(os.path.join(t, "nested", "b.memmap"), 2), ["b.memmap"]),
            "missing_meta": (lambda t: os.remove(os.path.join(t, "nested", "deeper", "meta.json")), ["meta.json"]),
            "broken_meta": (lambda t: open(os.path.join(t, "meta.json"), "w").write('{"a": {"device": '),
                            ["meta.json"]),
            "missing_leaf": (lambda t: os.remove(os.path.join(t, "a.memmap")), ["a.memmap"]),
        }
        for name, (damage, messages) in trees.items():
            tree = os.path.join(scratch, name)
            shutil.copytree(source, tree)
            damage(tree)
            result = run(tool, "verify", tree)
            ok = failures.check(result.returncode == 1,
                                f"verify {name}: exit {result.returncode}, expected 1\n{result.stdout}{result.stderr}")
            for message in messages if ok else []:
                failures.check(message in result.stderr, f"verify {name}: stderr lacks {message!r}:\n{result.stderr}")
        # A short leaf is only found by reading the tree for real: inspect (meta) opens no data file.
        result = run(tool, "inspect", os.path.join(scratch, "short_leaf"))
        failures.check(result.returncode == 0, f"inspect of a tree with a short leaf: exit {result.returncode}")
        result = run(tool, "inspect", "--hash", os.path.join(scratch, "short_leaf"))
        failures.check(result.returncode == 1, f"inspect --hash of a tree with a short leaf: exit {result.returncode}")


# ---- progress bar -------------------------------------------------------------------------------

def run_on_terminal(argv, env):
    """Runs argv with stdin, stdout and stderr on a new pseudo-terminal; returns (status, output)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    output = b""
    while True:
        ready, _, _ = select.select([fd], [], [], TIMEOUT_S)
        if not ready:
            os.kill(pid, 9)
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode("utf-8", "replace")


def suite_progress(opts, failures):
    fixture = os.path.join(opts.data, "torch", "state_dict_linear_bn.pt")
    now = dict(os.environ, TENSORFILE_PROGRESS_DELAY_MS="0")  # draw at once: the fixtures convert in milliseconds
    with tempfile.TemporaryDirectory() as scratch:
        for out in ("out.pt", "out_tree"):
            target = os.path.join(scratch, out)
            status, output = run_on_terminal([opts.tensorfile, "convert", fixture, target], now)
            failures.check(status == 0, f"convert to {out} on a terminal: exit {status}\n{output}")
            failures.check(f"writing {out}" in output and "100%  72 B / 72 B" in output and "\r" in output,
                           f"convert to {out} on a terminal drew no complete bar:\n{output!r}")

            status, output = run_on_terminal([opts.tensorfile, "convert", "--quiet", fixture, target], now)
            failures.check(status == 0 and output == "", f"convert --quiet on a terminal printed {output!r}")

            status, output = run_on_terminal([opts.tensorfile, "convert", fixture, target], dict(os.environ))
            failures.check(status == 0 and output == "",
                           f"convert on a terminal, done in under a second, printed {output!r}")

            result = subprocess.run([opts.tensorfile, "convert", fixture, target], env=now, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S, check=False)
            failures.check(result.returncode == 0 and result.stdout == "" and result.stderr == "",
                           f"convert on a pipe printed {result.stdout!r} {result.stderr!r}")

    # scan counts files: a bar on a terminal, none with --quiet or --json, none on a pipe (stdout unchanged).
    folder = os.path.join(opts.data, "torch")
    count = sum(len(names) for _, _, names in os.walk(folder))  # scan reads every regular file, whatever its name
    scan = [opts.tensorfile, "scan", folder]
    _, output = run_on_terminal(scan, now)
    failures.check("scanning  [" in output and f"100%  {count} / {count} files" in output and "\r" in output,
                   f"scan on a terminal drew no complete bar:\n{output!r}")
    piped = subprocess.run(scan, env=now, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S,
                           check=False)
    failures.check(piped.stderr == "" and f"{count} files scanned" in piped.stdout,
                   f"scan on a pipe: {piped.stderr!r}\n{piped.stdout}")
    for quiet in ("--quiet", "--json"):
        _, output = run_on_terminal([*scan, quiet], now)
        failures.check("scanning" not in output and "files/s" not in output,
                       f"scan {quiet} on a terminal drew a bar:\n{output!r}")


# ---- convert -------------------------------------------------------------------------------------

def describe(tool, path):
    result = run(tool, "inspect", "--json", "--hash", path)
    if result.returncode != 0:
        raise RuntimeError(f"inspect {path}: {result.stderr}")
    return json.loads(result.stdout)


def contiguous_strides(shape):
    strides, step = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def as_tensordict_keeps_it(description):
    """What a tensordict tree keeps of a description: each tensor a contiguous copy of its own, no
    requires_grad; values as they are."""
    out = dict(description, format="torch-zip")
    out["tensors"] = [dict(t, stride=contiguous_strides(t["shape"]), storage_offset=0, requires_grad=False, storage=i)
                      for i, t in enumerate(description["tensors"])]
    return out


def without_unsupported(description):
    return dict(description, values=[v for v in description["values"] if v["type"] != "unsupported"])


def differences(a, b):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
    import compare_reference  # noqa: E402  (tests/interop, the standard library only)
    problems = []
    compare_reference.compare(a, b, "", problems.append)
    return problems


# Fixtures that have no tensordict form, with the refusal convert gives.
NO_TENSORDICT_FORM = {
    "meta.pt": "the root is of type Tensor",
    "nested_containers.pt": "bytes: a value of type bytes has no tensordict form",
    "noncontig_view.pt": "the root is of type Tensor",
    "subclass.pt": "the root is a __main__.MyT, which is not data; nothing to write",
    "t_float32_2x3.pt": "the root is of type Tensor",
    "t_float32_2x3_buffer.pt": "the root is of type Tensor",
    "torch_objects.pt": "device: a value of type device has no tensordict form",
    "whole_module.pt": "the root is a torch.nn.modules.linear.Linear, which is not data",
}
# Fixtures whose objects a clean re-save leaves out, by path.
LEFT_OUT = {
    "numpy_objects.pt": ["np_scalar", "np_int", "np_array"],
    "quantized.pt": ["q_per_tensor", "q_per_channel"],
    "sparse.pt": ["coo", "csr"],
    "torch_objects.pt": ["layout"],
}


def lazy_permuted_tree(path):
    """td.permute(1, 0) of a [2, 3] TensorDict whose "a" is float32 [2, 3] (0..5), memmapped without
    materialising it: the layout of tensordict's _lazy.py _CustomOpTensorDict._memmap_ (pytorch/tensordict
    a1a061e3d), compact JSON as orjson writes it."""
    os.makedirs(os.path.join(path, "_source"))
    with open(os.path.join(path, "_source", "a.memmap"), "wb") as f:
        f.write(struct.pack("<6f", *range(6)))
    with open(os.path.join(path, "_source", "meta.json"), "w") as f:
        f.write('{"a":{"device":"cpu","shape":[2,3],"dtype":"torch.float32","is_nested":false},"shape":[2,3],'
                '"device":"cpu","_type":"<class \'tensordict._td.TensorDict\'>"}')
    with open(os.path.join(path, "meta.json"), "w") as f:
        f.write('{"shape":[3,2],"device":"cpu","_type":"<class \'tensordict._lazy._PermutedTensorDict\'>",'
                '"custom_op":"permute","inv_op":"permute","custom_op_kwargs":{"dims":[1,0]},'
                '"inv_op_kwargs":{"dims":[1,0]}}')


def suite_convert(opts, failures):
    tool = opts.tensorfile
    with tempfile.TemporaryDirectory() as scratch:
        for rel in torch_fixtures(opts.data):
            name = os.path.basename(rel)
            source = os.path.join(opts.data, rel)
            original = describe(tool, source)
            # torch -> torch: everything that is data, views and sharing included.
            resaved = os.path.join(scratch, name)
            result = run(tool, "convert", source, resaved)
            if name in ("subclass.pt", "whole_module.pt"):
                failures.check(result.returncode == 1 and NO_TENSORDICT_FORM[name] in result.stderr,
                               f"convert {rel} (code at the root): exit {result.returncode}: {result.stderr}")
                continue
            if not failures.check(result.returncode == 0, f"convert {rel} {name}: {result.stderr}"):
                continue
            for path in LEFT_OUT.get(name, []):
                failures.check(f"tensorfile convert: left out {path}: " in result.stderr,
                               f"convert {rel}: no word on stderr about leaving out {path}:\n{result.stderr}")
            expected = dict(without_unsupported(original), format="torch-zip")
            for problem in differences(expected, describe(tool, resaved)):
                failures.check(False, f"torch -> torch {rel}: {problem}")

            # torch -> tensordict -> torch: data, names and values; not views, sharing or requires_grad.
            tree = os.path.join(scratch, name[:-3] + "_tree")
            result = run(tool, "convert", source, tree)
            if name in NO_TENSORDICT_FORM:
                failures.check(result.returncode == 1 and NO_TENSORDICT_FORM[name] in result.stderr,
                               f"convert {rel} to a tree: exit {result.returncode}, expected the refusal "
                               f"{NO_TENSORDICT_FORM[name]!r}: {result.stderr}")
                continue
            if not failures.check(result.returncode == 0 and os.path.isfile(os.path.join(tree, "meta.json")),
                                  f"convert {rel} to a tree: {result.stderr}"):
                continue
            back = os.path.join(scratch, name[:-3] + "_back.pt")
            result = run(tool, "convert", tree, back)
            if not failures.check(result.returncode == 0, f"convert the tree of {rel} back: {result.stderr}"):
                continue
            expected = as_tensordict_keeps_it(without_unsupported(original))
            for problem in differences(expected, as_tensordict_keeps_it(describe(tool, back))):
                failures.check(False, f"torch -> tensordict -> torch {rel}: {problem}")
            # The tree itself describes the same (as a tensordict).
            for problem in differences(dict(expected, format="tensordict"), as_tensordict_keeps_it(describe(tool, tree))
                                       | {"format": "tensordict"}):
                failures.check(False, f"torch -> tensordict {rel}: {problem}")

        for rel in tensordict_fixtures(opts.data):
            source = os.path.join(opts.data, rel)
            out = os.path.join(scratch, os.path.basename(rel) + ".pt")
            result = run(tool, "convert", source, out)
            if not failures.check(result.returncode == 0, f"convert {rel} to torch: {result.stderr}"):
                continue
            expected = dict(without_unsupported(describe(tool, source)), format="torch-zip")
            for problem in differences(expected, describe(tool, out)):
                failures.check(False, f"tensordict -> torch {rel}: {problem}")
            again = os.path.join(scratch, os.path.basename(rel) + "_again")
            result = run(tool, "convert", source, again, "--to", "memmap")
            failures.check(result.returncode == 0 and not differences(describe(tool, source), describe(tool, again)),
                           f"tensordict -> tensordict {rel}: {result.stderr}")
        pickled = run(tool, "convert", os.path.join(opts.data, "tensordict", "s05_nontensor"),
                      os.path.join(scratch, "nt.pt"))
        failures.check("tensorfile convert: left out obj: pickled NonTensorData" in pickled.stderr,
                       f"convert s05_nontensor: no word about the pickled leaf:\n{pickled.stderr}")

        # --to follows the name unless given; an existing tree is replaced.
        source = os.path.join(opts.data, "torch", "state_dict_linear_bn.pt")
        for out, to, is_dir in (("a.pth", None, False), ("b", None, True), ("c", "memmap", True),
                                ("d", "pt", False), ("e.npz", None, False), ("f.safetensors", None, False)):
            target = os.path.join(scratch, "naming", out)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            result = run(tool, "convert", source, target, *(["--to", to] if to else []))
            failures.check(result.returncode == 0 and os.path.isdir(target) == is_dir and os.path.exists(target),
                           f"convert to {out} (--to {to}): exit {result.returncode}, directory {os.path.isdir(target)}")
        result = run(tool, "convert", source, os.path.join(scratch, "naming", "b"))
        failures.check(result.returncode == 0, f"converting over an existing tree: {result.stderr}")

        # A lazy tensordict layout (issue 18): inspect names the op; convert materialises it, to torch and to a
        # plain tree, with the permuted values (a C-order SHA-256 of a.T computed here).
        lazy = os.path.join(scratch, "lazy_permuted")
        lazy_permuted_tree(lazy)
        result = run(tool, "inspect", lazy)
        failures.check(result.returncode == 0 and "permuted (1, 0) of _source" in result.stdout,
                       f"inspect a permuted tree: exit {result.returncode}: {result.stdout}{result.stderr}")
        want = {"a": ([3, 2], hashlib.sha256(struct.pack("<6f", 0, 3, 1, 4, 2, 5)).hexdigest())}
        for target in (lazy, os.path.join(scratch, "lazy.pt"), os.path.join(scratch, "lazy_tree")):
            if target != lazy:
                result = run(tool, "convert", lazy, target)
                if not failures.check(result.returncode == 0, f"convert a permuted tree to {target}: {result.stderr}"):
                    continue
            got = {t["path"]: (t["shape"], t.get("sha256")) for t in describe(tool, target)["tensors"]}
            failures.check(got == want, f"permuted tree as {os.path.basename(target)}: {got}, expected {want}")
        meta = os.path.join(scratch, "lazy_tree", "meta.json")
        failures.check(os.path.isfile(meta) and "_PermutedTensorDict" not in open(meta).read() and
                       not os.path.exists(os.path.join(scratch, "lazy_tree", "_source")),
                       "convert of a permuted tree to a tree did not write a plain TensorDict")

        # --select: only the tensors it names are written, with their values, to every output kind; a pattern
        # that matches nothing is an error and writes nothing.
        def tensor_hashes(path):
            return {t["path"]: (t["shape"], t.get("sha256")) for t in describe(tool, path)["tensors"]}
        selections = (
            (os.path.join(opts.data, "torch", "state_dict_linear_bn.pt"), ["*.weight", "1.bias"],
             {"0.weight", "1.weight", "1.bias"}),
            (os.path.join(opts.data, "tensordict", "s01_basic"), ["nested/deeper/*"], {"nested/deeper/c"}),
        )
        for source, patterns, kept in selections:
            original = tensor_hashes(source)
            select_args = [arg for pattern in patterns for arg in ("--select", pattern)]
            for out in ("sel.pt", "sel.safetensors", "sel_tree", "sel.npz"):
                target = os.path.join(scratch, os.path.basename(source) + "_" + out)
                result = run(tool, "convert", source, target, *select_args)
                if not failures.check(result.returncode == 0, f"convert {source} {out} --select: {result.stderr}"):
                    continue
                got = tensor_hashes(target)
                want = {p: v for p, v in original.items() if p in kept}
                failures.check(got == want, f"convert {source} {out} --select {patterns}: {got}, expected {want}")

        # One path spelling: each tensor path inspect --json lists, given to --select as it is, writes just that
        # tensor, which a flat file names by that path (the name is convert's named_tensors() path) and a tree
        # lists under it again.
        for source in (os.path.join(opts.data, "torch", "optimizer_sgd.pt"),
                       os.path.join(opts.data, "tensordict", "s01_basic"),
                       os.path.join(opts.data, "tensordict", "s07_tensorclass")):
            original = tensor_hashes(source)
            failures.check(len(original) > 1 and any("/" in p for p in original),
                           f"{source}: no nested tensor paths to check: {sorted(original)}")
            for path, value in sorted(original.items()):
                failures.check(not path.startswith("/"), f"inspect --json {source}: path {path!r} starts with /")
                for out in ("one.safetensors", "one.pt"):
                    target = os.path.join(scratch, "spelling_" + out)
                    result = run(tool, "convert", source, target, "--select", path)
                    if failures.check(result.returncode == 0, f"convert {source} --select {path!r}: {result.stderr}"):
                        got = tensor_hashes(target)
                        failures.check(got == {path: value},
                                       f"convert {source} {out} --select {path!r}: {got}, expected {path!r}")
        source = os.path.join(opts.data, "torch", "state_dict_linear_bn.pt")
        target = os.path.join(scratch, "typo.pt")
        result = run(tool, "convert", source, target, "--select", "0.weight", "--select", "O.bias")
        failures.check(result.returncode == 2 and "no tensor path of" in result.stderr and "'O.bias'" in result.stderr
                       and "'0.weight'" not in result.stderr and not os.path.exists(target),
                       f"convert --select with a pattern matching nothing: exit {result.returncode}: {result.stderr}")


# ---- hostile text --------------------------------------------------------------------------------

def pickle_text(text):
    data = text.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(data)) + data


def pickle_int(value):
    return b"J" + struct.pack("<i", value)


def pickle_tensor(key, numel, location="cpu"):
    """torch._utils._rebuild_tensor_v2 of a 1-d FloatStorage record `key`, as torch.save writes it."""
    storage = (b"(" + pickle_text("storage") + b"ctorch\nFloatStorage\n" + pickle_text(key) + pickle_text(location) +
               pickle_int(numel) + b"tQ")
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage + pickle_int(0) + b"(" + pickle_int(numel) + b"t(" +
            pickle_int(1) + b"t\x89ccollections\nOrderedDict\n)Rt" + b"R")


def pickle_dict(items):
    """A dict of (key, pickled value) pairs; values are pickle opcodes."""
    return b"}(" + b"".join(pickle_text(k) + v for k, v in items) + b"u"


def torch_zip(path, prefix, pickle, records):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "/data.pkl", b"\x80\x02" + pickle + b".")
        for name, data in records.items():
            z.writestr(f"{prefix}/data/{name}", data)
        z.writestr(prefix + "/version", b"3\n")


# Each a way a hostile file could drive a terminal: colours, clearing it, setting its title, a bell, NUL
# (which cuts a C string), DEL, C1 CSI and NEL.
HOSTILE = ["\x1b[31mred\x1b[0m", "nul\0key", "bell\x07", "del\x7f", "osc\x1b]0;pwned\x07", "c1\u009b2J\u0085"]


def hostile_torch(path, missing_record=False):
    floats = struct.pack("<4f", 1, 2, 3, 4)
    items = [(HOSTILE[0], pickle_tensor("0", 4, location="cpu")),
             (HOSTILE[1], pickle_text("value \x1b[2J\0 \x07\x7f\u009b")),
             (HOSTILE[2], pickle_dict([(HOSTILE[3], pickle_tensor("0", 4)), (HOSTILE[5], pickle_int(7))])),
             (HOSTILE[4], b"cevil\x1b[2J\nclass\x07\n")]
    if missing_record:
        items.append(("gone", pickle_tensor("k\0\x1b[31m", 1)))
    torch_zip(path, "evil\x1b]0;t\x07", pickle_dict(items), {"0": floats})


def hostile_tree(path):
    os.makedirs(os.path.join(path, HOSTILE[2]))
    leaf = {"device": "cpu", "shape": [2], "dtype": "torch.float32", "is_nested": False}
    meta = {HOSTILE[0]: leaf, HOSTILE[2]: {"type": "TensorDict"}, "shape": [2], "device": "cpu",
            "_type": "<class 'evil\x1b[2J.TD'>"}
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f)
    with open(os.path.join(path, HOSTILE[2], "meta.json"), "w") as f:
        json.dump({HOSTILE[3]: leaf, "shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}, f)
    for leaf_path in (os.path.join(path, HOSTILE[0] + ".memmap"), os.path.join(path, HOSTILE[2], HOSTILE[3] + ".memmap")):
        with open(leaf_path, "wb") as f:
            f.write(struct.pack("<2f", 1, 2))


def raw_controls(text):
    """The characters of `text` a terminal would act on (and U+FFFD, what bytes that are not UTF-8 decode to)."""
    return sorted({c for c in text if (c < " " and c != "\n") or "\x7f" <= c <= "\x9f" or c == "\ufffd"})


def suite_hostile(opts, failures):
    tool = opts.tensorfile

    def clean(result, what):
        for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            failures.check(not raw_controls(text), f"{what}: raw control characters {raw_controls(text)!r} on "
                                                   f"{stream}:\n{text!r}")

    def golden(result, name):
        path = os.path.join(opts.golden, "hostile", name)
        if opts.regenerate:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(result.stdout + result.stderr)
            return
        with open(path, encoding="utf-8", newline="") as f:
            expected = f.read()
        failures.check(result.stdout + result.stderr == expected,
                       f"{name} differs from {path}:\n--- got\n{result.stdout}{result.stderr}--- expected\n{expected}")

    with tempfile.TemporaryDirectory() as scratch:
        pt = "evil\x1b[31m.pt"  # relative to scratch, so the output names it the same on every machine
        hostile_torch(os.path.join(scratch, pt))
        hostile_tree(os.path.join(scratch, "tree\x07"))
        for name, target in (("torch", pt), ("tensordict", "tree\x07")):
            result = run(tool, "inspect", target, cwd=scratch)
            if failures.check(result.returncode == 0, f"inspect hostile {name}: exit {result.returncode}: {result.stderr}"):
                clean(result, f"inspect hostile {name}")
                golden(result, f"{name}.txt")
            result = run(tool, "inspect", "--json", "--hash", target, cwd=scratch)
            if failures.check(result.returncode == 0, f"inspect --json hostile {name}: {result.stderr}"):
                clean(result, f"inspect --json hostile {name}")
                golden(result, f"{name}.json")
                paths = {t["path"] for t in json.loads(result.stdout)["tensors"]}
                expected = {HOSTILE[0], HOSTILE[2] + "/" + HOSTILE[3]}
                failures.check(paths == expected, f"inspect --json hostile {name}: tensor paths {paths!r}, "
                                                  f"expected {expected!r}")
            result = run(tool, "verify", target, cwd=scratch)
            # The torch file's pickle names a class weights_only refuses: verify says so (escaped) and exits 1.
            failures.check(result.returncode == (1 if name == "torch" else 0),
                           f"verify hostile {name}: exit {result.returncode}: {result.stderr}")
            clean(result, f"verify hostile {name}")
            golden(result, f"{name}.verify.txt")

        # convert names what it leaves out (a class reference with a hostile name, under a hostile key)
        result = run(tool, "convert", pt, "back.pt", cwd=scratch)
        failures.check(result.returncode == 0, f"convert hostile torch: exit {result.returncode}: {result.stderr}")
        clean(result, "convert hostile torch")
        golden(result, "torch.convert.txt")

        # Errors naming a hostile record or key: whole past the NUL, escaped.
        broken = "broken\x1b[2J.pt"
        hostile_torch(os.path.join(scratch, broken), missing_record=True)
        for command in ("inspect", "verify"):
            result = run(tool, command, broken, cwd=scratch)
            failures.check(result.returncode == 1, f"{command} hostile broken file: exit {result.returncode}")
            clean(result, f"{command} hostile broken file")
            failures.check("/data/k\\x00\\x1b[31m is missing" in result.stderr,
                           f"{command} hostile broken file: the message is cut or not escaped: {result.stderr!r}")
            golden(result, f"broken.{command}.txt")
        result = run(tool, "convert", pt, "tree_out", cwd=scratch)
        clean(result, "convert hostile torch to a tree")
        golden(result, "torch.convert_tree.txt")

# ---- formats -------------------------------------------------------------------------------------

def suite_formats(opts, failures):
    """Every command on every kind of input the library reads: inspect --json names the format open() found, verify,
    scan and bench succeed, and convert to a torch file keeps every tensor's values (the sha256 multiset)."""
    tool = opts.tensorfile
    d = opts.data
    with tempfile.TemporaryDirectory() as scratch:
        model_folder = os.path.join(scratch, "model_folder")  # a Hugging Face folder with one model.safetensors
        os.mkdir(model_folder)
        shutil.copy(os.path.join(d, "safetensors", "f.safetensors"), os.path.join(model_folder, "model.safetensors"))
        gguf = os.path.join(scratch, "overall.gguf")  # GGUF as this tool's convert writes it (no fixture of gguf-py's)
        result = run(tool, "convert", "--quiet", os.path.join(d, "safetensors", "overall.safetensors"), gguf)
        failures.check(result.returncode == 0 and "left out B: a uint8 tensor; gguf has no uint8" in result.stderr,
                       f"convert overall.safetensors -> gguf: exit {result.returncode}: {result.stderr}")
        split_prefix = os.path.join(scratch, "split")  # llama.cpp's split files, a part given for the whole model
        result = run(tool, "convert", "--quiet", gguf, split_prefix + ".gguf", "--split-max-tensors", "2")
        split_part = split_prefix + "-00002-of-00003.gguf"
        failures.check(result.returncode == 0 and os.path.exists(split_part),
                       f"convert overall.gguf --split-max-tensors 2: exit {result.returncode}: {result.stderr}")
        result = run(tool, "inspect", split_part)  # the first part's metadata and every part's tensor infos
        failures.check(result.returncode == 0 and "\nmetadata:\n  split.no = 0\n  split.count = 3\n" in result.stdout
                       and "part 1, byte " in result.stdout and "part 3, byte " in result.stdout,
                       f"inspect of a split part: exit {result.returncode}: {result.stdout[-600:]}{result.stderr}")
        inputs = [
            (os.path.join(d, "torch", "t_float32_2x3.pt"), "torch-zip"),
            (os.path.join(d, "torch", "legacy_format.pt"), "torch-legacy"),
            (os.path.join(d, "safetensors", "f.safetensors"), "safetensors"),
            (model_folder, "safetensors"),
            (os.path.join(d, "safetensors", "samples.safetensors.index.json"), "safetensors-sharded"),
            (os.path.join(d, "sharded", "torch_bin"), "torch-zip-sharded"),
            (os.path.join(d, "numpy", "f4_c.npy"), "npy"),
            (os.path.join(d, "numpy", "stored.npz"), "npz"),
            (os.path.join(d, "numpy", "deflated.npz"), "npz"),
            (os.path.join(d, "tensordict", "s01_basic"), "tensordict"),
            (gguf, "gguf"),
            (split_part, "gguf-sharded"),
        ]
        for index, (path, label) in enumerate(inputs):
            rel = os.path.relpath(path, d) if path.startswith(d) else os.path.basename(path)
            result = run(tool, "inspect", "--json", "--hash", path)
            if not failures.check(result.returncode == 0, f"inspect {rel}: exit {result.returncode}: {result.stderr}"):
                continue
            described = json.loads(result.stdout)
            failures.check(described["format"] == label, f"inspect {rel}: format {described['format']!r}, expected "
                                                         f"{label!r}")
            failures.check(len(described["tensors"]) > 0, f"inspect {rel}: no tensors")
            result = run(tool, "inspect", path)
            failures.check(result.returncode == 0 and result.stdout.startswith(path + ": "),
                           f"inspect {rel} (tree): exit {result.returncode}: {result.stdout[:200]}{result.stderr}")
            result = run(tool, "verify", path)
            failures.check(result.returncode == 0 and f"{path}: OK: " in result.stdout,
                           f"verify {rel}: exit {result.returncode}: {result.stdout}{result.stderr}")
            result = run(tool, "scan", "--quiet", path)
            failures.check(result.returncode == 0 and "all safe" in result.stdout,
                           f"scan {rel}: exit {result.returncode}: {result.stdout}{result.stderr}")
            result = run(tool, "bench", "--repeat", "1", "--threads", "2", path)
            failures.check(result.returncode == 0 and result.stdout.startswith(f"{path}: {label}, "),
                           f"bench {rel}: exit {result.returncode}: {result.stdout[:200]}{result.stderr}")
            out = os.path.join(scratch, f"out{index}.pt")
            result = run(tool, "convert", "--quiet", "--mmap", "off", "--threads", "2", path, out)
            if failures.check(result.returncode == 0, f"convert {rel} -> pt: exit {result.returncode}: {result.stderr}"):
                before = sorted(t["sha256"] for t in described["tensors"])
                after = sorted(t["sha256"] for t in describe(tool, out)["tensors"])
                failures.check(before == after, f"convert {rel} -> pt changed tensor values")

        # The flags named after LoadOptions / SaveOptions fields.
        source = os.path.join(d, "torch", "t_float32_2x3.pt")
        out = os.path.join(scratch, "meta.safetensors")
        result = run(tool, "convert", "--quiet", "--metadata", "origin=test", "--metadata", "format=np", source, out)
        if failures.check(result.returncode == 0, f"convert --metadata: exit {result.returncode}: {result.stderr}"):
            with open(out, "rb") as f:
                size = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(size))
            failures.check(header.get("__metadata__") == {"format": "np", "origin": "test"},
                           f"convert --metadata: __metadata__ {header.get('__metadata__')!r}")
        for mode in ("read-only", "copy-on-write", "shared", "off"):
            result = run(tool, "convert", "--quiet", "--mmap", mode, "--verify-crc", "--direct-reads", "never", source,
                         os.path.join(scratch, f"mode_{mode}.pt"))
            failures.check(result.returncode == 0, f"convert --mmap {mode}: exit {result.returncode}: {result.stderr}")
        with open(source, "rb") as f:
            good = f.read()
        flipped = os.path.join(scratch, "crc_flipped.pt")
        with open(flipped, "wb") as f:
            f.write(patch_member(good, "data/0", lambda old: bytes([old[0] ^ 0xFF]) + old[1:], fix_crc=False))
        result = run(tool, "convert", "--quiet", "--verify-crc", "--mmap", "off", flipped, os.path.join(scratch, "x.pt"))
        failures.check(result.returncode == 1 and "CRC-32 mismatch" in result.stderr,
                       f"convert --verify-crc of a flipped record: exit {result.returncode}: {result.stderr}")
        result = run(tool, "convert", "--quiet", "--mmap", "off", flipped, os.path.join(scratch, "y.pt"))
        failures.check(result.returncode == 0, f"convert without --verify-crc: exit {result.returncode}: {result.stderr}")


SUITES = {"golden": suite_golden, "formats": suite_formats, "usage": suite_usage, "verify": suite_verify, "progress": suite_progress,
          "convert": suite_convert,
          "hostile": suite_hostile}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", choices=sorted(SUITES))
    ap.add_argument("--tensorfile", required=True, help="the tensorfile program")
    ap.add_argument("--data", required=True, help="tests/data")
    ap.add_argument("--golden", required=True, help="tests/tools/golden")
    ap.add_argument("--regenerate", action="store_true", help="golden: rewrite the golden files")
    opts = ap.parse_args()
    opts.tensorfile = os.path.abspath(opts.tensorfile)
    opts.data = os.path.abspath(opts.data)
    opts.golden = os.path.abspath(opts.golden)
    failures = Failures()
    SUITES[opts.suite](opts, failures)
    for failure in failures.items:
        print("FAIL:", failure)
    print(f"{opts.suite}: {len(failures.items)} failure(s)" if failures.items else f"{opts.suite}: all passed")
    return 1 if failures.items else 0


if __name__ == "__main__":
    sys.exit(main())
