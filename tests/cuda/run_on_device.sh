#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tensorfile's CUDA code on a GPU machine, one command per half, from the repository root, without network:
#
#   bash tests/cuda/run_on_device.sh deps    # where fmt and Catch2 are installed (the development machine):
#                                            # copies them into build-deps/usr for a bare GPU image; carry build-deps
#   bash tests/cuda/run_on_device.sh test    # configure with CUDA on, build, run every cuda- and ring-labelled test
#                                            # (a missing GPU fails them: TENSORFILE_REQUIRE_CUDA=1), cuFile through
#                                            # pip's libcufile when present, compute-sanitizer memcheck on a few tests
#   bash tests/cuda/run_on_device.sh bench   # build bench_cuda_load, write its files with tensorfile's save, time
#                                            # stream / direct on-off / smaller ring / separate / cuFile / hook / read
#                                            # floor / pinned cudaMemcpy / torch.load(map_location="cuda")
#
# Each half fits one 10-minute call. Env: W (work folder, default /tmp/tf_device; build in build-device/),
# SIZES_MIB (bench file sizes, default "1024 4096"), REPEATS (3), BUDGET (bench seconds, 360), OUT (when set,
# summary.txt, the JSON lines and the logs are copied there at exit). Exit status: 0 when every step passed;
# 3 when there is no GPU (after configure, build and the ring tests, which need none); 1 otherwise.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

phase="${1:-}"
case "$phase" in
  deps | test | bench) ;;
  *) sed -n '3,17p' "$0"; exit 2 ;;
esac

if [[ $phase == deps ]]; then
  # Catch2 v2 (header-only) and fmt (a shared library), in the layout Debian installs them, whose CMake
  # packages find their files relative to themselves.
  rm -rf build-deps
  for path in /usr/include/fmt /usr/include/catch2 /usr/lib/cmake/Catch2 /usr/lib/libCatch2WithMain.a \
    /usr/lib/x86_64-linux-gnu/cmake/fmt \
    /usr/lib/x86_64-linux-gnu/libfmt.so*; do
    [[ -e $path ]] || { echo "run_on_device.sh: $path is missing here; install fmt and Catch2 v2 first" >&2; exit 1; }
    mkdir -p "build-deps$(dirname "$path")"
    cp -a "$path" "build-deps$(dirname "$path")/" || exit 1
  done
  echo "run_on_device.sh: build-deps/usr holds fmt and Catch2 ($(du -sh build-deps | cut -f1)); carry build-deps"
  exit 0
fi

W="${W:-/tmp/tf_device}"
B=build-device
L="$W/logs"
S="$W/summary.txt"
mkdir -p "$L"
: > "$S"
status=0
say() { echo "$*" | tee -a "$S"; }
# step NAME COMMAND...: runs it with its output in $L/NAME.log and one summary line; returns its status.
step() {
  local name="$1" started=$SECONDS rc
  shift
  "$@" > "$L/$name.log" 2>&1
  rc=$?
  say "$(printf '%-16s rc=%-4s %4ss' "$name" "$rc" $((SECONDS - started)))"
  return "$rc"
}
# shellcheck disable=SC2317  # called by the EXIT trap
copy_out() {
  [[ -n "${OUT:-}" ]] || return 0
  cp "$S" "$OUT/" 2> /dev/null
  [[ -f "$W/bench/results.jsonl" ]] && cp "$W/bench/results.jsonl" "$OUT/"
  tar czf "$OUT/logs.tgz" -C "$L" . 2> /dev/null
}
trap copy_out EXIT

# cuFile: pip's CUDA puts libcufile.so.0 in site-packages, off the loader path; put only it on the path, and let
# cuFile work through its POSIX path where nvidia_fs is not loaded.
cufile_on_path() {
  local found
  found=$(python3 -c "import nvidia, glob, os; print(next(iter(glob.glob(os.path.join(list(nvidia.__path__)[0], '**', 'libcufile.so.0'), recursive=True)), ''))" 2> /dev/null)
  if [[ -n "$found" ]]; then
    mkdir -p "$W/cufile"
    ln -sf "$found" "$W/cufile/libcufile.so.0"
    export LD_LIBRARY_PATH="$W/cufile${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  export CUFILE_ALLOW_COMPAT_MODE=true CUFILE_LOGFILE_PATH="$L/cufile.log"
  say "cufile: ldconfig $(ldconfig -p | grep -c 'libcufile.so.0') hit(s), pip copy ${found:-none}"
}

