// sm70 family (Volta and newer): M = 1..16 weight-streaming linear with mma.m8n8k4 (f16 x f16 -> f32) and
// f16x2 multiplies only (no ldmatrix, cp.async or bf16), and the fp16 dequantization for the GEMM path (M >= 65).
// scripts/check-sm70.sh assembles this file for sm_70 and asserts HMMA.884 in the weight kernels; tests
// (tests/kernels/linear_gpu_test.cpp) run it on any GPU against linear_ref on dequantized weights.
//
// Layout (prepack.h, kSm70): 32-row tiles; each quad-pair q of a warp owns rows 8q..8q+7 and each lane one
// row r, loading 16 contiguous code bytes of it per k-block (32 k of NVFP4 = 2 scale groups, or 16 k of FP8).
// Codes are decoded straight into A-fragment registers through a per-lane e2m1-pair table and multiplied by
// (e4m3 group scale x global scale) folded in fp32 and rounded once to f16, so decoded weights sit at their true
// magnitude (outlier activations of +-200 cannot overflow f16 products; accumulation is fp32). Activations are
// the B operand (8 tokens per quad-pair tile); M = 9..16 runs two token tiles off the same decoded A registers,
// i.e. one weight pass.
#include <cuda_runtime.h>

#include "linear/dequant_launch.cuh"
#include "linear/linear_families.h"
#include "linear/linear_device.cuh"

namespace voltserve::kernels::sm70 {
namespace {

using detail::fp8_pair;
using detail::hmul2;
using detail::lut_pair;

constexpr int kWarps = 8;
constexpr int kUnroll = 4;

struct Params {
  const uint4* codes;
  const uint16_t* scales;
  const __half* x;
  void* y;
  int64_t ldy;  // elements between rows of y
  const float* channel_scales;
  float global_scale;
  float out_scale;
  int n, k, m, n_tiles, kblocks;
  bool y_f32;
  bool x_chunked;  // x in the token-chunked layout (x_layout.h), else row-major
};

__device__ __forceinline__ void mma884(float (&c)[8], uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, {%10,%11}, "
      "{%0,%1,%2,%3,%4,%5,%6,%7};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7])
      : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
}

template <bool kFp8, int NT>
__device__ __forceinline__ void row_step(float (&acc)[NT][8], const uint4& w, uint32_t sc, const uint32_t (&xw)[NT][16],
                                         const uint32_t* lut_lane, float gscale) {
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  if constexpr (!kFp8) {
    const uint32_t s0 = detail::e4m3_scale_h2(sc & 0xFF, gscale);
    const uint32_t s1 = detail::e4m3_scale_h2(sc >> 8, gscale);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t word = words[j >> 1];
      const uint32_t s = j < 4 ? s0 : s1;
      uint32_t a0, a1;
      if ((j & 1) == 0) {
        a0 = lut_pair<0>(lut_lane, word);
        a1 = lut_pair<1>(lut_lane, word);
      } else {
        a0 = lut_pair<2>(lut_lane, word);
        a1 = lut_pair<3>(lut_lane, word);
      }
      a0 = hmul2(a0, s);
      a1 = hmul2(a1, s);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma884(acc[nt], a0, a1, xw[nt][2 * j], xw[nt][2 * j + 1]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t a0 = fp8_pair<0>(words[j]);
      const uint32_t a1 = fp8_pair<1>(words[j]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma884(acc[nt], a0, a1, xw[nt][2 * j], xw[nt][2 * j + 1]);
    }
  }
}

template <bool kFp8, int NT>
__global__ void __launch_bounds__(kWarps * 32, 2) decode_kernel(Params p) {
  extern __shared__ __align__(16) uint32_t smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int q = (lane >> 2) & 3;
  const int rr = (lane & 3) + 4 * (lane >> 4);  // this lane's A row and B column inside its quad-pair tile
  if constexpr (!kFp8) {
    detail::fill_e2m1_lut(smem);
    __syncthreads();
  }
  const uint32_t* lut_lane = smem + lane;
  const int tile = blockIdx.x;
  constexpr int kKPerBlock = kFp8 ? 16 : 32;
  constexpr int kXVec = kKPerBlock / 8;  // 16-byte x loads per token and k-block

  float acc[NT][8];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[nt][c] = 0.0f;

  const bool row_ok = tile * 32 + 8 * q + rr < p.n;  // padded rows of the last tile hold zero codes anyway
  for (int kb0 = warp; kb0 < p.kblocks; kb0 += kWarps * kUnroll) {
    uint4 wv[kUnroll];
    uint32_t sv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * kWarps;
      if (kb < p.kblocks && row_ok) {
        const size_t unit = (static_cast<size_t>(tile) * p.kblocks + kb) * 32 + lane;
        wv[u] = detail::ld_stream(p.codes + unit);
        sv[u] = kFp8 ? 0u : static_cast<uint32_t>(p.scales[unit]);
      } else {
        wv[u] = make_uint4(0, 0, 0, 0);
        sv[u] = 0;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * kWarps;
      if (kb >= p.kblocks) break;
      const int kx = kb * kKPerBlock;
      uint32_t xw[NT][16];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int tok = nt * 8 + rr;
        const bool ok = tok < p.m && kx < p.k;
        // 16-byte chunk v holds k = kx + 8v ..; kx is a multiple of kKPerBlock (16 or 32), so the chunks lie in one
        // 64-k block, x_chunk_step(v) halves from chunk 0.
        const __half* xp = p.x + x_offset(p.x_chunked ? XLayout::kTokenChunked : XLayout::kRowMajor, p.k, tok, kx);
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int vofs = static_cast<int>(p.x_chunked ? x_chunk_step(XLayout::kTokenChunked, v)
                                                        : x_chunk_step(XLayout::kRowMajor, v));
          uint4 xv = make_uint4(0, 0, 0, 0);
          if (v < kXVec && ok && kx + 8 * v < p.k) xv = detail::ld_x(xp + vofs);
          xw[nt][4 * v + 0] = xv.x;
          xw[nt][4 * v + 1] = xv.y;
          xw[nt][4 * v + 2] = xv.z;
          xw[nt][4 * v + 3] = xv.w;
        }
      }
      row_step<kFp8, NT>(acc, wv[u], sv[u], xw, lut_lane, p.global_scale);
    }
  }

