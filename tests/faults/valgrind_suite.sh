#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the unit test executable (BUILD_DIR/tests/tensorfile_tests) under valgrind memcheck:
# --error-exitcode=1 --leak-check=full, definite and indirect leaks are errors. Test cases valgrind
# cannot run faithfully are skipped, each listed with its reason in the output (SKIPS below); the loops that try
# every offset of a file take every 5th under memcheck (tensorfile_test::exhaustive_step). The test
# files are split into JOBS groups (default 2, env VALGRIND_JOBS), each run by its own valgrind process
# at the same time; every test case runs exactly once, and the script checks that.
#   tests/faults/valgrind_suite.sh BUILD_DIR
set -euo pipefail
build="${1:?usage: valgrind_suite.sh BUILD_DIR}"
exe="$(cd "$build" && pwd)/tests/tensorfile_tests"
[ -x "$exe" ] || { echo "no test executable at $exe" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
jobs="${VALGRIND_JOBS:-2}"

# name pattern (Catch2 test spec) | why it is skipped under valgrind
SKIPS=(
  "*never dies of SIGBUS*|loads race a thread that cuts and rewrites the file for 2 s in a child; under memcheck's slowdown the race tests little, and the child is not followed (--child-silent-after-fork)"
  "*beside a writer saving again and again*|10,000 loads beside a writer process; it runs natively in CI (label long)"
  "*killed after any step of its commit*|about 100 forked saves killed in turn; it runs natively and under ASan+UBSan in CI"
  "*every one-byte change and truncation*|14,000 runs of mutated pickles take minutes under memcheck; the case runs natively and under ASan+UBSan in CI"
)
# Catch2 2.13 reads its test spec as comma-separated alternatives, each a run of terms that must all hold
# (a name in quotes, ~ for "not", [#file] for a source file's tests with -#). So the exclusions are repeated
# in every alternative: "[#a]~"x"~"y",[#b]~"x"~"y"".
exclusions=""
echo "valgrind: skipped test cases:"
for entry in "${SKIPS[@]}"; do
  pattern="${entry%%|*}"
  reason="${entry#*|}"
  exclusions+="~\"$pattern\""
  while IFS= read -r name; do
    [ -n "$name" ] && echo "  SKIP: $name ($reason)"
  done < <("$exe" --list-test-names-only "\"$pattern\"" 2>/dev/null | sed '/^$/d' | grep -v "test case" || true)
done

# (Catch2's --list options exit with the number of test cases listed.)
list_names() { { "$exe" -# --list-test-names-only "$@" 2>/dev/null || true; } | sed '/^$/d' | { grep -v "test case" || true; } | sort; }
expected=$(list_names "${exclusions}")
total=$(list_names | wc -l)
echo "valgrind: $(wc -l <<<"$expected") of $total test cases, in $jobs groups of source files"

# The source files, largest first, dealt to the group with the fewest test cases so far.
mapfile -t files < <({ "$exe" -# --list-tags 2>/dev/null || true; } | sed -n 's/^ *\([0-9]*\) *\[#\([^]]*\)\].*/\1 \2/p' | sort -rn)
declare -a specs counts
for ((g = 0; g < jobs; g++)); do specs[g]=""; counts[g]=0; done
for line in "${files[@]}"; do
  count="${line%% *}"
  file="${line#* }"
  best=0
  for ((g = 1; g < jobs; g++)); do [ "${counts[g]}" -lt "${counts[best]}" ] && best=$g; done
  specs[best]+="${specs[best]:+,}[#$file]$exclusions"
  counts[best]=$((counts[best] + count))
done

# Every test case runs once: the groups together list exactly what the exclusions leave.
together=$(for ((g = 0; g < jobs; g++)); do [ -n "${specs[g]}" ] && list_names "${specs[g]}"; done | sort)
if [ "$together" != "$expected" ]; then
  echo "valgrind: the groups do not cover the test cases exactly once:" >&2
  diff <(echo "$expected") <(echo "$together") >&2 || true
  exit 2
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for ((g = 0; g < jobs; g++)); do
  [ -n "${specs[g]}" ] || continue
  # Tests that valgrind's CPU emulation cannot reproduce bit for bit (its int64 -> float32 rounds twice) read this.
  TENSORFILE_UNDER_VALGRIND=1 valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --show-leak-kinds=definite,indirect --track-origins=no --num-callers=30 --child-silent-after-fork=yes \
    --suppressions=/dev/null "$exe" -# "${specs[g]}" --durations no >"$logs/$g.log" 2>&1 &
  pids[g]=$!
done
status=0
for g in "${!pids[@]}"; do
  if wait "${pids[g]}"; then
    echo "== group $g (${counts[g]} test cases before skips): clean: $(grep -E "^(All tests passed|test cases)" "$logs/$g.log" | tail -1)"
  else
    echo "== group $g (${counts[g]} test cases before skips): FAILED"
    cat "$logs/$g.log"
    status=1
  fi
done
[ "$status" -eq 0 ] || exit 1
echo "valgrind: memcheck clean"
