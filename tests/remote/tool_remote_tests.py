#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The tensorfile program on URLs, against the servers run_remote_tests.py starts (nginx, the fault proxy, s3rver).

Each check runs the built program on a URL and on the same file on disk (the folder nginx serves) and compares what
they print: inspect (tree and --json, with --hash), verify, scan, convert to safetensors and .pt (the output read back
by the program, its tensors' hashes against the local file's), bench. Then the failures: a 404 and the proxy's faults
(403, a dropped connection) end with exit status 1 and a message naming the URL, and a URL holding credentials or a
query never prints them. Called by run_remote_tests.py with --tool; standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def run(tool, args, env, timeout=120):
    return subprocess.run([tool] + args, env=env, capture_output=True, text=True, timeout=timeout)


def tensors_of(tool, target, env):
    """(path, dtype, shape, sha256) of every tensor, from inspect --json --hash."""
    result = run(tool, ["inspect", "--json", "--hash", target], env)
    if result.returncode != 0:
        return ("inspect failed", result.returncode, result.stderr)
    return sorted((t["path"], t["dtype"], tuple(t["shape"]), t["sha256"]) for t in json.loads(result.stdout)["tensors"])


def compare_with_local(tool, env, url, local, label, unsafe=False):
    """What the program prints for `url` against what it prints for `local`, the same file on disk. An `unsafe` file
    (a pickled module) fails verify and scan, and holds nothing convert writes."""
    # inspect: the tree (its first line names the source, which differs) and the JSON, without and with hashes.
    remote, here = run(tool, ["inspect", url], env), run(tool, ["inspect", local], env)
    check(remote.returncode == 0, f"{label}: inspect URL exits 0 (got {remote.returncode}: {remote.stderr.strip()})")
    check(remote.stdout.startswith(url.split("?")[0] + ": "), f"{label}: inspect's first line names the URL")
    check(remote.stdout.splitlines()[1:] == here.stdout.splitlines()[1:],
          f"{label}: inspect URL's tree is the local file's\n{remote.stdout}\n---\n{here.stdout}")
    for flags in (["--json"], ["--json", "--hash"]):
        remote, here = run(tool, ["inspect"] + flags + [url], env), run(tool, ["inspect"] + flags + [local], env)
        check(remote.returncode == 0 and remote.stdout == here.stdout,
              f"{label}: inspect {' '.join(flags)} URL is the local file's\n{remote.stdout}{remote.stderr}\n---\n"
              f"{here.stdout}")
    # verify: the same summary line.
    remote, here = run(tool, ["verify", url], env), run(tool, ["verify", local], env)
    expected = 1 if unsafe else 0
    check(remote.returncode == here.returncode == expected,
          f"{label}: verify URL exits {expected} (got {remote.returncode}, local {here.returncode}: {remote.stderr})")
    check(remote.stdout.replace(url.split("?")[0], "X") == here.stdout.replace(local, "X"),
          f"{label}: verify URL says what verify of the file says\n{remote.stdout}\n---\n{here.stdout}")
    # scan: the same verdict line, and the same JSON report.
    for flags in ([], ["--json"]):
        remote = run(tool, ["scan", "--quiet"] + flags + [url], env)
        here = run(tool, ["scan", "--quiet"] + flags + [local], env)
        check(remote.returncode == here.returncode == expected,
              f"{label}: scan {' '.join(flags)} URL exits {expected} (got {remote.returncode}, local "
              f"{here.returncode}: {remote.stdout}{remote.stderr})")
        check(remote.stdout.replace(url.split("?")[0], "X") == here.stdout.replace(local, "X"),
              f"{label}: scan {' '.join(flags)} URL reports what the file's scan reports\n{remote.stdout}\n---\n"
              f"{here.stdout}")
    # bench: the same tensor count and bytes on its first line.
    remote, here = run(tool, ["bench", "--repeat", "1", url], env), run(tool, ["bench", "--repeat", "1", local], env)
    check(remote.returncode == 0, f"{label}: bench URL exits 0 ({remote.stderr.strip()})")
    first = remote.stdout.split("\n", 1)[0]
    check(first.replace(url.split("?")[0], "X") == here.stdout.split("\n", 1)[0].replace(local, "X"),
          f"{label}: bench URL's first line counts what the file's does\n{first}\n---\n{here.stdout}")
    modes = [line.split()[0] for line in remote.stdout.splitlines()[2:] if line.strip()]
    check(modes == ["heap", "meta"], f"{label}: bench URL times heap and meta (got {modes})")
    if unsafe:
        return
    # convert: to safetensors and .pt, read back, every tensor's values the local file's.
    expected = tensors_of(tool, local, env)
    check(isinstance(expected, list) and expected, f"{label}: the local file's tensors are listed ({expected})")
    with tempfile.TemporaryDirectory() as out:
        for name in ("out.safetensors", "out.pt"):
            target = os.path.join(out, name)
            result = run(tool, ["convert", "--quiet", url, target], env)
            check(result.returncode == 0 and os.path.exists(target),
                  f"{label}: convert URL {name} exits 0 ({result.returncode}: {result.stderr.strip()})")
            check(tensors_of(tool, target, env) == expected,
                  f"{label}: convert URL {name}: its tensors are the local file's")


