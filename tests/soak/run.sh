#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The soak run of issue 20: builds tensorfile_soak (tests/soak/soak.cpp) and runs its experiments for SECONDS in
# all: threads and processes saving and loading one .pt, save_memmap/load_memmap over one prefix, disk full on a
# small tmpfs (SKIPPED, with the reason, where no mount is allowed), heap-mode loads of a file truncated
# meanwhile, and leak loops. Prints one table; exits non-zero when any experiment had an unexpected failure.
#   tests/soak/run.sh SECONDS [--only NAME[,NAME...]]
#   env: BUILD=dir  a configured build folder to reuse (default /tmp/tensorfile-soak, configured Release here)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:?usage: tests/soak/run.sh SECONDS [--only NAME[,NAME...]]}"
shift
build="${BUILD:-/tmp/tensorfile-soak}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  mkdir -p "$build"
  if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTENSORFILE_BUILD_TESTS=ON \
      >"$build/configure.log" 2>&1; then
    cat "$build/configure.log"
    exit 2
  fi
fi
cmake --build "$build" --target tensorfile_soak -j"${SOAK_BUILD_JOBS:-2}"
exec "$build/tests/soak/tensorfile_soak" --seconds "$seconds" "$@"
