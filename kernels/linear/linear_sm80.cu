// sm80 family (Ampere and newer): M = 1..16 weight-streaming linear with mma.m16n8k16 (weights as the A
// operand, 16 rows x 16 k; activations as B, 8 tokens), and the fp16 dequantization used by the M >= 17
// path. Tested by tests/kernels/linear_gpu_test.cpp against linear_ref on dequantized weights.
//
// Layout (prepack.h, kSm80): per 16-row tile and 32-byte k-block, lane (g, t) loads 16 bytes: bytes [8t, 8t+8)
// of rows g and g+8. For NVFP4 that is k in [16t, 16t+16) of one 64-wide k-block, i.e. exactly one scale
// group per row, so a lane needs 2 scale bytes per load. The MMA's k order is permuted identically for A and
// B (a sum does not care), which lets B come from one contiguous 32-byte run of x per lane and token.
#include <cuda_runtime.h>

#include <type_traits>

#include "linear/linear.h"
#include "linear/linear_device.cuh"
#include "linear/nvfp4_bits.h"

namespace voltserve::kernels::sm80 {
namespace {

using detail::fp8_pair;
using detail::hmul2;

// Two e4m3 bytes to f16x2 holding value * 2^-8 (hardware conversion from sm_89 on, scaled back by 2^-8 in the
// epilogue instead; the integer path elsewhere).
template <int J>
__device__ __forceinline__ uint32_t fp8_pair_fast(uint32_t word) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t out;
  const unsigned short in = static_cast<unsigned short>(word >> (16 * J));
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(in));
  return out;
#else
  return fp8_pair<J>(word);
#endif
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
constexpr float kFp8DecodeScale = 1.0f / 256.0f;  // hardware cvt gives true values; out_scale carries 2^8
#else
constexpr float kFp8DecodeScale = 1.0f;
#endif


struct Params {
  const uint4* codes;
  const uint16_t* scales;
  const __half* x;
  void* y;
  const float* channel_scales;
  float global_scale;
  float out_scale;
  int n, k, m, n_tiles, kblocks;
  int ksplit;  // blocks sharing one tile group, each over a k range; > 1: fp32 y pre-zeroed, atomic adds
  bool y_f32;
  float* fix_ws;          // fixup variants: fp32 partials [group][split][R * NT * 128]
  unsigned* fix_count;    // fixup variants: per tile group arrival counter (0 between launches)
  bool pdl;               // per-tile variants: launched with programmatic dependent launch (sm_90+)
};

// Serial fixup (k split over blocks without memset or atomics on y): each (tile group, k slice) block stores its
// fp32 partial sums in the caller's LinearArgs::fixup_partials; the last block of a group to arrive (counter in
// fixup_counters, which it resets to 0, so nothing is cleared between launches and CUDA graphs replay it as is)
// adds the slices in split order (deterministic) and writes y. Launches that share the buffers must not run
// concurrently (linear.h).
// Programmatic dependent launch by default on sm_90+ (LinearArgs::overlap = 0).
constexpr bool kOverlapDefault = true;

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

// The two e4m3 group scales of a lane (byte 0: row g, byte 1: row g + 8) as f16x2 holding their exact values
// (every e4m3 value is an f16). Hardware conversion from sm_89 on; elsewhere the bits are moved (value * 2^-8,
// exact) and multiplied by 2^8 (exact).
__device__ __forceinline__ uint32_t nvfp4_scale_pair(uint32_t sc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t out;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(static_cast<unsigned short>(sc)));
  return out;
#else
  return hmul2(fp8_pair<0>(sc), 0x5C005C00u);
#endif
}

// One k-block of one 16-row tile: 4 (NVFP4) or 2 (FP8) MMAs per token tile.
// NVFP4: codes come as f16 e2m1 * 2^-14 straight from the placed bits (nvfp4_bits.h: 1-3 integer ops per two
// weights, no table), times the exact e4m3 group scale with one HMUL2 per two weights. Both factors have at most
// 4 significant bits and the product is >= 2^-24, so the A operand is exact; global_scale * 2^14 is applied to
// the fp32 sums.
template <bool kFp8, int NT>
__device__ __forceinline__ void tile_step(float (&acc)[NT][4], const uint4& w, uint32_t sc,
                                          const uint32_t (&xw)[NT][8]) {
  if constexpr (!kFp8) {
    const uint32_t sp = nvfp4_scale_pair(sc);
    const uint32_t s_lo = __byte_perm(sp, 0u, 0x1010);
    const uint32_t s_hi = __byte_perm(sp, 0u, 0x3232);
    const uint32_t lo[2] = {w.x, w.y};
    const uint32_t hi[2] = {w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t wl = lo[i >> 1];
      const uint32_t wh = hi[i >> 1];
      uint32_t a0, a1, a2, a3;
      if ((i & 1) == 0) {
        a0 = nvfp4_sm80_pair<0>(wl);
        a2 = nvfp4_sm80_pair<1>(wl);
        a1 = nvfp4_sm80_pair<0>(wh);
        a3 = nvfp4_sm80_pair<1>(wh);
      } else {
        a0 = nvfp4_sm80_pair<2>(wl);
        a2 = nvfp4_sm80_pair<3>(wl);
        a1 = nvfp4_sm80_pair<2>(wh);
        a3 = nvfp4_sm80_pair<3>(wh);
      }
      a0 = hmul2(a0, s_lo);
      a2 = hmul2(a2, s_lo);
      a1 = hmul2(a1, s_hi);
      a3 = hmul2(a3, s_hi);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma16816(acc[nt], a0, a1, a2, a3, xw[nt][2 * i], xw[nt][2 * i + 1]);
    }
  } else {
    const uint32_t lo[2] = {w.x, w.y};
    const uint32_t hi[2] = {w.z, w.w};
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint32_t a0 = fp8_pair_fast<0>(lo[j]);
      const uint32_t a2 = fp8_pair_fast<1>(lo[j]);
      const uint32_t a1 = fp8_pair_fast<0>(hi[j]);
      const uint32_t a3 = fp8_pair_fast<1>(hi[j]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma16816(acc[nt], a0, a1, a2, a3, xw[nt][2 * j], xw[nt][2 * j + 1]);
    }
  }
}

