// sm80 family (Ampere and newer), dense fp16 weights: the M = 1..16 weight-streaming linear y = x · W^T with
// mma.m16n8k16 (f16 x f16 -> f32) straight from the row-major [n, k] weight, no prepack (dense_kmap.h draws which
// lane loads what). Tested by tests/kernels/linear_gpu_test.cpp against linear_ref (bit for bit batch invariant).
//
// Launch: one block per 16-row tile (lm_head 248320 x 5120: 15520 blocks), WARPS = dense::decode_warps(n, k) warps
// (4 / 8 / 16, from the shape only) splitting k in blocks of 64; each warp issues the weight loads of kUnroll of its
// k-blocks (4 x 16 bytes per lane each: 2 KB per warp and k-block, whole sectors) before multiplying the first, x
// loaded right before use (it is shared by every block of the SM and hits L1). Weights are read once with
// L1-bypassing loads; the partial sums of the warps are added in warp order in shared memory. Traffic per launch:
// 2nk bytes of weight + the x rows per block (from L1/L2) + 4mn (or 2mn) bytes of y.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "linear/dense.h"
#include "linear/dense_kmap.h"
#include "linear/linear_families.h"
#include "linear/linear_device.cuh"
#include "linear/x_layout.h"

namespace voltserve::kernels::sm80 {
namespace {

constexpr int kUnroll = 4;  // k-blocks of weight loads a warp issues before it multiplies the first

struct DenseParams {
  const uint4* w;               // [n, k] fp16 row-major, as 16-byte chunks: k / 8 per row
  const __half* x;              // [m, k] fp16, row-major or token-chunked (x_chunked)
  void* y;                      // [m, n] fp32 (y_f32) or fp16
  const float* channel_scales;  // [n] or nullptr
  int n, k, m, kblocks;
  int64_t ldy;  // elements between rows of y
  bool y_f32;
  bool x_chunked;
};

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // the dispatcher never launches the sm80 family below sm_80
#endif
}

template <int WARPS, int NT>
__global__ void __launch_bounds__(WARPS * 32) dense_decode_kernel(DenseParams p) {
  constexpr int kOut = NT * 128;  // fp32 sums per warp: 16 rows x 8 tokens per token tile (4 per lane)
  __shared__ __align__(16) float red[WARPS * kOut];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int t = lane & 3;
  const int tile = static_cast<int>(blockIdx.x);
  const int kc = p.k / 8;  // 16-byte chunks per row

  // Rows g and g + 8 of the tile; rows past n (last tile) read row n - 1 instead: in bounds, never written.
  const uint4* wrow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = min(tile * dense::kTileRows + dense::sm80_row(lane, h), p.n - 1);
    wrow[h] = p.w + static_cast<size_t>(row) * kc;
  }
  // x of token g (+ 8 per token tile) at this warp's first k-block; chunk j of a k-block xo[j] halves further, the
  // next k-block of the warp WARPS * x_block_step further (x_layout.h). Padded tokens (>= m) load nothing.
  const XLayout layout = p.x_chunked ? XLayout::kTokenChunked : XLayout::kRowMajor;
  const int64_t xbs = x_block_step(layout);
  const int xo[2] = {static_cast<int>(x_chunk_step(layout, dense::sm80_chunk(t, 0))),
                     static_cast<int>(x_chunk_step(layout, dense::sm80_chunk(t, 1)))};
  const __half* xp[NT];
  bool tok_ok[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int tok = nt * 8 + dense::sm80_row(lane, 0);
    tok_ok[nt] = tok < p.m;
    xp[nt] = p.x + x_offset(layout, p.k, tok_ok[nt] ? tok : 0, static_cast<int64_t>(warp) * dense::kKBlock);
  }

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[nt][c] = 0.0f;

  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int kb0 = warp; kb0 < p.kblocks; kb0 += WARPS * kUnroll) {
    // wv[u][2h + j]: row h's chunk j of k-block kb0 + u * WARPS (zero past k, so the partial last k-block adds 0).
    uint4 wv[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * WARPS;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int c = kb * 8 + dense::sm80_chunk(t, j);
          wv[u][2 * h + j] = c < kc ? detail::ld_stream(wrow[h] + c) : zero;
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * WARPS;
      if (kb >= p.kblocks) break;
      const uint32_t r0[8] = {wv[u][0].x, wv[u][0].y, wv[u][0].z, wv[u][0].w,
                              wv[u][1].x, wv[u][1].y, wv[u][1].z, wv[u][1].w};  // row g, words 0..7
      const uint32_t r1[8] = {wv[u][2].x, wv[u][2].y, wv[u][2].z, wv[u][2].w,
                              wv[u][3].x, wv[u][3].y, wv[u][3].z, wv[u][3].w};  // row g + 8
      const int64_t xstep = static_cast<int64_t>(kb - warp) * xbs;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t xw[8];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int c = kb * 8 + dense::sm80_chunk(t, j);
          const uint4 v = tok_ok[nt] && c < kc ? detail::ld_x(xp[nt] + xstep + xo[j]) : zero;
          xw[4 * j + 0] = v.x;
          xw[4 * j + 1] = v.y;
          xw[4 * j + 2] = v.z;
          xw[4 * j + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) mma16816(acc[nt], r0[2 * i], r1[2 * i], r0[2 * i + 1], r1[2 * i + 1], xw[2 * i], xw[2 * i + 1]);
      }
    }
  }

  // Warp sums in warp order. Accumulator c of lane (g, t): row g + 8 (c / 2), token 2t + c % 2 (m16n8k16 C layout).
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
    *reinterpret_cast<float4*>(&red[warp * kOut + nt * 128 + lane * 4]) =
        make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
  __syncthreads();
  for (int o = static_cast<int>(threadIdx.x); o < kOut; o += WARPS * 32) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) sum += red[w * kOut + o];
    const int nt = o / 128;
    const int ln = (o / 4) % 32;
    const int c = o % 4;
    const int row = tile * dense::kTileRows + (ln >> 2) + 8 * (c >> 1);
    const int tok = nt * 8 + 2 * (ln & 3) + (c & 1);
    if (row < p.n && tok < p.m) {
      const float v = p.channel_scales != nullptr ? sum * p.channel_scales[row] : sum;
      const size_t idx = static_cast<size_t>(tok) * p.ldy + row;
      if (p.y_f32) {
        static_cast<float*>(p.y)[idx] = v;
      } else {
        static_cast<__half*>(p.y)[idx] = __float2half_rn(v);
      }
    }
  }
}

