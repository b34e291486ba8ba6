// Which k values each lane of the sm80 family holds, shared by prepack (host), the sm80 decode and dequantization
// kernels (device) and the token-chunked x layout (x_layout.h). Tested through prepack's round trip
// (tests/kernels/linear_prepack_test.cpp) and the GPU tests.
//
// A packed 16-row tile is cut into k-blocks of 32 row-bytes; lane (g, t) of a k-block holds one 8-byte run of rows
// g and g + 8. NVFP4 (two codes per byte): k-block kb covers k [64 kb, 64 kb + 64), lane t the 16 k values from
// 64 kb + 16 t (one scale group). FP8: k-blocks come in pairs covering 64 k; lane t holds the 8 k values from
// 64 (kb / 2) + 16 t + 8 (kb % 2), i.e. the same 16-byte x chunks an NVFP4 lane reads, so that one x layout (the
// token-chunked one) serves both codecs.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace voltserve::kernels {

// k-blocks per packed row: NVFP4 ceil(k / 64); FP8 2 * ceil(k / 64) (whole pairs).
VS_HD int64_t sm80_kblocks(bool fp8, int64_t k) { return (fp8 ? 2 : 1) * ((k + 63) / 64); }

// First k of lane t's run in k-block kb.
VS_HD int64_t sm80_lane_k0(bool fp8, int64_t kb, int t) {
  return fp8 ? 64 * (kb / 2) + 16 * t + 8 * (kb % 2) : 64 * kb + 16 * t;
}

}  // namespace voltserve::kernels
