#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Safety-scan benchmark. (1) scan() of a ~1 GiB torch.save checkpoint on a warm page cache: time per scan and the
# pickle bytes read (the tensor data is never read). (2) `tensorfile scan` over a folder of COUNT small checkpoints
# against a Python loop running pickletools.genops over the same files' pickles, measured in the same run (whole
# commands, interpreter and program start included: the mean of 30 runs each with hyperfine, else the best of 3).
# usage: tests/benchmarks/run_scan_bench.sh BENCH_BIN_DIR TENSORFILE_PROGRAM [COUNT=1000] [MIB=1024]
set -euo pipefail
bin="${1:?usage: run_scan_bench.sh BENCH_BIN_DIR TENSORFILE_PROGRAM [COUNT] [MIB]}"
tool="${2:?usage: run_scan_bench.sh BENCH_BIN_DIR TENSORFILE_PROGRAM [COUNT] [MIB]}"
count="${3:-1000}"
mib="${4:-1024}"
python=/usr/bin/python3  # the python3 with torch
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$python" - "$dir" "$count" "$mib" <<'PY'
import collections, os, sys, torch
folder, count, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
big = collections.OrderedDict((f"layer{i}.weight", torch.zeros(mib * 2**20 // 4 // 64)) for i in range(64))
torch.save(big, os.path.join(folder, "big.pt"))
os.makedirs(os.path.join(folder, "small"))
for i in range(count):
    sd = collections.OrderedDict((f"l{j}.w", torch.full((4, 4), float(i))) for j in range(8))
    torch.save(sd, os.path.join(folder, "small", f"ckpt_{i:04d}.pt"))
PY
cat "$dir/big.pt" > /dev/null
echo "== scan() of a $(du -m "$dir/big.pt" | cut -f1) MiB checkpoint, warm cache"
"$bin/bench_scan" "$dir/big.pt" 50
cat > "$dir/genops_loop.py" <<'PY'
import os, pickletools, sys, zipfile
found = set()
for root, _, names in os.walk(sys.argv[1]):
    for name in sorted(names):
        with zipfile.ZipFile(os.path.join(root, name)) as archive:
            for member in archive.namelist():
                if member.endswith(".pkl"):
                    for op, arg, _ in pickletools.genops(archive.read(member)):
                        if op.name in ("GLOBAL", "INST"):
                            found.add(arg)
print(len(found), "distinct GLOBAL args")
PY
if command -v hyperfine > /dev/null; then
  # Mean of 30 runs of each, after 3 warm-up runs; the ratio of the means.
  hyperfine -N -w 3 -r 30 -i --export-json "$dir/times.json" "$tool scan $dir/small" \
    "$python $dir/genops_loop.py $dir/small" > /dev/null
  read -r tool_s python_s < <("$python" -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"]
print(r[0]["mean"], r[1]["mean"])' "$dir/times.json")
  how="mean of 30 runs (hyperfine)"
else
  best() {  # best wall time of 3 runs of a command, seconds (fork and exec of the timing included)
    local best=""
    for _ in 1 2 3; do
      local start end
      start=$(date +%s.%N)
      "$@" > /dev/null || [ $? -eq 1 ]
      end=$(date +%s.%N)
      best=$(echo "$start $end $best" | awk '{t=$2-$1; if ($3=="" || t<$3) print t; else print $3}')
    done
    echo "$best"
  }
  tool_s=$(best "$tool" scan "$dir/small")
  python_s=$(best "$python" "$dir/genops_loop.py" "$dir/small")
  how="best of 3 (no hyperfine installed)"
fi
echo "$tool_s $python_s" | awk -v count="$count" -v how="$how" '{
  printf "== %d small checkpoints, %s: tensorfile scan %.1f ms, python pickletools.genops loop %.1f ms\n", count, how,
         1000 * $1, 1000 * $2
  printf "speed-up: %.1fx\n", $2 / $1 }'
