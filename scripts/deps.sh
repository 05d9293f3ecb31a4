#!/usr/bin/env bash
# Installs the Debian packages the build needs (when run as root), or prints the exact
# command to run. The CUDA toolkit (nvcc >= 13) is a precondition, not installed here.
set -euo pipefail
pkgs=(cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${missing[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null
  else
    echo "deps: missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  else
    echo "deps: nvcc not found; install the CUDA 13 toolkit and put /usr/local/cuda/bin on PATH" >&2
    exit 1
  fi
fi
