#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs the fault and concurrency checks:
#   1. libtensorfile_fail_io.so (LD_PRELOAD shim) + save_faults: ENOSPC/EIO after N bytes, fsync
#      failures, short writes; the shrunk-under-mapping check (SIGBUS in a child, documented);
#   2. threads_lifetime under ThreadSanitizer (g++ -fsanitize=thread): 8 threads loading at once;
#   3. threads_lifetime under AddressSanitizer + UBSan: tensors outliving their loaders.
#   tests/faults/run_faults.sh [BUILD]      (default BUILD=/tmp/tensorfile-faults-build)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-/tmp/tensorfile-faults-build}"
mkdir -p "$build"
cxx="${CXX:-g++}"
common=(-std=c++20 -O1 -g -fno-omit-frame-pointer -I "$root/include")

echo "== build"
"$cxx" -shared -fPIC -O1 -g -Wall -Wextra "$here/fail_io.cpp" -o "$build/libtensorfile_fail_io.so" -ldl
"$cxx" "${common[@]}" "$here/save_faults.cpp" -o "$build/save_faults" -lfmt -pthread -ldl
"$cxx" "${common[@]}" -fsanitize=thread "$here/threads_lifetime.cpp" -o "$build/threads_tsan" -lfmt -pthread
"$cxx" "${common[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all "$here/threads_lifetime.cpp" \
  -o "$build/threads_asan" -lfmt -pthread

echo "== save under injected faults"
LD_PRELOAD="$build/libtensorfile_fail_io.so" "$build/save_faults" "$build/scratch"
echo "== 8 threads under ThreadSanitizer"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" "$build/threads_tsan" "$root/tests/data"
echo "== lifetimes under AddressSanitizer"
ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  "$build/threads_asan" "$root/tests/data"
echo "== faults: passed"
