#!/usr/bin/env bash
# One command on a GPU machine: uses an existing CUDA build (VOLTSERVE_BUILD_DIR, build-kern or build, as long as
# it holds the GPU test binaries and bench_linear) or configures and builds build-gpu for this GPU, then runs
# every [gpu] Catch2 test found in the build, the linear benchmark and the other kernel benchmarks (bench_norm,
# bench_elementwise, ...), writes the logs to $OUT (or <build>/gpu-check/) and prints a short table last. Exit
# status: non-zero if any test failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=""
for d in ${VOLTSERVE_BUILD_DIR:-} build-kern build; do
  if [ -x "$d/tests/kernels/test_kernels_linear_gpu" ] && [ -x "$d/bench_linear" ]; then build=$d; break; fi
done
if [ -z "$build" ]; then
  build=build-gpu
  echo "gpu-check: no CUDA build found; building $build for this GPU"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLTSERVE_CUDA=ON \
    -DVOLTSERVE_CUDA_ARCHITECTURES=native >/dev/null || exit 1
  cmake --build "$build" -j"$(nproc)" || exit 1
fi
logs=${OUT:-$build/gpu-check}
mkdir -p "$logs"
echo "gpu-check: build $build, logs in $logs"
nvidia-smi -L || { echo "gpu-check: no GPU visible (nvidia-smi -L failed)"; exit 1; }

# cuBLAS is linked dynamically: find libcublas if the loader does not.
if ldd "$build/bench_linear" | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    for lib in "$d" "$d/nvidia/cublas/lib" "$d/nvidia/cu13/lib"; do
      if [ -e "$lib/libcublas.so.13" ]; then export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; fi
    done
  done
fi

status=0
test_lines=()
while IFS= read -r bin; do
  name=$(basename "$bin")
  n_gpu=$("$bin" --list-tests "[gpu]" 2>/dev/null | grep -Eo '^[0-9]+ matching test case' | awk '{ print $1 }')
  if [ "${n_gpu:-0}" -eq 0 ]; then continue; fi
  if "$bin" "[gpu]" --reporter console --durations yes >"$logs/$name.log" 2>&1; then r=passed; else r=FAILED; status=1; fi
  test_lines+=("$(printf '%-32s %-7s %s' "$name" "$r" "$(grep -E '^(All tests passed|test cases:)' "$logs/$name.log" | tail -1)")")
done < <(find "$build/tests" -maxdepth 3 -type f -executable -name 'test_*' | sort)

"$build/bench_linear" ${VOLTSERVE_BENCH_ARGS:-} --out "$logs/bench_linear.tsv" >"$logs/bench_linear.log" 2>&1 || { echo "gpu-check: bench_linear failed"; status=1; }
# The other kernel benchmarks of the build (bench_norm, bench_elementwise, ...; bench_tokenizer is a CPU benchmark).
op_benches=()
for b in "$build"/bench_*; do
  name=$(basename "$b")
  case "$name" in bench_linear | bench_tokenizer) continue ;; esac
  [ -f "$b" ] && [ -x "$b" ] || continue
  if "$b" >"$logs/$name.log" 2>&1; then op_benches+=("$name"); else echo "gpu-check: $name failed"; status=1; fi
done

echo
echo "== GPU kernel cases (worst 8 by error; full list in $logs) =="
grep -hE ' err=' "$logs"/test_*.log | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^err=/) print substr($i, 5), $0 }' |
  sort -g | tail -8 | cut -d' ' -f2-
grep -hE ' FAIL$' "$logs"/test_*.log | head -20
cat "$logs"/test_*.log | awk '/ err=/ { if ($NF == "ok") ok++; else bad++ } END { printf "cases: %d ok, %d failed\n", ok, bad }'
echo
sed -n '/== summary/,$p' "$logs/bench_linear.log"
for name in "${op_benches[@]}"; do
  echo
  echo "-- $name"
  sed -n '/== summary/,$p' "$logs/$name.log"
done
echo
echo "== [gpu] tests =="
printf '%s\n' "${test_lines[@]}"
exit $status
