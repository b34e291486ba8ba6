#!/usr/bin/env bash
# The sanitizer runs, part of scripts/test.sh's default run (CI), each in its own build folder, CPU only, Debug -O1
# -g1, building only the targets its suites need:
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/): the unit tests of the
#                              engine, scheduler, server, tokenizer, chat templates and grammar, the golden tests on
#                              the tiny fixtures, and the e2e suites of every route against an ASan voltserve
#   scripts/sanitize.sh tsan   ThreadSanitizer (build-tsan/): test_scheduler, test_server_http and the e2e suites
#                              labelled `threads` against a TSan voltserve
# Any report fails the run: UB aborts (-fno-sanitize-recover), ASan and TSan halt on the first error, LeakSanitizer
# checks every process at exit (the e2e harness stops servers with SIGTERM and fails on a report in their log).
# The e2e suites' latency limits are scaled by the build folder's VOLTSERVE_TEST_TIME_SCALE (cmake/Sanitizers.cmake).
# Appends "<kind>-configure N", "<kind>-build N", "<kind>-unit N", "<kind>-e2e N" to VOLTSERVE_TIMES_FILE when set.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
times=${VOLTSERVE_TIMES_FILE:-/dev/null}
jobs=$(nproc)
# Unit and golden executables, run whole (one process each: cheaper than CTest's process per test case, where
# every process pays the sanitizer's start-up), as paths under the build folder, longest first. test_memory_plan
# is left out: under ASan it took 330 s (load ~12) to check plan arithmetic that no sanitizer adds much to.
case "$kind" in
  asan)
    dir=${VOLTSERVE_ASAN_DIR:-build-asan}; sanitize=address,undefined
    exes=(tests/golden/test_qwen35_golden tests/server/test_server_openai tests/scheduler/test_scheduler
          tests/server/test_server_http tests/tokenizer/test_tokenizer tests/chat/chat_template_test
          tests/grammar/test_grammar tests/golden/test_prefix_cache tests/golden/test_kv_exhaustion
          tests/server/test_server_parsers tests/common/test_common)
    # Every route and its cancellation, structured output, tools, KV exhaustion, the lifecycle (drain at SIGTERM).
    # sanitizer_canary's planted bugs, each with the report it must produce.
    canaries=("heap-overflow:heap-buffer-overflow" "use-after-free:heap-use-after-free"
              "leak:detected memory leaks" "signed-overflow:signed integer overflow")
    e2e=(-R '^e2e_(openai_sdk|responses_sdk|anthropic_sdk|robustness|agent_api_robustness|structured_output|strict_tools_auto|kv_exhaustion|disconnects|lifecycle)$')
    ;;
  tsan)
    dir=${VOLTSERVE_TSAN_DIR:-build-tsan}; sanitize=thread
    exes=(tests/scheduler/test_scheduler tests/server/test_server_http)
    canaries=("data-race:data race")
    e2e=(-L threads)
    ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan" >&2; exit 2 ;;
esac
stamp() { echo "sanitize: [$(date -u +%H:%M:%S)] $*"; }
targets=(sanitizer_canary voltserve)
for exe in "${exes[@]}"; do targets+=("$(basename "$exe")"); done

t=$SECONDS
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVOLTSERVE_CUDA=OFF -DVOLTSERVE_SANITIZE="$sanitize" \
  -DVOLTSERVE_WERROR=ON >/dev/null
echo "$kind-configure $((SECONDS - t))" >>"$times"
stamp "$kind: configured $dir in $((SECONDS - t)) s; building ${targets[*]}"
t=$SECONDS
cmake --build "$dir" -j"$jobs" --target "${targets[@]}"
echo "$kind-build $((SECONDS - t))" >>"$times"
stamp "$kind: built in $((SECONDS - t)) s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp"
export VOLTSERVE_SOURCE_DIR=$PWD VOLTSERVE_BINARY_DIR=$PWD/$dir
logs="$dir/sanitize-logs"
rm -rf "$logs" && mkdir -p "$logs"
rc=0

# First the canary: each planted bug must be reported and fail its process, or the run proves nothing.
for canary in "${canaries[@]}"; do
  bug=${canary%%:*} want=${canary#*:}
  if out=$("$dir/tests/sanitizers/sanitizer_canary" "$bug" 2>&1); then
    stamp "$kind: FAILED: sanitizer_canary $bug exited 0 (the sanitizer did not stop it): $out"
    rc=1
  elif [[ "$out" != *"$want"* ]]; then
    stamp "$kind: FAILED: sanitizer_canary $bug failed without the report '$want':"
    echo "$out" | tail -n 20
    rc=1
  else
    stamp "$kind: canary $bug reported ('$want') and failed, as it must"
  fi
done

# The executables, $jobs at a time; each one's whole output goes to its log, a failure prints its tail.
t=$SECONDS
run_exe() {
  local exe=$1 log start
  log="$logs/$(basename "$exe").log"
  start=$SECONDS
  if "$dir/$exe" '~[gpu]' --reporter compact --colour-mode none >"$log" 2>&1; then
    stamp "$kind: $exe passed ($((SECONDS - start)) s): $(awk 'NF { last = $0 } END { print last }' "$log")"
  else
    stamp "$kind: $exe FAILED ($((SECONDS - start)) s), $log:"
    tail -n 60 "$log"
    return 1
  fi
}
# $jobs queues, dealt round-robin from the list (longest first), each run in order in the background.
pids=()
for ((q = 0; q < jobs; q++)); do
  (
    qrc=0
    for ((i = q; i < ${#exes[@]}; i += jobs)); do run_exe "${exes[i]}" || qrc=1; done
    exit "$qrc"
  ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
echo "$kind-unit $((SECONDS - t))" >>"$times"
stamp "$kind: unit and golden executables took $((SECONDS - t)) s (exit $rc)"

t=$SECONDS
ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$jobs" "${e2e[@]}" || rc=1
echo "$kind-e2e $((SECONDS - t))" >>"$times"
stamp "$kind: e2e suites took $((SECONDS - t)) s (exit $rc)"
exit "$rc"
