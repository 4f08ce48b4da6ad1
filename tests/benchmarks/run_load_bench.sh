#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Load benchmark of every format: tensorfile's load() (heap under each page policy, mmap, meta) against floors of
# the same bytes and the peers (torch.load, numpy.load, libtorch's pickle_load), fresh processes interleaved.
#
# usage: tests/benchmarks/run_load_bench.sh [--dir DIR] [--bin DIR] [--repeats N] [--python PY] [--quick]
#   --dir DIR      benchmark files (made there by make_bench_files.py when missing; default: a temp dir, removed)
#   --bin DIR      folder holding bench_load (and bench_libtorch); default: built here with CMake
#   --repeats N    N rounds (default 5): each round runs every configuration once, in a fresh process of one
#                  load, in an order shuffled anew per round; then one warm process per torch configuration of
#                  N+1 loads (at least 51 for the small file), its first left out
#   --python PY    python with torch and numpy (default $PYTHON or /usr/bin/python3)
#   --seed S       seed of the rounds' order (default 1)
#   --quick        the ~64 MiB files instead of the 1 GiB ones (a smoke run)
#   --no-cold      skip the cold-cache runs (by default, as root and without --quick, the 1 GiB torch file is
#                  also loaded N times each by heap, torch.load, the floors and `dd iflag=direct bs=16M`, the page
#                  cache dropped before each run; not root: skipped with a note)
#   --table-only   print the tables of an earlier run's DIR/results.jsonl (needs --dir)
#   --list         print the jobs of one round and the warm processes, run nothing
# Formats, each of the main set (1 GiB of float32 in 2,000 tensors; --quick: 64 MiB): torch zip, safetensors
# single and sharded (Hugging Face index), torch .bin shards (index), .npy (one array), .npz (2,000 members),
# a tensordict memmap tree, GGUF (F32; its peer ggml's gguf_init_from_file, from the ggml that .ci/install-deps puts in
# ~/.cache/tensorfile-ggml or $TENSORFILE_GGML_DIR, when there); and the 5,000-tensor small torch file.
# Order: no two processes of one configuration follow each other; tensorfile's heap load runs with huge pages off
# (the default) and with TENSORFILE_HUGE_PAGES=1, and each round also runs both right after a NumPy process
# that dirtied and freed 1 GiB of small pages (rows "... after 4K"). Each row records the process before it.
# Warm page cache: every file is read once before timing. Prints one JSON line per process (also saved to
# DIR/results.jsonl), then the tables and the targets of issue 42 as ratios of this run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir=""
bin=""
repeats=5
python="${PYTHON:-/usr/bin/python3}"
seed=1
quick=0
cold=1
table_only=0
list=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-cold) cold=0; shift ;;
    --table-only) table_only=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '3,27p' "$0"; exit 0 ;;
    *) echo "run_load_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

