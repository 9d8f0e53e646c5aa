#!/usr/bin/env bash
# Copies spdlog, fmt and googletest from this machine into .deps/ (git-ignored), for a GPU machine
# that lacks them: copy .deps along with the tree and scripts/gpu_check.sh builds against it.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps && mkdir -p .deps/include
cp -r /usr/include/spdlog /usr/include/fmt .deps/include/
cp -r /usr/src/googletest .deps/googletest
du -sh .deps
