#!/usr/bin/env bash
# Proves the sm70 kernel family is Volta code: CUDA 13's nvcc compiles kernels/linear/linear_sm70.cu to PTX
# (compute_75, the oldest it has), the PTX is retargeted to sm_70 and assembled by the CUDA 12.9 ptxas
# (pip nvidia-cuda-nvcc-cu12; it rejects any instruction sm_70 lacks: ldmatrix, cp.async, bf16, m16n8k16), and
# the CUDA 12 cuobjdump/nvdisasm (scripts/setup.sh puts them in ~/.cache/voltserve/cuda12-tools) must show
# HMMA.884 in every weight kernel. Usage: scripts/check-sm70.sh [work dir]. Registered as the ctest test
# kernels_sm70_hmma884 (label unit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/build/sm70-check}
mkdir -p "$work"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PYTHON=${PYTHON:-python3}

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

src=$root/kernels/linear/linear_sm70.cu
"$NVCC" -std=c++20 -O3 -arch=compute_75 -ptx -I"$root/kernels" "$src" -o "$work/linear_sm70.sm75.ptx"
# Retarget: PTX ISA 8.8 is what the 12.9 ptxas reads; .target sm_70 makes it refuse anything newer than Volta.
sed -e 's/^\.version .*/.version 8.8/' -e 's/^\.target sm_75/.target sm_70/' \
  "$work/linear_sm70.sm75.ptx" > "$work/linear_sm70.ptx"
"$ptxas12" -arch=sm_70 -O3 "$work/linear_sm70.ptx" -o "$work/linear_sm70.sm_70.cubin"
PATH="$tools/bin:$PATH" "$tools/bin/cuobjdump" --dump-sass "$work/linear_sm70.sm_70.cubin" > "$work/linear_sm70.sass"

grep -q "code for sm_70" "$work/linear_sm70.sass" || { echo "check-sm70: FAIL: cubin is not sm_70" >&2; exit 1; }
# Per function: the weight kernels (decode_kernel<...>) must use HMMA.884; none may use LDSM/LDGSTS.
awk '
  /Function : / { fn = $3; if (fn ~ /decode_kernel/) { kernels[fn] = 0; order[++n] = fn } }
  /HMMA\.884/ { if (fn in kernels) kernels[fn]++ }
  /LDSM|LDGSTS/ { bad = bad " " fn }
  END {
    if (n == 0) { print "check-sm70: FAIL: no weight kernels found"; exit 1 }
    fail = 0
    for (i = 1; i <= n; i++) {
      printf "check-sm70: %-90s HMMA.884 x %d\n", order[i], kernels[order[i]]
      if (kernels[order[i]] == 0) fail = 1
    }
    if (bad != "") { print "check-sm70: FAIL: Turing+/Ampere+ instructions in" bad; exit 1 }
    if (fail) { print "check-sm70: FAIL: a weight kernel has no HMMA.884"; exit 1 }
    print "check-sm70: OK: " n " sm70 weight kernels contain HMMA.884 (sm_70 SASS from the CUDA 12 ptxas)"
  }' "$work/linear_sm70.sass"
