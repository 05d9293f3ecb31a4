#!/usr/bin/env bash
# Main job: build everything, then run flashattn-bench on the default problem (the seed shape).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
bash scripts/deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)"
exec ./build/tools/bench/flashattn-bench --check "$@"
