#!/usr/bin/env bash
# Sets everything up and runs every test: manifest validator, codegen tests, GoogleTest (ctest) and
# pytest, which includes tests/packaging (CMake install + out-of-tree consumers, the wheel in a fresh
# venv, autoload, the AOTInductor C++ runner; they need PyPI once for scikit-build-core).
# GPU tests skip cleanly without a GPU (run them with scripts/gpu_check.sh on one).
# pytest runs on every core (pytest-xdist; TILEOPS_TEST_WORKERS=1: one process), then tests/packaging
# alone, whose session fixtures build an install prefix and a wheel once. Each part's time is printed last.
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
bash scripts/setup.sh
VENV=${TILEOPS_VENV:-/opt/tileops-venv}
export PATH="$VENV/bin:$PATH"
[ -d /usr/local/cuda ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# Tests use a private kernel cache: never a stale shared one, never the user's.
export TILEOPS_CACHE_DIR=${TILEOPS_CACHE_DIR:-$PWD/build/test-kernel-cache}
T1=$(date +%s)

echo "== manifest validator"
python scripts/validate_manifest.py
echo "== ctest"
(cd build && ctest --output-on-failure -j"$(nproc)")
T2=$(date +%s)
echo "== pytest"
PYTHONPATH=python python -m pytest -q -p no:cacheprovider -n "${TILEOPS_TEST_WORKERS:-$(nproc)}" \
  tests --ignore tests/packaging
T3=$(date +%s)
echo "== pytest: packaging"
PYTHONPATH=python python -m pytest -q -p no:cacheprovider tests/packaging
T4=$(date +%s)
echo "== time: setup and build $((T1 - T0)) s, validator and ctest $((T2 - T1)) s, pytest $((T3 - T2)) s," \
  "packaging $((T4 - T3)) s"
