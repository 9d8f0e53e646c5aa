#!/usr/bin/env bash
# GPU reliability run, on a machine with a CUDA GPU (at most about 6 minutes once build/ exists,
# e.g. after scripts/gpu_check.sh; scripts/prepare_gpu_deps.sh supplies .deps where packages are missing):
#   1. build (incremental when build/ is already there)
#   2. every kernel family on odd shapes (rows 1, 3, 130 x cols 1, 7, 1000, 4100, 33000, 131072),
#      checked against the reference target, plain and under compute-sanitizer memcheck, racecheck
#      and synccheck (PYTORCH_NO_CUDA_MEMORY_CACHING=1, so out-of-bounds accesses meet no slack);
#      then every op with a boundary (the compile-contract registry, all families) the same way
#   3. a CUDA out-of-memory while allocating an output: a clean error naming the op, the next call works
#   4. 8 processes x 4 threads on a cold disk cache: one NVRTC build per identity, every result right
# Logs and a summary go to $OUT (summary.txt, one log per step). Each step has its own time limit
# (seconds, overridable: T_BUILD, T_PLAIN, T_MEMCHECK, T_RACECHECK, T_SYNCCHECK, T_CONTRACT, T_OOM,
# T_RACE); a step
# that runs out of time is reported as such, and the next one runs. Exit status 0 when all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
DEST=${OUT:-/tmp/tileops-reliability}
mkdir -p "$DEST"
PY=$(command -v "${PYTHON:-python3}")
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DRIVER=scripts/reliability/gpu_reliability.py
export PYTHONUNBUFFERED=1
export TILEOPS_CACHE_DIR=${TILEOPS_CACHE_DIR:-$(mktemp -d /tmp/tileops-rel-cache.XXXX)}
SUMMARY="$DEST/summary.txt"
: >"$SUMMARY"
status=0
T0=$(date +%s)

# step NAME LIMIT CMD...: runs CMD with a time limit, its output to $DEST/NAME.log; records the result.
step() {
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  echo "== $name (limit ${limit}s, at +$((t - T0))s)"
  timeout -k 5 "$limit" "$@" >"$DEST/$name.log" 2>&1
  local rc=$?
  local what="ok"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then what="TIMED OUT"; status=1
  elif [ $rc -ne 0 ]; then what="FAILED (exit $rc)"; status=1; fi
  printf '%-12s %-16s %4ss  %s\n' "$name" "$what" "$(( $(date +%s) - t ))" \
    "$(grep -E '^\{|ERROR SUMMARY' "$DEST/$name.log" | tail -1)" | tee -a "$SUMMARY"
  [ "$what" = ok ] || tail -15 "$DEST/$name.log"
}

if [ ! -f build/libtileops.so ] || [ -n "${REBUILD:-}" ]; then
  step configure "${T_BUILD:-240}" cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$PY" \
    -DTILEOPS_DEPS_DIR="$PWD/.deps"
fi
step build "${T_BUILD:-240}" ninja -C build tileops
[ -f build/libtileops.so ] || { echo "no library; stopping"; exit 1; }

# The plain run also fills the disk cache, so the sanitizer runs do not compile under the tool.
step shapes "${T_PLAIN:-75}" "$PY" "$DRIVER" shapes --warm-up
SANITIZE=(env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$SAN" --error-exitcode 1 --print-limit 20
          --target-processes all)
step memcheck "${T_MEMCHECK:-75}" "${SANITIZE[@]}" --tool memcheck --leak-check no "$PY" "$DRIVER" shapes
step racecheck "${T_RACECHECK:-60}" "${SANITIZE[@]}" --tool racecheck "$PY" "$DRIVER" shapes --quick
step synccheck "${T_SYNCCHECK:-40}" "${SANITIZE[@]}" --tool synccheck "$PY" "$DRIVER" shapes --quick
step contract "${T_CONTRACT:-120}" "$PY" "$DRIVER" contract
step c-memcheck "${T_CONTRACT:-120}" "${SANITIZE[@]}" --tool memcheck --leak-check no "$PY" "$DRIVER" contract
step c-racecheck "${T_CONTRACT:-120}" "${SANITIZE[@]}" --tool racecheck "$PY" "$DRIVER" contract
step c-synccheck "${T_CONTRACT:-120}" "${SANITIZE[@]}" --tool synccheck "$PY" "$DRIVER" contract
step oom "${T_OOM:-25}" "$PY" "$DRIVER" oom
step race "${T_RACE:-80}" "$PY" "$DRIVER" race --procs 8 --threads 4 --timeout 75 \
  --cache-dir "$(mktemp -d /tmp/tileops-cold.XXXX)/kernels"

echo "== summary (total $(( $(date +%s) - T0 ))s)"
cat "$SUMMARY"
exit $status
