#!/usr/bin/env bash
# Proves that the device code meant for Volta is Volta code. Every kernels/*/*.cu except the Ampere+ families
# (*_sm80.cu) — the sm70 families, the portable ops (<op>.cu) and the dispatchers, including files added later — and
# the CUDA backend's own device code (engine/backend/cuda/*.cu) is
# compiled by CUDA 13's nvcc to PTX (compute_75, the oldest it has, with the build's flags), the PTX is retargeted to
# sm_70 and assembled by the CUDA 12.9 ptxas (pip nvidia-cuda-nvcc-cu12; it rejects any instruction sm_70 lacks:
# ldmatrix, cp.async, bf16, m16n8k16), and the CUDA 12 cuobjdump (scripts/setup.sh puts it in
# ~/.cache/voltserve/cuda12-tools) must show HMMA.884 in every weight decode kernel (the functions named
# *decode_kernel* of the kernels/linear/*_sm70.cu families: NVFP4, FP8 and dense fp16; each such file must have one)
# and no LDSM/LDGSTS anywhere. Prints one line per file and fails if any file fails. Usage: scripts/check-sm70.sh
# [work dir]; VOLTSERVE_CHECK_JOBS (default 2) files at a time. Registered as the ctest test kernels_sm70_hmma884
# (label unit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/build/sm70-check}
mkdir -p "$work"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PYTHON=${PYTHON:-python3}
jobs_max=${VOLTSERVE_CHECK_JOBS:-2}

ptxas12=${VOLTSERVE_PTXAS12:-}
if [ -z "$ptxas12" ]; then
  for sp in $("$PYTHON" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))'); do
    if [ -x "$sp/nvidia/cuda_nvcc/bin/ptxas" ]; then ptxas12="$sp/nvidia/cuda_nvcc/bin/ptxas"; break; fi
  done
fi
tools=${VOLTSERVE_CUDA12_TOOLS:-$HOME/.cache/voltserve/cuda12-tools}
if [ -z "$ptxas12" ]; then
  echo "check-sm70: FAIL: no CUDA 12 ptxas (pip install nvidia-cuda-nvcc-cu12==12.9.*; scripts/setup.sh does)" >&2
  exit 1
fi
if [ ! -x "$tools/bin/cuobjdump" ] || [ ! -x "$tools/bin/nvdisasm" ]; then
  echo "check-sm70: FAIL: no CUDA 12 cuobjdump/nvdisasm in $tools/bin (scripts/setup.sh installs them)" >&2
  exit 1
fi
case "$("$ptxas12" --version | tail -1)" in
  *cuda_12.*) ;;
  *) echo "check-sm70: FAIL: $ptxas12 is not a CUDA 12 ptxas" >&2; exit 1 ;;
esac