// Persistent schedule: grid = resident blocks (SMs x occupancy) or fewer, block b takes tiles b, b + grid, ...;
// the block's WARPS warps split each tile's k-blocks (warp w: k-blocks w, w + WARPS, ...; every warp runs the
// same ceil(kblocks / WARPS) steps per tile, out-of-range steps load zeros), so the whole block meets one
// __syncthreads per tile to reduce the warps' partial sums (double-buffered in shared memory). The ring of RING
// weight loads per warp runs across tile boundaries: no per-tile prologue, no partial last wave of short blocks.
template <bool kFp8, int NT, int RING, int WARPS, int MINB>
__global__ void __launch_bounds__(WARPS * 32, MINB) stream_kernel(Params p) {
  __shared__ __align__(16) float red[2][WARPS][NT * 128];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  constexpr int kKPerBlock = kFp8 ? 32 : 64;
  constexpr int kKPerLane = kFp8 ? 8 : 16;
  const int steps = (p.kblocks + WARPS - 1) / WARPS;  // per tile, same for every warp
  const int first = static_cast<int>(blockIdx.x);
  const int stride = static_cast<int>(gridDim.x);
  const int my_tiles = first < p.n_tiles ? (p.n_tiles - 1 - first) / stride + 1 : 0;
  const int total = my_tiles * steps;

  // Load cursor (runs RING steps ahead of the compute cursor).
  int l_tile = first;
  int l_j = 0;
  auto load_w = [&](uint4& wv, uint32_t& sv) {
    const int kb = warp + l_j * WARPS;
    if (l_tile < p.n_tiles && kb < p.kblocks) {
      const size_t idx = (static_cast<size_t>(l_tile) * p.kblocks + kb) * 32 + lane;
      wv = detail::ld_stream(p.codes + idx);
      sv = kFp8 ? 0u : static_cast<uint32_t>(p.scales[idx]);
    } else {
      wv = make_uint4(0, 0, 0, 0);
      sv = 0;
    }
    if (++l_j == steps) {
      l_j = 0;
      l_tile += stride;
    }
  };
  const __half* xrow[NT];
  bool tok_ok[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int tok = nt * 8 + g;
    tok_ok[nt] = tok < p.m;
    xrow[nt] = p.x + static_cast<size_t>(tok < p.m ? tok : 0) * p.k + t * kKPerLane;
  }
  auto load_x = [&](int j, uint32_t (&xw)[NT][8]) {
    const int kb = warp + j * WARPS;
    const bool in_k = kb * kKPerBlock + t * kKPerLane < p.k;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 v0 = make_uint4(0, 0, 0, 0);
      uint4 v1 = make_uint4(0, 0, 0, 0);
      if (in_k && tok_ok[nt]) {
        const __half* xp = xrow[nt] + static_cast<size_t>(kb) * kKPerBlock;
        v0 = detail::ld_x(xp);
        if (!kFp8) v1 = detail::ld_x(xp + 8);
      }
      xw[nt][0] = v0.x; xw[nt][1] = v0.y; xw[nt][2] = v0.z; xw[nt][3] = v0.w;
      xw[nt][4] = v1.x; xw[nt][5] = v1.y; xw[nt][6] = v1.z; xw[nt][7] = v1.w;
    }
  };

  uint4 ring_w[RING];
  uint32_t ring_s[RING];
