// sm70 family (Volta and newer), dense fp16 weights: the M = 1..16 weight-streaming linear y = x · W^T with
// mma.m8n8k4 (f16 x f16 -> f32) only (no ldmatrix, cp.async or bf16) straight from the row-major [n, k] weight, no
// prepack (dense_kmap.h draws which lane loads what). scripts/check-sm70.sh assembles this file for sm_70 and asserts
// HMMA.884 in its decode kernels; tests/kernels/linear_gpu_test.cpp runs it on any GPU against linear_ref.
//
// Launch: one block per 16-row tile, WARPS = dense::decode_warps(n, k) warps (4 / 8 / 16, from the shape only)
// splitting k in blocks of 64. In a warp, quad-pair q owns rows 8 * (q / 2) .. + 7 of the tile and the 16-byte
// chunks of parity q % 2 of each k-block, so one load instruction covers whole 32-byte sectors of 16 rows; each warp
// issues the weight loads of 4 (16 warps: 2) of its k-blocks (4 x 16 bytes per lane each) before multiplying the first, x
// loaded right before use (L1 hits: every block of the SM reads it). The two parities' and the warps' partial sums
// are added in a fixed order in shared memory. Traffic per launch: 2nk bytes of weight + x from L1/L2 + y.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "linear/dense.h"
#include "linear/dense_kmap.h"
#include "linear/linear_families.h"
#include "linear/linear_device.cuh"
#include "linear/x_layout.h"

namespace voltserve::kernels::sm70 {
namespace {


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

__device__ __forceinline__ void mma884(float (&c)[8], uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, {%10,%11}, "
      "{%0,%1,%2,%3,%4,%5,%6,%7};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7])
      : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
}

template <int WARPS, int NT>
__global__ void __launch_bounds__(WARPS * 32) dense_decode_kernel(DenseParams p) {
  constexpr int kCols = NT * 8;             // tokens of the block
  constexpr int kPart = dense::kTileRows * kCols;
  constexpr int kOut = 2 * kPart;           // fp32 sums per warp: [chunk parity][tile row][token]
  __shared__ __align__(16) float red[WARPS * kOut];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int q = dense::sm70_quad_pair(lane);
  const int rr = dense::sm70_rr(lane);  // A row and B column (token) of this lane inside its quad-pair
  const int par = dense::sm70_parity(lane);
  const int tile = static_cast<int>(blockIdx.x);
  const int kc = p.k / 8;  // 16-byte chunks per row

  // This lane's row; rows past n (last tile) read row n - 1 instead: in bounds, never written.
  const int row_ld = min(tile * dense::kTileRows + dense::sm70_row(lane), p.n - 1);
  const uint4* wrow = p.w + static_cast<size_t>(row_ld) * kc;
  // x of token rr (+ 8 per token tile) at this warp's first k-block; chunk j xo[j] halves further, the next k-block
  // of the warp WARPS * x_block_step further (x_layout.h). Padded tokens (>= m) load nothing.
  const XLayout layout = p.x_chunked ? XLayout::kTokenChunked : XLayout::kRowMajor;
  const int64_t xbs = x_block_step(layout);
  int xo[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) xo[j] = static_cast<int>(x_chunk_step(layout, dense::sm70_chunk(lane, j)));
  const __half* xp[NT];
  bool tok_ok[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int tok = nt * 8 + rr;
    tok_ok[nt] = tok < p.m;
    xp[nt] = p.x + x_offset(layout, p.k, tok_ok[nt] ? tok : 0, static_cast<int64_t>(warp) * dense::kKBlock);
  }

  float acc[NT][8];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[nt][c] = 0.0f;

  // k-blocks of weight loads a warp issues before it multiplies the first: 4, or 2 with 16 warps (512 threads leave
  // 128 registers a thread, too few for 4 with two token tiles; 16 warps keep enough loads in flight anyway).
  constexpr int kUnroll = WARPS >= 16 ? 2 : 4;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int kb0 = warp; kb0 < p.kblocks; kb0 += WARPS * kUnroll) {
    // wv[u][j]: chunk 2j + parity of k-block kb0 + u * WARPS (zero past k, so the partial last k-block adds 0).
    uint4 wv[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * WARPS;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = kb * 8 + dense::sm70_chunk(lane, j);
        wv[u][j] = c < kc ? detail::ld_stream(wrow + c) : zero;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * WARPS;
      if (kb >= p.kblocks) break;
      const int64_t xstep = static_cast<int64_t>(kb - warp) * xbs;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = kb * 8 + dense::sm70_chunk(lane, j);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint4 xv = tok_ok[nt] && c < kc ? detail::ld_x(xp[nt] + xstep + xo[j]) : zero;
          // Chunk = 8 k: two m8n8k4 steps, k 0..3 (words x, y) and k 4..7 (words z, w), A and B alike.
          mma884(acc[nt], wv[u][j].x, wv[u][j].y, xv.x, xv.y);
          mma884(acc[nt], wv[u][j].z, wv[u][j].w, xv.z, xv.w);
        }
      }
    }
  }

  // Where each accumulator lands: one m8n8k4 with A[r][0] = r, A[r][1] = 1, B[0][c] = 8, B[1][c] = c gives
  // C[r][c] = 8r + c in every accumulator slot (robust to the accumulator layout; as in linear_sm70.cu).
  float cal[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) cal[c] = 0.0f;
  mma884(cal, detail::half2_bits(static_cast<float>(rr), 1.0f), 0u, detail::half2_bits(8.0f, static_cast<float>(rr)), 0u);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int v = static_cast<int>(cal[c]);
      red[warp * kOut + par * kPart + (8 * (q / 2) + (v >> 3)) * kCols + nt * 8 + (v & 7)] = acc[nt][c];
    }
  __syncthreads();
  for (int o = static_cast<int>(threadIdx.x); o < kPart; o += WARPS * 32) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      sum += red[w * kOut + o];
      sum += red[w * kOut + kPart + o];
    }
    const int row = tile * dense::kTileRows + o / kCols;
    const int tok = o % kCols;
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
  if (KernelStatus s = dense::check_decode(w, a, KernelFamily::kSm70, warps_choice); !s.ok()) return s;
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

}  // namespace voltserve::kernels::sm70