results_table() {  # RESULTS_FILE
  "$python" - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
groups = {}  # "set format" -> config -> {"fresh": [rows], "warm": row}
for r in rows:
    config = r["config"] + ("@cold" if r.get("cache") == "cold" else "")
    c = groups.setdefault(f"{r['set']} {r['format']}", {}).setdefault(config, {"fresh": [], "warm": None})
    if r["repeats"] == 1:
        c["fresh"].append(r)
    else:
        c["warm"] = r
set_order = {"big_2000": 0, "big_2000_64mib": 1, "small_5000": 2}
format_order = {f: i for i, f in enumerate(["torch", "safetensors", "st_shards", "bin_shards", "npy", "npz", "tensordict",
                                            "gguf"])}
groups = dict(sorted(groups.items(), key=lambda g: (set_order.get(g[0].split()[0], 9), format_order.get(g[0].split()[1], 9))))
nan = float("nan")
def summary(c):
    fresh = c["fresh"]
    wall = [r["first_ms"] for r in fresh]
    return {"min": min(wall), "median": statistics.median(wall), "cpu": statistics.median(r["cpu_median_ms"] for r in fresh),
            "warm": c["warm"]["warm_median_ms"] if c["warm"] else nan,
            "peak": max(r["peak_rss_kb"] for r in fresh) * 1024, "start": min(r["start_rss_kb"] for r in fresh) * 1024,
            "anon": max(r.get("rss_anon_kb", -1) for r in fresh) * 1024, "filerss": max(r.get("rss_file_kb", -1) for r in fresh) * 1024,
            "growth": [(r["peak_rss_kb"] - r["start_rss_kb"]) * 1024 for r in fresh],
            "bytes": fresh[0]["file_bytes"], "tensors": fresh[0]["tensors"], "n": len(fresh),
            "read": max(r.get("bytes_read", -1) for r in fresh)}
MiB = 2 ** 20
floors = {"pread_floor": "pread floor", "populate_floor": "populate fl", "huge_floor": "huge floor",
          "huge2_floor": "huge 2thr fl"}
peers = {"torch.load": "torch.load", "torch.load_shards": "torch.load x shards", "numpy.load": "numpy.load",
         "numpy.mmap": "numpy mmap_mode=r", "safetensors.load_file": "safetensors.load_file",
         "pickle_load": "libtorch", "ggml.load": "ggml gguf_init_from_file"}
labels = {**floors, "decode_floor": "decode floor", "heap": "tf heap", "heap_huge": "tf heap huge",
          "heap~4k": "tf heap after 4K", "heap_huge~4k": "tf heap huge after 4K", "heap_1thread": "tf heap 1 thread",
          "mmap": "tf mmap", "meta": "tf meta",
          "select": "tf select 1", **peers}
labels.update({m + "@cold": "cold " + l for m, l in list(labels.items())})
labels["dd_direct@cold"] = "cold dd direct"
s = {name: {config: summary(c) for config, c in configs.items() if c["fresh"]} for name, configs in groups.items()}

print()
print("fresh = a fresh process per load (min and median of the rounds); warm = in-process repeats after the first;")
print("ms wall clock; huge = TENSORFILE_HUGE_PAGES=1; after 4K = right after a NumPy process dirtied and freed 1 GiB of")
print("small pages; rows named 'cold ...': page cache dropped before each process, the others: warm page cache;")
print("cpu = user+system ms of the fresh loads; peak = ru_maxrss (max over the fresh processes), start = before loading")
print(f"{'set format':<22} {'config':<22} {'n':>2} {'fresh min':>9} {'fresh med':>9} {'cpu med':>8} {'warm med':>8} "
      f"{'peak MiB':>8} {'start MiB':>9} {'peak/data':>9} {'(peak-start)/data':>17}")
for name, c in s.items():
    for config in labels:
        if config in c:
            x = c[config]
            print(f"{name:<22} {labels[config]:<22} {x['n']:>2} {x['min']:>9.1f} {x['median']:>9.1f} {x['cpu']:>8.1f} "
                  f"{x['warm']:>8.1f} {x['peak'] / MiB:>8.1f} {x['start'] / MiB:>9.1f} {x['peak'] / x['bytes']:>9.3f} "
                  f"{(x['peak'] - x['start']) / x['bytes']:>17.3f}")

def med(c, config):
    return c[config]["median"] if config in c else nan
def cell(c, config):
    return f"{c[config]['median']:.1f} ({c[config]['min']:.1f})" if config in c else "-"
print()
print("per format: fresh-process median (min) ms; floors and peers: medians; peer = torch.load, numpy.load (eager),")
print("safetensors.load_file when installed; peer mmap = numpy.load(mmap_mode='r'); cold: page cache dropped (root)")
cold = any("heap@cold" in c for c in s.values())
head = ["set format", "MiB", "heap", "heap huge", "mmap"] + [floors[f] for f in floors] + ["peer", "peer mmap"]
head += ["cold heap", "cold torch.load", "cold dd direct"] if cold else []
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for name, c in s.items():
    if "heap" not in c and "mmap" not in c:
        continue
    peer = next((p for p in ("torch.load", "torch.load_shards", "numpy.load", "safetensors.load_file", "ggml.load")
                 if p in c), None)
    some = next(iter(c.values()))
    cells = [name, f"{some['bytes'] / MiB:.0f}", cell(c, "heap"), cell(c, "heap_huge"), cell(c, "mmap")]
    cells += [f"{med(c, f):.1f}" if f in c else "-" for f in floors]
    cells += [f"{labels[peer]} {med(c, peer):.1f}" if peer else "-", f"{med(c, 'numpy.mmap'):.1f}" if "numpy.mmap" in c else "-"]
    if cold:
        cells += [cell(c, "heap@cold")] + [f"{med(c, k):.1f}" if k in c else "-" for k in ("torch.load@cold", "dd_direct@cold")]
    print("| " + " | ".join(cells) + " |")

def ratio(a, b):
    return a / b if b else float("inf")
def verdict(value, target, at_least):
    if value != value:
        return "n/a"
    return "met" if (value >= target if at_least else value <= target) else "NOT met"
def best_floor(c):
    present = [f for f in floors if f in c]
    return min(present, key=lambda f: c[f]["median"]) if present else None
print()
print("targets of issue 42 (ratios of fresh-process medians of this run; heap = huge pages off, the default;")
print("huge = TENSORFILE_HUGE_PAGES=1):")
main = [n for n in s if n.endswith(" torch") and not n.startswith("small")]
main = max(main, key=lambda n: s[n]["heap"]["bytes"]) if main else None
main_set = main.split()[0] if main else None
if main:
    c = s[main]
    best = best_floor(c)
    for heap in ("heap", "heap_huge", "heap~4k", "heap_huge~4k"):
        if heap not in c:
            continue
        x = ratio(med(c, "torch.load"), med(c, heap))
        print(f"  {main}: torch.load / {labels[heap]}: {x:.2f}x (target >= 2.5x: {verdict(x, 2.5, True)})")
        y = ratio(med(c, heap), med(c, best))
        print(f"  {main}: {labels[heap]} / best floor ({floors[best]}): {y:.2f}x (target <= 1.3x: {verdict(y, 1.3, False)})")
if main:
    print(f"  {main}: each fresh heap load, ms, after the process before it:")
    for heap in ("heap", "heap_huge"):
        fresh = groups[main][heap]["fresh"] if heap in groups[main] else []
        print(f"    {labels[heap]}: " + ", ".join(f"{r['first_ms']:.0f} after {r['after']}" for r in fresh))
def of_main(*formats):  # (name, format, configs) of the main set's groups of these formats
    for fmt in formats:
        if f"{main_set} {fmt}" in s:
            yield f"{main_set} {fmt}", fmt, s[f"{main_set} {fmt}"]
for name, fmt, c in of_main("npy", "npz"):
    for heap in ("heap", "heap_huge"):
        x = ratio(med(c, "numpy.load"), med(c, heap))
        print(f"  {name}: numpy.load / {labels[heap]}: {x:.2f}x (target >= 2x: {verdict(x, 2, True)})")
    if "numpy.mmap" in c:
        x = ratio(med(c, "numpy.mmap"), med(c, "mmap"))
        print(f"  {name}: numpy mmap_mode=r / tf mmap: {x:.2f}x (target >= 1x: {verdict(x, 1, True)})")
    else:
        x = ratio(med(c, "numpy.load"), med(c, "mmap"))
        print(f"  {name}: numpy.load / tf mmap: {x:.2f}x (numpy.load ignores mmap_mode for .npz; target >= 1x: "
              f"{verdict(x, 1, True)})")
for name, fmt, c in of_main("safetensors", "st_shards"):
    best = best_floor(c)
    for heap in ("heap", "heap_huge"):
        x = ratio(med(c, heap), med(c, "pread_floor"))
        y = ratio(med(c, heap), med(c, best))
        target = f" (target <= 1.2x: {verdict(x, 1.2, False)})" if fmt == "safetensors" else ""
        print(f"  {name}: {labels[heap]} / pread floor: {x:.2f}x{target}; / best floor ({floors[best]}): {y:.2f}x")
for name, fmt, c in of_main("gguf"):
    best = best_floor(c)
    for heap in ("heap", "heap_huge"):
        x = ratio(med(c, heap), med(c, "pread_floor"))
        y = ratio(med(c, heap), med(c, best))
        print(f"  {name}: {labels[heap]} / pread floor: {x:.2f}x (issue 45's target <= 1.2x: {verdict(x, 1.2, False)}); "
              f"/ best floor ({floors[best]}): {y:.2f}x")
        if "ggml.load" in c:
            print(f"  {name}: ggml gguf_init_from_file / {labels[heap]}: {ratio(med(c, 'ggml.load'), med(c, heap)):.2f}x")
c = s.get(f"{main_set} st_shards", {})
if "heap_1thread" in c:
    print(f"  {main_set} st_shards: tf heap 1 thread / tf heap (the default threads): "
          f"{ratio(med(c, 'heap_1thread'), med(c, 'heap')):.2f}x (shards read at once: target > 1x)")
for name, fmt, c in of_main("bin_shards", "tensordict"):
    best = best_floor(c)
    for config in ("heap", "heap_huge", "mmap"):
        if config in c:
            print(f"  {name}: {labels[config]} / pread floor: {ratio(med(c, config), med(c, 'pread_floor')):.2f}x; "
                  f"/ best floor ({floors[best]}): {ratio(med(c, config), med(c, best)):.2f}x")
    if "torch.load_shards" in c:
        print(f"  {name}: torch.load x shards / tf heap: {ratio(med(c, 'torch.load_shards'), med(c, 'heap')):.2f}x")
small = s.get("small_5000 torch")
if small and "decode_floor" in small:
    for heap in ("heap", "heap_huge"):
        x = ratio(small[heap]["warm"], small["decode_floor"]["warm"])
        print(f"  small_5000: warm {labels[heap]} / warm decode floor: {x:.2f}x (target <= 2x: {verdict(x, 2, False)}; "
              f"fresh: {ratio(med(small, heap), med(small, 'decode_floor')):.2f}x)")
if main and "heap@cold" in s[main]:
    c = s[main]
    x = ratio(med(c, "torch.load@cold"), med(c, "heap@cold"))
    print(f"  {main}, cold page cache: torch.load / tf heap: {x:.2f}x (target >= 1.5x: {verdict(x, 1.5, True)})")
    if "dd_direct@cold" in c:
        x = ratio(med(c, "dd_direct@cold"), med(c, "heap@cold"))
        print(f"  {main}, cold page cache: tf heap throughput / dd iflag=direct bs=16M: {x * 100:.0f}% (target >= 85%: "
              f"{verdict(x, 0.85, True)}; dd {c['heap@cold']['bytes'] / MiB / med(c, 'dd_direct@cold') * 1e3:.0f} MiB/s)")

print()
print("checks of earlier issues (must not regress):")
for name, c in s.items():
    if "mmap" in c and "meta" in c:
        mmap, meta = c["mmap"], c["meta"]
        n = mmap["tensors"] or 1
        target = " (safetensors: target <= 1 us)" if name.endswith(" safetensors") else ""
        print(f"  {name}: mmap {mmap['median'] * 1e3 / n:.2f} us/tensor in all; meta (parse, no data) "
              f"{meta['median'] * 1e3 / n:.2f} us/tensor; mmap - meta {(mmap['median'] - meta['median']) * 1e3 / n:+.2f} "
              f"us/tensor{target}")
    if not name.endswith(" torch") or not all(k in c for k in ("heap", "mmap", "pread_floor")):
        continue
    heap, mmap = c["heap"], c["mmap"]
    print(f"  {name}: tf heap / pread floor {ratio(heap['median'], c['pread_floor']['median']):.2f}x fresh, "
          f"{ratio(heap['warm'], c['pread_floor']['warm']):.2f}x warm (small file: target <= 2x)")
    if "pickle_load" in c:
        print(f"  {name}: libtorch / tf heap {ratio(c['pickle_load']['median'], heap['median']):.2f}x")
    growth = [g / heap["bytes"] for g in heap["growth"]]
    print(f"  {name}: peak RSS of tf heap, (peak - start) / data: median {statistics.median(growth):.3f}x, most "
          f"{max(growth):.3f}x (small file: target <= 1.5x; {heap['anon'] / MiB:.0f} MiB anon + "
          f"{heap['filerss'] / MiB:.0f} MiB file-backed after the load); mmap {mmap['peak'] / MiB:.1f} MiB")
    if "select" in c:
        print(f"  {name}: select of 1 tensor of {heap['tensors']}: {c['select']['read'] / heap['bytes'] * 100:.2f}% of "
              f"the file read (/proc/self/io rchar; target < 1%)")
for fmt in ("torch", "npy"):
    a, b = s.get(f"big_2000 {fmt}"), s.get(f"big_2000_64mib {fmt}")
    if a and b and "mmap" in a and "mmap" in b:
        print(f"  {fmt}: tf mmap 1 GiB / 64 MiB, same tensors: {ratio(a['mmap']['median'], b['mmap']['median']):.2f}x "
              f"(target <= 1.05x: independent of data size)")
PY
}
if [[ $table_only -eq 1 ]]; then
  [[ -n "$dir" && -f "$dir/results.jsonl" ]] || { echo "run_load_bench.sh: --table-only needs --dir with results.jsonl" >&2; exit 2; }
  results_table "$dir/results.jsonl"
  exit 0