gpus=0
command -v nvidia-smi > /dev/null && gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
say "machine: $(nproc) cores; GPUs: $gpus $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null | head -1)"
say "nvcc: $(command -v nvcc > /dev/null && nvcc --version | grep -o 'release [0-9.]*' || echo none); cmake: $(cmake --version | head -1)"

if [[ -d build-deps/usr ]]; then
  export CMAKE_PREFIX_PATH="$PWD/build-deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  say "deps: build-deps/usr (fmt, Catch2)"
fi
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
step configure cmake -S . -B "$B" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORFILE_CUDA=ON \
  -DTENSORFILE_BUILD_TESTS=ON -DTENSORFILE_BUILD_BENCHMARKS=ON -DTENSORFILE_BUILD_EXAMPLES=OFF \
  -DTENSORFILE_BUILD_TOOLS=OFF -DTENSORFILE_INSTALL=OFF ||
  { tail -20 "$L/configure.log"; say "configure failed (fmt or Catch2 missing? run 'deps' where they are, carry build-deps)"; exit 1; }

if [[ $phase == test ]]; then
  step build cmake --build "$B" -j"$(nproc)" --target tensorfile_cuda_tests tensorfile_ring_tests \
    tensorfile_cuda_header_alone || { grep -m5 -A5 'error' "$L/build.log"; exit 1; }
  tests="$B/tests/cuda/tensorfile_cuda_tests"
  if [[ $gpus == 0 && ! -e /dev/nvidiactl ]]; then
    step ring_tests ctest --test-dir "$B" -L ring -j"$(nproc)" || status=1
    grep -E 'tests passed|tests failed' "$L/ring_tests.log" | tee -a "$S"
    step cuda_no_device "$tests"
    grep -E '^(SKIPPED|FAILED)' "$L/cuda_no_device.log" | tee -a "$S"
    say "run_on_device.sh: no GPU on this machine (nvidia-smi lists none, no /dev/nvidiactl): configure, build" \
      "and the ring tests ran; the CUDA tests need a GPU"
    exit 3
  fi
  # Every cuda- and ring-labelled test; a GPU that does not start fails rather than skips.
  step ctest env TENSORFILE_REQUIRE_CUDA=1 ctest --test-dir "$B" -L 'cuda|ring' -j"$(nproc)" --output-on-failure || status=1
  grep -E 'tests passed|tests failed|Skipped|\(Failed\)' "$L/ctest.log" | tee -a "$S"
  step cuda_tests env TENSORFILE_REQUIRE_CUDA=1 "$tests" --durations yes || status=1
  grep -E '^tensorfile CUDA tests|^FAILED|test cases' "$L/cuda_tests.log" | tee -a "$S"
  cufile_on_path
  step cufile_tests env TENSORFILE_REQUIRE_CUDA=1 "$tests" 'require_cufile*' 'every torch fixture*' \
    '*empty record*' 'cuda::load leaves*' || status=1
  grep -E 'passed|failed|cuFile cannot' "$L/cufile_tests.log" | head -5 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    step memcheck timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$tests" \
      'Tensor::to moves*' 'cuda::from_file*' 'device tensors save*' 'clone() and contiguous()*' || status=1
    grep -E 'ERROR SUMMARY|LEAK SUMMARY|passed|failed' "$L/memcheck.log" | tee -a "$S"
  else
    say "memcheck: compute-sanitizer not found"
  fi
  say "test: $([[ $status == 0 ]] && echo PASSED || echo FAILED)"
  exit "$status"
fi

# bench
step build cmake --build "$B" -j"$(nproc)" --target tensorfile_bench_cuda_load ||
  { grep -m5 -A5 'error' "$L/build.log"; exit 1; }
if [[ $gpus == 0 && ! -e /dev/nvidiactl ]]; then
  say "run_on_device.sh: no GPU on this machine: configure and build ran; the benchmark needs a GPU"
  exit 3
fi
cufile_on_path
say "python: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1)"
step bench bash tests/benchmarks/run_cuda_bench.sh --bench "$B/tests/benchmarks/bench_cuda_load" --dir "$W/bench" \
  --sizes-mib "${SIZES_MIB:-1024 4096}" --repeats "${REPEATS:-3}" --budget "${BUDGET:-360}" || status=1
sed -n '/^notes/,$p' "$L/bench.log" | tee -a "$S"
exit "$status"
