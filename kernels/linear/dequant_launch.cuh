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

// The lane unit (16 code bytes) a dequant-kernel thread handles under launch_dequant's grid: its lane and k-block
// within tile `tile`, and its index in the packed code and scale arrays. False past the tile's units (whole warps,
// since a tile has 32 units per k-block). 32-bit math except the packed index.
struct DequantUnit {
  int lane, kb, tile;
  size_t index;
};

__device__ __forceinline__ bool dequant_unit_of_thread(int kblocks, int tile0, DequantUnit& u) {
  const int in_tile = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (in_tile >= kblocks * 32) return false;
  u.lane = in_tile & 31;
  u.kb = in_tile >> 5;
  u.tile = tile0 + static_cast<int>(blockIdx.y);
  u.index = (static_cast<size_t>(u.tile) * kblocks + u.kb) * 32 + u.lane;
  return true;
}

// codes, scales (NVFP4; nullptr for FP8), global scale (NVFP4), tensor scale (FP8), per-channel scales (or nullptr), rows
// below n_lim are written, k, k-blocks per tile, first tile of this launch, first row of `out`, out [rows, k].
using DequantKernel = void (*)(const uint4*, const uint16_t*, float, float, const float*, int, int, int, int, int,
                               __half*);

inline KernelStatus launch_dequant(DequantKernel kernel, const PackedWeightView& w, int tile_rows, int kblocks,
                                   int64_t row0, int64_t rows, void* out_f16, void* stream) {
  const bool fp8 = w.format == WeightFormat::kFp8;
  constexpr int kThreads = 256;
  const unsigned x_blocks = static_cast<unsigned>((kblocks * 32 + kThreads - 1) / kThreads);
  const int end_tile = static_cast<int>((row0 + rows + tile_rows - 1) / tile_rows);
  for (int tile0 = static_cast<int>(row0 / tile_rows); tile0 < end_tile; tile0 += 65535) {
    const dim3 grid(x_blocks, static_cast<unsigned>(std::min(end_tile - tile0, 65535)));
    kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const uint4*>(w.codes), fp8 ? nullptr : reinterpret_cast<const uint16_t*>(w.scales),
        fp8 ? 1.0f : w.global_scale, fp8 ? w.tensor_scale : 1.0f, w.channel_scales,
        static_cast<int>(row0 + rows), static_cast<int>(w.k), kblocks, tile0, static_cast<int>(row0),
        static_cast<__half*>(out_f16));
    VS_CUDA_TRY(cudaGetLastError());
  }
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::detail
