// See accepted_runs.h: the walk and the shift on the device, one block each (a step has at most a few hundred
// sequences and rows). The shift moves the output rows first, matching them against the sequences' rows, then the
// positions, so that one launch does both.
#include <cuda_runtime.h>

#include "sampling/accept.h"
#include "sampling/accepted_runs.h"

namespace voltserve::kernels::sampling {

namespace {

constexpr int kThreads = 256;

// As accepted_runs_ref.cpp: the output row of a verify item's first token, -1 when s is no verify item.
__device__ int32_t first_judging_row(const WalkArgs& a, const SeqDesc& s) {
  if (s.n_draft <= 0) return -1;
  for (int32_t o = 0; o < a.n_out; ++o) {
    if (a.out_rows[o] == s.row0 && a.rows[o].draft >= 0) return o;
  }
  return -1;
}

__global__ void walk_kernel(const WalkArgs a) {
  for (int32_t i = threadIdx.x; i < a.n_seqs; i += blockDim.x) {
    const SeqDesc s = a.seqs[i];
    const int32_t f = first_judging_row(a, s);
    const int32_t k = f >= 0 ? s.n_draft : 0;
    int32_t n = 0;
    while (n < k && a.status[f + n] == kRowOk && a.token_out[f + n] == a.tokens[s.row0 + 1 + n]) ++n;
    a.runs[2 * i] = n;
    a.runs[2 * i + 1] = k - n;
  }
}

__global__ void shift_kernel(const ShiftArgs a) {
  for (int32_t o = threadIdx.x; o < a.n_out; o += blockDim.x) {
    const int32_t row = a.out_rows[o];
    for (int32_t i = 0; i < a.n_seqs; ++i) {
      const SeqDesc& s = a.seqs[i];
      if (s.shift_rows >= 0 && row >= s.row0 && row < s.row0 + s.n_tokens) a.out_rows[o] = row + a.runs[2 * s.shift_rows];
    }
  }
  __syncthreads();  // every thread has read the rows' sequences before n_past changes (row0 and n_tokens do not)
  for (int32_t i = threadIdx.x; i < a.n_seqs; i += blockDim.x) {
    if (a.seqs[i].shift_past >= 0) a.seqs[i].n_past -= a.runs[2 * a.seqs[i].shift_past + 1];
  }
}

}  // namespace

KernelStatus walk(const WalkArgs& a, void* stream) {
  if (a.n_seqs < 0) return VS_KERNEL_FAIL(kBadShape, "walk: n_seqs must be >= 0");
  if (a.n_seqs == 0) return KernelStatus::Ok();
  if (a.seqs == nullptr || a.tokens == nullptr || a.token_out == nullptr || a.status == nullptr || a.runs == nullptr ||
      (a.n_out > 0 && (a.out_rows == nullptr || a.rows == nullptr))) {
    return VS_KERNEL_FAIL(kBadArgument, "walk: a pointer is null");
  }
  walk_kernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

KernelStatus shift(const ShiftArgs& a, void* stream) {
  if (a.n_seqs < 0 || a.n_out < 0) return VS_KERNEL_FAIL(kBadShape, "shift: n_seqs and n_out must be >= 0");
  if (a.n_seqs == 0) return KernelStatus::Ok();
  if (a.seqs == nullptr || a.runs == nullptr || (a.out_rows == nullptr && a.n_out > 0)) {
    return VS_KERNEL_FAIL(kBadArgument, "shift: a pointer is null");
  }
  shift_kernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::sampling
