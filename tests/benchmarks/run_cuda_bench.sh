#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CUDA load benchmark: torch state dicts (written by tensorfile's save) to cuda:0 by tensorfile's streamed
# load (pread ring + cudaMemcpyAsync; its options; cuFile), by load's per-storage copies, by
# torch.load(map_location="cuda") when a CUDA torch is there, and the floors: one cudaMemcpy from one pinned
# buffer, and a parallel pread of the file. Warm and cold page cache; wall time with the result alive, peak RSS.
# Every run is bounded and logged: a failure costs its row, never the table. Run by tests/cuda/run_on_device.sh.
#
# usage: tests/benchmarks/run_cuda_bench.sh --bench PATH [--dir DIR] [--sizes-mib "1024 4096"] [--repeats N]
#                                           [--caches "warm cold"] [--budget S] [--python PY] [--out FILE]
#   --bench PATH     bench_cuda_load, built with -DTENSORFILE_CUDA=ON -DTENSORFILE_BUILD_BENCHMARKS=ON
#   --dir DIR        files, results and logs (default /tmp/tf_cuda_bench); state_dict_<N>m.pt made when missing
#   --sizes-mib S    file sizes in MiB (default "1024 4096": with the defaults below, about 5 minutes)
#   --repeats N      timed loads per configuration and cache state (default 3)
#   --caches C       page-cache states (default "warm cold"); cold evicts the file before each repeat
#   --budget S       seconds after which the remaining runs are skipped (default 480), so one call fits 10 minutes
#   --python PY      python for torch.load and the table (default python3)
#   --out FILE       JSON lines (default DIR/results.jsonl); the table follows on stdout
set -uo pipefail

bench=""
dir=/tmp/tf_cuda_bench
sizes="1024 4096"
repeats=3
caches="warm cold"
budget=480
python="${PYTHON:-python3}"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench) bench="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --sizes-mib) sizes="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --caches) caches="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '3,19p' "$0"; exit 0 ;;
    *) echo "run_cuda_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$bench" ]] || { echo "run_cuda_bench.sh: --bench PATH to a built bench_cuda_load is required" >&2; exit 2; }
mkdir -p "$dir"
out="${out:-$dir/results.jsonl}"
errors="$dir/errors.log"
: > "$out"
: > "$errors"
started=$SECONDS

# run LABEL COMMAND...: appends the command's JSON lines, or notes its failure; skipped past the budget.
run() {
  local label="$1" rc
  shift
  if (( SECONDS - started > budget )); then
    echo "skipped (time budget of ${budget}s spent): $label" >> "$errors"
    return 0
  fi
  timeout 120 "$@" >> "$out" 2>> "$errors"
  rc=$?
  [[ $rc == 0 ]] || echo "failed (rc=$rc): $label" >> "$errors"
}

torch_cuda=no
if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
  torch_cuda=yes
else
  echo "torch.load not measured: $("$python" -c 'import torch; print("torch", torch.__version__, "without CUDA")' 2>&1 | tail -1)" >> "$errors"
fi