# One file: writes its result line ("OK ..." or "FAIL ...") to stdout; logs and intermediates go to $work/<tag>.*.
check_file() {
  local src=$1 rel tag log
  rel=${src#"$root"/}
  tag=$(printf '%s' "${rel%.cu}" | tr '/' '_')
  log=$work/$tag.log
  : > "$log"
  # The build's flags (kernels/CMakeLists.txt): include root kernels/, relaxed constexpr, VOLTSERVE_HAVE_CUDA.
  if ! "$NVCC" -std=c++20 -O3 -arch=compute_75 -ptx --expt-relaxed-constexpr -DVOLTSERVE_HAVE_CUDA=1 \
       -I"$root/kernels" -I"$root/engine" -I"$root/engine/include" -I"$root" "$src" -o "$work/$tag.sm75.ptx" >>"$log" 2>&1; then
    echo "FAIL $rel: nvcc cannot compile it to PTX: $(grep -m1 -i 'error' "$log" || tail -1 "$log")"
    return
  fi
  # Retarget: PTX ISA 8.8 is what the 12.9 ptxas reads; .target sm_70 makes it refuse anything newer than Volta.
  sed -e 's/^\.version .*/.version 8.8/' -e 's/^\.target sm_75/.target sm_70/' "$work/$tag.sm75.ptx" > "$work/$tag.ptx"
  if ! "$ptxas12" -arch=sm_70 -O3 "$work/$tag.ptx" -o "$work/$tag.sm_70.cubin" >>"$log" 2>&1; then
    echo "FAIL $rel: does not assemble for sm_70: $(grep -m1 -i 'error' "$log" || tail -1 "$log")"
    return
  fi
  if ! PATH="$tools/bin:$PATH" "$tools/bin/cuobjdump" --dump-sass "$work/$tag.sm_70.cubin" > "$work/$tag.sass" 2>>"$log"; then
    echo "FAIL $rel: cuobjdump cannot read its cubin"
    return
  fi
  if ! grep -q "code for sm_70" "$work/$tag.sass"; then
    echo "FAIL $rel: the cubin is not sm_70 code"
    return
  fi
  # Weight decode kernels: the *decode_kernel* functions of a kernels/linear/*_sm70.cu family file.
  local weights=0
  case "$rel" in kernels/linear/*_sm70.cu) weights=1 ;; esac
  awk -v rel="$rel" -v weights="$weights" -v list="$work/$tag.kernels" '
    /Function : / { fn = $3; n++; if (weights && fn ~ /decode_kernel/) { hmma[fn] = 0; order[++nw] = fn } }
    /HMMA\.884/ { if (fn in hmma) hmma[fn]++ }
    /LDSM|LDGSTS/ { if (!(fn in bad)) { bad[fn] = 1; nbad++ } }
    END {
      min = -1; missing = 0
      for (i = 1; i <= nw; i++) {
        printf "%s HMMA.884 x %d\n", order[i], hmma[order[i]] > list
        if (hmma[order[i]] == 0) missing++
        if (min < 0 || hmma[order[i]] < min) min = hmma[order[i]]
      }
      if (nbad > 0) { printf "FAIL %s: Turing+/Ampere+ instructions (LDSM/LDGSTS) in %d kernels\n", rel, nbad; exit }
      if (weights && nw == 0) { printf "FAIL %s: a weight-kernel family without decode kernels\n", rel; exit }
      if (missing > 0) { printf "FAIL %s: %d of %d weight decode kernels lack HMMA.884 (%s)\n", rel, missing, nw, list; exit }
      if (weights) printf "OK   %s: %d kernels, %d weight decode kernels with HMMA.884 (min %d each)\n", rel, n, nw, min
      else printf "OK   %s: %d kernels\n", rel, n
    }' "$work/$tag.sass"
}

mapfile -t sources < <({ find "$root/kernels" -mindepth 2 -maxdepth 2 -name '*.cu' ! -name '*_sm80.cu';
                         find "$root/engine/backend/cuda" -maxdepth 1 -name '*.cu'; } | sort)
if [ "${#sources[@]}" -eq 0 ]; then
  echo "check-sm70: FAIL: no kernels/*/*.cu found" >&2
  exit 1
fi
for i in "${!sources[@]}"; do
  check_file "${sources[$i]}" > "$work/result.$i" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
done
wait

failed=0
weight_files=0
for i in "${!sources[@]}"; do
  line=$(cat "$work/result.$i")
  [ -n "$line" ] || line="FAIL ${sources[$i]#"$root"/}: no result"
  echo "check-sm70: $line"
  case "$line" in FAIL*) failed=$((failed + 1)) ;; *"weight decode kernels"*) weight_files=$((weight_files + 1)) ;; esac
done
if [ "$weight_files" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "check-sm70: FAIL: no weight-kernel family (kernels/linear/*_sm70.cu) checked"
  exit 1
fi
if [ "$failed" -gt 0 ]; then
  echo "check-sm70: FAIL: $failed of ${#sources[@]} files (logs in $work)"
  exit 1
fi
echo "check-sm70: OK: ${#sources[@]} files assemble for sm_70 (CUDA 12 ptxas); $weight_files weight-kernel families have HMMA.884 in every decode kernel"