  // Where each accumulator lands: one m8n8k4 with A[r][0] = r, A[r][1] = 1, B[0][c] = 8, B[1][c] = c gives
  // C[r][c] = 8r + c in every accumulator slot (robust to the accumulator layout).
  float cal[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) cal[c] = 0.0f;
  mma884(cal, detail::half2_bits(static_cast<float>(rr), 1.0f), 0u, detail::half2_bits(8.0f, static_cast<float>(rr)), 0u);

  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
  constexpr int kCols = NT * 8;
  constexpr int kOut = 32 * kCols;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int v = static_cast<int>(cal[c]);
      red[warp * kOut + (8 * q + (v >> 3)) * kCols + nt * 8 + (v & 7)] = acc[nt][c];
    }
  __syncthreads();
  for (int o = threadIdx.x; o < kOut; o += blockDim.x) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w * kOut + o];
    const int row = tile * 32 + o / kCols;
    const int tok = o % kCols;
    if (row < p.n && tok < p.m) {
      float v = s * p.out_scale;
      if (p.channel_scales != nullptr) v *= p.channel_scales[row];
      const size_t idx = static_cast<size_t>(tok) * p.ldy + row;
      if (p.y_f32) {
        static_cast<float*>(p.y)[idx] = v;
      } else {
        static_cast<__half*>(p.y)[idx] = __float2half_rn(v);
      }
    }
  }
}

template <bool kFp8, int NT>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  const size_t red_bytes = static_cast<size_t>(kWarps) * 32 * NT * 8 * sizeof(float);
  const size_t lut_bytes = kFp8 ? 0 : detail::kLutWords * sizeof(uint32_t);
  const size_t smem = red_bytes > lut_bytes ? red_bytes : lut_bytes;
  decode_kernel<kFp8, NT><<<p.n_tiles, kWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

