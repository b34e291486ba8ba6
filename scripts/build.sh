#!/usr/bin/env bash
# Configures and builds voltserve into build/ (the binary is build/voltserve). Extra arguments go to CMake.
# VOLTSERVE_BUILD_DIR overrides the folder; CI=true turns warnings into errors and keeps CUDA to the archs
# that prove the point (one Ampere+ arch here; sm70 is compiled separately with the CUDA 12 nvcc).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${VOLTSERVE_BUILD_DIR:-build}
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ "${CI:-}" = "true" ]; then
  args+=(-DVOLTSERVE_WERROR=ON -DVOLTSERVE_CUDA_ARCHITECTURES=80)
fi
# scripts/test.sh reads the times of both parts from VOLTSERVE_TIMES_FILE.
times=${VOLTSERVE_TIMES_FILE:-/dev/null}
t=$SECONDS
cmake -S . -B "$BUILD_DIR" "${args[@]}" "$@" >/dev/null
echo "configure $((SECONDS - t))" >>"$times"
echo "build: configured $BUILD_DIR in $((SECONDS - t)) s"
t=$SECONDS
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "build $((SECONDS - t))" >>"$times"
echo "build: built in $((SECONDS - t)) s"
