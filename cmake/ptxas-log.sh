#!/usr/bin/env bash
# Compiler launcher: runs the compile, appends ptxas's register/spill report to one file
# (first argument) and keeps the rest of stderr on the terminal.
report="$1"; shift
err=$(mktemp)
"$@" 2>"$err"
rc=$?
if grep -q 'ptxas info' "$err"; then
  { echo "## $(printf '%s\n' "$@" | grep -E '\.cu$' | tail -1)"; grep -E 'ptxas (info|warning)|bytes stack frame' "$err"; } \
    | flock "$report.lock" tee -a "$report" >/dev/null
fi
grep -vE 'ptxas info|bytes stack frame|^ptxas info *: Used|Compiling entry|Function properties' "$err" >&2
rm -f "$err"
exit $rc