#pragma unroll
  for (int u = 0; u < RING; ++u) load_w(ring_w[u], ring_s[u]);
  uint32_t xcur[NT][8];
  load_x(0, xcur);
  int x_j = steps > 1 ? 1 : 0;  // step (within the tile) whose x is loaded next
  int c_j = 0;
  int c_tile = first;
  int buf = 0;
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[nt][c] = 0.0f;
  const float oscale = p.out_scale * (kFp8 ? kFp8DecodeScale : 1.0f);

  for (int s0 = 0; s0 < total; s0 += RING) {
#pragma unroll
    for (int u = 0; u < RING; ++u) {
      if (s0 + u >= total) break;  // uniform over the block
      const uint4 w = ring_w[u];
      const uint32_t sc = ring_s[u];
      load_w(ring_w[u], ring_s[u]);
      uint32_t xnext[NT][8];
      load_x(x_j, xnext);
      x_j = x_j + 1 == steps ? 0 : x_j + 1;
      tile_step<kFp8, NT>(acc, w, sc, xcur);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int q = 0; q < 8; ++q) xcur[nt][q] = xnext[nt][q];
      if (++c_j == steps) {  // tile done (uniform over the block): reduce over warps, write y
        c_j = 0;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          *reinterpret_cast<float4*>(&red[buf][warp][nt * 128 + lane * 4]) =
              make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[nt][c] = 0.0f;
        }
        __syncthreads();
        for (int o = threadIdx.x; o < NT * 128; o += WARPS * 32) {
          float sum = 0.0f;
#pragma unroll
          for (int w2 = 0; w2 < WARPS; ++w2) sum += red[buf][w2][o];
          const int nt = o / 128;
          const int ln = (o / 4) % 32;
          const int c = o % 4;
          const int row = c_tile * 16 + (ln >> 2) + 8 * (c >> 1);
          const int tok = nt * 8 + 2 * (ln & 3) + (c & 1);
          if (row < p.n && tok < p.m) {
            float v = sum * oscale;
            if (p.channel_scales != nullptr) v *= p.channel_scales[row];
            const size_t idx = static_cast<size_t>(tok) * p.n + row;
            if (p.y_f32) {
              static_cast<float*>(p.y)[idx] = v;
            } else {
              static_cast<__half*>(p.y)[idx] = __float2half_rn(v);
            }
          }
        }
        c_tile += stride;
        buf ^= 1;
      }
    }
  }
}

template <bool kFp8, int NT, int RING, int WARPS, int MINB>
cudaError_t launch_stream(const Params& p, cudaStream_t stream) {
  constexpr int blocks_per_sm = MINB;
  static int sms = 0;  // the process's device count of SMs (one device per process in this server)
  if (sms == 0) {
    int dev = 0;
    if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
  }
  const int grid = p.n_tiles < sms * blocks_per_sm ? p.n_tiles : sms * blocks_per_sm;
  stream_kernel<kFp8, NT, RING, WARPS, MINB><<<grid, WARPS * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

template <bool kFp8, int NT, int R, int RING, int WARPS, int MINB, int LOADK = 0, int ABLATE = 0, bool FIX = false>
__global__ void __launch_bounds__(WARPS * 32, MINB) decode_kernel(Params p) {
  constexpr int kWarps = WARPS;
  // Static shared memory: the table's address is a link-time constant, so a lookup is LDS [reg + imm].
  // The same space holds the split-k reduction afterwards (<= 16 KB).
  __shared__ __align__(16) uint32_t smem[4096];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int tile0 = static_cast<int>(blockIdx.x / p.ksplit) * R;
  const int split = static_cast<int>(blockIdx.x % p.ksplit);
  const int kb_lo = static_cast<int>(static_cast<int64_t>(p.kblocks) * split / p.ksplit);
  const int kb_hi = static_cast<int>(static_cast<int64_t>(p.kblocks) * (split + 1) / p.ksplit);
  constexpr int kKPerBlock = kFp8 ? 32 : 64;  // k values per 32-byte k-block
  constexpr int kKPerLane = kFp8 ? 8 : 16;

  float acc[R][NT][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][nt][c] = 0.0f;

  // Software pipeline over this warp's k-blocks kb_j = warp + j * kWarps: a ring of kRing weight loads is
  // always in flight (slot u is refilled with step j + kRing as soon as step j consumed it), and the
  // activations of step j + 1 are loaded while step j computes. Addresses advance by compile-time strides.
  constexpr int kRing = RING / R;
  constexpr int kWStep = kWarps * 32;                 // uint4 / scale units between a warp's k-blocks
  constexpr int kXStep = kWarps * kKPerBlock;         // halves between a warp's k-blocks
  const int kb_n = kb_hi - kb_lo;
  const int cnt = kb_n > warp ? (kb_n - warp + kWarps - 1) / kWarps : 0;
  const size_t tstride = static_cast<size_t>(p.kblocks) * 32;
  const size_t wofs = (static_cast<size_t>(tile0) * p.kblocks + kb_lo + warp) * 32 + lane;
  const uint4* wptr = p.codes + wofs;
  const uint16_t* sptr = kFp8 ? nullptr : p.scales + wofs;
  bool tile_ok[R];
#pragma unroll
  for (int r = 0; r < R; ++r) tile_ok[r] = tile0 + r < p.n_tiles;
  const __half* xptr[NT];
  int xlim[NT];  // k-blocks of this warp whose x lies inside the row (0 for padded tokens)
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int tok = nt * 8 + g;
    const int k0 = (kb_lo + warp) * kKPerBlock + t * kKPerLane;
    xptr[nt] = p.x + static_cast<size_t>(tok < p.m ? tok : 0) * p.k + k0;
    xlim[nt] = tok < p.m && p.k > k0 ? (p.k - k0 + kXStep - 1) / kXStep : 0;
  }
  auto load_w = [&](int j, int ofs, uint4 (&wv)[R], uint32_t (&sv)[R]) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (j < cnt && tile_ok[r]) {
        if constexpr (ABLATE == 2) {
          wv[r] = make_uint4(0x12345678u + j, 0x9abcdef0u, 0x0f1e2d3cu, 0x4b5a6978u);
        } else if constexpr (LOADK == 1) {
          wv[r] = __ldcs(wptr + r * tstride + ofs);
        } else if constexpr (LOADK == 2) {
          wv[r] = __ldg(wptr + r * tstride + ofs);
        } else {
          wv[r] = detail::ld_stream(wptr + r * tstride + ofs);
        }
        sv[r] = kFp8 ? 0u : static_cast<uint32_t>(sptr[r * tstride + ofs]);
      } else {
        wv[r] = make_uint4(0, 0, 0, 0);
        sv[r] = 0;
      }
    }
  };
  auto load_x = [&](int j, int ofs, uint32_t (&xw)[NT][8]) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 v0 = make_uint4(0, 0, 0, 0);
      uint4 v1 = make_uint4(0, 0, 0, 0);
      if (j < xlim[nt]) {
        v0 = detail::ld_x(xptr[nt] + ofs);
        if (!kFp8) v1 = detail::ld_x(xptr[nt] + ofs + 8);
      }
      xw[nt][0] = v0.x; xw[nt][1] = v0.y; xw[nt][2] = v0.z; xw[nt][3] = v0.w;
      xw[nt][4] = v1.x; xw[nt][5] = v1.y; xw[nt][6] = v1.z; xw[nt][7] = v1.w;
    }
  };
  uint4 ring_w[kRing][R];
  uint32_t ring_s[kRing][R];
