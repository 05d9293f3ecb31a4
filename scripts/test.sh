#!/usr/bin/env bash
# Tests: build, then run every test. Tests that need a GPU (or torch) report themselves
# skipped on a machine without one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# The Python suite: C-ABI tests run anywhere; torch tests skip without torch and a GPU.
py=""
for cand in python3 /usr/bin/python3; do
  if "$cand" -c 'import pytest' 2>/dev/null; then py=$cand; break; fi
done
if [ -n "$py" ]; then
  FLASHATTN_LIBRARY="$PWD/build/libflashattn.so" "$py" -m pytest -q -p no:cacheprovider tests/python
else
  echo "python tests: no python3 with pytest (apt-get install python3-pytest)"
fi
# One line per test is noise at ~300 tests; failures and the summary are what matter.
ctest --preset default -j"$(nproc)" | { grep -v -E '((Passed|Skipped) +[0-9.]+ sec|\(Skipped\)|The following tests did not run:)$' || true; }
