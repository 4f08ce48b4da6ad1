#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Load benchmark: tensorfile heap/mmap/meta vs the pread floor, Python torch.load and libtorch pickle_load.
#
# usage: tests/benchmarks/run_load_bench.sh [--dir DIR] [--bin DIR] [--repeats N] [--python PY] [--quick]
#   --dir DIR      benchmark files (made there by make_bench_files.py when missing; default: a temp dir, removed)
#   --bin DIR      folder holding bench_load (and bench_libtorch); default: built here with CMake
#   --repeats N    N cold runs (a fresh process, one load) per configuration, plus one warm process
#                  of N+1 loads (at least 51 for the small file) whose first is left out (default 5)
#   --python PY    python with torch (default $PYTHON or /usr/bin/python3)
#   --quick        skip the 1 GiB file (for a smoke run)
#   --no-cold      skip the cold-cache runs (by default, as root, the 1 GiB file is also loaded N times
#                  each by heap, torch.load, the floors and `dd iflag=direct bs=16M`, the page cache dropped
#                  before each run; not root: skipped with a note)
#   --table-only   print the table of an earlier run's DIR/results.jsonl (needs --dir)
# Warm page cache: every file is read once before timing. Cold page cache (root only): drop_caches before
# each run. Prints one JSON line per configuration (also saved to DIR/results.jsonl), then a table with
# the targets of issue 17 as ratios of this run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir=""
bin=""
repeats=5
python="${PYTHON:-/usr/bin/python3}"
quick=0
cold=1
table_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-cold) cold=0; shift ;;
    --table-only) table_only=1; shift ;;
    -h|--help) sed -n '3,17p' "$0"; exit 0 ;;
    *) echo "run_load_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

