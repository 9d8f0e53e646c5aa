#!/usr/bin/env bash
# Copies the headers/sources the GPU machine lacks (spdlog, fmt, googletest) into .deps/ (git-ignored),
# which the device tool carries: run(..., carry=[".deps"]).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps && mkdir -p .deps/include
cp -r /usr/include/spdlog /usr/include/fmt .deps/include/
cp -r /usr/src/googletest .deps/googletest
du -sh .deps
