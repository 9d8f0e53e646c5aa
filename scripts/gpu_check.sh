#!/usr/bin/env bash
# GPU checks, on a machine with a CUDA GPU:   bash scripts/gpu_check.sh
# (Without spdlog, fmt or GoogleTest installed there: run scripts/prepare_gpu_deps.sh where they are
# and copy the .deps folder it fills along with the tree.)
# Builds against that machine's torch, runs the C++ and Python tests (GPU ones included) and the
# benchmarks, and prints a short table last. Environment: SKIP_CTEST, SKIP_PYTEST, PYTEST_ARGS,
# PYTEST_K (a -k expression; it may hold spaces, PYTEST_ARGS may not), PYTEST_TIME_LIMIT (seconds), BUILD_TARGETS (ninja targets),
# SKIP_BENCH, BENCHES="norm reduction ...", BENCH_VARIANTS, SWEEP_ENV="key=1 key=2,other=3" (TILEOPS_TUNE
# settings), PROFILE=1|"names"; TILEOPS_UNVERIFIED_GPU_TESTS=1 also runs the tests marked unverified_gpu
# (written without a GPU; a GPU round runs them and drops the mark once they pass).
set -uo pipefail
cd "$(dirname "$0")/.."
# Logs and JSON go to a work folder; on exit they are packed into one archive,
# $OUT/gpu_logs.tar.gz ($OUT defaults to /tmp/tileops-gpu-out).
# Packed after every step too: a run killed at its time limit runs no EXIT trap.
DEST=${OUT:-/tmp/tileops-gpu-out}
OUT=$(mktemp -d /tmp/tileops-gpu-logs.XXXX)
mkdir -p "$DEST"
pack() { tar -czf "$DEST/.gpu_logs.$BASHPID" -C "$OUT" . 2>/dev/null && mv -f "$DEST/.gpu_logs.$BASHPID" "$DEST/gpu_logs.tar.gz"; }
# and every 30 s: a step cut off by the caller's time limit still brings back the log it had written
( while sleep 30; do pack; done ) &
PACKER=$!
trap 'kill $PACKER 2>/dev/null; pack' EXIT
PY=$(command -v "${PYTHON:-python3}")  # absolute: some steps run from scripts/bench
export TILEOPS_CACHE_DIR=${TILEOPS_CACHE_DIR:-$(mktemp -d)}
export PYTHONUNBUFFERED=1
status=0
step() { pack; echo "== $1 ($(date +%T))"; }

step "configure + build"
if ! cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$(command -v "$PY")" -DTILEOPS_DEPS_DIR="$PWD/.deps" \
    >"$OUT/cmake.log" 2>&1; then tail -40 "$OUT/cmake.log"; exit 1; fi
# With SKIP_CTEST the GoogleTest binaries are not built: the library and the programs pytest runs
# (tileops-warmup, the example backend) are; BUILD_TARGETS names others.
[ -n "${SKIP_CTEST:-}" ] && BUILD_TARGETS=${BUILD_TARGETS:-tileops tileops-warmup tileops_example_backend}
if ! ninja -C build ${BUILD_TARGETS:-} >"$OUT/build.log" 2>&1; then grep -E "error|FAILED" -A5 "$OUT/build.log" | head -80; exit 1; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
# The benchmarks' flashinfer column needs a torch extension over its headers (.deps/peers, see
# scripts/prepare_gpu_deps.sh --peers); built now, beside the tests, so the benchmarks find it ready.
if [ -z "${SKIP_BENCH:-}" ] && [ -d .deps/peers ]; then
  (cd scripts/bench && $PY -c "import peers; peers.flashinfer()" >"$OUT/peers_build.log" 2>&1) &
  PEERS_BUILD=$!
fi

if [ -z "${SKIP_CTEST:-}" ]; then
  step "ctest"
  (cd build && ctest --output-on-failure -j"$(nproc)" >"$OUT/ctest.log" 2>&1) || status=1
  grep -E "tests passed|tests failed|FAILED|Failed" "$OUT/ctest.log" | head -20
fi

if [ -z "${SKIP_PYTEST:-}" ]; then
step "pytest (all, GPU included)"
# tests/packaging (installs, wheel, AOTI runner) builds wheels from PyPI: it runs in CI, not here.
# A segfault prints its native stack too (after faulthandler's Python one), resolved below; fd 2
# stays uncaptured (--capture=sys) so that what a dying process prints reaches the log.
TRACE=$(mktemp /tmp/segv_trace.XXXX.so)
cc -shared -fPIC -O1 -o "$TRACE" scripts/debug/segv_trace.c -ldl 2>/dev/null || TRACE=""
# PYTEST_TIME_LIMIT=<seconds>: interrupt pytest then (SIGINT), so that it still prints its summary.
export TILEOPS_FAILURES_LOG="$OUT/pytest_failures.txt"  # each failure's id as it happens
LD_PRELOAD=$TRACE ${PYTEST_TIME_LIMIT:+timeout -s INT -k 30 $PYTEST_TIME_LIMIT} $PY -m pytest -q -p no:cacheprovider --capture=sys ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_ARGS:-tests --timeout=150 -rf \
  --ignore tests/packaging} \
  >"$OUT/pytest.log" 2>&1 || status=1
