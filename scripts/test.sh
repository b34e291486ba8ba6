#!/usr/bin/env bash
# The README's test command (and what .ci/run calls): installs what is missing, builds, and runs every test this
# machine can run, with any shared/ folder beside the clone hidden, then the sanitizer runs (scripts/sanitize.sh
# asan and tsan; VOLTSERVE_SANITIZERS=0 skips them), and prints how long each part took and how each sanitizer run ended. GPU tests run only where a GPU is present (scripts/gpu-check.sh on a GPU
# machine). The output ends with CTest's summary of the main build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# Users' clones have nothing beside them, but this workplace's clones (CI's too) sit next to a shared/ folder, so
# a test reading it would pass here and fail for users. As root, an empty mount over it in a private mount
# namespace lets the whole run see what a user's clone sees (the ctest repo_self_contained also checks statically).
shared=$(dirname "$root")/shared
if [ -e "$shared" ] && [ -z "${VOLTSERVE_SHARED_HIDDEN:-}" ]; then
  # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
  if unshare -m sh -c 'mount -t tmpfs -o ro,size=4k voltserve-no-shared "$0"' "$shared" 2>/dev/null; then
    echo "test: $shared is hidden from this run (empty mount in a private mount namespace)"
    export VOLTSERVE_SHARED_HIDDEN=1
    exec unshare -m sh -c 'mount -t tmpfs -o ro,size=4k voltserve-no-shared "$0" && exec "$@"' \
      "$shared" "$root/scripts/test.sh" "$@"
  fi
  echo "test: $shared exists and cannot be hidden here (no mount namespace); repo_self_contained still checks"
fi

t_all=$SECONDS
stamp() { echo "test: [$(date -u +%H:%M:%S)] $*"; }
BUILD_DIR=${VOLTSERVE_BUILD_DIR:-build}
export VOLTSERVE_TIMES_FILE
VOLTSERVE_TIMES_FILE=$(mktemp)
trap 'rm -f "$VOLTSERVE_TIMES_FILE"' EXIT

stamp "setup"
t=$SECONDS
scripts/setup.sh
echo "setup $((SECONDS - t))" >>"$VOLTSERVE_TIMES_FILE"
stamp "setup took $((SECONDS - t)) s; build (scripts/build.sh, -j$(nproc))"
scripts/build.sh  # appends "configure N" and "build N" to VOLTSERVE_TIMES_FILE

ctest_args=(--test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 1500)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test: no GPU on this machine; [gpu] tests run with scripts/gpu-check.sh on a GPU machine"
  ctest_args+=(-LE gpu)
fi
stamp "tests (ctest -j$(nproc))"
t=$SECONDS
set +e
ctest "${ctest_args[@]}" | tee "$BUILD_DIR/ctest.log"
rc=${PIPESTATUS[0]}
set -e
echo "tests $((SECONDS - t))" >>"$VOLTSERVE_TIMES_FILE"

# The sanitizer runs (scripts/sanitize.sh; each builds its own folder with only the targets its suites need):
# ASan+UBSan over the engine, server, tokenizer, golden and route suites, TSan over the threading ones. Any report
# fails the run. On by default (CI): about 17 min on its 2 cores, 31 min for the whole run of CI's 90
# (bench/RESULTS.md, "CI with the sanitizers on by default");
# VOLTSERVE_SANITIZERS=0 skips them for a quick local run.
sanitizers=""
want_sanitizers=${VOLTSERVE_SANITIZERS:-1}
if [ "$want_sanitizers" != 1 ]; then
  sanitizers="skipped (VOLTSERVE_SANITIZERS=$want_sanitizers)"
else
  for kind in asan tsan; do
    stamp "sanitizers: $kind (scripts/sanitize.sh $kind)"
    set +e
    scripts/sanitize.sh "$kind" 2>&1 | tee "$BUILD_DIR/sanitize-$kind.log"
    krc=${PIPESTATUS[0]}
    set -e
    if [ "$krc" -eq 0 ]; then
      sanitizers+="$kind passed; "
    else
      sanitizers+="$kind FAILED (exit $krc, see $BUILD_DIR/sanitize-$kind.log); "
      rc=1
    fi
  done
fi
echo "total $((SECONDS - t_all))" >>"$VOLTSERVE_TIMES_FILE"
echo
stamp "times (s): $(awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }' "$VOLTSERVE_TIMES_FILE")"
stamp "sanitizers: ${sanitizers%; }"
# CTest's summary line again, so that it stays the last line of the output, unless a sanitizer run failed: then
# the last line says so (the main suite's "100% tests passed" would read as a green run).
grep -E '^[0-9]+% tests passed' "$BUILD_DIR/ctest.log" | tail -1 || true
if [[ "$sanitizers" == *FAILED* ]]; then
  echo "test: FAILED: sanitizer run(s): ${sanitizers%; }"
fi
exit "$rc"
