#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CUDA load benchmark: a torch state_dict to cuda:0 by tensorfile's streamed load (cuda::load: pread
# ring + cudaMemcpyAsync), by load's per-storage copies, by torch.load(map_location="cuda"), and the
# floors: one cudaMemcpy from one pinned buffer, and a parallel pread of the file. Warm and cold
# page cache; wall time and peak RSS. NOT RUN YET: written on a machine without a GPU.
#
# usage: tests/benchmarks/run_cuda_bench.sh [--dir DIR] [--sizes "4g 16g"] [--repeats N] [--python PY] [--out FILE]
#   --dir DIR      where the state dicts live (made by make_cuda_bench_files.py when missing; default /tmp/tf_cuda_bench)
#   --sizes S      which files (default "4g 16g"; the disk needs 21 GiB for both)
#   --repeats N    timed loads per configuration and cache state (default 3); cold evicts the file before each
#   --python PY    python with torch and CUDA (default python3)
#   --out FILE     JSON lines (default DIR/results.jsonl); a table follows
# Cold cache: the file's pages are dropped with posix_fadvise(DONTNEED) before each cold repeat
# (bench_cuda_load --cold, and the same through os.posix_fadvise for torch.load).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir=/tmp/tf_cuda_bench
sizes="4g 16g"
repeats=3
python="${PYTHON:-python3}"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '3,16p' "$0"; exit 0 ;;
    *) echo "run_cuda_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
out="${out:-$dir/results.jsonl}"
: > "$out"

# Built directly: the program needs only the CUDA runtime (no fmt, no CMake configuration).
cuda="${CUDA_HOME:-/usr/local/cuda}"
bench="$dir/bench_cuda_load"
"${CXX:-g++}" -std=c++20 -O2 -DNDEBUG -I"$root/include" -I"$cuda/include" "$here/bench_cuda_load.cpp" -o "$bench" \
  -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart -pthread -ldl

"$python" "$here/make_cuda_bench_files.py" --out "$dir" --sizes $sizes

torch_load() {  # FILE CACHE
  "$python" - "$1" "$2" "$repeats" <<'PY' >> "$out"
import json, os, resource, sys, time
import torch
path, cache, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.zeros(1, device="cuda")  # context, not timed
size = os.path.getsize(path)
for repeat in range(repeats):
    if cache == "cold":
        fd = os.open(path, os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
    start = time.perf_counter()
    sd = torch.load(path, map_location="cuda", weights_only=True)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3
    print(json.dumps({"file": path, "mode": "torch.load", "cache": cache, "repeat": repeat, "bytes": size,
                      "tensors": len(sd), "ms": round(ms, 2), "gb_per_s": round(size / ms / 1e6, 3),
                      "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    del sd
    torch.cuda.empty_cache()
PY
}

for size in $sizes; do
  file="$dir/state_dict_$size.pt"
  for cache in warm cold; do
    cold=""; [[ $cache == cold ]] && cold="--cold"
    [[ $cache == warm ]] && cat "$file" > /dev/null  # warm the page cache once
    # One process per configuration, so that peak RSS is that configuration's own.
    "$bench" "$file" stream --repeats "$repeats" $cold >> "$out"
    "$bench" "$file" stream --repeats "$repeats" $cold --direct on >> "$out"
    "$bench" "$file" stream --repeats "$repeats" $cold --direct off >> "$out"
    "$bench" "$file" stream --repeats "$repeats" $cold --threads 16 --ring-mib 512 --slot-mib 32 >> "$out"
    "$bench" "$file" stream --repeats "$repeats" $cold --ring-mib 64 >> "$out"
    "$bench" "$file" stream --repeats "$repeats" $cold --cufile >> "$out"
    "$bench" "$file" hook --repeats "$repeats" $cold >> "$out"
    "$bench" "$file" read_floor --repeats "$repeats" $cold >> "$out"
    torch_load "$file" "$cache"
  done
  "$bench" "$file" pinned_copy --repeats "$repeats" >> "$out"  # the PCIe floor: cache plays no part
done

"$python" - "$out" <<'PY'
import json, statistics, sys, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    label = r["mode"]
    if r["mode"] == "stream":
        label += f" ring={r['ring_mib']}M slot={r['slot_mib']}M t={r['threads']} direct={r['direct']}" + (" cufile" if r["cufile"] else "")
    groups.setdefault((os.path.basename(r["file"]), r["cache"], label), []).append(r)
print(f"{'file':<20} {'cache':<5} {'configuration':<52} {'median ms':>10} {'GB/s':>7} {'peak RSS MiB':>13}")
for (name, cache, label), rs in sorted(groups.items()):
    ms = statistics.median(r["ms"] for r in rs)
    print(f"{name:<20} {cache:<5} {label:<52} {ms:>10.1f} {rs[0]['bytes'] / ms / 1e6:>7.2f} {max(r['peak_rss_kb'] for r in rs) / 1024:>13.0f}")
PY
