#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Safetensors benchmark (issue 14, item 6): builds bench_safetensors and runs it once; it makes its own files
# (a MIB MiB / TENSORS-tensor .safetensors file, a torch file and a 4-shard directory of the same tensors)
# and prints one JSON line per figure and the README's table, each figure against a floor of the same run.
#   run_safetensors_bench.sh [--dir D] [--bin B] [--mib MIB] [--tensors N] [--repeats N]
# Defaults: D=${TMPDIR:-/tmp}/tensorfile-bench-safetensors, MIB=1024, N=2000 tensors, 5 repeats (min taken).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${TMPDIR:-/tmp}/tensorfile-bench-safetensors
bin=""
mib=1024
tensors=2000
repeats=5
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --tensors) tensors=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "usage: $0 [--dir D] [--bin B] [--mib MIB] [--tensors N] [--repeats N]" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
if [ -z "$bin" ]; then
  bin=$dir/build
  mkdir -p "$bin"
  g++ -std=c++20 -O2 -DNDEBUG -I"$here/../../include" "$here/bench_safetensors.cpp" -o "$bin/bench_safetensors" \
    -lfmt -pthread
fi
"$bin/bench_safetensors" "$dir/files" "$mib" "$tensors" "$repeats"