fi

# ---- configurations -------------------------------------------------------------------------
have_libtorch=0
have_safetensors=0
"$python" -c "import safetensors.torch" 2>/dev/null && have_safetensors=1
ggml_dir="${TENSORFILE_GGML_DIR:-$HOME/.cache/tensorfile-ggml}"
have_ggml=0
[[ -f $ggml_dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so ]] && have_ggml=1
main=big_2000
[[ $quick -eq 1 ]] && main=big_2000_64mib
sets=(big_2000_64mib small_5000)
[[ $quick -eq 1 ]] || sets+=(big_2000)
set_suffixes() {  # SET: the files make_bench_files.py writes for it
  if [[ $1 == small_5000 ]]; then echo .pt _dict.pt; else echo .pt _dict.pt .safetensors _st_shards _bin_shards .npy .npz _tensordict .gguf; fi
}
# One job a line: SET FORMAT CONFIG PATH (PATH relative to DIR: what load() and the peers are given).
floor_configs="pread_floor populate_floor huge_floor huge2_floor"
jobs_of() {  # SET FORMAT PATH CONFIG...
  local set="$1" format="$2" path="$3"
  shift 3
  for config in "$@"; do echo "$set $format $config $path"; done
}
fresh_jobs() {
  local m=$main st=()
  [[ $have_safetensors -eq 1 ]] && st=(safetensors.load_file)
  local torch_peers=(torch.load)
  [[ $have_libtorch -eq 1 ]] && torch_peers+=(pickle_load)
  jobs_of "$m" torch "$m.pt" $floor_configs heap heap_huge heap~4k heap_huge~4k mmap meta select "${torch_peers[@]}"
  jobs_of "$m" safetensors "$m.safetensors" $floor_configs heap heap_huge mmap meta "${st[@]}"
  jobs_of "$m" st_shards "${m}_st_shards/model.safetensors.index.json" $floor_configs heap heap_huge heap_1thread mmap \
    "${st[@]}"
  jobs_of "$m" bin_shards "${m}_bin_shards/pytorch_model.bin.index.json" $floor_configs heap heap_huge mmap \
    torch.load_shards
  jobs_of "$m" npy "$m.npy" $floor_configs heap heap_huge mmap numpy.load numpy.mmap
  jobs_of "$m" npz "$m.npz" $floor_configs heap heap_huge mmap numpy.load
  # A tensordict tree always maps its leaves (as tensordict does): its load is the mmap row.
  jobs_of "$m" tensordict "${m}_tensordict" $floor_configs mmap
  local gguf_peer=()
  [[ $have_ggml -eq 1 ]] && gguf_peer=(ggml.load)
  jobs_of "$m" gguf "$m.gguf" $floor_configs heap heap_huge mmap meta "${gguf_peer[@]}"
  jobs_of small_5000 torch small_5000.pt $floor_configs decode_floor heap heap_huge mmap meta select "${torch_peers[@]}"
  if [[ $m != big_2000_64mib ]]; then  # the 64 MiB files: mmap time must not depend on the data's size
    jobs_of big_2000_64mib torch big_2000_64mib.pt pread_floor heap heap_huge mmap meta
    jobs_of big_2000_64mib npy big_2000_64mib.npy mmap
  fi
}
warm_jobs() {  # the torch files' configurations, for the in-process repeats
  fresh_jobs | awk '$2 == "torch" && $3 !~ /~4k$/'
}
schedule() {  # JOBS_FILE ROUNDS SEED [LAST_CONFIG]: every job once per round, shuffled, no config twice in a row
  "$python" - "$@" <<'PY'
import random, sys
jobs = [line.split() for line in open(sys.argv[1]) if line.strip()]
rounds, rng = int(sys.argv[2]), random.Random(int(sys.argv[3]))
last = sys.argv[4] if len(sys.argv) > 4 else None
for _ in range(rounds):
    for attempt in range(1000):
        left, order, prev = jobs[:], [], last
        rng.shuffle(left)
        while left:
            pick = next((j for j in left if j[2] != prev), None)
            if pick is None:
                break
            left.remove(pick)
            order.append(pick)
            prev = pick[2]
        if not left:
            break
    else:
        sys.exit("run_load_bench.sh: no order of the jobs keeps one configuration from following itself")
    last = order[-1][2]
    for job in order:
        print(" ".join(job))
PY
}

