#!/usr/bin/env bash
# Compiler launcher: runs the compile, keeps ptxas's register/spill report of this source in a
# fragment, and rebuilds the one report file (first argument) from all fragments, so a rebuild
# replaces a source's entries instead of appending them again. Other stderr stays on the terminal.
report="$1"; shift
err=$(mktemp)
"$@" 2>"$err"
rc=$?
if grep -q 'ptxas info' "$err"; then
  src=$(printf '%s\n' "$@" | grep -E '\.cu$' | tail -1)
  obj=$(printf '%s\n' "$@" | grep -A1 -x -- '-o' | tail -1)
  frag="$report.d/$(printf '%s' "${obj:-$src}" | tr '/ ' '__').txt"
  mkdir -p "$report.d"
  { echo "## $src"; grep -E 'ptxas (info|warning)|bytes stack frame' "$err"; } >"$frag"
  (
    flock 9
    cat "$report.d"/*.txt >"$report"
  ) 9>"$report.lock"
fi
grep -vE 'ptxas info|bytes stack frame|^ptxas info *: Used|Compiling entry|Function properties' "$err" >&2
# wgmma serialised by ptxas is a silent 25%+ slowdown: say so on the terminal, not only in the report.
grep 'Potential Performance Loss' "$err" >&2
rm -f "$err"
exit $rc
