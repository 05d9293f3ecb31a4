#!/usr/bin/env bash
# Fingerprints every kernel the build ships (and the sm80 ablation set) from PTX, for refactors
# that must leave the kernels unchanged:
#   scripts/ptx-snapshot.sh OUT.txt [TU.cu ...]     (default: every instantiation unit)
#   python3 tools/dev/ptx_fingerprint.py --diff before.txt after.txt
# sm90 units compile for sm_90a, the rest for sm_80; extra flags come from PTX_FLAGS
# (e.g. -DFLASHATTN_SM90_ABL_PINGPONG=0).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?usage: ptx-snapshot.sh OUT.txt [TU.cu ...]}"); shift
export PATH=/usr/local/cuda/bin:$PATH
units=("$@")
if [ ${#units[@]} -eq 0 ]; then
  mapfile -t units < <(ls src/sm90/instantiations/*.cu src/sm90/fwd/instantiations/*.cu \
    src/sm80/instantiations/*.cu src/sm80/fwd/instantiations/*.cu tools/tune/*kernels*.cu 2>/dev/null)
fi
tmp=$(mktemp -d)
for u in "${units[@]}"; do
  arch=sm_80; case $u in src/sm90/*) arch=sm_90a ;; esac
  nvcc -std=c++20 --expt-relaxed-constexpr -arch=$arch -ptx -Isrc -Iinclude ${PTX_FLAGS:-} \
    "$u" -o "$tmp/$(echo "$u" | tr / _).ptx" &
  # two at a time: the build machine has two cores
  [ "$(jobs -r | wc -l)" -ge 2 ] && wait -n
done
wait
python3 tools/dev/ptx_fingerprint.py "$tmp"/*.ptx | sort >"$out"
rm -rf "$tmp"
echo "$(wc -l <"$out") functions -> $out"
