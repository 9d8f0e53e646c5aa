#!/usr/bin/env bash
# Sets everything up and runs the main job: examples/quickstart.py (GPU if present, else the
# reference target on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh tileops  # the library: tests and plugins are the test command's to build
VENV=${TILEOPS_VENV:-/opt/tileops-venv}
[ -d /usr/local/cuda ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PYTHONPATH=python exec "$VENV/bin/python" examples/quickstart.py "$@"
