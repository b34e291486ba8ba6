// What linear_forward (linear.h) dispatches to: one entry per family and path, with the choices its defaults make
// open — the decode-kernel variant, the FP8 L2 prefetch budget, the dense kernels' warps per block, the dequantize +
// cuBLAS path at any m. Tests call these to cover both families and every variant the default pick may choose;
// benchmarks to sweep them. The engine calls linear_forward only.
#pragma once

#include "linear/linear.h"

namespace voltserve::kernels {

// linear_forward's M >= 65 path, at any m: NVFP4/FP8 row chunks dequantized to fp16 in the workspace, then cuBLAS; dense weights
// straight to cuBLAS. x row-major.
KernelStatus linear_gemm(const PackedWeightView& w, const LinearArgs& args);

namespace sm70 {
KernelStatus linear_decode(const PackedWeightView& w, const LinearArgs& args);
// kDense, m <= 16; warps per block 4, 8 or 16, 0: dense::decode_warps (the default).
KernelStatus linear_dense_decode(const PackedWeightView& w, const LinearArgs& args, int warps = 0);
KernelStatus dequantize_f16(const PackedWeightView& w, int64_t row0, int64_t rows, void* out_f16, void* stream);
}  // namespace sm70

namespace sm80 {
// A decode launch's choices beyond LinearArgs. variant: a kDecodeCandidates id (decode_pick.h), 0 = the default pick;
// the cluster variants (ksplit 2) need sm_90+. l2_prefetch_kib (FP8 weights): KiB of the weight's first k-blocks,
// spread over its tiles, prefetched into L2 before the kernel waits for the previous one; -1 = the default (8 MiB),
// 0 = none. Neither changes a result bit: a variant's sums are ordered by its warps per block and k split only.
struct DecodeChoice {
  int variant = 0;
  int l2_prefetch_kib = -1;
};
KernelStatus linear_decode(const PackedWeightView& w, const LinearArgs& args, const DecodeChoice& choice = {});
// kDense, m <= 16; warps as sm70::linear_dense_decode.
KernelStatus linear_dense_decode(const PackedWeightView& w, const LinearArgs& args, int warps = 0);
// The variant id the default pick launches for this weight and m on the current device, and its resident blocks
// per SM (for logs and benchmarks).
int default_decode_variant(const PackedWeightView& w, int64_t m, int* blocks_per_sm = nullptr);
// Whether a variant runs on the current device (false for an unknown id, and for cluster variants below sm_90 or
// where clusters of two cannot be resident).
bool decode_variant_runs_here(int variant);
KernelStatus dequantize_f16(const PackedWeightView& w, int64_t row0, int64_t rows, void* out_f16, void* stream);
}  // namespace sm80

// Compute capability major of the calling thread's current CUDA device (0 if it cannot be read), queried once per
// device (PerDevice).
int current_device_major();

}  // namespace voltserve::kernels