grep -E "passed|failed|error|Error" "$OUT/pytest.log" | tail -15
[ -s "$OUT/pytest_failures.txt" ] && { echo "failed:"; head -40 "$OUT/pytest_failures.txt"; }
if grep -q "^SEGV at" "$OUT/pytest.log"; then $PY scripts/debug/resolve_trace.py <"$OUT/pytest.log" | head -40; fi
fi

if [ -n "${SWEEP_ENV:-}" ]; then
  # SWEEP_ENV="a=1 a=2,b=3": one `sweep.py $SWEEP_ARGS` (default --norm) process per
  # space-separated item, run with TILEOPS_TUNE=<item> (read once per process; keys:
  # python3 scripts/bench/sweep.py --list-tune).
  step "tuning sweep"
  for item in $SWEEP_ENV; do
    (cd scripts/bench && TILEOPS_TUNE="$item" $PY sweep.py ${SWEEP_ARGS:---norm}) 2>&1 | grep -v "^W[0-9]" | tee -a "$OUT/sweep.txt" || status=1
  done
fi

if [ -n "${PROFILE:-}" ]; then
  # PROFILE=1 (every workload of scripts/bench/ncu_profile.py) or PROFILE="name ...": Nsight Compute,
  # clocks left alone, one process a workload; raw metrics to $OUT/profile.csv, summary printed.
  step "ncu profiles"
  names=$PROFILE; [ "$names" = 1 ] && names=$($PY scripts/bench/ncu_profile.py list)
  mkdir -p /tmp/tileops-prof
  for n in $names; do
    ncu --profile-from-start off --clock-control none --set full -f -o "/tmp/tileops-prof/$n" \
      $PY scripts/bench/ncu_profile.py run "$n" >"/tmp/tileops-prof/$n.log" 2>&1 || { status=1; tail -5 "/tmp/tileops-prof/$n.log"; }
    ncu --import "/tmp/tileops-prof/$n.ncu-rep" --page raw --csv >"/tmp/tileops-prof/$n.csv" 2>/dev/null
    ncu --import "/tmp/tileops-prof/$n.ncu-rep" --page details >>"$OUT/profile_details.txt" 2>/dev/null
  done
  for n in $names; do echo "## $n"; cat "/tmp/tileops-prof/$n.csv"; done >"$OUT/profile.csv"
  $PY scripts/bench/ncu_profile.py summarize /tmp/tileops-prof | tee "$OUT/profile_summary.txt"
fi

[ -n "${SKIP_BENCH:-}" ] && exit $status
step "benchmarks"
[ -n "${PEERS_BUILD:-}" ] && { wait "$PEERS_BUILD"; tail -3 "$OUT/peers_build.log"; }
# Optional tuning experiment (BENCH_VARIANTS=1): 8 vectors per thread first (TILEOPS_TUNE is read
# once per process, hence a separate run).
if [ -n "${BENCH_VARIANTS:-}" ]; then
  TILEOPS_TUNE=rms_vecs_per_thread=8 $PY scripts/bench/bench_norm.py --json "$OUT/bench_vpt8.json" ${BENCH_ARGS:-} \
    >"$OUT/bench_vpt8.txt" 2>&1 || status=1
  grep -A12 "^workload" "$OUT/bench_vpt8.txt" | grep -v "^$" | sed 's/^/[vpt8] /' | head -9
fi
# BENCHES="norm reduction" runs only those families' scripts (default: every bench_*.py).
for bench in scripts/bench/bench_*.py; do
  fam=$(basename "$bench" .py); fam=${fam#bench_}
  if [ -n "${BENCHES:-}" ] && [[ " $BENCHES " != *" $fam "* ]]; then continue; fi
  stem=$(basename "$bench" .py)
  $PY "$bench" --json "$OUT/$stem.json" ${BENCH_ARGS:-} >"$OUT/$stem.txt" 2>&1 || { status=1; tail -20 "$OUT/$stem.txt"; }
done
cat "$OUT"/bench_*.txt | grep -v "^W[0-9]" | tail -60
exit $status