if [[ $list -eq 1 ]]; then
  [[ -n "$bin" && -x "$bin/bench_libtorch" ]] && have_libtorch=1
  echo "# one round (SET FORMAT CONFIG PATH), shuffled anew for each of the $repeats rounds:"
  fresh_jobs
  echo "# warm processes:"
  warm_jobs
  exit 0
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/tensorfile_bench.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
if [[ -z "$dir" ]]; then dir="$scratch/files"; fi
mkdir -p "$dir"

# ---- programs -------------------------------------------------------------------------------
if [[ -z "$bin" ]]; then
  # A wrapper project, so that no top-level option is needed and only these two benchmarks are built.
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
  echo "== building bench_load and bench_libtorch (Release)" >&2
  cmake -S "$scratch/project" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  targets=(tensorfile_bench_load)
  if cmake --build "$scratch/build" --target help | grep tensorfile_bench_libtorch >/dev/null; then
    targets+=(tensorfile_bench_libtorch)
  fi
  cmake --build "$scratch/build" -j 2 --target "${targets[@]}" >/dev/null
  bin="$scratch/build/benchmarks"
fi
[[ -x "$bin/bench_load" ]] || { echo "run_load_bench.sh: no $bin/bench_load" >&2; exit 1; }
[[ -x "$bin/bench_libtorch" ]] && have_libtorch=1

