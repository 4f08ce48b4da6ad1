#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every libFuzzer harness with clang++ (-fsanitize=fuzzer,address,undefined) and runs each for
# SECONDS on a scratch copy of its committed corpus, one at a time. Prints executions and findings per
# harness; exits non-zero on any crash, leak, timeout or out-of-memory. Inputs under
# regressions/<harness>/ (past findings) are replayed first.
#   tests/fuzz/run_fuzzers.sh SECONDS [HARNESS...]   (SECONDS=0: build only; env: BUILD=dir, default
#   /tmp/tensorfile-fuzz; FUZZ_BUILD_JOBS=2 parallel compiles)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${1:?usage: run_fuzzers.sh SECONDS [HARNESS...]}"
shift
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(zip pickle load tensordict from_buffer roundtrip safetensors numpy scan open gguf)
build="${BUILD:-/tmp/tensorfile-fuzz}"
cxx="${CXX_FUZZ:-clang++}"
mkdir -p "$build"

flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -I "$root/include" -I "$here")
jobs="${FUZZ_BUILD_JOBS:-2}"
pids=()
for h in "${harnesses[@]}"; do
  src="$here/fuzz_$h.cpp"
  bin="$build/fuzz_$h"
  if [ ! -x "$bin" ] || [ -n "$(find "$root/include" "$src" "$here/fuzz_common.hpp" -newer "$bin" -print -quit)" ]; then
    echo "== build fuzz_$h"
    "$cxx" "${flags[@]}" "$src" -o "$bin.new" -pthread -lfmt && mv "$bin.new" "$bin" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || { echo "BUILD FAILED"; exit 2; }; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p" || { echo "BUILD FAILED"; exit 2; }; done
for h in "${harnesses[@]}"; do [ -x "$build/fuzz_$h" ] || { echo "BUILD FAILED: fuzz_$h"; exit 2; }; done
[ "$seconds" = 0 ] && { echo "== built (SECONDS=0: nothing run)"; exit 0; }

status=0
summary=()
for h in "${harnesses[@]}"; do
  work="$build/run-$h"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  [ -d "$here/corpus/$h" ] && cp -r "$here/corpus/$h/." "$work/corpus/"
  dict=()
  [ -f "$here/$h.dict" ] && dict=(-dict="$here/$h.dict")
  if [ -d "$here/regressions/$h" ] && [ -n "$(ls -A "$here/regressions/$h")" ]; then
    echo "== replay regressions/$h ($(ls "$here/regressions/$h" | wc -l) inputs)"
    if ! "$build/fuzz_$h" "$here/regressions/$h"/* >"$work/regressions.log" 2>&1; then
      echo "REGRESSION: fuzz_$h fails on a committed regression input"
      tail -40 "$work/regressions.log"
      status=1
    fi
  fi
  echo "== run fuzz_$h for ${seconds}s"
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "$build/fuzz_$h" "$work/corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
      >"$work/log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' | tail -1)
  findings=$(find "$work/artifacts" -type f | wc -l)
  line="fuzz_$h: ${execs:-?} executions in ${seconds}s, $findings finding(s), exit $rc"
  echo "$line"
  summary+=("$line")
  if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
    status=1
    tail -60 "$work/log"
    find "$work/artifacts" -type f -exec echo "  artifact: {}" \;
  fi
done
echo
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit $status
