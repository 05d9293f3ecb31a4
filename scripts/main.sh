#!/usr/bin/env bash
# Main job: build everything, then run flashattn-bench on the default problem (the seed shape).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/tools/bench/flashattn-bench --check "$@"
