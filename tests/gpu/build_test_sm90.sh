#!/usr/bin/env bash
# Builds the standalone sm90 test driver into build-sm90-test/ (no API layer needed).
set -euo pipefail
cd "$(dirname "$0")/../.."
# Optional: $1 = output folder, $2 = extra nvcc flags (ablations, e.g. "-DFLASHATTN_SM90_PINGPONG=0").
out=${1:-build-sm90-test}
extra=${2:-}
mkdir -p $out
flags="-std=c++20 -O3 -arch=sm_90a -Isrc -Iinclude -lineinfo --expt-relaxed-constexpr -cudart static $extra"
pids=()
for f in src/sm90/launcher.cu src/sm90/instantiations/fwd_d64.cu src/sm90/instantiations/fwd_d128.cu \
         src/sm90/instantiations/fwd_d256.cu tests/gpu/test_sm90_standalone.cu; do
  nvcc $flags -Xptxas=-v -c $f -o $out/$(basename $f .cu).o 2> $out/$(basename $f .cu).log &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait $p || rc=1; done
grep -hE "error|warning|spill|Used|Compiling entry" $out/*.log | grep -v "0 bytes spill stores, 0 bytes spill loads" | sed 's/ptxas info *: //' > $out/ptxas.txt || true
[ $rc = 0 ] || { cat $out/*.log | grep -iE "error|warning" | head -30; exit 1; }
# ptxas serialising wgmma (C7510-C7520 "Potential Performance Loss") costs 25%+: treat as an error.
if grep -h "Performance Loss" $out/*.log | head -5; then echo "ptxas serialised wgmma (see above)"; exit 1; fi
nvcc $flags $out/*.o -o $out/test_sm90_standalone
echo built $out/test_sm90_standalone