#pragma unroll
  for (int u = 0; u < kRing; ++u) load_w(u, u * kWStep, ring_w[u], ring_s[u]);
  // Programmatic dependent launch (sm_90+, when launched with the attribute; no-ops otherwise): the next kernel
  // may be scheduled once every block of this one has started, and this one's weight loads above (constant
  // data) were issued before waiting for the previous kernel, whose output x may be. Nothing is written before
  // the wait, so the fixup buffer and y are never touched while the previous launch still runs.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  uint32_t xcur[NT][8];
  load_x(0, 0, xcur);
  for (int j0 = 0; j0 < cnt; j0 += kRing) {
#pragma unroll
    for (int u = 0; u < kRing; ++u) {
      const int j = j0 + u;
      if (j >= cnt) break;
      uint4 w[R];
      uint32_t sc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        w[r] = ring_w[u][r];
        sc[r] = ring_s[u][r];
      }
      load_w(j + kRing, (u + kRing) * kWStep, ring_w[u], ring_s[u]);
      uint32_t xnext[NT][8];
      load_x(j + 1, (u + 1) * kXStep, xnext);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (ABLATE == 1) {  // diagnostics: stream the weights, skip decode and MMA
          acc[r][0][0] += __uint_as_float((w[r].x ^ w[r].y ^ w[r].z ^ w[r].w ^ sc[r] ^ xcur[0][0]) & 0x3F7FFFFFu);
        } else {
          tile_step<kFp8, NT>(acc[r], w[r], sc[r], xcur);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int q = 0; q < 8; ++q) xcur[nt][q] = xnext[nt][q];
    }
    wptr += kRing * kWStep;
    if (!kFp8) sptr += kRing * kWStep;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xptr[nt] += kRing * kXStep;
  }

  // Split-k reduction across the block's warps (the LUT space is reused).
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
  constexpr int kOut = R * NT * 128;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[warp * kOut + (r * NT + nt) * 128 + lane * 4 + c] = acc[r][nt][c];
  __syncthreads();
  auto emit = [&](int o, float s) {
    const int r = o / (NT * 128);
    const int nt = (o / 128) % NT;
    const int ln = (o / 4) % 32;
    const int c = o % 4;
    const int row = (tile0 + r) * 16 + (ln >> 2) + 8 * (c >> 1);
    const int tok = nt * 8 + 2 * (ln & 3) + (c & 1);
    if (row < p.n && tok < p.m) {
      float v = s * p.out_scale * (kFp8 ? kFp8DecodeScale : 1.0f);
      if (p.channel_scales != nullptr) v *= p.channel_scales[row];
      const size_t idx = static_cast<size_t>(tok) * p.n + row;
      if (!FIX && p.ksplit > 1) {
        atomicAdd(static_cast<float*>(p.y) + idx, v);
      } else if (p.y_f32) {
        static_cast<float*>(p.y)[idx] = v;
      } else {
        static_cast<__half*>(p.y)[idx] = __float2half_rn(v);
      }
    }
  };
  if constexpr (FIX) {
    if (p.ksplit > 1) {
      const int grp = static_cast<int>(blockIdx.x) / p.ksplit;
      float* part = p.fix_ws + static_cast<size_t>(grp) * p.ksplit * kOut;
      for (int o = threadIdx.x; o < kOut; o += blockDim.x) {
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) s += red[w * kOut + o];
        __stcg(part + split * kOut + o, s);
      }
      __threadfence();  // partials visible device-wide before this block is counted
      __syncthreads();
      __shared__ unsigned is_last;
      if (threadIdx.x == 0) {
        const unsigned prev = atomicAdd(p.fix_count + grp, 1u);
        is_last = prev == static_cast<unsigned>(p.ksplit - 1);
        if (is_last) p.fix_count[grp] = 0;  // every block of the group has arrived: ready for the next launch
      }
      __syncthreads();
      if (!is_last) return;
      __threadfence();
      for (int o = threadIdx.x; o < kOut; o += blockDim.x) {
        float s = 0.0f;
        for (int sp = 0; sp < p.ksplit; ++sp) s += __ldcg(part + sp * kOut + o);
        emit(o, s);
      }
      return;
    }
  }
  for (int o = threadIdx.x; o < kOut; o += blockDim.x) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w * kOut + o];
    emit(o, s);
  }
}

