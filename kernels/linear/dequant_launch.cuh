// Host side of both families' fp16 dequantization (the M >= 17 path: dequantize a row chunk, then cuBLAS). The
// families' dequant kernels share one signature; this launches one over a row range: grid.x over the lanes of a
// tile's k-blocks (32 per k-block), grid.y over tiles, one launch per 65535 tiles (the grid.y limit).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "linear/linear.h"

namespace voltserve::kernels::detail {

// codes, scales (NVFP4; nullptr for FP8), global scale (NVFP4), tensor scale and per-channel scales (FP8), rows
// below n_lim are written, k, k-blocks per tile, first tile of this launch, first row of `out`, out [rows, k].
using DequantKernel = void (*)(const uint4*, const uint16_t*, float, float, const float*, int, int, int, int, int,
                               __half*);

inline KernelStatus launch_dequant(DequantKernel kernel, const PackedWeightView& w, int tile_rows, int kblocks,
                                   int64_t row0, int64_t rows, void* out_f16, void* stream) {
  const bool fp8 = w.codec == WeightCodec::kFp8;
  constexpr int kThreads = 256;
  const unsigned x_blocks = static_cast<unsigned>((kblocks * 32 + kThreads - 1) / kThreads);
  const int end_tile = static_cast<int>((row0 + rows + tile_rows - 1) / tile_rows);
  for (int tile0 = static_cast<int>(row0 / tile_rows); tile0 < end_tile; tile0 += 65535) {
    const dim3 grid(x_blocks, static_cast<unsigned>(std::min(end_tile - tile0, 65535)));
    kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const uint4*>(w.codes), fp8 ? nullptr : reinterpret_cast<const uint16_t*>(w.scales),
        fp8 ? 1.0f : w.global_scale, fp8 ? w.tensor_scale : 1.0f, fp8 ? w.channel_scales : nullptr,
        static_cast<int>(row0 + rows), static_cast<int>(w.k), kblocks, tile0, static_cast<int>(row0),
        static_cast<__half*>(out_f16));
    VS_CUDA_TRY(cudaGetLastError());
  }
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::detail