template <int WARPS>
cudaError_t launch(const DenseParams& p, int nt, unsigned tiles, cudaStream_t stream) {
  if (nt == 2) {
    dense_decode_kernel<WARPS, 2><<<tiles, WARPS * 32, 0, stream>>>(p);
  } else {
    dense_decode_kernel<WARPS, 1><<<tiles, WARPS * 32, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

KernelStatus linear_dense_decode(const PackedWeightView& w, const LinearArgs& a, int warps_choice) {
  if (KernelStatus s = dense::check_decode(w, a, KernelFamily::kSm80, warps_choice); !s.ok()) return s;
  if (current_device_major() < 8) return VS_KERNEL_FAIL(kUnsupported, "linear: sm80-family weights on a device below sm_80");
  DenseParams p{};
  p.w = reinterpret_cast<const uint4*>(w.codes);
  p.x = static_cast<const __half*>(a.x);
  p.y = a.y;
  p.channel_scales = w.channel_scales;
  p.n = static_cast<int>(w.n);
  p.ldy = a.y_stride > 0 ? a.y_stride : w.n;
  p.k = static_cast<int>(w.k);
  p.m = static_cast<int>(a.m);
  p.kblocks = static_cast<int>(dense::kblocks(w.k));
  p.y_f32 = a.y_f32;
  p.x_chunked = a.x_layout == XLayout::kTokenChunked;
  const int warps = warps_choice != 0 ? warps_choice : dense::decode_warps(w.n, w.k);
  const int nt = a.m > 8 ? 2 : 1;
  const auto tiles = static_cast<unsigned>(dense::row_tiles(w.n));
  auto stream = static_cast<cudaStream_t>(a.stream);
  cudaError_t err;
  switch (warps) {
    case 4: err = launch<4>(p, nt, tiles, stream); break;
    case 8: err = launch<8>(p, nt, tiles, stream); break;
    default: err = launch<16>(p, nt, tiles, stream); break;
  }
  VS_CUDA_TRY(err);
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::sm80