results_table() {  # RESULTS_FILE
  "$python" - "$1" <<'PY'
import json, os, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
files = {}
for r in rows:
    name = os.path.basename(r["file"]).replace("_dict.pt", ".pt")
    mode = r["mode"] + ("@cold" if r.get("cache") == "cold" else "")
    c = files.setdefault(name, {}).setdefault(mode, {"cold": [], "warm": None})
    if r["repeats"] == 1:
        c["cold"].append(r)
    else:
        c["warm"] = r
def summary(c):
    cold = c["cold"]
    wall = [r["first_ms"] for r in cold]
    return {"min": min(wall), "median": statistics.median(wall), "cpu": statistics.median(r["cpu_median_ms"] for r in cold),
            "warm": c["warm"]["warm_median_ms"] if c["warm"] else float("nan"),
            "peak": max(r["peak_rss_kb"] for r in cold) * 1024, "start": min(r["start_rss_kb"] for r in cold) * 1024,
            "anon": max(r.get("rss_anon_kb", -1) for r in cold) * 1024, "filerss": max(r.get("rss_file_kb", -1) for r in cold) * 1024,
            "growth": [(r["peak_rss_kb"] - r["start_rss_kb"]) * 1024 for r in cold],
            "bytes": cold[0]["file_bytes"], "tensors": cold[0]["tensors"],
            "read": max(r.get("bytes_read", -1) for r in cold)}
MiB = 2 ** 20
floors = {"pread_floor": "pread floor", "populate_floor": "populate fl", "huge_floor": "huge floor",
          "huge2_floor": "huge 2thr fl"}
labels = {**floors, "decode_floor": "decode floor", "heap": "tf heap", "mmap": "tf mmap", "meta": "tf meta", "select": "tf select 1",
          "torch.load": "torch.load",
          "pickle_load": "libtorch"}
labels.update({m + "@cold": "cold " + l for m, l in list(labels.items())})
labels["dd_direct@cold"] = "cold dd direct"
print()
print("cold = fresh process per load (median of N); warm = in-process repeats after the first; ms wall clock;")
print("rows named 'cold ...': cold page cache (drop_caches before each process); the others: warm page cache;")
print("cpu = user+system ms of the cold loads; peak = ru_maxrss (max over the cold processes), start = before loading")
print(f"{'file':<19} {'config':<12} {'cold min':>9} {'cold med':>9} {'cpu med':>9} {'warm med':>9} "
      f"{'peak MiB':>9} {'start MiB':>9} {'peak/file':>9} {'(peak-start)/file':>17}")
s = {}
for name, configs in files.items():
    s[name] = {mode: summary(c) for mode, c in configs.items() if c["cold"]}
    for mode in labels:
        if mode in s[name]:
            x = s[name][mode]
            print(f"{name:<19} {labels[mode]:<12} {x['min']:>9.1f} {x['median']:>9.1f} {x['cpu']:>9.1f} {x['warm']:>9.1f} "
                  f"{x['peak'] / MiB:>9.1f} {x['start'] / MiB:>9.1f} {x['peak'] / x['bytes']:>9.3f} "
                  f"{(x['peak'] - x['start']) / x['bytes']:>17.3f}")
print()
print("targets of issue 17 (fresh-process medians; [cpu medians]; {warm-repeat medians}):")
def r(a, b, key):
    return a[key] / b[key] if b[key] else float("inf")
def ratios(a, b):
    return f"{r(a, b, 'median'):.2f}x [{r(a, b, 'cpu'):.2f}x] {{{r(a, b, 'warm'):.2f}x}}"
for name, c in s.items():
    if not all(k in c for k in ("heap", "mmap", "meta", "pread_floor", "torch.load")):
        continue
    heap, mmap, meta, floor, py = c["heap"], c["mmap"], c["meta"], c["pread_floor"], c["torch.load"]
    best = min((m for m in floors if m in c), key=lambda m: c[m]["median"])
    print(f"  {name}: torch.load/heap {ratios(py, heap)} (target >= 3x for the 1 GiB file)")
    print(f"  {name}: heap/best floor ({floors[best]}) {ratios(heap, c[best])} (target <= 1.2x for the 1 GiB file)")
    print(f"  {name}: heap/pread floor {ratios(heap, floor)} (small file: target <= 2x cold and warm)")
    if "decode_floor" in c:
        print(f"  {name}: decode floor/pread floor {ratios(c['decode_floor'], floor)}, heap/decode floor "
              f"{ratios(heap, c['decode_floor'])} (the decode floor: the pread floor and one pass that decodes the "
              f"pickle's opcodes, building nothing)")
    if "pickle_load" in c:
        print(f"  {name}: libtorch/heap {ratios(c['pickle_load'], heap)}")
    n = heap["tensors"] or 1
    print(f"  {name}: mmap {mmap['median'] * 1e3 / n:.2f} us/tensor in all; meta (parse, no data) {meta['median'] * 1e3 / n:.2f} "
          f"us/tensor; mmap - meta {(mmap['median'] - meta['median']) * 1e3 / n:+.2f} us/tensor")
    growth = [g / heap["bytes"] for g in heap["growth"]]
    print(f"  {name}: peak RSS heap, (peak - start) / file: median {statistics.median(growth):.3f}x, most "
          f"{max(growth):.3f}x, the pread floor's {statistics.median(g / floor['bytes'] for g in floor['growth']):.3f}x "
          f"(small file: target <= 1.5x; "
          f"{heap['anon'] / MiB:.0f} MiB anon + {heap['filerss'] / MiB:.0f} MiB file-backed after the load); mmap "
          f"{mmap['peak'] / MiB:.1f} MiB")
    if "select" in c:
        print(f"  {name}: select of 1 tensor of {heap['tensors']}: {c['select']['read'] / heap['bytes'] * 100:.2f}% of the file "
              f"read (/proc/self/io rchar; target < 1%)")
    if "heap@cold" in c and "torch.load@cold" in c:
        hc, pc = c["heap@cold"], c["torch.load@cold"]
        print(f"  {name}, cold page cache: torch.load/heap {r(pc, hc, 'median'):.2f}x (target >= 2x)")
        if "dd_direct@cold" in c:
            dd = c["dd_direct@cold"]
            print(f"  {name}, cold page cache: heap throughput / dd iflag=direct bs=16M {r(dd, hc, 'median') * 100:.0f}% "
                  f"(target >= 85%; dd {hc['bytes'] / MiB / dd['median'] * 1e3:.0f} MiB/s)")
if "big_2000.pt" in s and "big_2000_64mib.pt" in s:
    a, b = s["big_2000.pt"]["mmap"], s["big_2000_64mib.pt"]["mmap"]
    print(f"  mmap 1 GiB / 64 MiB, same 2,000 tensors: {ratios(a, b)} (target <= 1.05x: independent of data size)")
PY
}
if [[ $table_only -eq 1 ]]; then
  [[ -n "$dir" && -f "$dir/results.jsonl" ]] || { echo "run_load_bench.sh: --table-only needs --dir with results.jsonl" >&2; exit 2; }
  results_table "$dir/results.jsonl"
  exit 0
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/tensorfile_bench.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
if [[ -z "$dir" ]]; then dir="$scratch/files"; fi
mkdir -p "$dir"

# ---- programs -------------------------------------------------------------------------------
if [[ -z "$bin" ]]; then
  # A wrapper project, so that no top-level option is needed and only the benchmarks are built.
  mkdir -p "$scratch/project"
  cat > "$scratch/project/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.21)
project(tensorfile_load_bench LANGUAGES CXX)
find_package(fmt 9 REQUIRED)
add_library(tensorfile INTERFACE)
add_library(tensorfile::tensorfile ALIAS tensorfile)
target_include_directories(tensorfile INTERFACE "$root/include")
target_compile_features(tensorfile INTERFACE cxx_std_20)
target_link_libraries(tensorfile INTERFACE fmt::fmt)
add_subdirectory("$here" benchmarks)
CMAKE
  echo "== building the benchmarks (Release)" >&2
  cmake -S "$scratch/project" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$scratch/build" -j 2 >/dev/null
  bin="$scratch/build/benchmarks"
fi
[[ -x "$bin/bench_load" ]] || { echo "run_load_bench.sh: no $bin/bench_load" >&2; exit 1; }
have_libtorch=0
[[ -x "$bin/bench_libtorch" ]] && have_libtorch=1

