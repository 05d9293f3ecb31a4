#!/usr/bin/env bash
# Copies the parts of a build folder that the GPU machine needs (test binaries, bench,
# shared library) into a small folder to send with the device tool's `carry`:
#   scripts/stage-device.sh [BUILD_DIR=build] [DEST=.dev/build]
set -euo pipefail
src=${1:-build}
dst=${2:-.dev/build}
rm -rf "$dst"
mkdir -p "$dst/tests" "$dst/tools/bench"
cp "$src/tests/flashattn_gpu_tests" "$dst/tests/"
cp "$src/tools/bench/flashattn-bench" "$dst/tools/bench/"
cp -P "$src"/libflashattn.so* "$dst/"
[ -f "$src/ptxas-report.txt" ] && cp "$src/ptxas-report.txt" "$dst/"
du -sh "$dst" | cut -f1
