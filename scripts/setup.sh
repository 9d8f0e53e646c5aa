#!/usr/bin/env bash
# One-time (idempotent, quick when done) setup: Debian packages, a Python venv outside the clone with
# torch 2.14.1, and a build in build/. Safe to run again.
#   bash scripts/setup.sh            everything (library, tests, plugin, tools)
#   bash scripts/setup.sh tileops    the library alone (what the demo runs)
#   TILEOPS_VENV   where the venv lives (default /opt/tileops-venv; shared by every clone)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TILEOPS_VENV:-/opt/tileops-venv}
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need_pkgs=()
for p in cmake ninja-build g++ ccache libgtest-dev libspdlog-dev libfmt-dev binutils; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
# transformers: tests/hf and examples/hf_patch.py (tileops.patch); the library itself never needs it.
if ! "$VENV/bin/python" -c "import torch, yaml, pytest, xdist, importlib.metadata as m; assert torch.__version__.startswith('2.14.1'); assert m.version('transformers') == '5.23.0'" 2>/dev/null; then
  echo "setup: installing torch==2.14.1, transformers==5.23.0 and test tools into $VENV"
  "$VENV/bin/pip" install --disable-pip-version-check torch==2.14.1 transformers==5.23.0 pyyaml pytest pytest-xdist numpy
fi

export PATH="$VENV/bin:$PATH"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$VENV/bin/python" >build-configure.log 2>&1 \
    || { tail -40 build-configure.log; exit 1; }
  rm -f build-configure.log
fi
# ninja's own status lines: a first build takes minutes (README: how long, measured).
ninja -C build "$@"
