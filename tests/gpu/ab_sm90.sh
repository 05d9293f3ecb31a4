#!/usr/bin/env bash
# One device call for the sm90 V5+ experiments: correctness of the variant builds, then same-call
# timing of the variants (two alternating rounds) against cuDNN. Binaries: $AB/<name>/test_sm90_standalone
# (tests/gpu/build_test_sm90.sh <dir> "<flags>", then copy). Usage: tests/gpu/ab_sm90.sh [dir] [v5|v6]
# (v5: base cr tma both c0 bn160 bn160tma; v6: def base cr2 cr0 c0; v7: def st3 c0; see docs/VERSIONS.md (sm90 family)).
AB=${1:-build-ab}
plan=${2:-v5}
t() { echo "== $*"; }
ck() {  # name mode timeout
  t "check $1 $2"
  timeout $3 $AB/$1/test_sm90_standalone check $2 | grep -E "FAIL|failed" | tail -8
  echo "rc=${PIPESTATUS[0]}"
}
b() {  # name D causal S...
  local n=$1; shift
  timeout 20 $AB/$n/test_sm90_standalone bench $1 $2 1 "${@:3}" | sed "s/^ours/$n/"
}
if [ $plan = v5 ]; then
ck both "" 40
ck bn160tma "" 40
ck cr quick 15
ck tma quick 15
for round in 1 2; do
  t "round $round D=128"
  for n in base cr tma both bn160 bn160tma; do b $n 128 0 2048 4096 8192 16384; b $n 128 1 2048 4096 8192 16384; done
  if [ $round = 1 ]; then
    t "cudnn"
    timeout 40 python3 tests/gpu/bench_cudnn_sm90.py 128:0:1:2048,4096,8192,16384 128:1:1:2048,4096,8192,16384 \
      64:1:1:1024,4096 64:0:1:4096 256:1:1:4096,16384 256:0:1:4096,16384 2>&1 | grep cudnn
  fi
done
t "D=64 / D=256"
for n in base cr tma both; do b $n 64 1 1024 4096; b $n 64 0 4096; done
for n in base cr c0; do b $n 256 1 4096 16384; b $n 256 0 4096 16384; done
fi
api() {
  [ -f .dev/build.tgz ] || return 0
  t "api gpu tests"
  mkdir -p .dev/build && tar xzf .dev/build.tgz -C .dev/build
  (cd .dev/build && LD_LIBRARY_PATH=$PWD timeout 60 tests/flashattn_gpu_tests --gtest_filter='*sm90*' 2>&1 |
     grep -E "^\[  (PASSED|FAILED|SKIPPED) \] [0-9]+ test|^\[  FAILED")
}
if [ $plan = v7 ]; then
ck def "" 40
ck st3 "" 40
api
for round in 1 2; do
  t "round $round D=128 causal"
  for n in def st3 c0; do b $n 128 1 2048 4096 8192 16384; done
done
b def 128 0 2048 4096 8192 16384
b def 256 1 1024 2048 4096
timeout 40 python3 tests/gpu/bench_cudnn_sm90.py 128:0:1:2048,4096,8192,16384 128:1:1:2048,4096,8192,16384 \
  256:1:1:1024,2048,4096 2>&1 | grep cudnn
fi
if [ $plan = v6 ]; then
ck def "" 40
ck cr0 quick 15
if [ -f .dev/build.tgz ]; then
  t "api gpu tests"
  mkdir -p .dev/build && tar xzf .dev/build.tgz -C .dev/build
  (cd .dev/build && LD_LIBRARY_PATH=$PWD timeout 60 tests/flashattn_gpu_tests --gtest_filter='*sm90*' 2>&1 | tail -3)
fi
for round in 1 2; do
  t "round $round D=256"
  for n in base cr2 cr0 c0 def; do b $n 256 1 1024 2048 4096 8192 16384; done
  for n in base def; do b $n 256 0 4096 16384; done
done
t "final grid (def)"
for d in 64 128 256; do for c in 0 1; do b def $d $c 512 1024 2048 4096 8192 16384; done; done
for c in 0 1; do timeout 20 $AB/def/test_sm90_standalone bench 128 $c 0 512 1024 2048 4096 8192 16384 | sed s/^ours/def/; done
S=512,1024,2048,4096,8192,16384
timeout 60 python3 tests/gpu/bench_cudnn_sm90.py 64:0:1:$S 64:1:1:$S 128:0:1:$S 128:1:1:$S 256:0:1:$S 256:1:1:$S \
  128:0:0:$S 128:1:0:$S 2>&1 | grep cudnn
