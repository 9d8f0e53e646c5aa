#!/usr/bin/env bash
# Copies spdlog, fmt and googletest from this machine into .deps/ (git-ignored), for a GPU machine
# that lacks them: copy .deps along with the tree and scripts/gpu_check.sh builds against it.
# With --peers it also fetches the peer libraries the benchmarks compare against (flashinfer's
# header-only kernels, Liger-Kernel's Triton ops) into .deps/peers, for a machine without PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
FLASHINFER=flashinfer-python==0.7.2
LIGER=liger-kernel==0.8.5
rm -rf .deps/include .deps/googletest && mkdir -p .deps/include
cp -r /usr/include/spdlog /usr/include/fmt .deps/include/
cp -r /usr/src/googletest .deps/googletest
if [[ "${1:-}" == "--peers" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps "$FLASHINFER" "$LIGER" packaging -d "$tmp"
  rm -rf .deps/peers && mkdir -p .deps/peers/site .deps/peers/flashinfer
  (cd "$tmp" && python3 -m zipfile -e flashinfer_python-*.whl fi)
  cp -r "$tmp/fi/flashinfer/data/include" .deps/peers/flashinfer/include
  # flashinfer builds against the CCCL it ships (newer than the toolkit's), first on the include path.
  mkdir -p .deps/peers/flashinfer/cccl
  cp -r "$tmp/fi/flashinfer/data/cccl/libcudacxx/include" .deps/peers/flashinfer/cccl/libcudacxx
  cp -r "$tmp/fi/flashinfer/data/cccl/cub" "$tmp/fi/flashinfer/data/cccl/thrust" .deps/peers/flashinfer/cccl/
  rm -rf .deps/peers/flashinfer/cccl/cub/benchmarks .deps/peers/flashinfer/cccl/thrust/scripts
  for whl in "$tmp"/liger_kernel-*.whl "$tmp"/packaging-*.whl; do python3 -m zipfile -e "$whl" .deps/peers/site; done
  echo "$FLASHINFER $LIGER" > .deps/peers/VERSIONS
fi
du -sh .deps