# ---- files ----------------------------------------------------------------------------------
missing=0
for name in "${sets[@]}"; do
  for suffix in $(set_suffixes "$name"); do [[ -e "$dir/$name$suffix" ]] || missing=1; done
done
if [[ $missing -eq 1 ]]; then
  echo "== writing benchmark files into $dir" >&2
  quick_flag=()
  [[ $quick -eq 1 ]] && quick_flag=(--quick)
  "$python" "$here/make_bench_files.py" --out "$dir" "${quick_flag[@]}" >&2
fi
for name in "${sets[@]}"; do
  for suffix in $(set_suffixes "$name"); do find "$dir/$name$suffix" -type f -exec cat {} + >/dev/null; done
done

# ---- runs -----------------------------------------------------------------------------------
results="$dir/results.jsonl"
: > "$results"
peer() {  # MODE PATH LOADS: a Python peer's load, one JSON line as bench_load prints
  "$python" - "$@" <<'PY'
import json, os, resource, statistics, sys, time
mode, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode.startswith("numpy"):
    import numpy as np  # alone: a numpy user's process imports no torch
elif mode == "ggml.load":
    import ctypes
    sys.path.insert(0, os.environ["TENSORFILE_BENCH_GGUF_DIR"])
    import ggml_peer
    ggml = ggml_peer.Ggml(ggml_peer.library_path(os.environ["TENSORFILE_GGML_DIR"]))

    class GgmlLoad:  # what a load gave, freed when dropped
        def __init__(self, ctx, data):
            self.ctx, self.data = ctx, data
            self.tensors = ggml.lib.gguf_get_n_tensors(ctx)

        def __len__(self):
            return self.tensors

        def __del__(self):
            ggml.lib.ggml_free(self.data)
            ggml.lib.gguf_free(self.ctx)
else:
    import torch
def shards(index):
    folder = os.path.dirname(index)
    return [os.path.join(folder, f) for f in dict.fromkeys(json.load(open(index))["weight_map"].values())]
def load():
    if mode == "torch.load":
        return torch.load(path)
    if mode == "torch.load_shards":  # what transformers does with a .bin index: torch.load of each shard
        out = {}
        for shard in shards(path):
            out.update(torch.load(shard, map_location="cpu"))
        return out
    if mode == "safetensors.load_file":
        from safetensors.torch import load_file
        out = {}
        for shard in shards(path) if path.endswith(".index.json") else [path]:
            out.update(load_file(shard))
        return out
    if mode == "numpy.load":
        value = np.load(path)
        if path.endswith(".npz"):  # an NpzFile reads its members when asked: ask for every one
            with value:
                return {name: value[name] for name in value.files}
        return value
    if mode == "numpy.mmap":
        return np.load(path, mmap_mode="r")
    if mode == "ggml.load":  # ggml's own reader: the tensor infos, then the data section read into one context
        params = ggml_peer.GgufInitParams(False, ctypes.pointer(ctypes.c_void_p()))
        ctx = ggml.lib.gguf_init_from_file(os.fsencode(path), params)
        assert ctx, "ggml refused " + path
        return GgmlLoad(ctx, params.ctx.contents)
    sys.exit(f"unknown peer {mode}")
def count(value):
    return len(value) if isinstance(value, dict) or mode == "ggml.load" else 1
folder = os.path.dirname(path) if path.endswith(".index.json") else path
data_bytes = (sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) if os.path.isdir(folder)
              else os.path.getsize(path))
