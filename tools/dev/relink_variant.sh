#!/usr/bin/env bash
# A variant of a built library with a few translation units recompiled under extra flags, in
# about a minute instead of a whole build (for A/B runs of one family's ablation switches):
#   tools/dev/relink_variant.sh BUILD_DIR OUT.so "FLAGS" TU.cu [TU.cu ...]   (TUs relative to the source tree)
# e.g. tools/dev/relink_variant.sh build .dev/libs/ed0/libflashattn.so \
#        "-DFLASHATTN_SM90_ABL_EARLY_DESC=0" src/sm90/fwd/instantiations/fwd_d128.cu
# Each TU is compiled with BUILD_DIR's own command plus FLAGS, for sm_90a only (the variant is
# for Hopper runs), and the shared library is linked by hand into OUT.so. BUILD_DIR's objects of
# those TUs are left as the variant's: ninja's deps log no longer matches them, so the next ninja
# run there rebuilds them with the configured flags (that is also why the link is not ninja's).
set -euo pipefail
build=$(realpath "${1:?usage: relink_variant.sh BUILD_DIR OUT.so FLAGS TU.cu...}")
out=$(realpath -m "${2:?}")
flags=${3?}
shift 3
[ $# -gt 0 ] || { echo "relink_variant.sh: no TU given" >&2; exit 2; }
cd "$build"
# TUs are named relative to the source tree BUILD_DIR was configured from.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' CMakeCache.txt)
tus=()
for tu in "$@"; do tus+=("$src/${tu#./}"); done
for tu in "${tus[@]}"; do
  # The TU's own compile command (file names repeat across families: match the full path).
  cmd=$(ninja -t commands | grep -F -- "-c $tu -o " | head -1 | sed 's/--generate-code=arch=compute_80,code=\[compute_80,sm_80\] //' || true)
  [ -n "$cmd" ] || { echo "relink_variant.sh: no compile command for $tu in $build" >&2; exit 2; }
  (eval "$cmd $flags") &
done
wait
eval "$(ninja -t commands flashattn | grep -- '-o libflashattn\.so\.[0-9.]* ')"
mkdir -p "$(dirname "$out")"
cp -L "$build"/libflashattn.so "$out"
echo "$out: $(stat -c %s "$out") bytes"
