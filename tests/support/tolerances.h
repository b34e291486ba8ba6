// The one table of numeric tolerances the tests use (DESIGN.md §3). Change a number only with a reason written
// next to it; goldens themselves come from tools/make_fixtures.py, never by hand.
#pragma once

namespace voltserve::tol {

// CPU fp32 backend vs the transformers fp32 eager reference: max |logit difference| at every checked position.
inline constexpr float kCpuVsTransformersLogitsAbs = 1e-3f;
// The same model, same backend, computed two ways (chunked prefill + incremental decode vs one full forward;
// several sequences batched vs each alone). With the sequential delta rule both are bit-identical (the tests
// check exactly 0); the chunked WY form reorders fp32 sums and its chunk boundaries move with the step sizes:
// measured up to 1.1e-4 on fixture logits of magnitude ~45 (2.5e-6 relative), so 5e-4 leaves a 4x margin.
inline constexpr float kSameBackendLogitsAbs = 5e-4f;
// Chunked (MODEL.md §3) vs sequential (§2.6) gated delta rule on the same inputs.
inline constexpr float kGdnChunkedVsSequentialAbs = 5e-4f;
// GPU fp16 vs CPU fp32, per op: normalised error ||a - b||^2 / ||b||^2.
inline constexpr float kGpuVsCpuNormalisedError = 5e-4f;
// Attention kernels vs an fp64 oracle that reads the kernels' own fp16 KV cache (tests/kernels/attention_harness.h),
// normalised error as above. The fp16 rounding of K and V, which the 5e-4 bound absorbs, is then common to both, and
// the 5e-4 bound cannot see a key dropped or counted twice (at context N it moves the output by ~1/N in this metric:
// 6e-5 at N = 17000). What remains is fp32 rounding (fp32 output) or the fp16 rounding of the output itself (at most
// (2^-11)^2 = 2.4e-7, typically 4e-8).
inline constexpr double kAttentionStrictF32 = 1e-8;
inline constexpr double kAttentionStrictF16 = 1e-6;

}  // namespace voltserve::tol
