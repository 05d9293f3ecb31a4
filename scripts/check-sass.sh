#!/usr/bin/env bash
# Asserts what the kernels are made of, from the SASS of a built library (needs cuobjdump,
# which the GPU machine has):
#   every sm90 kernel (sm_90a) issues HGMMA and UTMALDG; every sm80 kernel issues HMMA, LDSM
#   and LDGSTS. Prints one line per family and exits non-zero on any kernel that does not.
#   scripts/check-sass.sh LIB [PTXAS_REPORT]
# With PTXAS_REPORT, also asserts that no sm90 kernel spills beyond scripts/spill-budget.txt
# and ptxas serialised no wgmma.
set -uo pipefail
lib=${1:?usage: check-sass.sh LIB [PTXAS_REPORT]}
report=${2:-}
cuobjdump --dump-sass "$lib" | awk '
  /code for sm_/ { arch = $NF }
  /Function :/ { fn = $3; if (fn ~ /sm90_fwd_kernel/) fam = "sm90"; else if (fn ~ /sm80_fwd_kernel/) fam = "sm80"; else fam = ""
                 if (fam != "") { key = fam " " arch " " fn; keys[key] = 1 } next }
  fam == "sm90" && /HGMMA/   { h[key] = 1 }
  fam == "sm90" && /UTMALDG/ { t[key] = 1 }
  fam == "sm80" && /HMMA/    { m[key] = 1 }
  fam == "sm80" && /LDSM/    { l[key] = 1 }
  fam == "sm80" && /LDGSTS/  { g[key] = 1 }
  END {
    bad = 0
    for (k in keys) {
      split(k, p, " ")
      if (p[1] == "sm90") { n90++; if (!(k in h) || !(k in t)) { print "MISSING HGMMA/UTMALDG: " k; bad++ } }
      else { n80++; if (!(k in m) || !(k in l) || !(k in g)) { print "MISSING HMMA/LDSM/LDGSTS: " k; bad++ } }
    }
    printf "sass: %d sm90 kernels with HGMMA+UTMALDG, %d sm80 kernels with HMMA+LDSM+LDGSTS, %d bad\n", n90 - 0, n80 - 0, bad
    exit ((bad > 0 || n90 + n80 == 0) ? 1 : 0)
  }'
rc=$?
if [ -n "$report" ]; then
  # Spill-store bytes per sm90 source (its worst kernel) against scripts/spill-budget.txt.
  budget="$(dirname "$0")/spill-budget.txt"
  spills=$(awk 'FNR == NR { if ($0 !~ /^#/ && NF == 2) allow[$1] = $2; next }
    /^## / { f = $2; next }
    /spill stores/ && f ~ /src\/sm90\// {
      b = 0
      for (i = 1; i + 3 <= NF; i++) if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) == "stores,") b = $i + 0
      if (b > worst[f] + 0) worst[f] = b
    }
    END {
      n = 0
      for (f in worst) {
        lim = 0
        for (a in allow) if (substr(f, length(f) - length(a) + 1) == a) lim = allow[a]
        if (worst[f] > lim) { print "spills over budget: " f " " worst[f] " bytes (budget " lim ")" > "/dev/stderr"; n++ }
      }
      print n
    }' "$budget" "$report")
  # ptxas serialising wgmma (C75xx "Potential Performance Loss") costs 25%+ (docs/VERSIONS.md, V9).
  serial=$(grep -c 'Potential Performance Loss' "$report")
  echo "ptxas: $spills sm90 sources with spills over budget, $serial with serialised wgmma"
  [ "$spills" -ne 0 ] && rc=1
  [ "$serial" -ne 0 ] && rc=1
fi
exit $rc