# ---- files ----------------------------------------------------------------------------------
names=(small_5000 big_2000_64mib)
[[ $quick -eq 1 ]] || names+=(big_2000)
missing=0
for name in "${names[@]}"; do
  [[ -f "$dir/$name.pt" && -f "$dir/${name}_dict.pt" ]] || missing=1
done
if [[ $missing -eq 1 ]]; then
  echo "== writing benchmark files into $dir" >&2
  "$python" "$here/make_bench_files.py" --out "$dir" >&2
fi
for name in "${names[@]}"; do cat "$dir/$name.pt" "$dir/${name}_dict.pt" >/dev/null; done

# ---- runs ---------------------------------------------------------------------------------
# Cold: REPEATS fresh processes of one load each, the configurations interleaved (side by side), as
# a program that loads a model once: every page of the result newly faulted in; peak RSS is the
# configuration's own. Warm: one process of REPEATS+1 loads, the first left out: freed memory reused.
results="$dir/results.jsonl"
: > "$results"
torch_load() {  # FILE LOADS: Python torch.load, one JSON line
  "$python" - "$1" "$2" <<'PY'
import json, os, resource, statistics, sys, time
import torch
path, repeats = sys.argv[1], int(sys.argv[2])
start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu, tensors = [], [], 0
for _ in range(repeats):
    c, t = time.process_time(), time.perf_counter()
    value = torch.load(path)
    wall.append((time.perf_counter() - t) * 1e3)
    cpu.append((time.process_time() - c) * 1e3)
    tensors = sum(1 for v in value.values() if isinstance(v, torch.Tensor))
    del value
print(json.dumps({"tool": "python", "mode": "torch.load", "file": path, "file_bytes": os.path.getsize(path),
                  "tensors": tensors, "repeats": repeats, "first_ms": wall[0], "min_ms": min(wall),
                  "median_ms": statistics.median(wall), "cpu_min_ms": min(cpu),
                  "cpu_median_ms": statistics.median(cpu),
                  "warm_median_ms": statistics.median(wall[1:]) if repeats > 1 else 0,
                  "start_rss_kb": start_rss, "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
PY
}
configs=(pread_floor populate_floor huge_floor huge2_floor decode_floor heap mmap meta select torch.load)
[[ $have_libtorch -eq 1 ]] && configs+=(libtorch)
dd_direct() {  # FILE: dd iflag=direct bs=16M to /dev/null, one JSON line as the programs print
  local start end
  start=$(date +%s%N)
  dd if="$1" of=/dev/null iflag=direct bs=16M status=none
  end=$(date +%s%N)
  local ms=$(((end - start) / 1000))
  ms="$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
  printf '{"tool": "dd", "mode": "dd_direct", "file": "%s", "file_bytes": %s, "tensors": 0, "repeats": 1, ' \
    "$1" "$(stat -c %s "$1")"
  printf '"first_ms": %s, "cpu_median_ms": 0, "warm_median_ms": 0, "start_rss_kb": 0, "peak_rss_kb": 0}\n' "$ms"
}
run() {  # CONFIG FILE_STEM LOADS [CACHE]: CACHE cold drops the page cache first and tags the line
  local file="$dir/$2.pt"
  local cache="${4:-warm}"
  if [[ $cache == cold ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  case "$1" in
    torch.load) torch_load "$file" "$3" ;;
    libtorch) "$bin/bench_libtorch" "$dir/$2_dict.pt" "$3" ;;
    dd_direct) dd_direct "$file" ;;
    *) "$bin/bench_load" "$1" "$file" "$3" ;;
  esac | sed "s/^{/{\"cache\": \"$cache\", /" | tee -a "$results" | cut -c1-160 >&2
}
for name in "${names[@]}"; do
  echo "== $name: $repeats cold runs of ${configs[*]}" >&2
  for ((i = 0; i < repeats; ++i)); do
    for config in "${configs[@]}"; do run "$config" "$name" 1; done
  done
  # The small file's warm process loads 51 times: the floor's first few repeats still fault fresh memory.
  warm_loads=$((repeats + 1))
  [[ $name == small_5000 && $warm_loads -lt 51 ]] && warm_loads=51
  echo "== $name: warm runs ($warm_loads loads each)" >&2
  for config in "${configs[@]}"; do run "$config" "$name" "$warm_loads"; done
done
if [[ $cold -eq 1 && $quick -eq 0 ]]; then
  if [[ $(id -u) -eq 0 && -w /proc/sys/vm/drop_caches ]]; then
    echo "== big_2000: $repeats cold-cache runs (drop_caches before each)" >&2
    for ((i = 0; i < repeats; ++i)); do
      for config in dd_direct pread_floor huge2_floor heap torch.load; do run "$config" big_2000 1 cold; done
    done
  else
    echo "NOTE: cold-cache runs skipped: dropping the page cache needs root (/proc/sys/vm/drop_caches)" >&2
  fi
fi

# ---- table ----------------------------------------------------------------------------------
results_table "$results"
