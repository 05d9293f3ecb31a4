#!/usr/bin/env bash
# Hardware-counter comparison of our sm90 kernel and cuDNN's on the same shapes (GPU machine):
#   scripts/profile-sm90.sh BUILD_DIR OUT_DIR [D:causal:S ...]      (default 128:0:2048 128:1:2048)
#   PROFILE_DIRECTION=bwd scripts/profile-sm90.sh ...   the backward's main kernel and cuDNN's
#                                                       (both through bench/compare.py)
# Batch = 16384/S, heads = 2048/D, bf16. For each shape: ncu (clocks left alone) on one launch
# of flashattn-bench (sm90) and of SDPA's cuDNN backend, with the throughput, launch, pipe,
# memory, warp-state and scheduler sections. Every collected metric goes to one CSV per run
# (packed into OUT_DIR/ncu.tgz); a digest of the telling ones is printed.
set -uo pipefail
build=${1:?usage: profile-sm90.sh BUILD_DIR OUT_DIR [D:causal:S ...]}
out=${2:?}
shift 2
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(128:0:2048 128:1:2048)
mkdir -p "$out/ncu"
sections=(--section SpeedOfLight --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis
          --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats)
# name -> value from a --page raw CSV (header row names the metrics, third row holds the values).
pick() {
  python3 - "$1" <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
if hdr is None or len(rows) < hdr + 3:
    print("    (no data)"); sys.exit()
names, vals = rows[hdr], rows[hdr + 2]
print("    kernel:", vals[names.index("Kernel Name")][:100])
want = re.compile(r"gpu__time_duration.sum|gpc__cycles_elapsed.avg.per_second|sm__throughput.avg.pct|pipe_tensor.*(pct|ratio)|lts__t_bytes.sum.per_second|"
                  r"lts__throughput.avg.pct|dram__throughput.avg.pct|smsp__issue_active.avg.pct|"
                  r"smsp__average_warps_issue_stalled_.*_per_issue_active|smsp__inst_executed.sum$|launch__cluster|"
                  r"sm__pipe_(alu|fma|fmaheavy|xu|shared).*cycles_active.avg.pct_of_peak_sustained_active|"
                  r"sm__inst_executed_pipe_(xu|fma|alu|fmaheavy).*pct_of_peak_sustained_active|l1tex__data_bank_conflicts")
for n, v in zip(names, vals):
    if want.search(n):
        try:
            if float(v.replace(",", "")) == 0: continue
        except ValueError:
            pass
        print(f"    {n:90s} {v}")
PY
}
for sh in "${shapes[@]}"; do
  IFS=: read -r d c s <<<"$sh"
  b=$((16384 / s)); h=$((2048 / d)); tag="d${d}_c${c}_s${s}"
  causal=(); [ "$c" = 1 ] && causal=(--causal)
  cyn=$([ "$c" = 1 ] && echo yes || echo no)
  if [ "${PROFILE_DIRECTION:-fwd}" = bwd ]; then
    ncu --clock-control none "${sections[@]}" --kernel-name regex:sm90_bwd_kernel --launch-skip 2 --launch-count 1 --csv --page raw \
      python3 bench/compare.py --impls ours --direction bwd --no-seed --dims "$d" --seqlens "$s" --causal "$cyn" --out "$out/ncu/cmp-o-$tag" \
      >"$out/ncu/ours-$tag.csv" 2>"$out/ncu/ours-$tag.err"
    ncu --clock-control none "${sections[@]}" --kernel-name regex:'bprop|dgrad' --launch-skip 2 --launch-count 1 --csv --page raw \
      python3 bench/compare.py --impls cudnn --direction bwd --no-seed --dims "$d" --seqlens "$s" --causal "$cyn" --out "$out/ncu/cmp-c-$tag" \
      >"$out/ncu/cudnn-$tag.csv" 2>"$out/ncu/cudnn-$tag.err"
  else
    ncu --clock-control none "${sections[@]}" --kernel-name regex:sm90_fwd --launch-skip 3 --launch-count 1 --csv --page raw \
      "$build/tools/bench/flashattn-bench" --backend sm90 -b $b --heads $h -s $s -d $d --dtype bf16 "${causal[@]}" --warmup 3 --iters 1 \
      >"$out/ncu/ours-$tag.csv" 2>"$out/ncu/ours-$tag.err"
    ncu --clock-control none "${sections[@]}" --kernel-name regex:'sdpa|fprop|fmha|flash' --launch-skip 3 --launch-count 1 --csv --page raw \
      python3 bench/compare.py --impls cudnn --no-seed --dims "$d" --seqlens "$s" --causal "$cyn" --out "$out/ncu/cmp-$tag" >"$out/ncu/cudnn-$tag.csv" 2>"$out/ncu/cudnn-$tag.err"
  fi
  for who in ours cudnn; do
    echo "== $who $tag"
    pick "$out/ncu/$who-$tag.csv"
  done
done
tar czf "$out/ncu.tgz" -C "$out" ncu && rm -rf "$out/ncu"