// Launches a decode kernel, with programmatic dependent launch when p.pdl (sm_90+ devices only).
template <typename Kernel>
cudaError_t launch_decode(Kernel kernel, const Params& p, int blocks, int threads, cudaStream_t stream) {
  if (!p.pdl) {
    kernel<<<blocks, threads, 0, stream>>>(p);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

template <bool kFp8, int NT, int R, int RING, int WARPS, int MINB, int LOADK = 0, int ABLATE = 0>
cudaError_t launch(const Params& p, cudaStream_t stream) {
  const int blocks = (p.n_tiles + R - 1) / R * p.ksplit;
  static_assert(WARPS * R * NT * 128 <= 4096, "reduction must fit the static shared buffer");
  return launch_decode(decode_kernel<kFp8, NT, R, RING, WARPS, MINB, LOADK, ABLATE>, p, blocks, WARPS * 32, stream);
}

int device_sms() {
  static int sms = 0;  // the process's device count of SMs (one device per process in this server)
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 132;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) sms = 132;
  }
  return sms;
}

int device_major() {
  static int major = 0;  // compute capability major of the process's device
  if (major == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      major = 8;  // unknown: no programmatic dependent launch
    }
  }
  return major;
}

// Block shapes of the serial-fixup variants 30..35 (tiles per block, warps, resident blocks per SM); must match
// the launch_fixup instantiations in linear_decode.
struct FixupShape {
  int r, warps, minb;
};
constexpr FixupShape kFixupShapes[6] = {{1, 4, 5}, {1, 8, 4}, {1, 8, 2}, {1, 4, 4}, {2, 8, 2}, {1, 16, 1}};

// Split count and memory of a fixup variant. requested = 0: about two waves of resident blocks (SMs x MINB); then
// each warp keeps >= 2 k-blocks. max_floats / max_groups (< 0: unlimited) lower the split count to fit the
// caller's buffers; splits == 1 runs unsplit and uses no memory. Memory is counted for two token tiles (m up to
// 16) whatever m is, so that the split count, and the summation order with it, does not depend on m.
struct FixupPlan {
  int groups = 0;
  int splits = 1;
  size_t floats = 0;  // partials needed (0 when splits == 1)
};
FixupPlan plan_fixup(int tuning, int requested, int n_tiles, int kblocks, int64_t max_floats, int64_t max_groups) {
  const FixupShape s = kFixupShapes[tuning - 30];
  FixupPlan plan;
  plan.groups = (n_tiles + s.r - 1) / s.r;
  int splits = requested;
  if (splits <= 0) splits = (2 * device_sms() * s.minb + plan.groups - 1) / plan.groups;
  const int max_split = kblocks / (2 * s.warps) > 1 ? kblocks / (2 * s.warps) : 1;
  splits = splits < max_split ? splits : max_split;
  const int64_t out = static_cast<int64_t>(s.r) * 2 * 128;
  while (max_floats >= 0 && splits > 1 && static_cast<int64_t>(plan.groups) * splits * out > max_floats) --splits;
  if (max_groups >= 0 && plan.groups > max_groups) splits = 1;
  plan.splits = splits < 1 ? 1 : splits;
  plan.floats = plan.splits > 1 ? static_cast<size_t>(static_cast<int64_t>(plan.groups) * plan.splits * out) : 0;
  return plan;
}

// k split over blocks with the serial fixup; p.ksplit (from plan_fixup), p.fix_ws and p.fix_count are set.
template <bool kFp8, int NT, int R, int RING, int WARPS, int MINB>
cudaError_t launch_fixup(const Params& p, cudaStream_t stream) {
  const int groups = (p.n_tiles + R - 1) / R;
  return launch_decode(decode_kernel<kFp8, NT, R, RING, WARPS, MINB, 0, 0, true>, p, groups * p.ksplit, WARPS * 32,
                       stream);
}