template <bool kFp8>
__global__ void dequant_kernel(const uint4* codes, const uint16_t* scales, float gscale, float tscale,
                               const float* chs, int n, int k, int kblocks, int tile0, int row0, __half* out) {
  detail::DequantUnit u;
  if (!detail::dequant_unit_of_thread(kblocks, tile0, u)) return;
  const int lane = u.lane;
  const int kb = u.kb;
  const int row = u.tile * 32 + 8 * ((lane >> 2) & 3) + (lane & 3) + 4 * (lane >> 4);
  if (row >= n) return;
  const uint4 w = codes[u.index];
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  __half* orow = out + static_cast<size_t>(row - row0) * k;
  if constexpr (!kFp8) {
    const uint32_t sc = scales[u.index];
    const int kbase = kb * 32;
    if (kbase >= k) return;
    const float gs = gscale * (chs != nullptr ? chs[row] : 1.0f);
    const float s_lo = detail::e4m3_value(sc & 0xFF) * gs;  // bytes 0..7 (k 0..15 of the k-block)
    const float s_hi = detail::e4m3_value((sc >> 8) & 0xFF) * gs;
    uint32_t pairs[16];
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      const float s = b < 8 ? s_lo : s_hi;
      const uint32_t byte = (words[b / 4] >> (8 * (b % 4))) & 0xFF;
      pairs[b] = detail::half2_bits(detail::e2m1_value(byte & 0xF) * s, detail::e2m1_value(byte >> 4) * s);
    }
    uint4* dst = reinterpret_cast<uint4*>(orow + kbase);
    for (int v = 0; v < 4; ++v) {
      if (kbase + 8 * v >= k) break;  // k % 32 == 16: the k-block's second half is padding
      dst[v] = make_uint4(pairs[4 * v], pairs[4 * v + 1], pairs[4 * v + 2], pairs[4 * v + 3]);
    }
  } else {
    const float s = tscale * (chs != nullptr ? chs[row] : 1.0f);
    const int kbase = kb * 16;
    if (kbase >= k) return;
    uint32_t pairs[8];
    for (int b = 0; b < 8; ++b) {
      const uint32_t word = words[b / 2] >> (16 * (b % 2));
      pairs[b] = detail::half2_bits(detail::e4m3_value(word & 0xFF) * s, detail::e4m3_value((word >> 8) & 0xFF) * s);
    }
    uint4* dst = reinterpret_cast<uint4*>(orow + kbase);
    dst[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    dst[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
  }
}

}  // namespace

KernelStatus linear_decode(const PackedWeightView& w, const LinearArgs& a) {
  if (w.family != KernelFamily::kSm70) return VS_KERNEL_FAIL(kBadArgument, "sm70::linear_decode: weight not in sm70 layout");
  if (a.m < 1 || a.m > kMaxDecodeRows) return VS_KERNEL_FAIL(kBadShape, "sm70::linear_decode: m must be 1..16");
  const bool fp8 = w.format == WeightFormat::kFp8;
  Params p{};
  p.codes = reinterpret_cast<const uint4*>(w.codes);
  p.scales = reinterpret_cast<const uint16_t*>(w.scales);
  p.x = static_cast<const __half*>(a.x);
  p.y = a.y;
  p.channel_scales = w.channel_scales;
  p.global_scale = w.global_scale * 256.0f;  // e4m3_scale_h2 leaves out 2^8
  p.out_scale = fp8 ? w.tensor_scale * 256.0f : 1.0f;
  p.n = static_cast<int>(w.n);
  p.k = static_cast<int>(w.k);
  p.m = static_cast<int>(a.m);
  p.n_tiles = static_cast<int>((w.n + 31) / 32);
  p.kblocks = static_cast<int>(((fp8 ? w.k : w.k / 2) + 15) / 16);
  p.y_f32 = a.y_f32;
  p.ldy = a.y_stride > 0 ? a.y_stride : w.n;
  p.x_chunked = a.x_layout == XLayout::kTokenChunked;
  auto stream = static_cast<cudaStream_t>(a.stream);
  const bool two = a.m > 8;
  cudaError_t err;
  if (fp8) {
    err = two ? launch<true, 2>(p, stream) : launch<true, 1>(p, stream);
  } else {
    err = two ? launch<false, 2>(p, stream) : launch<false, 1>(p, stream);
  }
  VS_CUDA_TRY(err);
  return KernelStatus::Ok();
}

KernelStatus dequantize_f16(const PackedWeightView& w, int64_t row0, int64_t rows, void* out_f16, void* stream) {
  if (row0 % 32 != 0 || rows <= 0 || row0 + rows > w.n) return VS_KERNEL_FAIL(kBadShape, "sm70::dequantize_f16: bad row range");
  const bool fp8 = w.format == WeightFormat::kFp8;
  const int kblocks = static_cast<int>(((fp8 ? w.k : w.k / 2) + 15) / 16);
  return detail::launch_dequant(fp8 ? dequant_kernel<true> : dequant_kernel<false>, w, 32, kblocks, row0, rows,
                                out_f16, stream);
}

}  // namespace voltserve::kernels::sm70
