#!/usr/bin/env bash
# The whole device check, run on the GPU machine:
#   scripts/gpu-check.sh BUILD_DIR OUT_DIR [--sanitize] [--compare] [--no-pytest]
# Runs the GPU tests, the bench's --check path, the Python suite, and optionally
# compute-sanitizer on a small grid and bench/compare.py. Logs go to OUT_DIR; a short
# summary is printed last. GTEST_FILTER narrows the GPU tests; COMPARE_ARGS goes to compare.py.
set -uo pipefail
build=${1:?usage: gpu-check.sh BUILD_DIR OUT_DIR [--sanitize] [--compare] [--no-pytest]}
out=${2:?usage: gpu-check.sh BUILD_DIR OUT_DIR [...]}
shift 2
sanitize=0 compare=0 pytest=1
for a in "$@"; do
  case $a in
    --sanitize) sanitize=1 ;; --compare) compare=1 ;; --no-pytest) pytest=0 ;;
    *) echo "gpu-check: unknown option $a" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
summary=()
fail=0
note() { summary+=("$1"); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv >"$out/device.txt" 2>&1
note "device: $(tail -1 "$out/device.txt")"

"$build/tests/flashattn_gpu_tests" --gtest_brief=1 >"$out/gpu-tests.log" 2>&1
rc=$?
passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$out/gpu-tests.log" | grep -oE '[0-9]+$' || echo 0)
skipped=$(grep -oE '\[  SKIPPED \] [0-9]+' "$out/gpu-tests.log" | grep -oE '[0-9]+$' || echo 0)
failed=$(grep -oE '\[  FAILED  \] [0-9]+ test' "$out/gpu-tests.log" | grep -oE '[0-9]+' || echo 0)
note "gpu tests: rc=$rc passed=$passed skipped=$skipped failed=${failed:-0}"
[ $rc -ne 0 ] && fail=1 && grep -E '^\[  FAILED  \]' "$out/gpu-tests.log" | head -8 | sed 's/^/  /' >>"$out/summary-fail.txt"

report=""; [ -f "$build/ptxas-report.txt" ] && report="$build/ptxas-report.txt"
bash "$(dirname "$0")/check-sass.sh" "$build/libflashattn.so" $report >"$out/sass.log" 2>&1
rc=$?; note "$(tail -2 "$out/sass.log" | tr '\n' ' ')(rc=$rc)"
[ $rc -ne 0 ] && fail=1

bench="$build/tools/bench/flashattn-bench"
"$bench" --backend reference --check --heads 16 --seqlen 1024 --iters 5 --warmup 1 >"$out/bench-reference.log" 2>&1
rc=$?; note "bench --backend reference --check: rc=$rc $(grep -E 'Check vs' "$out/bench-reference.log" | cut -c1-40)"
[ $rc -ne 0 ] && fail=1
"$bench" --check --json "$out/bench-default.json" >"$out/bench-default.log" 2>&1
rc=$?; note "bench default (seed shape, auto): rc=$rc $(grep -E 'backend=' "$out/bench-default.log" | grep -oE 'backend=[a-z0-9]+ \([a-z0-9]+\)') $(grep -E 'Compute Performance' "$out/bench-default.log" | tr -s ' ')"
[ $rc -ne 0 ] && fail=1

if [ $pytest = 1 ] && [ -d tests/python ]; then
  FLASHATTN_LIBRARY="$build/libflashattn.so" python3 -m pytest -q -x tests/python >"$out/pytest.log" 2>&1
  rc=$?; note "pytest: rc=$rc $(tail -1 "$out/pytest.log")"
  [ $rc -ne 0 ] && fail=1
fi

if [ $compare = 1 ] && [ -f bench/compare.py ]; then
  # COMPARE_ARGS passes options through, e.g. "--timer graph" or "--quick".
  FLASHATTN_LIBRARY="$build/libflashattn.so" python3 bench/compare.py --out "$out" ${COMPARE_ARGS:-} \
    >"$out/compare.log" 2>&1
  rc=$?; note "compare.py: rc=$rc (table in compare.log)"
  [ $rc -ne 0 ] && fail=1
fi

if [ $sanitize = 1 ]; then
  # One shape per head dim with several key tiles (so the pipeline turns over), causal and not,
  # and the stream-K split (sm90 non-causal: pieces merged through the workspace).
  # Many tiles per CTA (Q slots and O staging wrap; causal tiles without keys), out without TMA.
  filt='Grid/Backends.MatchesReference/sm*_b1_sq113_sk1000_*bf16:Grid/Backends.MatchesReference/sm90_b1_sq200_sk6000_*'
  filt="$filt:Grid/Backends.MatchesReference/sm90_b16_sq512_sk64_*"
  # The sm90 backward: GQA with Sq < Sk and Sq > Sk, causal and not, both head dims.
  filt="$filt:Grid/BackwardGrid.MatchesFp64/sm90_b1_sq113_sk1000_h8x2_d64_causal_bf16"
  filt="$filt:Grid/BackwardGrid.MatchesFp64/sm90_b1_sq1000_sk113_h8x1_d128_fp16"
  filt="$filt:Grid/BackwardGrid.MatchesFp64/sm90_b1_sq1000_sk113_h8x1_d128_causal_bf16"
  # D=256 (split columns, dQ staged over the ring stage) and a padded head dim with Dv != D.
  filt="$filt:Grid/BackwardGrid.MatchesFp64/sm90_b1_sq113_sk1000_h8x2_d256_causal_bf16"
  filt="$filt:Grid/BackwardGrid.MatchesFp64/sm90_b2_sq300_sk517_h6x2_d192v128_bf16"
  # Varlen (sm90: shifted last key block, empty-tile skip, direct and TMA stores; sm80), and
  # the KV-cache kernels (append, paged gather, split combine).
  filt="$filt:Grid/Varlen.MatchesReferenceAndTouchesOnlyItsRows/sm90_mixed_d128v128_causal_fp16_h16x2"
  filt="$filt:Grid/Varlen.MatchesReferenceAndTouchesOnlyItsRows/sm90_mixed_d64v64_full_bf16_h16x2"
  filt="$filt:Grid/Sm80Varlen.MatchesReferenceAndLeaksNothing/d128v128_causal_bf16_mixed"
  filt="$filt:Grid/KvCache.MatchesReferenceAndWritesOnlyNewKeys/paged64_d128_gqa8_causal_sq4"
  filt="$filt:Grid/KvCache.MatchesReferenceAndWritesOnlyNewKeys/contig_d192_v128_causal"
  # The varlen backward (short sequences, zeroed rows), the sm80 backward and an sm80 window.
  filt="$filt:Grid/VarlenBackward.MatchesFp64AndTouchesOnlyItsRows/sm90_mixed_d128_causal_bf16_h8x2"
  filt="$filt:Sm80/Sm80BackwardGrid.MatchesFp64/b1_sq113_sk1000_h8x2_d128_causal_bf16"
  filt="$filt:Grid/Features.MatchesReference/sm80_d64_sq700_sk700_h8x8_w127_0_fp16"
  # 64B-swizzled D=96 and the (192, 128) pair kernel (O staged in the Q slot, padded out).
  filt="$filt:Grid/Backends.MatchesReference/sm90_b1_sq1000_sk1000_h16x2_d96_*"
  filt="$filt:Grid/Backends.MatchesReference/sm90_b2_sq777_sk1000_h8x2_d192v128_*"
  # The sm80 backward's small-shared-memory tier (sm86/sm89 kernels, forced on this device).
  filt="$filt:Sm80Small/Sm80BackwardSmallGrid.MatchesFp64/b1_sq113_sk1000_h8x2_d*_causal_bf16"
  filt="$filt:Sm80Small/Sm80BackwardSmallGrid.MatchesFp64/b1_sq1000_sk113_h8x1_d128_bf16"
  for tool in memcheck racecheck synccheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tests/flashattn_gpu_tests" \
      --gtest_filter="$filt" --gtest_brief=1 >"$out/sanitize-$tool.log" 2>&1
    rc=$?; note "compute-sanitizer $tool: rc=$rc $(grep -E 'ERROR SUMMARY' "$out/sanitize-$tool.log" | tail -1)"
    [ $rc -ne 0 ] && fail=1
  done
fi

echo "== gpu-check summary =="
printf '%s\n' "${summary[@]}"
[ -f "$out/summary-fail.txt" ] && cat "$out/summary-fail.txt"
exit $fail
