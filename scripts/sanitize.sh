#!/usr/bin/env bash
# The sanitizer runs, opt-in (by hand, or scripts/test.sh with VOLTSERVE_SANITIZERS=1), each in its own build
# folder, CPU only:
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer over the whole CPU tree (build-asan/):
#                              every unit, golden and e2e test (ctest -LE gpu)
#   scripts/sanitize.sh tsan   ThreadSanitizer (build-tsan/) over the engine, scheduler and server: test_scheduler,
#                              test_server_http and the e2e suites labelled `threads` against a TSan voltserve
# Any report fails the run: UB aborts (-fno-sanitize-recover), ASan and TSan halt on the first error, LeakSanitizer
# checks every process at exit (the e2e harness stops servers with SIGTERM and fails on a report in their log).
# Appends "<kind>-configure N", "<kind>-build N", "<kind>-tests N" to VOLTSERVE_TIMES_FILE when set.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
times=${VOLTSERVE_TIMES_FILE:-/dev/null}
case "$kind" in
  asan) dir=${VOLTSERVE_ASAN_DIR:-build-asan}; sanitize=address,undefined; targets=() ;;
  tsan) dir=${VOLTSERVE_TSAN_DIR:-build-tsan}; sanitize=thread; targets=(--target test_scheduler test_server_http voltserve) ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan" >&2; exit 2 ;;
esac
stamp() { echo "sanitize: [$(date -u +%H:%M:%S)] $*"; }

t=$SECONDS
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVOLTSERVE_CUDA=OFF -DVOLTSERVE_SANITIZE="$sanitize" \
  -DVOLTSERVE_WERROR=ON >/dev/null
echo "$kind-configure $((SECONDS - t))" >>"$times"
stamp "$kind: configured $dir in $((SECONDS - t)) s; building ${targets[*]:-everything}"
t=$SECONDS
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
echo "$kind-build $((SECONDS - t))" >>"$times"
stamp "$kind: built in $((SECONDS - t)) s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:check_initialization_order=1:strict_init_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
t=$SECONDS
rc=0
if [ "$kind" = asan ]; then
  ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" --timeout 1500 -LE gpu || rc=$?
else
  # The threading unit tests run whole (their executables), then the e2e suites labelled `threads`.
  for exe in "$dir/tests/scheduler/test_scheduler" "$dir/tests/server/test_server_http"; do
    stamp "tsan: $exe"
    "$exe" --reporter compact --colour-mode none || rc=$?
  done
  ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" --timeout 1500 -L threads || rc=$?
fi
echo "$kind-tests $((SECONDS - t))" >>"$times"
stamp "$kind: tests took $((SECONDS - t)) s (exit $rc)"
exit "$rc"