# torch_load.py FILE CACHE REPEATS: torch.load(map_location="cuda"), plain and mmap=True, timed with the result alive.
cat > "$dir/torch_load.py" <<'PY'
import json, os, resource, sys, time
import torch
path, cache, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.zeros(1, device="cuda")  # context, not timed
size = os.path.getsize(path)
for mmap in (False, True):
    for repeat in range(repeats):
        if cache == "cold":
            fd = os.open(path, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
        start = time.perf_counter()
        sd = torch.load(path, map_location="cuda", mmap=mmap, weights_only=True)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3
        print(json.dumps({"file": path, "mode": "torch.load" + (" mmap" if mmap else ""), "io": "torch", "cache": cache,
                          "repeat": repeat, "bytes": size, "tensors": len(sd), "ms": round(ms, 2),
                          "gb_per_s": round(size / ms / 1e6, 3),
                          "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)
        del sd
        torch.cuda.empty_cache()
PY

for mib in $sizes; do
  file="$dir/state_dict_${mib}m.pt"
  [[ -s "$file" ]] || run "make $file" "$bench" "$file" make --mib "$mib"
  [[ -s "$file" ]] || continue
  for cache in $caches; do
    cold=()
    [[ $cache == cold ]] && cold=(--cold)
    [[ $cache == warm ]] && cat "$file" > /dev/null  # warm the page cache once
    # One process per configuration, so that peak RSS is that configuration's own.
    for config in "" "--direct on" "--direct off" "--ring-mib 64" "--separate" "--cufile"; do
      # shellcheck disable=SC2086  # config is a list of words
      run "$mib MiB $cache stream $config" "$bench" "$file" stream --repeats "$repeats" "${cold[@]}" $config
    done
    run "$mib MiB $cache hook" "$bench" "$file" hook --repeats "$repeats" "${cold[@]}"
    run "$mib MiB $cache read_floor" "$bench" "$file" read_floor --repeats "$repeats" "${cold[@]}"
    [[ $torch_cuda == yes ]] && run "$mib MiB $cache torch.load" "$python" "$dir/torch_load.py" "$file" "$cache" "$repeats"
  done
  run "$mib MiB pinned_copy" "$bench" "$file" pinned_copy --repeats "$repeats"  # the PCIe floor: no cache
done

if [[ -s "$errors" ]]; then
  echo "notes ($(wc -l < "$errors") lines, in $errors):"
  grep -E '^(failed|skipped|torch.load not)' "$errors" | head -20
  grep -vE '^(failed|skipped|torch.load not)' "$errors" | head -5
fi
"$python" - "$out" <<'PY'
import json, statistics, sys, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
groups, unavailable = {}, set()
for r in rows:
    label = r["mode"]
    if r["mode"] == "stream":
        if r.get("io") == "unavailable":
            unavailable.add(f"{os.path.basename(r['file'])}: cuFile not used: {r.get('error', '')}")
            continue
        label += f" {r['io']} ring={r['ring_mib']}M direct={r['direct']}" + ("" if r["single_allocation"] else " separate")
    groups.setdefault((os.path.basename(r["file"]), r["cache"], label), []).append(r)
for line in sorted(unavailable):
    print(line)
median = {k: (statistics.median(r["ms"] for r in rs), rs[0]["bytes"], max(r["peak_rss_kb"] for r in rs) / 1024)
          for k, rs in groups.items()}
print(f"{'file':<22} {'cache':<5} {'configuration':<44} {'median ms':>10} {'GB/s':>7} {'peak RSS MiB':>13}")
for (name, cache, label), (ms, size, rss) in sorted(median.items()):
    print(f"{name:<22} {cache:<5} {label:<44} {ms:>10.1f} {size / ms / 1e6:>7.2f} {rss:>13.0f}")
print()
for name in sorted({k[0] for k in median}):
    pinned = median.get((name, "warm", "pinned_copy"))
    for cache in ("warm", "cold"):
        stream = median.get((name, cache, "stream ring ring=256M direct=auto"))
        if not stream:
            continue
        line = f"{name} {cache}: stream {stream[1] / stream[0] / 1e6:.2f} GB/s, rss {stream[2]:.0f} MiB"
        floor = median.get((name, cache, "read_floor"))
        if pinned:
            share = pinned[0] / stream[0]
            verdict = ("PASS" if share >= 0.85 else "FAIL") if cache == "warm" else "info"
            line += f"; {100 * share:.0f}% of pinned cudaMemcpy ({verdict}, >= 85% warm)"
        if floor:
            line += f"; {100 * floor[0] / stream[0]:.0f}% of the read floor"
        torch = median.get((name, cache, "torch.load"))
        if torch:
            line += f"; torch.load/stream {torch[0] / stream[0]:.2f}x ({'PASS' if torch[0] >= 3 * stream[0] else 'FAIL'}, >= 3x)"
        print(line)
PY
