#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What including tensorfile costs a translation unit: CPU time (user + sys) and peak memory of compiling a TU that
# includes only <tensorfile/tensorfile.hpp>, one per capability header, and a baseline TU with only <fmt/format.h>,
# <string>, <vector> and <map>. Each TU is compiled several times, each time right after the baseline; its ratio is
# the median of those paired ratios (the machine's speed drifts by tens of percent from minute to minute, which a
# pair shares), and its CPU seconds and memory are those of its fastest run. Each header is measured header-only
# and with TENSORFILE_SEPARATE_COMPILATION (tensorfile::compiled: declarations only), and the library's own TU
# (include/tensorfile/separate_compilation.cpp) is shown too: whole, then each of the parts CMake compiles in
# parallel, and the wall time of compiling those parts `nproc` at a time. Target: the umbrella header
# at most 2.5x the baseline. With valgrind installed, the instruction counts of the baseline and the umbrella
# follow (steady where CPU seconds are not).
# Usage: tests/benchmarks/compile_time.sh [runs (default 3)] [compiler (default g++)] [extra flags...]
#   e.g. tests/benchmarks/compile_time.sh 5 clang++ -O2
# HEADERS="tensorfile/tensorfile.hpp ..." measures only those headers (and skips the library TU).
# REAL=1 measures the real TU instead (tests/benchmarks/compile_real_tu.cpp: four loaders, named_tensors,
# to_vector, printing) in both modes, with the flags given (-O2 unless they name another level), and the library
# TU with CMake's Release flags (-O3 -DNDEBUG; LIBRARY_FLAGS="..." to change them); with valgrind, the
# instruction counts of all four TUs follow (several minutes: the library alone runs about 20 minutes of
# cachegrind on a 2-core machine; INSTRUCTIONS=0 skips the counts).
#   e.g. REAL=1 tests/benchmarks/compile_time.sh 5
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