// The default variant (LinearArgs::tuning = 0) and its split count (fixup variants; 0 = automatic). with_fixup =
// false: the best variant without a serial-fixup k split (the caller gave no, or too little, fixup memory).
//
// Batch invariance: the pick depends on the weight's shape only, never on m. A variant sums every output in an
// order fixed by its k split across warps and blocks (the MMA columns of different tokens never mix), so with one
// variant per shape a token's result is bit-identical whether it runs alone or with up to 15 others: speculative
// verification (k + 1 tokens) reproduces plain decoding (1 token) exactly. Tested by "decode is batch invariant".
int default_tuning(bool fp8, int n_tiles, int kblocks, bool with_fixup, int* splits) {
  // H200 sweep, 2026-11-30 (bench/RESULTS.md): per shape the variant with the best weighted mean over M = 1, 8
  // (0.4 each) and 16 (0.2). Two tiles per block (v15, x shared by both) once there are >= 528 tiles for NVFP4;
  // one tile, 8 warps, 4 blocks/SM (v6) for FP8 there; v1 (one tile, 8 warps, 2 blocks/SM) on 256-527 tiles,
  // except FP8 with long k (mlp.down) where the serial-fixup k split v31 wins; v7 (16 warps split k) below 256.
  // Without fixup memory v31 falls back to v1, the next best there.
  *splits = 0;
  if (n_tiles < 256) return 7;
  if (n_tiles >= 528) return fp8 ? 6 : 15;
  return fp8 && kblocks >= 256 && with_fixup ? 31 : 1;
}

// Dequantizes rows [row0, row0 + rows) (row0 a multiple of 16) to fp16 [rows, k]: one thread per lane unit.
template <bool kFp8>
__global__ void dequant_kernel(const uint4* codes, const uint16_t* scales, float gscale, float tscale,
                               const float* chs, int n, int k, int kblocks, int tile0, int tiles, int row0,
                               __half* out) {
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (unit >= static_cast<int64_t>(tiles) * kblocks * 32) return;
  const int lane = unit % 32;
  const int kb = (unit / 32) % kblocks;
  const int tile = tile0 + static_cast<int>(unit / (32 * kblocks));
  const size_t gunit = (static_cast<size_t>(tile) * kblocks + kb) * 32 + lane;
  const uint4 w = codes[gunit];
  const int g = lane >> 2;
  const int t = lane & 3;
  uint32_t words[4] = {w.x, w.y, w.z, w.w};
  if constexpr (!kFp8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) words[i] = nvfp4_sm80_unplace(words[i]);  // back to checkpoint nibble order
  }
  const uint32_t sc = kFp8 ? 0u : scales[gunit];
  for (int h = 0; h < 2; ++h) {
    const int row = tile * 16 + g + 8 * h;
    if (row >= n) continue;
    __half* orow = out + static_cast<size_t>(row - row0) * k;
    if constexpr (!kFp8) {
      const float s = detail::e4m3_value((sc >> (8 * h)) & 0xFF) * gscale;
      const int kbase = kb * 64 + t * 16;
      if (kbase >= k) continue;
      uint32_t pairs[8];
      for (int b = 0; b < 8; ++b) {
        const uint32_t byte = (words[2 * h + b / 4] >> (8 * (b % 4))) & 0xFF;
        pairs[b] = detail::half2_bits(detail::e2m1_value(byte & 0xF) * s, detail::e2m1_value(byte >> 4) * s);
      }
      uint4* dst = reinterpret_cast<uint4*>(orow + kbase);
      dst[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
      dst[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
    } else {
      const float s = tscale * (chs != nullptr ? chs[row] : 1.0f);
      const int kbase = kb * 32 + t * 8;
      if (kbase >= k) continue;
      uint32_t pairs[4];
      for (int b = 0; b < 4; ++b) {
        const uint32_t word = words[2 * h + b / 2] >> (16 * (b % 2));
        pairs[b] = detail::half2_bits(detail::e4m3_value(word & 0xFF) * s, detail::e4m3_value((word >> 8) & 0xFF) * s);
      }
      *reinterpret_cast<uint4*>(orow + kbase) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    }
  }
}

}  // namespace

