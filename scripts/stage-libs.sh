#!/usr/bin/env bash
# Builds variants of the library (sm_90a by default, no tests) and packs them for one device call:
#   scripts/stage-libs.sh NAME="CUDA FLAGS" [NAME="CUDA FLAGS" ...]   -> .dev/libs.tgz
# STAGE_ARCHS (default 90a) sets FLASHATTN_ARCHS ("80;90a" to time the sm80 family on Hopper;
# "80" alone builds faster, but Hopper then JIT-compiles compute_80 PTX, without the sm_90 code
# paths, so its timings are not the shipped kernels': tools/dev/relink_variant.sh is the quick way).
# e.g. scripts/stage-libs.sh base="" lead0="-DFLASHATTN_SM90_ABL_CLAIM_LEAD=0"
# Each variant builds in build-<NAME>/ (kept: a rebuild is incremental). On the GPU machine:
#   tar xzf .dev/libs.tgz -C .dev && bash scripts/lib-ab.sh "LIB_AB ARGS" base lead0
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
[ $# -gt 0 ] || { sed -n 2,9p "$0"; exit 2; }
rm -rf .dev/libs && mkdir -p .dev/libs
for spec in "$@"; do
  name=${spec%%=*}
  flags=${spec#*=}
  case $name in ''|[!A-Za-z]*|*[!A-Za-z0-9_-]*) echo "stage-libs: bad name '$name'" >&2; exit 2 ;; esac
  dir=build-$name
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_ARCHS="${STAGE_ARCHS:-90a}" -DFLASHATTN_BUILD_TESTS=OFF \
    -DFLASHATTN_BUILD_BENCH=OFF "-DCMAKE_CUDA_FLAGS=$flags" >/dev/null
  cmake --build "$dir" --target flashattn -j"$(nproc)" >"$dir/build.log" 2>&1 || { tail -20 "$dir/build.log"; exit 1; }
  spills=$(awk '/Compiling entry.*sm90_fwd_kernel/{k=1} k&&/spill stores/{if ($5 != 0) n++; k=0} END{print n+0}' \
    "$dir/ptxas-report.txt" 2>/dev/null)
  mkdir -p ".dev/libs/$name"
  cp -L "$dir/libflashattn.so" ".dev/libs/$name/libflashattn.so"
  echo "$name: built ($flags), sm90 kernels with spills: $spills"
done
tar czf .dev/libs.tgz -C .dev libs
du -sh .dev/libs.tgz | cut -f1
