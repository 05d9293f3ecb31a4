#!/usr/bin/env bash
# Dev harness, not a test: builds tools/dev/sm90_standalone.cu (the sm90 kernels without the API
# layer or CMake) into build-sm90-standalone/, for quick ablation builds of the kernels alone.
# Usage: tools/dev/build_sm90_standalone.sh [OUT_DIR] ["EXTRA NVCC FLAGS"]
#   e.g. tools/dev/build_sm90_standalone.sh build-pp0 "-DFLASHATTN_SM90_ABL_PINGPONG=0"
# Library variants for A/B timing against cuDNN: scripts/stage-libs.sh + scripts/lib-ab.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build-sm90-standalone}
extra=${2:-}
mkdir -p "$out"
flags="-std=c++20 -O3 -arch=sm_90a -Isrc -Iinclude -lineinfo --expt-relaxed-constexpr -cudart static $extra"
# The sm90 family's translation units (launcher and instantiations, wherever the tree keeps them)
# and the host code they call in src/common (device properties).
mapfile -t srcs < <(find src/sm90 -name '*.cu' | sort; find src/common -name '*.cpp' | sort)
srcs+=(tools/dev/sm90_standalone.cu)
pids=() objs=()
for f in "${srcs[@]}"; do
  o=$out/$(echo "${f%.*}" | tr / _)  # path-derived, so equal basenames in two folders do not clash
  objs+=("$o.o")
  # shellcheck disable=SC2086  # flags is a list of options
  nvcc $flags -Xptxas=-v -c "$f" -o "$o.o" 2>"$o.log" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
grep -hE "error|warning|spill|Used|Compiling entry" "$out"/*.log | grep -v "0 bytes spill stores, 0 bytes spill loads" |
  sed 's/ptxas info *: //' >"$out/ptxas.txt" || true
[ $rc = 0 ] || { cat "$out"/*.log | grep -iE "error|warning" | head -30; exit 1; }
# ptxas serialising wgmma (C7510-C7520 "Potential Performance Loss") costs 25%+: treat as an error.
if grep -h "Performance Loss" "$out"/*.log | head -5; then echo "ptxas serialised wgmma (see above)"; exit 1; fi
# shellcheck disable=SC2086
nvcc $flags "${objs[@]}" -o "$out/sm90_standalone"
echo "built $out/sm90_standalone"