def failures_name_the_url(tool, env, url, label, secrets=()):
    """Every command on `url` (which fails) exits 1 and names it (without its query and credentials)."""
    shown = url.split("?")[0]
    if "@" in shown:
        shown = shown.split("://")[0] + "://" + shown.split("@", 1)[1]
    with tempfile.TemporaryDirectory() as out:
        for args in (["inspect", url], ["inspect", "--json", url], ["verify", url], ["scan", "--quiet", url],
                     ["convert", "--quiet", url, os.path.join(out, "x.safetensors")], ["bench", "--repeat", "1", url]):
            result = run(tool, args, env)
            said = result.stdout + result.stderr
            check(result.returncode == 1, f"{label}: {args[0]} exits 1 (got {result.returncode}: {said.strip()})")
            check(shown in said, f"{label}: {args[0]}'s message names {shown}: {said.strip()}")
            for secret in secrets:
                check(secret not in said, f"{label}: {args[0]} never prints {secret!r}: {said.strip()}")
            check("Traceback" not in said and "terminate called" not in said, f"{label}: {args[0]} fails cleanly")


def main():
    tool = sys.argv[1]
    env = dict(os.environ)
    http, proxy, root = env["TENSORFILE_REMOTE_HTTP"], env["TENSORFILE_REMOTE_PROXY"], env["TENSORFILE_REMOTE_ROOT"]
    files = [("safetensors/overall.safetensors", False), ("torch/state_dict_linear_bn.pt", False),
             ("torch/whole_module.pt", True), ("numpy/f4_c.npy", False)]
    for relative, unsafe in files:
        compare_with_local(tool, env, f"{http}/{relative}", os.path.join(root, relative), f"http {relative}", unsafe)
    # Through the proxy without a fault, and a sharded index (its shards fetched beside it): inspect and convert.
    compare_with_local(tool, env, f"{proxy}/pass/safetensors/overall.safetensors",
                       os.path.join(root, "safetensors/overall.safetensors"), "proxy pass")
    index = "safetensors/samples.safetensors.index.json"
    for flags in (["--json"], ["--json", "--hash"]):
        remote = run(tool, ["inspect"] + flags + [f"{http}/{index}"], env)
        here = run(tool, ["inspect"] + flags + [os.path.join(root, index)], env)
        check(remote.returncode == 0 and remote.stdout == here.stdout,
              f"sharded: inspect {' '.join(flags)} of the index URL is the local index's\n{remote.stdout}"
              f"{remote.stderr}\n---\n{here.stdout}")
    remote = run(tool, ["inspect", f"{http}/{index}"], env)
    check(remote.returncode == 0 and ": safetensors-sharded, 3 shards" in remote.stdout.split("\n", 1)[0],
          f"sharded: inspect's first line counts the shards: {remote.stdout}{remote.stderr}")
    # verify of an index URL: the index against its shards, then each shard by its URL, as verify of the index.
    remote, here = run(tool, ["verify", f"{http}/{index}"], env), run(tool, ["verify", os.path.join(root, index)], env)
    check(remote.returncode == here.returncode == 0 and
          remote.stdout.replace(f"{http}/{index}", "X") == here.stdout.replace(os.path.join(root, index), "X"),
          f"sharded: verify of the index URL says what verify of the index says\n{remote.stdout}{remote.stderr}\n---\n"
          f"{here.stdout}{here.stderr}")
    with open(os.path.join(root, index)) as f:
        broken = json.load(f)
    broken["weight_map"]["gone"] = "gone.safetensors"  # a shard that is not there
    with open(os.path.join(root, "safetensors", "broken.safetensors.index.json"), "w") as f:
        json.dump(broken, f)
    os.chmod(os.path.join(root, "safetensors", "broken.safetensors.index.json"), 0o644)
    broken_url = f"{http}/safetensors/broken.safetensors.index.json"
    remote = run(tool, ["verify", broken_url], env)
    here = run(tool, ["verify", os.path.join(root, "safetensors", "broken.safetensors.index.json")], env)
    check(remote.returncode == here.returncode == 1, f"sharded: verify of a broken index URL exits 1 "
          f"({remote.returncode}, local {here.returncode}: {remote.stdout}{remote.stderr})")
    check(broken_url in remote.stderr and "gone.safetensors" in remote.stderr,
          f"sharded: verify of a broken index URL names it and the missing shard: {remote.stderr}")
    with tempfile.TemporaryDirectory() as out:
        result = run(tool, ["convert", "--quiet", f"{http}/{index}", os.path.join(out, "all.safetensors")], env)
        check(result.returncode == 0, f"sharded: convert of the index URL exits 0 ({result.stderr.strip()})")
        check(tensors_of(tool, os.path.join(out, "all.safetensors"), env) == tensors_of(tool, os.path.join(root, index),
                                                                                           env),
              "sharded: convert of the index URL writes the index's tensors")

    # S3 (s3rver), credentials from the AWS_* environment run_remote_tests.py set.
    if "TENSORFILE_REMOTE_S3_BUCKET" in env:
        bucket = env["TENSORFILE_REMOTE_S3_BUCKET"]
        for relative in ("safetensors/overall.safetensors", "torch/state_dict_linear_bn.pt"):
            compare_with_local(tool, env, f"s3://{bucket}/{relative}", os.path.join(root, relative), f"s3 {relative}")
        failures_name_the_url(tool, env, f"s3://{bucket}/safetensors/missing.safetensors", "s3 404")
        wrong = dict(env, AWS_ACCESS_KEY_ID="WRONGKEYID", AWS_SECRET_ACCESS_KEY="s3-secret-never-printed")
        failures_name_the_url(tool, wrong, f"s3://{bucket}/safetensors/overall.safetensors", "s3 403 (unknown key)",
                              secrets=("s3-secret-never-printed",))
    else:
        check(False, "s3rver is not running: the S3 cases need it (.ci/install-deps installs it)")

    # Failures: a 404, the proxy's 403 and dropped connections, a refused connection.
    failures_name_the_url(tool, env, f"{http}/safetensors/missing.safetensors", "http 404")
    failures_name_the_url(tool, env, f"{proxy}/forbidden/safetensors/overall.safetensors", "proxy 403")
    failures_name_the_url(tool, env, f"{proxy}/drop-always/safetensors/overall.safetensors", "proxy drop")
    # Credentials and a presigned query: the server ignores both; no output, good or bad, holds them.
    host = http.split("://", 1)[1]
    secret_url = f"http://reader:pass-never-printed@{host}/safetensors/overall.safetensors?X-Amz-Signature=sig-never-printed"
    for args in (["inspect", secret_url], ["inspect", "--json", secret_url], ["verify", secret_url],
                 ["scan", "--quiet", secret_url], ["scan", "--json", secret_url], ["bench", "--repeat", "1", secret_url]):
        result = run(tool, args, env)
        said = result.stdout + result.stderr
        check(result.returncode == 0, f"credentials: {args[0]} of a URL with credentials works ({said.strip()})")
        check(f"http://{host}/safetensors/overall.safetensors" in said or args[1] == "--json",
              f"credentials: {args[0]} names the URL without them: {said.strip()}")
        for secret in ("pass-never-printed", "sig-never-printed", "reader:"):
            check(secret not in said, f"credentials: {args[0]} never prints {secret!r}: {said.strip()}")
    failures_name_the_url(tool, env, secret_url.replace("overall", "missing"), "credentials 404",
                          secrets=("pass-never-printed", "sig-never-printed", "reader:"))

    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        return 1
    print("every tool check passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
