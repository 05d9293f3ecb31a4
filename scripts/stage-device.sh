#!/usr/bin/env bash
# Packs the parts of a build folder that the GPU machine needs (test binaries, bench, shared
# library) into one compressed file to send with the device tool's `carry` (the build folder
# itself is far over the 64 MiB limit):
#   scripts/stage-device.sh [BUILD_DIR=build] [DEST=.dev/build.tgz]
# On the GPU machine: mkdir -p .dev/build && tar xzf .dev/build.tgz -C .dev/build
set -euo pipefail
src=${1:-build}
dst=${2:-.dev/build.tgz}
tmp=$(mktemp -d)
mkdir -p "$tmp/tests" "$tmp/tools/bench" "$(dirname "$dst")"
cp "$src/tests/flashattn_gpu_tests" "$tmp/tests/"
cp "$src/tools/bench/flashattn-bench" "$tmp/tools/bench/"
cp -P "$src"/libflashattn.so* "$tmp/"
for extra in "$src/ptxas-report.txt" "$src/src/sm80/flashattn-sm80-tune"; do
  [ -f "$extra" ] && cp "$extra" "$tmp/"
done
tar czf "$dst" -C "$tmp" .
rm -rf "$tmp"
du -sh "$dst" | cut -f1
