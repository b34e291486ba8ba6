#!/usr/bin/env bash
# One call on the GPU machine: unpacks the carried gpu-deps/ (scripts/gpu-deps.sh), builds build-gpu from source
# with all cores for this GPU, then runs every [gpu] Catch2 test, the e2e suites (ctest -L e2e, a voltserve started
# here) and bench/gpu-benches.txt; --tests-only / --bench-only. Logs to $OUT; times and a short table last.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

run_tests=1
run_bench=1
case "${1:-}" in
  "") ;;
  --tests-only) run_bench=0 ;;
  --bench-only) run_tests=0 ;;
  *) echo "usage: scripts/gpu-check.sh [--tests-only | --bench-only]" >&2; exit 2 ;;
esac
build=${VOLTSERVE_BUILD_DIR:-build-gpu}
case "$build" in /*) ;; *) build=$root/$build ;; esac
# $OUT returns at most 8 files: per-binary logs stay in $work, $OUT gets one log per part (build, gpu-tests, e2e,
# bench, summary) plus what a benchmark writes there itself (bench_linear.tsv).
work=$build/gpu-check
logs=${OUT:-$work}
mkdir -p "$work" "$logs"
jobs=$(nproc)
status=0
t_all=$SECONDS
times=()
note() { echo "gpu-check: [$(date -u +%H:%M:%S)] $*"; }
took() { times+=("$(printf '%-10s %5d s   %s' "$1" "$((SECONDS - $2))" "$3")"); }
finish() {
  took total "$t_all" "$([ $status -eq 0 ] && echo ok || echo FAILED)"
  {
    echo
    echo "== times (build $build, $jobs cores, logs in $logs) =="
    printf '%s\n' "${times[@]}"
  } | tee -a "$logs/summary.txt"
  exit $status
}

# --- dependencies: the carried .debs and wheels, or packages already installed (a dev machine) ---
t=$SECONDS
prefix=${VOLTSERVE_GPU_DEPS_PREFIX:-/tmp/vsdeps}
if [ -f gpu-deps/MANIFEST ]; then
  if ! scripts/gpu-deps.sh unpack "$prefix" >"$logs/build.log" 2>&1; then
    cat "$logs/build.log"; note "FAIL: scripts/gpu-deps.sh unpack"; exit 1
  fi
  # shellcheck source=/dev/null
  . "$prefix/env.sh"
elif ! pkg-config --exists libpcre2-8 libutf8proc cpp-httplib 2>/dev/null; then
  note "FAIL: no gpu-deps/ here and the build's packages are missing: run scripts/gpu-deps.sh on the dev machine"
  note "and pass carry: [\"gpu-deps\"] to the run"
  exit 1
fi
# XGrammar from the carried sdist (or the dev machine's prefix), built once per prefix.
if [ -d gpu-deps/sdist ]; then
  export VOLTSERVE_XGRAMMAR_PREFIX=${VOLTSERVE_XGRAMMAR_PREFIX:-$prefix/xgrammar}
  XG_NEED_SDIST=$(ls gpu-deps/sdist/xgrammar-*.tar.gz 2>/dev/null | head -1)
fi
# cmake and ninja come from the PyTorch venv there: on PATH, in the venv's bin, or inside the pip packages.
find_tool() {
  command -v "$1" >/dev/null 2>&1 && return 0
  local dir
  for dir in "$(python3 -c 'import sys; print(sys.prefix)' 2>/dev/null)/bin" \
             "$(python3 -c 'import cmake; print(cmake.CMAKE_BIN_DIR)' 2>/dev/null)" \
             "$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null)"; do
    if [ -x "$dir/$1" ]; then export PATH="$dir:$PATH"; return 0; fi
  done
  return 1
}
for tool in cmake ninja pkg-config; do
  find_tool "$tool" || { note "FAIL: no $tool on this machine"; exit 1; }
done
if [ -n "${XG_NEED_SDIST:-}" ]; then
  if ! scripts/xgrammar.sh "$XG_NEED_SDIST" >>"$logs/build.log" 2>&1; then
    tail -20 "$logs/build.log"; note "FAIL: scripts/xgrammar.sh $XG_NEED_SDIST"; exit 1
  fi
fi
took deps "$t" "$(cmake --version | head -1), ninja $(ninja --version)"

# --- configure + build ---
if ! nvidia-smi -L >"$work/gpus.txt" 2>&1; then
  cat "$work/gpus.txt"; note "FAIL: no GPU visible (nvidia-smi -L)"; exit 1
fi
cat "$work/gpus.txt"
# The one architecture of this GPU (e.g. 9.0 -> 90): a fraction of the default list's compile time.
arch=${VOLTSERVE_GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)}
arch=$(tr -d ' .' <<<"$arch")
arch=${arch:-native}
python=$(command -v python3)
t=$SECONDS
note "configure $build (CUDA $arch, $python)"
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLTSERVE_CUDA=ON \
     -DVOLTSERVE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="${CUDACXX:-/usr/local/cuda/bin/nvcc}" \
     -DPython3_EXECUTABLE="$python" -DVOLTSERVE_PYTHON3="$python" >>"$logs/build.log" 2>&1; then
  tail -40 "$logs/build.log"; note "FAIL: configure (log: $logs/build.log)"
  status=1; took configure "$t" FAILED; finish
fi
took configure "$t" "CUDA architectures $arch"
t=$SECONDS
note "build (-j$jobs)"
if ! cmake --build "$build" -j"$jobs" >>"$logs/build.log" 2>&1; then
  grep -E 'error|FAILED' "$logs/build.log" | head -40; note "FAIL: build (log: $logs/build.log)"
  status=1; took build "$t" FAILED; finish
fi
took build "$t" "$(grep -c '^\[' "$logs/build.log") steps"
export VOLTSERVE_SOURCE_DIR=$root VOLTSERVE_BINARY_DIR=$build

# cuBLAS is linked dynamically: where the loader does not find it, use the CUDA toolkit's or the pip wheel's copy.
find_cublas() {
  local d lib
  local site_dirs
  site_dirs=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $site_dirs; do
    for lib in "$d" "$d/nvidia/cublas/lib" "$d/nvidia/cu13/lib"; do
      if [ -e "$lib/libcublas.so.13" ]; then export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; return; fi
    done
  done
}
libs_ok() { ! ldd "$1" 2>/dev/null | grep -q 'not found'; }

# --- every [gpu] Catch2 test: each executable ctest knows, asked for its [gpu] cases ---
gpu_test_lines=()
if [ $run_tests -eq 1 ]; then
  t=$SECONDS
  n_bins=0
  n_failed=0
  : >"$logs/gpu-tests.log"
  while IFS= read -r bin; do
    name=$(basename "$bin")
    libs_ok "$bin" || find_cublas
    n_gpu=$("$bin" --list-tests "[gpu]" </dev/null 2>/dev/null | awk '/^[0-9]+ matching test case/ { print $1 }')
    if [ "${n_gpu:-0}" -eq 0 ]; then continue; fi
    n_bins=$((n_bins + 1))
    note "[gpu] $name ($n_gpu test cases)"
    (cd "$(dirname "$bin")" && "$bin" "[gpu]" --reporter console --durations yes) </dev/null >"$work/$name.log" 2>&1
    rc=$?
    case $rc in
      0) r=passed ;;
      4) r=SKIPPED; status=1; n_failed=$((n_failed + 1)) ;;  # Catch2: every test case skipped (no device seen)
      *) r=FAILED; status=1; n_failed=$((n_failed + 1)) ;;
    esac
    { echo "===== $name: $r (exit $rc)"; cat "$work/$name.log"; } >>"$logs/gpu-tests.log"
    gpu_test_lines+=("$(printf '%-32s %-7s %s' "$name" "$r" \
      "$(grep -E '^(All tests passed|test cases:)' "$work/$name.log" | tail -1)")")
  done < <(ctest --test-dir "$build" --show-only=json-v1 2>/dev/null | python3 -c '
import json, os, sys
build, seen = os.path.realpath(sys.argv[1]), []
for test in json.load(sys.stdin).get("tests", []):
    cmd = test.get("command") or [""]
    if os.path.realpath(cmd[0]).startswith(build + os.sep) and cmd[0] not in seen:
        seen.append(cmd[0])
print("\n".join(seen))' "$build")
  took "gpu tests" "$t" "$n_bins executables with [gpu] cases, $n_failed failed"
  [ $n_bins -gt 0 ] || { note "FAIL: no [gpu] test cases found in $build"; status=1; }

  # --- e2e: the same ctest suites as CI (each starts its own voltserve serve on a loopback port) ---
  t=$SECONDS
  e2e_args=(--test-dir "$build" -L e2e --output-on-failure -j"$jobs" --timeout 300)
  e2e_note=""
  if ! command -v curl >/dev/null 2>&1; then
    e2e_args+=(-E '^e2e_sse_curl$')
    e2e_note=" (no curl here: e2e_sse_curl runs in CI only)"
  fi
  note "e2e: ctest -L e2e$e2e_note"
  ctest "${e2e_args[@]}" >"$logs/e2e.log" 2>&1
  rc=$?
  e2e_line=$(grep -E '^[0-9]+% tests passed' "$logs/e2e.log" | tail -1)
  if [ $rc -ne 0 ] || [ -z "$e2e_line" ]; then
    status=1
    sed -n '/The following tests FAILED/,$p' "$logs/e2e.log"
  fi
  took e2e "$t" "${e2e_line:-no ctest summary (see e2e.log)}$e2e_note"
fi

# --- benchmarks: bench/gpu-benches.txt, then any other bench_* the build made (so a new bench/<op>/ runs at once) ---
bench_logs=()
if [ $run_bench -eq 1 ]; then
  t=$SECONDS
  n_bench=0
  listed=" "
  entries=()
  while read -r name args; do
    case "$name" in ""|\#*) continue ;; esac
    listed+="$name "
    [ "$args" = "-" ] && continue  # built, but no GPU benchmark
    entries+=("$name"$'\t'"$args")
  done <bench/gpu-benches.txt
  while IFS= read -r bin; do
    name=$(basename "$bin")
    [[ $listed == *" $name "* ]] && continue
    note "$name is not in bench/gpu-benches.txt: run without arguments (add it there)"
    entries+=("$name"$'\t')
  done < <(find "$build" -name CMakeFiles -prune -o -name 'bench_*' -type f -executable -print | sort)
  : >"$logs/bench.log"
  for entry in "${entries[@]}"; do
    name=${entry%%$'\t'*}
    args=${entry#*$'\t'}
    if [ -n "${VOLTSERVE_BENCH_ONLY:-}" ] && [[ ",$VOLTSERVE_BENCH_ONLY," != *",$name,"* ]]; then continue; fi
    bin=$build/$name
    [ -x "$bin" ] || bin=$(find "$build" -name "$name" -type f -executable -print -quit)
    if [ -z "$bin" ]; then note "FAIL: benchmark $name was not built"; status=1; continue; fi
    libs_ok "$bin" || find_cublas
    extra=""
    if [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then var=VOLTSERVE_BENCH_ARGS_$name; extra=${!var:-}; fi
    args=${args//\{logs\}/$logs}
    args=${args//\{args\}/${VOLTSERVE_BENCH_ARGS:-}}
    # Word splitting on purpose: the arguments are a flat list from the file and the variables.
    # shellcheck disable=SC2086
    set -- $args $extra
    note "bench $name $*"
    n_bench=$((n_bench + 1))
    if "$bin" "$@" </dev/null >"$work/$name.log" 2>&1; then r=ok; else r=FAILED; status=1; fi
    [ $r = ok ] || note "FAIL: $name (log: $logs/bench.log)"
    { echo "===== $name $*: $r"; cat "$work/$name.log"; } >>"$logs/bench.log"
    bench_logs+=("$work/$name.log")
  done
  took bench "$t" "$n_bench benchmarks"
fi

{
  if [ ${#gpu_test_lines[@]} -gt 0 ]; then
    echo
    echo "== GPU kernel cases (worst 8 by error; all in gpu-tests.log) =="
    grep -hE ' err=' "$logs/gpu-tests.log" |
      awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^err=/) print substr($i, 5), $0 }' | sort -g | tail -8 | cut -d' ' -f2-
    grep -hE ' FAIL$' "$logs/gpu-tests.log" | head -20
    awk '/ err=/ { if ($NF == "ok") ok++; else bad++ } END { printf "cases: %d ok, %d failed\n", ok, bad }' \
      "$logs/gpu-tests.log"
  fi
  for f in "${bench_logs[@]}"; do
    echo
    echo "== $(basename "$f" .log) =="
    if grep -q '== summary' "$f"; then sed -n '/== summary/,$p' "$f"; else tail -15 "$f"; fi
  done
  if [ ${#gpu_test_lines[@]} -gt 0 ]; then
    echo
    echo "== [gpu] tests =="
    printf '%s\n' "${gpu_test_lines[@]}"
  fi
} | tee "$logs/summary.txt"
finish