fi
if [ $plan = v9 ]; then  # narrow first key tile: nf (on, table) vs nf0 (off)
ck nf "" 60
ck nf0 quick 20
S="512 1024 2048 4096 8192 16384"
for round in 1 2; do
  t "round $round"
  for n in nf nf0; do
    b $n 128 0 $S; b $n 128 1 $S; b $n 256 0 512 1024 2048 4096; b $n 256 1 512 1024 2048; b $n 64 1 512 1024 2048
  done
done
timeout 60 python3 tests/gpu/bench_cudnn_sm90.py 128:0:1:512,1024,2048,4096,8192,16384 128:1:1:512,1024,2048,4096,8192,16384 \
  256:0:1:512,1024,2048,4096 256:1:1:512,1024,2048 64:1:1:512,1024,2048 2>&1 | grep cudnn
fi
if [ $plan = v10 ]; then  # cross-tile pipelining: base (off) vs ct (on) vs ct160 (on, D=128 BlockN 160) vs ct2 (epilogue before softmax)
ck ct "" 60
ck ct160 quick 20
ck ct2 quick 20
ck base quick 20
S="512 1024 2048 4096 8192 16384"
for round in 1 2; do
  t "round $round"
  for n in base ct ct160 ct2; do
    b $n 128 0 $S; b $n 128 1 $S; b $n 64 1 512 1024 2048; b $n 64 0 2048; b $n 256 0 1024 2048; b $n 256 1 1024 2048
  done
done
timeout 90 python3 tests/gpu/bench_cudnn_sm90.py 128:0:1:512,1024,2048,4096,8192,16384 128:1:1:512,1024,2048,4096,8192,16384 \
  64:1:1:512,1024,2048 64:0:1:2048 256:0:1:1024,2048 256:1:1:1024,2048 2>&1 | grep cudnn
fi
if [ $plan = v11 ]; then  # softmax row max / row sum as 1, 2, 4, 8 independent partial chains per row
ck ch4 "" 60
for n in ch1 ch2 ch8; do ck $n quick 20; done
for round in 1 2; do
  t "round $round"
  for n in ch1 ch2 ch4 ch8; do
    b $n 128 0 1024 2048 4096 8192; b $n 128 1 1024 2048 4096 8192; b $n 64 1 1024 2048; b $n 64 0 2048 8192; b $n 256 0 2048; b $n 256 1 2048
  done
done
timeout 90 python3 tests/gpu/bench_cudnn_sm90.py 128:0:1:1024,2048,4096,8192 128:1:1:1024,2048,4096,8192 \
  64:1:1:1024,2048 64:0:1:2048,8192 256:0:1:2048 256:1:1:2048 2>&1 | grep cudnn
fi
if [ $plan = v12 ]; then  # narrow first tile, one width per kernel: nt (D=128 on) vs nt0 (off)
ck nt "" 60
ck nt0 quick 20
S="512 1024 2048 4096 8192 16384"
for round in 1 2; do
  t "round $round"
  for n in nt nt0; do b $n 128 0 $S; b $n 128 1 $S; done
done
timeout 90 python3 tests/gpu/bench_cudnn_sm90.py 128:0:1:512,1024,2048,4096,8192,16384 128:1:1:512,1024,2048,4096,8192,16384 2>&1 | grep cudnn
fi
if [ $plan = v13 ]; then  # masked and unmasked key tiles in separate loops (no branch between the two wgmma waits)
ck sp "" 60
ck base quick 20
for round in 1 2; do
  t "round $round"
  for n in sp base; do b $n 128 0 1024 2048 4096 16384; b $n 128 1 1024 2048 4096 16384; b $n 64 0 2048; b $n 64 1 2048; b $n 256 0 2048; b $n 256 1 2048; done
done
fi
if [ $plan = v13b ]; then  # D=128 non-causal: BlockN 160 with split loops (no spill) vs the table (176, one loop)
ck sp2 "" 60
ck sp160 quick 20
for round in 1 2; do
  t "round $round"
  for n in sp2 sp160; do b $n 128 0 1024 2048 4096 8192 16384; done
done
fi