KernelStatus linear_decode(const PackedWeightView& w, const LinearArgs& a) {
  if (w.family != KernelFamily::kSm80) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: weight not in sm80 layout");
  if (a.m < 1 || a.m > kMaxDecodeRows) return VS_KERNEL_FAIL(kBadShape, "sm80::linear_decode: m must be 1..16");
  const bool fp8 = w.codec == WeightCodec::kFp8;
  Params p{};
  p.codes = reinterpret_cast<const uint4*>(w.codes);
  p.scales = reinterpret_cast<const uint16_t*>(w.scales);
  p.x = static_cast<const __half*>(a.x);
  p.y = a.y;
  p.channel_scales = fp8 ? w.channel_scales : nullptr;
  p.global_scale = w.global_scale;
  // NVFP4: the decoded codes carry 2^-14 (nvfp4_bits.h), the fp32 sums get it back with the global scale.
  p.out_scale = fp8 ? w.tensor_scale * 256.0f : w.global_scale * 16384.0f;
  p.n = static_cast<int>(w.n);
  p.k = static_cast<int>(w.k);
  p.m = static_cast<int>(a.m);
  p.n_tiles = static_cast<int>(w.n / 16);
  p.kblocks = static_cast<int>(((fp8 ? w.k : w.k / 2) + 31) / 32);
  p.y_f32 = a.y_f32;
  // Variants (LinearArgs::tuning). Per-tile blocks (decode_kernel): tiles per block R, weight loads in flight per
  // warp (ring), warps per block (k split) and resident blocks per SM asked of the register allocator:
  // 1: R1 ring4 w8 b2, 5: R1 ring4 w4 b5, 6: R1 ring2 w8 b4, 7: R1 ring4 w16 b1, 14: R2 ring4 w8 b4,
  // 15: R2 ring4 w8 b2, 16: R2 ring8 w8 b2; 12 / 13 are diagnostics (weights
  // loaded but not used / not loaded): wrong results, timing only. Persistent blocks (stream_kernel, grid = SMs x
  // blocks per SM): 20: ring4 w16 b1, 23: ring3 w8 b3 — measured slower than the per-tile blocks on every 27B
  // shape (bench/RESULTS.md, 2026-11-29 second section), kept for comparison. Defaults from that H200 sweep (the
  // variants 9-11, 21, 22, 24, 25 measured there were never best and were removed). Serial-fixup k split over
  // blocks (launch_fixup; LinearArgs::ksplit = split count, 0 = about two waves of blocks): 30: R1 ring4 w4 b5,
  // 31: R1 ring2 w8 b4, 32: R1 ring4 w8 b2, 33: R1 ring8 w4 b4, 34: R2 ring4 w8 b2, 35: R1 ring4 w16 b1 (third
  // section; 30 and 31 are defaults on some shapes, the others were never best).
  int tuning = a.tuning;
  int splits = a.ksplit;  // fixup variants: 0 = automatic
  const bool have_fixup = a.fixup_partials != nullptr && a.fixup_counters != nullptr;
  const int64_t max_floats = have_fixup ? static_cast<int64_t>(a.fixup_partials_bytes / sizeof(float)) : 0;
  const int64_t max_groups = have_fixup ? static_cast<int64_t>(a.fixup_counters_bytes / sizeof(unsigned)) : 0;
  FixupPlan plan;
  if (tuning == 0) {
    tuning = default_tuning(fp8, p.n_tiles, p.kblocks, true, &splits);
    if (tuning >= 30) {
      plan = plan_fixup(tuning, splits, p.n_tiles, p.kblocks, -1, -1);
      const bool fits = plan.splits == 1 || (have_fixup && static_cast<int64_t>(plan.floats) <= max_floats &&
                                             plan.groups <= max_groups);
      if (!fits) tuning = default_tuning(fp8, p.n_tiles, p.kblocks, false, &splits);  // documented fallback
    }
  }
  const bool persistent = tuning == 20 || tuning == 23;
  const bool fixup = tuning >= 30 && tuning <= 35;
  if (tuning != 1 && (tuning < 5 || tuning > 7) && (tuning < 12 || tuning > 16) && !persistent && !fixup) {
    return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: tuning must be 0, 1, 5, 6, 7, 12..16, 20, 23 or 30..35");
  }
  if (a.ksplit < 0) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: ksplit must be >= 0");
  if (fixup) {
    plan = plan_fixup(tuning, splits, p.n_tiles, p.kblocks, -1, -1);
    if (plan.splits > 1 && !have_fixup) {
      return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: a k-split variant (30..35) needs fixup_partials and fixup_counters");
    }
    if (have_fixup && ((reinterpret_cast<uintptr_t>(a.fixup_partials) | reinterpret_cast<uintptr_t>(a.fixup_counters)) & 3) != 0) {
      return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: fixup buffers must be 4-byte aligned");
    }
    plan = plan_fixup(tuning, splits, p.n_tiles, p.kblocks, max_floats, max_groups);  // lowered to fit
    p.fix_ws = static_cast<float*>(a.fixup_partials);
    p.fix_count = static_cast<unsigned*>(a.fixup_counters);
  }
  if (a.overlap < 0 || a.overlap > 2) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: overlap must be 0, 1 or 2");
  p.pdl = device_major() >= 9 && (a.overlap == 1 || (a.overlap == 0 && kOverlapDefault));
  if (persistent && a.ksplit > 1) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: ksplit needs a per-tile variant");
  auto stream = static_cast<cudaStream_t>(a.stream);
  // Optional k split over several blocks per tile for the variants below 30 (LinearArgs::ksplit > 1, fp32 y only:
  // y is zeroed first and the blocks add atomically). Off by default: on the H200 sweep (bench/RESULTS.md) the memset and atomics cost more
  // than the partial wave they remove for most 27B shapes.
  p.ksplit = fixup ? plan.splits : 1;
  if (a.ksplit > 1 && !fixup) {
    if (!a.y_f32) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: ksplit > 1 needs fp32 y");
    p.ksplit = a.ksplit < p.kblocks ? a.ksplit : p.kblocks;
    VS_CUDA_TRY(cudaMemsetAsync(a.y, 0, static_cast<size_t>(a.m) * p.n * sizeof(float), stream));
  }
  cudaError_t err;
  auto go = [&](auto fp8_tag, auto nt_tag) {
    constexpr bool F = decltype(fp8_tag)::value;
    constexpr int NT = decltype(nt_tag)::value;
    switch (tuning) {
      case 30: return launch_fixup<F, NT, 1, 4, 4, 5>(p, stream);
      case 31: return launch_fixup<F, NT, 1, 2, 8, 4>(p, stream);
      case 32: return launch_fixup<F, NT, 1, 4, 8, 2>(p, stream);
      case 33: return launch_fixup<F, NT, 1, 8, 4, 4>(p, stream);
      case 34: return launch_fixup<F, NT, 2, 4, 8, 2>(p, stream);
      case 35: return launch_fixup<F, NT, 1, 4, 16, 1>(p, stream);
      case 20: return launch_stream<F, NT, 4, 16, 1>(p, stream);
      case 23: return launch_stream<F, NT, 3, 8, 3>(p, stream);
      case 1: return launch<F, NT, 1, 4, 8, 2>(p, stream);
      case 5: return launch<F, NT, 1, 4, 4, 5>(p, stream);
      case 6: return launch<F, NT, 1, 2, 8, 4>(p, stream);
      case 7: return launch<F, NT, 1, 4, 16, 1>(p, stream);
      case 14: return launch<F, NT, 2, 4, 8, 4>(p, stream);
      case 15: return launch<F, NT, 2, 4, 8, 2>(p, stream);
      case 16: return launch<F, NT, 2, 8, 8, 2>(p, stream);
      case 12: return launch<F, NT, 1, 4, 8, 2, 0, 1>(p, stream);
      default: return launch<F, NT, 1, 4, 8, 2, 0, 2>(p, stream);
    }
  };
  const bool two = a.m > 8;
  if (fp8) {
    err = two ? go(std::true_type{}, std::integral_constant<int, 2>{}) : go(std::true_type{}, std::integral_constant<int, 1>{});
  } else {
    err = two ? go(std::false_type{}, std::integral_constant<int, 2>{}) : go(std::false_type{}, std::integral_constant<int, 1>{});
  }
  VS_CUDA_TRY(err);
  return KernelStatus::Ok();
}

