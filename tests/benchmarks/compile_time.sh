#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What including tensorfile costs a translation unit: CPU time (user + sys) and peak memory of compiling a TU that
# includes only <tensorfile/tensorfile.hpp>, one per capability header, and a baseline TU with only <fmt/format.h>,
# <string>, <vector> and <map>; each compiled several times, the fastest run kept. Each header is measured
# header-only and with TENSORFILE_SEPARATE_COMPILATION (tensorfile::compiled: declarations only), and the library's
# own TU (include/tensorfile/separate_compilation.cpp, compiled once per build) is shown too. Target: the umbrella
# header at most 2.5x the baseline.
# Usage: tests/benchmarks/compile_time.sh [runs (default 3)] [compiler (default g++)] [extra flags...]
#   e.g. tests/benchmarks/compile_time.sh 5 clang++ -O2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

runs=${1:-3}
compiler=${2:-g++}
shift $(($# > 2 ? 2 : $#))
flags=(-std=c++20 -O0 "$@")
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

# Prints "<cpu seconds> <peak MiB>" of the fastest of $runs compilations of $1 (further arguments: extra flags).
measure() {
  local unit=$1
  shift
  local best_cpu="" best_rss="" cpu rss
  for ((i = 0; i < runs; ++i)); do
    /usr/bin/time -f '%U %S %M' -o "$work/time" "$compiler" "${flags[@]}" "$@" -Iinclude -c "$unit" -o "$work/unit.o"
    read -r user sys rss < "$work/time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
    if [[ -z $best_cpu ]] || awk -v a="$cpu" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then
      best_cpu=$cpu
      best_rss=$rss
    fi
  done
  awk -v c="$best_cpu" -v r="$best_rss" 'BEGIN { printf "%s %.0f\n", c, r / 1024 }'
}

printf '#include <fmt/format.h>\n#include <map>\n#include <string>\n#include <vector>\n' > "$work/baseline.cpp"
read -r base_cpu base_rss < <(measure "$work/baseline.cpp")

echo "$compiler ${flags[*]}, fastest of $runs runs; compiled = -DTENSORFILE_SEPARATE_COMPILATION"
printf '%-48s %9s %9s %7s %9s %9s %7s\n' "TU includes only" "CPU s" "peak MiB" "x base" "compiled" "peak MiB" "x base"
printf '%-48s %9s %9s %7s\n' "<fmt/format.h> <string> <vector> <map>" "$base_cpu" "$base_rss" "1.00"
ratio() { awk -v c="$1" -v b="$base_cpu" 'BEGIN { printf "%.2f", c / b }'; }
for header in "${headers[@]}"; do
  [[ -f include/$header ]] || continue
  printf '#include <%s>\n' "$header" > "$work/unit.cpp"
  read -r cpu rss < <(measure "$work/unit.cpp")
  read -r compiled_cpu compiled_rss < <(measure "$work/unit.cpp" -DTENSORFILE_SEPARATE_COMPILATION)
  printf '%-48s %9s %9s %7s %9s %9s %7s\n' "<$header>" "$cpu" "$rss" "$(ratio "$cpu")" \
    "$compiled_cpu" "$compiled_rss" "$(ratio "$compiled_cpu")"
done
read -r library_cpu library_rss < <(measure include/tensorfile/separate_compilation.cpp -DTENSORFILE_SEPARATE_COMPILATION)
printf '%-48s %9s %9s %7s %9s %9s %7s\n' "separate_compilation.cpp (the library, once)" "" "" "" \
  "$library_cpu" "$library_rss" "$(ratio "$library_cpu")"
