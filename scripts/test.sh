#!/usr/bin/env bash
# The README's test command (and what .ci/run calls): installs what is missing, builds, and runs every test
# this machine can run. GPU tests run only where a GPU is present (scripts/gpu-check.sh on a GPU machine).
# The output ends with CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${VOLTSERVE_BUILD_DIR:-build}
ctest_args=(--test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 1500)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test: no GPU on this machine; [gpu] tests run with scripts/gpu-check.sh on a GPU machine"
  ctest_args+=(-LE gpu)
fi
exec ctest "${ctest_args[@]}"
