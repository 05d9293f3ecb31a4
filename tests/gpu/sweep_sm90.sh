#!/usr/bin/env bash
# One device call: ours vs cuDNN on the standard grid (bf16; fp16 at D=128), plus ablation builds
# if present. Usage: tests/gpu/sweep_sm90.sh [build-dir] [seqlens...]
B=${1:-build-sm90-test}/test_sm90_standalone
shift || true
S=${@:-1024 4096 16384}
for d in 64 128 256; do for c in 0 1; do
  $B bench $d $c 1 $S
  python3 tests/gpu/bench_cudnn_sm90.py $d $c 1 $S 2>&1 | grep cudnn
done; done
for c in 0 1; do $B bench 128 $c 0 $S; python3 tests/gpu/bench_cudnn_sm90.py 128 $c 0 $S 2>&1 | grep cudnn; done
