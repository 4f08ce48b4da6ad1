#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Save benchmark (issue: save): the 1 GiB, 2,000-tensor state_dict saved by tensorfile::save
# (no fsync), by Python torch.save, converted from the torch file to .safetensors (load with mmap + save),
# and the floor: the same number of bytes written with one plain write() from one buffer; all in one run,
# interleaved, each in its own process.
#   run_save_bench.sh [--dir D] [--bin B] [--repeats N]
# D holds (or gets) big_2000.pt from make_bench_files.py; B holds bench_save (else it is built).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${TMPDIR:-/tmp}/tensorfile-bench
bin=""
repeats=5
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "usage: $0 [--dir D] [--bin B] [--repeats N]" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3
mkdir -p "$dir"
[ -f "$dir/big_2000.pt" ] || "$python" "$here/make_bench_files.py" --out "$dir" --torch-only
if [ -z "$bin" ]; then
  bin=$dir/build
  mkdir -p "$bin"
  g++ -std=c++20 -O2 -DNDEBUG -I"$here/../../include" "$here/bench_save.cpp" -o "$bin/bench_save" -lfmt -pthread
fi
out=$dir/out
mkdir -p "$out"
for round in 1 2 3; do
  "$bin/bench_save" write_floor "$dir/big_2000.pt" "$out" "$repeats"
  "$bin/bench_save" save "$dir/big_2000.pt" "$out" "$repeats"
  "$bin/bench_save" convert "$dir/big_2000.pt" "$out" "$repeats"
  "$python" - "$dir/big_2000.pt" "$out" "$repeats" <<'PY'
import os, resource, sys, time
import torch
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
value = torch.load(src)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range(n):
    target = os.path.join(out, "bench_torch.pt")
    if os.path.exists(target):
        os.remove(target)
    start = time.perf_counter()
    torch.save(value, target)
    times.append((time.perf_counter() - start) * 1e3)
os.remove(target)
times.sort()
print('{"mode": "torch.save", "min_ms": %.1f, "median_ms": %.1f, "rss_before_kb": %d, "peak_rss_kb": %d}'
      % (times[0], times[len(times) // 2], before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
PY
done