start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu, tensors = [], [], 0
for _ in range(repeats):
    c, t = time.process_time(), time.perf_counter()
    value = load()
    wall.append((time.perf_counter() - t) * 1e3)
    cpu.append((time.process_time() - c) * 1e3)
    tensors = count(value)
    del value
print(json.dumps({"tool": "python", "mode": mode, "file": path, "file_bytes": data_bytes, "tensors": tensors,
                  "repeats": repeats, "first_ms": wall[0], "min_ms": min(wall), "median_ms": statistics.median(wall),
                  "cpu_min_ms": min(cpu), "cpu_median_ms": statistics.median(cpu),
                  "warm_median_ms": statistics.median(wall[1:]) if repeats > 1 else 0,
                  "start_rss_kb": start_rss, "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
PY
}
dirty_small_pages() {  # a NumPy process that faults in and frees 1 GiB of 4 KiB pages (no huge-page advice)
  NUMPY_MADVISE_HUGEPAGE=0 "$python" -c "import numpy; a = numpy.ones(1 << 28, numpy.float32); assert a[-1] == 1"
}
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
previous="none"
run() {  # SET FORMAT CONFIG PATH LOADS [CACHE]: one process; CACHE cold drops the page cache first
  local set="$1" format="$2" config="$3" file="$dir/$4" loads="$5" cache="${6:-warm}"
  if [[ $cache == cold ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  local after="$previous"
  if [[ $config == *~4k ]]; then dirty_small_pages; after="numpy 4K pages"; fi
  case "$config" in
    heap_huge | heap_huge~4k) TENSORFILE_HUGE_PAGES=1 "$bin/bench_load" heap "$file" "$loads" ;;
    heap~4k) env -u TENSORFILE_HUGE_PAGES "$bin/bench_load" heap "$file" "$loads" ;;
    heap_1thread) env -u TENSORFILE_HUGE_PAGES TENSORFILE_BENCH_READ_THREADS=1 "$bin/bench_load" heap "$file" "$loads" ;;
    torch.load | torch.load_shards | numpy.load | numpy.mmap | safetensors.load_file) peer "$config" "$file" "$loads" ;;
    ggml.load) TENSORFILE_GGML_DIR="$ggml_dir" TENSORFILE_BENCH_GGUF_DIR="$root/tests/gguf" peer "$config" "$file" "$loads" ;;
    pickle_load) "$bin/bench_libtorch" "${file%.pt}_dict.pt" "$loads" ;;
    dd_direct) dd_direct "$file" ;;
    *) env -u TENSORFILE_HUGE_PAGES "$bin/bench_load" "$config" "$file" "$loads" ;;
  esac | sed "s/^{/{\"cache\": \"$cache\", \"set\": \"$set\", \"format\": \"$format\", \"config\": \"$config\", \"after\": \"$after\", /" |
    tee -a "$results" | cut -c1-200 >&2
  previous="$format $config"
}
fresh_jobs > "$scratch/fresh_jobs"
schedule "$scratch/fresh_jobs" "$repeats" "$seed" > "$scratch/fresh"
echo "== $repeats rounds of $(wc -l < "$scratch/fresh_jobs") fresh processes each, shuffled per round" >&2
# The job lists come in on descriptor 3, so that no program run reads them from its standard input.
while read -r set format config path <&3; do run "$set" "$format" "$config" "$path" 1; done 3< "$scratch/fresh"
# The small file's warm process loads 51 times: the floor's first few repeats still fault fresh memory.
echo "== warm processes (torch files: $((repeats + 1)) loads each, the small file at least 51)" >&2
warm_jobs > "$scratch/warm_jobs"
schedule "$scratch/warm_jobs" 1 "$seed" "${previous##* }" > "$scratch/warm"
while read -r set format config path <&3; do
  loads=$((repeats + 1))
  [[ $set == small_5000 && $loads -lt 51 ]] && loads=51
  run "$set" "$format" "$config" "$path" "$loads"
done 3< "$scratch/warm"
if [[ $cold -eq 1 && $quick -eq 0 ]]; then
  if [[ $(id -u) -eq 0 && -w /proc/sys/vm/drop_caches ]]; then
    echo "== big_2000: $repeats cold-cache runs (drop_caches before each)" >&2
    for ((i = 0; i < repeats; ++i)); do
      for config in dd_direct pread_floor huge2_floor heap torch.load; do run big_2000 torch "$config" big_2000.pt 1 cold; done
    done
  else
    echo "NOTE: cold-cache runs skipped: dropping the page cache needs root (/proc/sys/vm/drop_caches)" >&2
  fi
fi

# ---- table ----------------------------------------------------------------------------------
results_table "$results"
