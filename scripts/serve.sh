#!/usr/bin/env bash
# The README's serve command: installs what is missing, builds, and serves the bundled default model
# (models/demo, the trained demo model) on 127.0.0.1:8080 with the OpenAI-compatible API. Extra arguments go to
# `voltserve serve` (GPU backend when a GPU is present: --backend auto) (e.g. --model DIR, --port 9000, --config config/serve-local.json, --api-key KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${VOLTSERVE_BUILD_DIR:-build}
backend=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  backend=auto
fi
exec "$BUILD_DIR/voltserve" serve --backend "$backend" "$@"
