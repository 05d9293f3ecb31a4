#!/usr/bin/env bash
# Tests: build, then run every test. Tests that need a GPU (or torch) report themselves
# skipped on a machine without one.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
bash scripts/deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)"
if python3 -c 'import pytest' 2>/dev/null && [ -d tests/python ]; then
  python3 -m pytest -q tests/python
else
  echo "python tests: pytest not installed here; run on the GPU machine by scripts/gpu-check.sh"
fi
# One line per test is noise at ~300 tests; failures and the summary are what matter.
ctest --preset default -j"$(nproc)" | { grep -v -E '((Passed|Skipped) +[0-9.]+ sec|\(Skipped\))$' || true; }
