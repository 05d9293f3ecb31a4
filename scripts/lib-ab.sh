#!/usr/bin/env bash
# On the GPU machine: bench/lib_ab.py once per variant staged by scripts/stage-libs.sh (one
# process per build: two builds in one process fail their launches), logs under $OUT (or
# ./ab-out), then each variant's table (ratios are ours/cuDNN from the same process).
#   scripts/lib-ab.sh "LIB_AB ARGS" NAME [NAME ...]
# e.g. scripts/lib-ab.sh "--dims 128 --seqlens 2048,4096 --causal both --rounds 3" base lead0
set -uo pipefail
args=${1:?usage: lib-ab.sh "LIB_AB ARGS" NAME...}
shift
out=${OUT:-ab-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >"$out/device.txt" 2>&1
for name in "$@"; do
  # shellcheck disable=SC2086  # args is a list of options
  timeout 300 python3 bench/lib_ab.py "$name=.dev/libs/$name/libflashattn.so" $args >"$out/ab-$name.log" 2>&1
  echo "== $name rc=$?"
  grep -vE '^\s*$|^ +D ' "$out/ab-$name.log" | cut -c1-72
done
