#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# .npy benchmark: mmap load time across file sizes (it must not grow with the data: O(1)), and a large heap
# load against bench_load's pread floor on the same file in the same run. Warm page cache (each file read
# once before timing).
# usage: tests/benchmarks/run_npy_bench.sh BIN_DIR [MIB=1024] [REPEATS=5]   (BIN_DIR holds bench_npy, bench_load)
set -euo pipefail
bin="${1:?usage: run_npy_bench.sh BIN_DIR [MIB] [REPEATS]}"
mib="${2:-1024}"
repeats="${3:-5}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
results="$dir/results.jsonl"
for size in 1 16 256 "$mib"; do
  f="$dir/f$size.npy"
  [ -f "$f" ] || "$bin/bench_npy" make "$f" "$size"
  cat "$f" > /dev/null
  "$bin/bench_npy" mmap "$f" "$repeats" | tee -a "$results"
done
big="$dir/f$mib.npy"
"$bin/bench_load" pread_floor "$big" "$repeats" | tee -a "$results"
"$bin/bench_npy" heap "$big" "$repeats" | tee -a "$results"
"$bin/bench_load" pread_floor "$big" "$repeats" | tee -a "$results"
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
mmap = [r for r in rows if r["mode"] == "mmap"]
print("mmap load (min ms) by file size:")
for r in mmap:
    print("  %10.1f MiB  %8.3f ms" % (r["file_bytes"] / 2**20, r["min_ms"]))
floor = min(r["min_ms"] for r in rows if r["mode"] == "pread_floor")
heap = [r for r in rows if r["mode"] == "heap"][0]
print("heap load of %.0f MiB: min %.1f ms, median %.1f ms; best pread floor %.1f ms; ratio (min/min) %.2f"
      % (heap["file_bytes"] / 2**20, heap["min_ms"], heap["median_ms"], floor, heap["min_ms"] / floor))
PY