runs=${1:-3}
compiler=${2:-g++}
shift $(($# > 2 ? 2 : $#))
flags=(-std=c++20 -O0 "$@")
real=${REAL:-}
library_flags=()  # after the TUs' flags, so that an -O level here wins
if [[ -n $real ]]; then
  flags=(-std=c++20 -O2 "$@")
  read -r -a library_flags <<< "${LIBRARY_FLAGS:--O3 -DNDEBUG}"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

headers=(
  tensorfile/tensorfile.hpp
  tensorfile/core/error.hpp
  tensorfile/core/dtype.hpp
  tensorfile/core/device.hpp
  tensorfile/core/storage.hpp
  tensorfile/core/tensor.hpp
  tensorfile/core/tensor_view.hpp
  tensorfile/core/value.hpp
  tensorfile/core/print.hpp
  tensorfile/io/from_buffer.hpp
  tensorfile/io/from_file.hpp
  tensorfile/formats/torch/load.hpp
  tensorfile/formats/torch/save.hpp
  tensorfile/formats/tensordict/tensordict.hpp
  tensorfile/formats/tensordict/load_memmap.hpp
  tensorfile/formats/tensordict/save_memmap.hpp
  tensorfile/formats/safetensors/load.hpp
  tensorfile/formats/safetensors/save.hpp
  tensorfile/formats/numpy/npy.hpp
  tensorfile/formats/numpy/npz.hpp
  tensorfile/state_dict.hpp
  tensorfile/scan.hpp
  tensorfile/verify.hpp
)

printf '#include <fmt/format.h>\n#include <map>\n#include <string>\n#include <vector>\n' > "$work/baseline.cpp"
base_cpu=""
base_rss=""

# Compiles $1 once (further arguments: extra flags); sets cpu (user + sys seconds) and rss (peak KiB).
compile_once() {
  local unit=$1
  shift
  /usr/bin/time -f '%U %S %M' -o "$work/time" "$compiler" "${flags[@]}" "$@" -Iinclude -c "$unit" -o "$work/unit.o"
  read -r user sys rss < "$work/time"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
}
less_than() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# Sets `measured` to "<cpu seconds> <peak MiB> <ratio>": the fastest of $runs compilations of $1 (further arguments:
# extra flags) and the median of its CPU time over that of the baseline compiled right before it (no subshell:
# base_cpu, the fastest baseline shown in the table, must keep its updates).
measure() {
  local best_cpu="" best_rss="" ratios=()
  for ((i = 0; i < runs; ++i)); do
    compile_once "$work/baseline.cpp"
    local paired=$cpu
    if [[ -z $base_cpu ]] || less_than "$cpu" "$base_cpu"; then
      base_cpu=$cpu
      base_rss=$rss
    fi
    compile_once "$@"
    ratios+=("$(awk -v c="$cpu" -v b="$paired" 'BEGIN { printf "%.4f", c / b }')")
    if [[ -z $best_cpu ]] || less_than "$cpu" "$best_cpu"; then
      best_cpu=$cpu
      best_rss=$rss
    fi
  done
  local median
  median=$(printf '%s\n' "${ratios[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  measured="$best_cpu $(awk -v r="$best_rss" 'BEGIN { printf "%.0f", r / 1024 }') $median"
}

if [[ -n ${HEADERS:-} ]]; then read -r -a headers <<< "$HEADERS"; fi
if [[ -n $real ]]; then headers=(); fi
rows=()
for header in "${headers[@]}"; do
  [[ -f include/$header ]] || continue
  printf '#include <%s>\n' "$header" > "$work/unit.cpp"
  measure "$work/unit.cpp"
  header_only=$measured
  measure "$work/unit.cpp" -DTENSORFILE_SEPARATE_COMPILATION
  rows+=("<$header> $header_only $measured")
done
real_tu=tests/benchmarks/compile_real_tu.cpp
if [[ -n $real ]]; then
  measure "$real_tu"
  header_only=$measured
  measure "$real_tu" -DTENSORFILE_SEPARATE_COMPILATION
  rows+=("compile_real_tu.cpp $header_only $measured")
fi
library_cpu="" library_rss="" library_ratio="" part_rows=() parts_wall=""
if [[ -z ${HEADERS:-} ]]; then
  measure include/tensorfile/separate_compilation.cpp -DTENSORFILE_SEPARATE_COMPILATION "${library_flags[@]}"
  read -r library_cpu library_rss library_ratio <<< "$measured"
  # The library as CMake builds it: one TU per part (config.hpp), compiled in parallel, `nproc` at a time.
  parts=$(sed -n 's/^#define TENSORFILE_PART_[a-z_]* \([0-9]*\)$/\1/p' include/tensorfile/config.hpp | sort -n | tail -1)
  for ((part = 1; part <= parts; ++part)); do
    measure include/tensorfile/separate_compilation.cpp -DTENSORFILE_SEPARATE_COMPILATION \
      -DTENSORFILE_LIBRARY_PART="$part" "${library_flags[@]}"
    part_rows+=("$part $measured")
  done
  start=$(date +%s.%N)
  seq 1 "$parts" | xargs -P "$(nproc)" -I{} "$compiler" "${flags[@]}" -DTENSORFILE_SEPARATE_COMPILATION \
    -DTENSORFILE_LIBRARY_PART={} "${library_flags[@]}" -Iinclude -c include/tensorfile/separate_compilation.cpp \
    -o "$work/part{}.o"
  parts_wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
fi

echo "$compiler ${flags[*]}; CPU s and MiB: fastest of $runs runs; x base: median of $runs paired ratios;" \
  "compiled = -DTENSORFILE_SEPARATE_COMPILATION"
printf '%-48s %9s %9s %7s %9s %9s %7s\n' "TU includes only" "CPU s" "peak MiB" "x base" "compiled" "peak MiB" "x base"
printf '%-48s %9s %9s %7s\n' "<fmt/format.h> <string> <vector> <map>" "$base_cpu" \
  "$(awk -v r="$base_rss" 'BEGIN { printf "%.0f", r / 1024 }')" "1.00"
for row in "${rows[@]}"; do
  read -r name cpu rss ratio compiled_cpu compiled_rss compiled_ratio <<< "$row"
  printf '%-48s %9s %9s %7s %9s %9s %7s\n' "$name" "$cpu" "$rss" "$ratio" "$compiled_cpu" "$compiled_rss" \
    "$compiled_ratio"
done
if [[ -n $library_cpu ]]; then
  printf '%-48s %9s %9s %7s %9s %9s %7s\n' "separate_compilation.cpp (the library, one TU)" "" "" "" \
    "$library_cpu" "$library_rss" "$library_ratio"
  for row in "${part_rows[@]}"; do
    read -r part cpu rss ratio <<< "$row"
    printf '%-48s %9s %9s %7s %9s %9s %7s\n' "  its part $part (TENSORFILE_LIBRARY_PART=$part)" "" "" "" "$cpu" "$rss" "$ratio"
  done
  echo "the ${#part_rows[@]} parts compiled in parallel ($(nproc) at a time): ${parts_wall} s wall"
fi

# Instructions the compiler proper executes do not drift with the machine: counted with cachegrind when valgrind
# is installed, for the baseline and the umbrella (header-only and compiled), or in REAL mode the real TU and the
# library. About a minute per TU at -O0.
if [[ ${INSTRUCTIONS:-1} != 0 ]] && command -v valgrind > /dev/null; then
  instructions() {
    valgrind --tool=cachegrind --cache-sim=no --trace-children=yes --cachegrind-out-file=/dev/null \
      "$compiler" "${flags[@]}" "$@" -Iinclude -c -o "$work/unit.o" 2>&1 |
      awk '/I +refs/ { gsub(",", "", $NF); total += $NF } END { printf "%.2f", total / 1e9 }'
  }
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
  base_instructions=$(instructions "$work/baseline.cpp")
  if [[ -n $real ]]; then
    real_instructions=$(instructions "$real_tu")
    compiled_instructions=$(instructions "$real_tu" -DTENSORFILE_SEPARATE_COMPILATION)
    library_instructions=$(instructions include/tensorfile/separate_compilation.cpp -DTENSORFILE_SEPARATE_COMPILATION \
      "${library_flags[@]}")
    echo "instructions (cachegrind, billions): baseline $base_instructions; compile_real_tu.cpp" \
      "$real_instructions ($(ratio "$real_instructions" "$base_instructions")x), compiled $compiled_instructions" \
      "($(ratio "$compiled_instructions" "$base_instructions")x); the library (${library_flags[*]})" \
      "$library_instructions"
  else
    printf '#include <tensorfile/tensorfile.hpp>\n' > "$work/unit.cpp"
    umbrella_instructions=$(instructions "$work/unit.cpp")
    compiled_instructions=$(instructions "$work/unit.cpp" -DTENSORFILE_SEPARATE_COMPILATION)
    echo "instructions (cachegrind, billions): baseline $base_instructions; <tensorfile/tensorfile.hpp>" \
      "$umbrella_instructions ($(ratio "$umbrella_instructions" "$base_instructions")x)," \
      "compiled $compiled_instructions ($(ratio "$compiled_instructions" "$base_instructions")x)"
  fi
fi
