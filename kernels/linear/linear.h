// Weight-streaming linear layer y[m,n] = x[m,k] · W[n,k]^T for quantized weights (NVFP4 W4A16, FP8 W8A16) and
// dense fp16 weights: the device entry point, its parameters and the weight layouts. CUDA-free header (raw
// pointers, no engine types). Tested against linear_ref (tests/kernels/linear_gpu_test.cpp) on dequantized weights.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/kernel_status.h"
#include "common/weight_format.h"
#include "linear/x_layout.h"

namespace voltserve::kernels {

using voltserve::WeightFormat;

// The kernel family a packed weight is laid out for. kSm70: Volta instructions only (mma.m8n8k4, HFMA2),
// 32-row tiles. kSm80: Ampere+ (mma.m16n8k16), 16-row tiles. Both run on any GPU >= their arch.
enum class KernelFamily { kSm70, kSm80 };

const char* family_name(KernelFamily f);

// Device-resident weights in a family's layout (made by prepack_* then copied to the device).
// NVFP4: codes + e4m3 group scales (one per 16 along k) + global_scale (multiplier, ModelOpt weight_scale_2).
//        W[n,k] = e2m1(code) * e4m3(scale[n,k/16]) * global_scale * c[n].
// FP8:   codes are e4m3 weights; W[n,k] = e4m3(code) * tensor_scale * c[n].
// c[n] = channel_scales ? channel_scales[n] : 1: FP8 per-channel checkpoints, and weights whose rows were merged
// from several tensors with different global scales (merge_packed_rows, prepack.h).
// Dense: codes is the fp16 weight itself, ROW-MAJOR [n, k] (2k bytes per row), NOT prepacked, 16-byte aligned; the
//        same storage serves both families (`family` only picks the kernel) and can double as the embedding table
//        of a tied lm_head. W[n,k] = w[n,k] * c[n]; scales, global_scale and tensor_scale are not used.
//        Needs k % 16 == 0 like the other formats (the decode kernels read 16-byte chunks of rows and of x).
struct PackedWeightView {
  WeightFormat format = WeightFormat::kNvfp4;
  KernelFamily family = KernelFamily::kSm80;
  int64_t n = 0;
  int64_t k = 0;
  const uint8_t* codes = nullptr;          // device, prepacked (size: packed_codes_bytes)
  const uint8_t* scales = nullptr;         // device, prepacked NVFP4 group scales (nullptr for FP8)
  float global_scale = 1.0f;               // NVFP4 per-tensor multiplier
  float tensor_scale = 1.0f;               // FP8 per-tensor scale
  const float* channel_scales = nullptr;   // per-output-channel multiplier [n], device, optional (both codecs)
};

// One call. x: [m, k] fp16 (device), row-major or, for m <= 16, token-chunked (x_layout.h). y: [m, n] row-major,
// fp32 (default) or fp16. linear_families.h declares what linear_forward dispatches to (for tests and benchmarks).
// M <= 16 streams the packed weights once through tensor cores (the decode path); 17 <= M <= 64 (kMaxStreamRows:
// speculative verify steps, short prefill chunks) runs the decode path over row chunks of 16, streaming the weights
// once per chunk; M >= 65 dequantizes (a chunk of) W to fp16 in `workspace` and calls cuBLAS (needs cublas_handle
// and workspace_bytes >= linear_workspace_bytes(w, m)). Dense weights the same way, except that M >= 65 calls cuBLAS
// on the weight itself (needs cublas_handle, no workspace), then multiplies the rows by channel_scales when there are
// any (with fp16 output that rounds twice, and the unscaled sum must fit fp16).
struct LinearArgs {
  const void* x = nullptr;  // __half*
  int64_t m = 0;
  void* y = nullptr;
  int64_t y_stride = 0;  // elements between rows of y (0: n): a weight's output can be a column range of a wider one
  bool y_f32 = true;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* cublas_handle = nullptr;  // cublasHandle_t, owned by the caller (bound to `stream` by the callee)
  void* stream = nullptr;         // cudaStream_t
  // Programmatic dependent launch of the decode kernels (sm_90+; kernels/common/pdl.cuh): the kernel issues its
  // first weight loads before waiting for the previous kernel in the stream. Ignored below sm_90.
  bool pdl = false;
  // kTokenChunked (m <= 16 only, both families' decode kernels): the 8 tokens of a tile interleaved per 16-byte
  // k-chunk, so a warp's x load touches one cache line per quarter-warp phase; same results, bit for bit
  // (x_layout.h). The faster layout from 2 tokens on (kChunkedPreferredMinRows).
  XLayout x_layout = XLayout::kRowMajor;
};

inline constexpr int64_t kMaxDecodeRows = 16;
// Up to this many rows linear_forward streams the weights (ceil(m / 16) decode launches) instead of dequantizing
// for cuBLAS: 64 verify rows (e.g. batch 8 at k = 7) read the weights 4 times, still several times cheaper than the
// fp16 dequantization, and every row stays bit-identical to decoding it alone (bench/RESULTS.md).
inline constexpr int64_t kMaxStreamRows = 64;

// Bytes of workspace the M >= 65 path wants (0 for m <= kMaxStreamRows and for dense weights). Smaller workspaces
// still work (the weight is processed in row chunks) as long as one chunk of 256 rows fits.
size_t linear_workspace_bytes(const PackedWeightView& w, int64_t m);

// y = x · W^T. Checks shapes and pointers on the host, then launches on args.stream.
// Batch invariance (M <= kMaxStreamRows): a token's output row is bit-identical whatever m is
// and whatever the other rows hold, so verifying k + 1 speculative tokens reproduces plain decoding exactly.
KernelStatus linear_forward(const PackedWeightView& w, const LinearArgs& args);

// Which family to prepack for on a device of compute capability major*10+minor (>= 80: kSm80, else kSm70).
KernelFamily preferred_family(int compute_capability);

}  // namespace voltserve::kernels
