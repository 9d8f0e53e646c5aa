#!/usr/bin/env bash
# Sets everything up and runs every test: manifest validator, codegen tests, GoogleTest (ctest) and
# pytest, which includes tests/packaging (CMake install + out-of-tree consumers, the wheel in a fresh
# venv, autoload, the AOTInductor C++ runner; they need PyPI once for scikit-build-core).
# GPU tests skip cleanly without a GPU (run them with scripts/gpu_check.sh on one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${TILEOPS_VENV:-/opt/tileops-venv}
export PATH="$VENV/bin:$PATH"
[ -d /usr/local/cuda ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# Tests use a private kernel cache: never a stale shared one, never the user's.
export TILEOPS_CACHE_DIR=${TILEOPS_CACHE_DIR:-$PWD/build/test-kernel-cache}

echo "== manifest validator"
python scripts/validate_manifest.py
echo "== ctest"
(cd build && ctest --output-on-failure -j2)
echo "== pytest"
PYTHONPATH=python python -m pytest -q -p no:cacheprovider tests
