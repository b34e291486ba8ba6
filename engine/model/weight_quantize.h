// Host quantization of a weight at load time (the opt-in smaller lm_head): FP8 E4M3 with one scale per row
// (row amax / 448), or NVFP4 the way ModelOpt quantizes it (per-tensor global scale amax / (6 * 448), one e4m3
// scale per 16 values of a row = block amax / (6 * global), e2m1 codes). Every rounding is to nearest, ties to
// even, and saturates (no infinities in either format). The result dequantizes through the one reference
// (kernels/linear/linear_ref.h). Tested in tests/model/weight_quantize_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "linear/linear_ref.h"
#include "voltserve/status.h"

namespace voltserve {

// float8_e4m3fn nearest to x (ties to even), saturating at +-448; NaN -> 0x7F.
uint8_t float_to_e4m3(float x);
// e2m1 code nearest to x (ties to the even code), saturating at +-6; x < 0 sets the sign bit (ModelOpt).
uint8_t float_to_e2m1(float x);

struct QuantizedWeight {
  std::vector<uint8_t> codes;          // NVFP4 [n, k/2] (even k in the low nibble) or FP8 [n, k]
  std::vector<uint8_t> scales;         // NVFP4 [n, k/16] e4m3
  std::vector<float> channel_scales;   // FP8 [n]
  kernels::HostWeightRef ref;          // points into the vectors above
};

// Quantizes `w` (any format the reference dequantizes; k % 16 == 0) to `target` (kFp8 or kNvfp4), over `threads`
// threads (0: up to 8). The result owns its arrays; keep it alive while its ref is used.
Result<std::unique_ptr<QuantizedWeight>> quantize_weight(const kernels::HostWeightRef& w, WeightFormat target,
                                                         int threads = 0);

}  // namespace voltserve