LinearFixupBytes fixup_bytes(const PackedWeightView& w) {
  const bool fp8 = w.codec == WeightCodec::kFp8;
  const int n_tiles = static_cast<int>(w.n / 16);
  const int kblocks = static_cast<int>(((fp8 ? w.k : w.k / 2) + 31) / 32);
  int splits = 0;
  const int tuning = default_tuning(fp8, n_tiles, kblocks, true, &splits);
  if (tuning < 30) return {};
  const FixupPlan plan = plan_fixup(tuning, splits, n_tiles, kblocks, -1, -1);
  if (plan.splits == 1) return {};
  return {plan.floats * sizeof(float), static_cast<size_t>(plan.groups) * sizeof(unsigned)};
}

KernelStatus dequantize_f16(const PackedWeightView& w, int64_t row0, int64_t rows, void* out_f16, void* stream) {
  if (row0 % 16 != 0 || rows <= 0 || row0 + rows > w.n) return VS_KERNEL_FAIL(kBadShape, "sm80::dequantize_f16: bad row range");
  const bool fp8 = w.codec == WeightCodec::kFp8;
  const int kblocks = static_cast<int>(((fp8 ? w.k : w.k / 2) + 31) / 32);
  const int tile0 = static_cast<int>(row0 / 16);
  const int tiles = static_cast<int>((rows + 15) / 16);
  const int64_t units = static_cast<int64_t>(tiles) * kblocks * 32;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((units + threads - 1) / threads);
  auto s = static_cast<cudaStream_t>(stream);
  const int n_lim = static_cast<int>(row0 + rows);
  if (fp8) {
    dequant_kernel<true><<<blocks, threads, 0, s>>>(reinterpret_cast<const uint4*>(w.codes), nullptr, 1.0f,
                                                    w.tensor_scale, w.channel_scales, n_lim, static_cast<int>(w.k),
                                                    kblocks, tile0, tiles, static_cast<int>(row0),
                                                    static_cast<__half*>(out_f16));
  } else {
    dequant_kernel<false><<<blocks, threads, 0, s>>>(reinterpret_cast<const uint4*>(w.codes),
                                                     reinterpret_cast<const uint16_t*>(w.scales), w.global_scale,
                                                     1.0f, nullptr, n_lim, static_cast<int>(w.k), kblocks, tile0,
                                                     tiles, static_cast<int>(row0), static_cast<__half*>(out_f16));
  }
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::sm80
