// sm80 family (Ampere and newer): M = 1..16 weight-streaming linear with mma.m16n8k16 (weights as the A
// operand, 16 rows x 16 k; activations as B, 8 tokens), and the fp16 dequantization used by the GEMM path
// (M >= 65). Tested by tests/kernels/linear_gpu_test.cpp against linear_ref on dequantized weights.
//
// Layout (prepack.h, kSm80; sm80_kmap.h): per 16-row tile and 32-byte k-block, lane (g, t) loads 16 bytes, an
// 8-byte run of rows g and g+8. For NVFP4 that is k in [16t, 16t+16) of one 64-wide k-block, i.e. exactly one
// scale group per row, so a lane needs 2 scale bytes per load; FP8 k-blocks pair up over 64 k so that a lane's x
// chunks are those of an NVFP4 lane (one token-chunked x layout, x_layout.h, serves both). The MMA's k order is
// permuted identically for A and B (a sum does not care), which lets B come from 16-byte runs of x.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>

#include "common/pdl_device.h"
#include "common/per_device.h"
#include "linear/decode_pick.h"
#include "linear/dequant_launch.cuh"
#include "linear/linear_families.h"
#include "linear/linear_device.cuh"
#include "linear/nvfp4_bits.h"
#include "linear/sm80_kmap.h"
#include "linear/x_layout.h"

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
  int64_t ldy;  // elements between rows of y
  const float* channel_scales;
  float global_scale;
  float out_scale;
  int n, k, m, n_tiles, kblocks;
  bool y_f32;
  bool pdl;        // launched with programmatic dependent launch (sm_90+)
  int pf_kblocks;  // FP8: k-blocks of each tile prefetched into L2 before the first wait (0: none)
};

// Prefetches the first p.pf_kblocks k-blocks (512 bytes each) of each of the block's tiles into L2, one 128-byte
// line per instruction over the block's threads. Issued with the first weight loads, before waiting for the previous
// kernel, so that DRAM streams this kernel's weights while the previous one finishes; the register ring alone keeps
// only kRing steps per warp in flight there. A hint only: no result depends on it.
template <int R>
__device__ __forceinline__ void prefetch_tiles_l2(const Params& p, int tile0) {
  const int tiles = min(R, p.n_tiles - tile0);
  const int lines = p.pf_kblocks * 4;
  for (int i = threadIdx.x; i < tiles * lines; i += blockDim.x) {
    const int r = i / lines;
    const char* tile = reinterpret_cast<const char*>(p.codes + static_cast<size_t>(tile0 + r) * p.kblocks * 32);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(tile + (i - r * lines) * 128));
  }
}

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
    const uint32_t sp = nvfp4_scale_pair(sc);  // half 0: row g's scale, half 1: row g + 8's
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
      a0 = detail::hmul2_bcast<0>(a0, sp);
      a2 = detail::hmul2_bcast<0>(a2, sp);
      a1 = detail::hmul2_bcast<1>(a1, sp);
      a3 = detail::hmul2_bcast<1>(a3, sp);
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

// sm_90 thread-block clusters (the k split over the two blocks of a cluster, KSPLIT = 2).
__device__ __forceinline__ int cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

__device__ __forceinline__ void cluster_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();  // split variants are launched on sm_90+ only
#endif
}

// Reads a float from the shared memory of block `rank` of this cluster at the address of `local` there.
__device__ __forceinline__ float cluster_load(const float* local, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
#else
  __trap();
  return 0.0f;
#endif
}

// One block: R adjacent 16-row tiles; its WARPS warps split k (warp w takes k-blocks w, w + WARPS, ...) and their
// partial sums are added in warp order in shared memory at the end. KSPLIT = 2 (sm_90+): the two blocks of a
// cluster share the tiles and split k once more (block b's warp w takes k-blocks b * WARPS + w, + 2 * WARPS, ...),
// so a weight with few tiles still fills every SM; block 1 hands its warp-ordered sums to block 0 through
// distributed shared memory, which adds them to its own (sums of block 0 + sums of block 1, a fixed order). The order
// of every sum depends on WARPS and KSPLIT only (not on R, RING, MINB, the x layout or the number of tokens): see
// default_index on batch invariance. XCH: x in the token-chunked layout (x_layout.h), else row-major.
template <bool kFp8, int NT, int R, int RING, int WARPS, int MINB, bool LATE_X2, int KSPLIT, bool XCH>
__global__ void __launch_bounds__(WARPS * 32, MINB) decode_kernel(Params p) {
  static_assert(KSPLIT == 1 || KSPLIT == 2, "k splits over one or two blocks");
  constexpr int kWarps = WARPS * KSPLIT;  // warps splitting k, over the cluster
  constexpr int kOut = R * NT * 128;      // fp32 sums per warp
  __shared__ __align__(16) float red[WARPS * kOut];
  const int lane = threadIdx.x & 31;
  const int split = KSPLIT == 1 ? 0 : cluster_rank();
  const int warp = split * WARPS + static_cast<int>(threadIdx.x >> 5);  // k index of this warp over the cluster
  const int g = lane >> 2;
  const int t = lane & 3;
  const int tile0 = static_cast<int>(blockIdx.x) / KSPLIT * R;
  constexpr int kKPerBlock = kFp8 ? 32 : 64;  // k values per 32-byte k-block

  float acc[R][NT][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][nt][c] = 0.0f;

  // Software pipeline over this warp's k-blocks kb_j = warp + j * kWarps: kRing weight loads are always in
  // flight ahead of the step being computed, and the activations of step j + 1 are loaded while step j computes
  // (LATE_X2: at step j). Addresses advance by compile-time strides.
  constexpr int kRing = RING / R;
  constexpr int kWStep = kWarps * 32;                 // uint4 / scale units between a warp's k-blocks
  constexpr int kXStep = kWarps * kKPerBlock;         // halves between a warp's k-blocks
  const int cnt = p.kblocks > warp ? (p.kblocks - warp + kWarps - 1) / kWarps : 0;
  const size_t tstride = static_cast<size_t>(p.kblocks) * 32;
  const size_t wofs = (static_cast<size_t>(tile0) * p.kblocks + warp) * 32 + lane;
  const uint4* wptr = p.codes + wofs;
  const uint16_t* sptr = kFp8 ? nullptr : p.scales + wofs;
  size_t tofs[R];  // offset of tile r from tile 0 (tiles past the last read the last one)
#pragma unroll
  for (int r = 0; r < R; ++r) tofs[r] = (tile0 + r < p.n_tiles ? r : p.n_tiles - 1 - tile0) * tstride;
  // x of token tile nt for this lane: token g's k values from k0 on (sm80_kmap.h), at x_offset (x_layout.h);
  // padded tokens read a real token (x_pad_source). Steps move k by whole 64-k blocks (FP8: kWarps is even), kXMul
  // times as far in x; the second 16-byte load of an NVFP4 lane (8 k further) is kX2 halves on.
  static_assert(kWarps % 2 == 0, "FP8 k-blocks pair up over 64 k (sm80_kmap.h)");
  constexpr XLayout kLayout = XCH ? XLayout::kTokenChunked : XLayout::kRowMajor;
  constexpr int kXMul = static_cast<int>(x_block_step(kLayout)) / 64;
  constexpr int kX2 = static_cast<int>(x_chunk_step(kLayout, 1));
  const __half* xptr[NT];
  int xlim[NT];  // k-blocks of this warp whose x lies inside the row (0 for padded tokens)
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int tok = nt * 8 + g;
    const int k0 = static_cast<int>(sm80_lane_k0(kFp8, warp, t));
    xptr[nt] = p.x + x_offset(kLayout, p.k, x_pad_source(kLayout, p.m, tok), k0);
    xlim[nt] = tok < p.m && p.k > k0 ? (p.k - k0 + kXStep - 1) / kXStep : 0;
  }
  // Loads of step j (offset ofs from the loop base). GUARD: only steps j < cnt are loaded (the ring runs past the
  // range's end) and x outside the row or of padded tokens is zero. Unguarded (the main loop, where every step is
  // in range and x lies inside the row): no predicates and no zero fills. Tiles past n_tiles read the last tile
  // (their sums are never written) and padded tokens read a real token (MMA columns never mix; never written either).
  auto load_w = [&](auto guard, int j, int ofs, uint4 (&wv)[R], uint32_t (&sv)[R]) {
    if (decltype(guard)::value && j >= cnt) return;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      wv[r] = detail::ld_stream(wptr + tofs[r] + ofs);
      sv[r] = kFp8 ? 0u : static_cast<uint32_t>(sptr[tofs[r] + ofs]);
    }
  };
  auto load_x = [&](auto guard, int j, int ofs, uint32_t (&xw)[NT][8]) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 v0, v1;
      if (!decltype(guard)::value || j < xlim[nt]) {
        v0 = detail::ld_x(xptr[nt] + ofs * kXMul);
        if (!kFp8) v1 = detail::ld_x(xptr[nt] + ofs * kXMul + kX2);
      } else {
        v0 = v1 = make_uint4(0, 0, 0, 0);
      }
      xw[nt][0] = v0.x; xw[nt][1] = v0.y; xw[nt][2] = v0.z; xw[nt][3] = v0.w;
      if (!kFp8) {
        xw[nt][4] = v1.x; xw[nt][5] = v1.y; xw[nt][6] = v1.z; xw[nt][7] = v1.w;
      }
    }
  };
  // kRing + 1 register slots for weights and activations: step j lives in slot j % kSlots; step j refills the
  // slot step j - 1 consumed (weights of step j + kRing, x of step j + 1), so nothing is copied between slots
  // and the loop body is unrolled over one turn of the ring.
  constexpr int kSlots = kRing + 1;
  uint4 ring_w[kSlots][R];
  uint32_t ring_s[kSlots][R];
  uint32_t ring_x[kSlots][NT][8];
  if constexpr (kFp8) {
    if (p.pf_kblocks > 0 && split == 0) prefetch_tiles_l2<R>(p, tile0);
  }
#pragma unroll
  for (int u = 0; u < kRing; ++u) load_w(std::true_type{}, u, u * kWStep, ring_w[u], ring_s[u]);
  // Programmatic dependent launch (sm_90+, when launched with the attribute; no-ops otherwise): the next kernel
  // may be scheduled once every block of this one has started, and this one's weight loads above (constant
  // data) were issued before waiting for the previous kernel, whose output x may be. Nothing is written before
  // the wait, so y is never touched while the previous launch still runs.
  pdl_start();
  // x one step ahead (default), or, with LATE_X2 and two token tiles, loaded right before use (fewer live
  // registers; x is read by every block of the SM and mostly hits L1).
  constexpr bool kXAhead = !(LATE_X2 && NT == 2);
  if constexpr (kXAhead) load_x(std::true_type{}, 0, 0, ring_x[0]);
  auto turn = [&](auto guard, int j0) {
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      const int j = j0 + u;
      if (decltype(guard)::value && j >= cnt) break;
      load_w(guard, j + kRing, (u + kRing) * kWStep, ring_w[(u + kRing) % kSlots], ring_s[(u + kRing) % kSlots]);
      if constexpr (kXAhead) {
        load_x(guard, j + 1, (u + 1) * kXStep, ring_x[(u + 1) % kSlots]);
      } else {
        load_x(guard, j, u * kXStep, ring_x[u]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) tile_step<kFp8, NT>(acc[r], ring_w[u][r], ring_s[u][r], ring_x[u]);
    }
    wptr += kSlots * kWStep;
    if (!kFp8) sptr += kSlots * kWStep;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xptr[nt] += kSlots * kXStep * kXMul;
  };
  // Main loop: every load of a turn is in range (steps up to j0 + kSlots - 1 + kRing < cnt, and x of steps up to
  // cnt - kRing, which is not the range's possibly partial last k-block since kRing >= 2). Then the guarded rest.
  static_assert(kRing >= 2, "the unguarded main loop relies on a ring of at least 2 steps");
  int j0 = 0;
  for (; j0 + kSlots + kRing <= cnt; j0 += kSlots) turn(std::false_type{}, j0);
  for (; j0 < cnt; j0 += kSlots) turn(std::true_type{}, j0);

  // Reduction across the block's warps, in warp order (then, KSPLIT = 2, across the cluster's two blocks).
  const int bwarp = static_cast<int>(threadIdx.x >> 5);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      *reinterpret_cast<float4*>(&red[bwarp * kOut + (r * NT + nt) * 128 + lane * 4]) =
          make_float4(acc[r][nt][0], acc[r][nt][1], acc[r][nt][2], acc[r][nt][3]);
  __syncthreads();
  auto warp_sum = [&](int o) {  // this block's warps, in warp order
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) sum += red[w * kOut + o];
    return sum;
  };
  if constexpr (KSPLIT == 2) {
    // Each block sums its warps into red[0 .. kOut) (thread o owns the outputs o, o + blockDim.x, ...; warp 0's slot
    // is read before being overwritten by the same thread). After a cluster barrier block 0 adds block 1's sums to
    // its own in the epilogue below; a second barrier keeps block 1's shared memory alive until then.
    for (int o = threadIdx.x; o < kOut; o += blockDim.x) red[o] = warp_sum(o);
    cluster_barrier();
    if (split != 0) {
      cluster_barrier();
      return;
    }
  }
  for (int o = threadIdx.x; o < kOut; o += blockDim.x) {
    float sum;
    if constexpr (KSPLIT == 2) {
      sum = red[o] + cluster_load(&red[o], 1);  // block 0's sums + block 1's: a fixed order
    } else {
      sum = warp_sum(o);
    }
    const int r = o / (NT * 128);
    const int nt = (o / 128) % NT;
    const int ln = (o / 4) % 32;
    const int c = o % 4;
    const int row = (tile0 + r) * 16 + (ln >> 2) + 8 * (c >> 1);
    const int tok = nt * 8 + 2 * (ln & 3) + (c & 1);
    if (row < p.n && tok < p.m) {
      float v = sum * p.out_scale * (kFp8 ? kFp8DecodeScale : 1.0f);
      if (p.channel_scales != nullptr) v *= p.channel_scales[row];
      const size_t idx = static_cast<size_t>(tok) * p.ldy + row;
      if (p.y_f32) {
        static_cast<float*>(p.y)[idx] = v;
      } else {
        static_cast<__half*>(p.y)[idx] = __float2half_rn(v);
      }
    }
  }
  if constexpr (KSPLIT == 2) cluster_barrier();  // block 1 may leave now
}

// The launch attribute that groups blocks into clusters of `ksplit` along x (sm_90+).
cudaLaunchAttribute cluster_dim_attr(int ksplit) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(ksplit);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  return attr;
}

// Launches a decode kernel, with programmatic dependent launch when p.pdl (sm_90+ devices only) and as clusters of
// `ksplit` blocks when ksplit > 1 (sm_90+).
template <typename Kernel>
cudaError_t launch_decode(Kernel kernel, const Params& p, int blocks, int threads, int ksplit, cudaStream_t stream) {
  if (!p.pdl && ksplit == 1) {
    kernel<<<blocks, threads, 0, stream>>>(p);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (p.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (ksplit > 1) attr[n++] = cluster_dim_attr(ksplit);
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

// A decode-kernel variant for one format and token-tile count: its kernels (x row-major / token-chunked) and block
// shape.
struct Variant {
  void (*kernel)(Params) = nullptr;
  void (*kernel_chunked_x)(Params) = nullptr;
  int tiles_per_block = 1;
  int warps = 4;
  int ksplit = 1;  // blocks of a cluster splitting k (sm_90+)
};

// The kernels of candidate I of kDecodeCandidates (decode_pick.h): the table is the only list of variants, so the
// pick's block shapes and the launched kernels cannot disagree. Variants measured slower on every 27B shape and
// removed are recorded in bench/RESULTS.md (persistent grids with a block barrier per tile, a k split over blocks
// through global memory, a stream-K schedule over warps with a cp.async ring, and block shapes no pick chose).
template <bool kFp8, int NT, int I>
Variant candidate_variant() {
  constexpr DecodeCandidate c = kDecodeCandidates[I];
  return {decode_kernel<kFp8, NT, c.tiles_per_block, c.ring, c.warps, c.min_blocks, c.late_x2, c.ksplit, false>,
          decode_kernel<kFp8, NT, c.tiles_per_block, c.ring, c.warps, c.min_blocks, c.late_x2, c.ksplit, true>,
          c.tiles_per_block, c.warps, c.ksplit};
}

template <bool kFp8, int NT, int... I>
std::array<Variant, sizeof...(I)> variant_table(std::integer_sequence<int, I...>) {
  return {candidate_variant<kFp8, NT, I>()...};
}

// [fp8][token tiles - 1][candidate index]
const std::array<Variant, kDecodeCandidateCount> kVariants[2][2] = {
    {variant_table<false, 1>(std::make_integer_sequence<int, kDecodeCandidateCount>{}),
     variant_table<false, 2>(std::make_integer_sequence<int, kDecodeCandidateCount>{})},
    {variant_table<true, 1>(std::make_integer_sequence<int, kDecodeCandidateCount>{}),
     variant_table<true, 2>(std::make_integer_sequence<int, kDecodeCandidateCount>{})},
};

const Variant& variant_at(bool fp8, int nt, int index) { return kVariants[fp8 ? 1 : 0][nt - 1][static_cast<size_t>(index)]; }

// Whether clusters of v.ksplit blocks of v can be resident at all on this device (a partitioned GPU, e.g. MIG or MPS
// with few SMs, may not place them); the default pick only takes split variants that can.
bool clusters_fit(const Variant& v) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(v.ksplit));
  cfg.blockDim = dim3(static_cast<unsigned>(v.warps * 32));
  cudaLaunchAttribute attr = cluster_dim_attr(v.ksplit);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  return cudaOccupancyMaxActiveClusters(&clusters, v.kernel, &cfg) == cudaSuccess && clusters > 0;
}

// A device as the default pick sees it (decode_pick.h): SM count and every candidate's resident blocks per SM (0: it
// does not run there: clusters below sm_90 or that cannot be placed), from the occupancy calculator on the candidates'
// own kernels. Measured once per device.
DecodeDevice measure_decode_device(int dev) {
  DecodeDevice d;
  int major = 0;
  if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess || current != dev) return {};  // the occupancy calls ask the current device
  for (int i = 0; i < kDecodeCandidateCount; ++i) {
    std::array<std::array<int, 2>, 2> r{};
    for (int f = 0; f < 2; ++f) {
      for (int nt = 1; nt <= 2; ++nt) {
        const Variant& v = variant_at(f == 1, nt, i);
        int blocks = 0;
        if ((v.ksplit > 1 && major < 9) ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, v.warps * 32, 0) != cudaSuccess ||
            (v.ksplit > 1 && !clusters_fit(v))) {
          blocks = 0;
          cudaGetLastError();
        }
        r[f][nt - 1] = blocks;
      }
    }
    d.resident.push_back(r);
  }
  return d;
}

const DecodeDevice& decode_device() {
  static PerDevice<DecodeDevice> devices;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) dev = -1;  // unknown: measured (and found empty) on every call
  return devices.get(dev, measure_decode_device);
}

// The default variant's candidate index for one (nt = 1) or two (nt = 2) token tiles: pick_decode_variants by wave
// fill (decode_pick.h). Batch invariance: the pick depends on the weight's shape and the device only, and the
// nt = 1 and nt = 2 picks of one shape have the same warps per block and k split, which alone order every sum (tiles
// per block, ring depth and blocks per SM do not). MMA columns of different tokens never mix, so a token's result is
// bit-identical whether it runs alone or with up to 15 others: speculative verification (k + 1 tokens) reproduces
// plain decoding (1 token). Tested by "decode is batch invariant".
int default_index(bool fp8, int n_tiles, int nt) {
  const DecodePick pick = pick_decode_variants(decode_device(), fp8, n_tiles);
  // No device information: candidate 0 (4 warps, no clusters) runs everywhere, for both tile counts.
  return pick.nt1 == 0 ? 0 : decode_candidate_index(nt == 2 ? pick.nt2 : pick.nt1);
}

// L2 prefetch budget of the FP8 decode kernels (DecodeChoice::l2_prefetch_kib = -1): 8 MiB over the whole weight,
// the best budget on every 27B shape in an H200 sweep (`bench_linear --prefetch-sweep`,
// bench/RESULTS.md): +2.5 to +6 points of the read ceiling; more than ~12 MiB costs again. NVFP4 kernels do not
// prefetch: every budget measured slower there (their decode, not DRAM, is the co-bottleneck).
constexpr int kFp8PrefetchKib = 8192;

// Dequantizes rows [row0, row0 + rows) (row0 a multiple of 16) to fp16 [rows, k]: one thread per lane unit
// (16 code bytes: rows g and g + 8). Codes become f16x2 pairs with the decode kernel's bit tricks (NVFP4:
// e2m1 * 2^-14 exactly; FP8: the e4m3 value, times 2^-8 below sm_89), then one fp32 multiply by the scale with
// the power of two folded in (the same single rounding as e2m1 * (e4m3 * global) in fp32) and one rounding to
// fp16. Memory-bound: it writes 2 bytes per weight.
template <bool kFp8>
__global__ void dequant_kernel(const uint4* codes, const uint16_t* scales, float gscale, float tscale,
                               const float* chs, int n, int k, int kblocks, int tile0, int row0, __half* out) {
  detail::DequantUnit u;
  if (!detail::dequant_unit_of_thread(kblocks, tile0, u)) return;
  if constexpr (kFp8) {
    // FP8 k-blocks pair up over 64 k (sm80_kmap.h): the 64 threads of a pair take its units so that the 8 threads of
    // a row (both k-blocks x 4 lanes) store the row's 128 contiguous bytes of the pair in one instruction, whole
    // sectors, as one k-block's 4 lanes did before the pairing.
    const int i = u.kb * 32 + u.lane;  // this thread's index in the tile (kblocks is even)
    const int j = i & 31;
    const int g = (i & 32) / 8 + j / 8;
    u.kb = i / 64 * 2 + (j & 1);
    u.lane = g * 4 + (j / 2) % 4;
    u.index = (static_cast<size_t>(u.tile) * kblocks + u.kb) * 32 + u.lane;
  }
  const int lane = u.lane;
  const int kb = u.kb;
  const int tile = u.tile;
  const uint4 w = codes[u.index];
  const int g = lane >> 2;
  const int t = lane & 3;
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  const uint32_t sc = kFp8 ? 0u : scales[u.index];
  auto scaled = [](uint32_t pair, float s) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&pair));
    const __half2 h = __floats2half2_rn(f.x * s, f.y * s);
    return *reinterpret_cast<const uint32_t*>(&h);
  };
  if constexpr (!kFp8) {
    // Lane t holds k [16t, 16t + 16) of rows g and g + 8 of the 64-wide k-block: words 2h and 2h + 1 are the 8-code
    // halves of row g + 8h, each one 16-byte piece of fp16 output (pieces 2t, 2t + 1 of the row's 8). So that each
    // store instruction writes 64 contiguous bytes of a row (full sectors) rather than 16-byte pieces 32 bytes
    // apart, lane t stores piece t, then piece 4 + t: it takes the code words (and group scales) of the lane that
    // holds that piece and decodes them itself (5 shuffles per store round instead of moving decoded pieces: 8).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int q = 4 * half + t;                      // piece this lane stores: word q % 2 of lane q / 2
      const int src = (lane & ~3) | (q >> 1);
      uint32_t sw[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) sw[i] = __shfl_sync(0xffffffffu, words[i], src);
      const uint32_t ssc = __shfl_sync(0xffffffffu, sc, src);
      const int kq = kb * 64 + 8 * q;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = tile * 16 + g + 8 * h;
        const float s = detail::e4m3_value((ssc >> (8 * h)) & 0xFF) * gscale * 16384.0f *  // undoes the 2^-14
                        (chs != nullptr && row < n ? chs[row] : 1.0f);
        const uint32_t v = sw[2 * h + (t & 1)];  // k = kq .. kq + 7, byte j = k pair 2j, 2j + 1
        if (row < n && kq < k) {
          *reinterpret_cast<uint4*>(out + static_cast<size_t>(row - row0) * k + kq) =
              make_uint4(scaled(nvfp4_sm80_pair<0>(v), s), scaled(nvfp4_sm80_pair<1>(v), s),
                         scaled(nvfp4_sm80_pair<2>(v), s), scaled(nvfp4_sm80_pair<3>(v), s));
        }
      }
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = tile * 16 + g + 8 * h;
      const int kbase = static_cast<int>(sm80_lane_k0(true, kb, t));
      if (row >= n || kbase >= k) continue;
      const float s = tscale * (chs != nullptr ? chs[row] : 1.0f) * (kFp8DecodeScale == 1.0f ? 256.0f : 1.0f);
      const uint32_t lo = words[2 * h];
      const uint32_t hi = words[2 * h + 1];
      *reinterpret_cast<uint4*>(out + static_cast<size_t>(row - row0) * k + kbase) =
          make_uint4(scaled(fp8_pair_fast<0>(lo), s), scaled(fp8_pair_fast<1>(lo), s), scaled(fp8_pair_fast<0>(hi), s),
                     scaled(fp8_pair_fast<1>(hi), s));
    }
  }
}

// 16-row tiles of a weight (the last one's rows past n are zero padding, never written) and 8-token tiles of m.
int row_tiles(const PackedWeightView& w) { return static_cast<int>((w.n + 15) / 16); }
int token_tiles(int64_t m) { return m > 8 ? 2 : 1; }

}  // namespace

int default_decode_variant(const PackedWeightView& w, int64_t m, int* blocks_per_sm) {
  const bool fp8 = w.format == WeightFormat::kFp8;
  const int nt = token_tiles(m);
  const int index = default_index(fp8, row_tiles(w), nt);
  if (blocks_per_sm != nullptr) {
    const DecodeDevice& d = decode_device();
    *blocks_per_sm = static_cast<size_t>(index) < d.resident.size() ? d.resident[static_cast<size_t>(index)][fp8 ? 1 : 0][nt - 1] : 0;
  }
  return kDecodeCandidates[index].id;
}

bool decode_variant_runs_here(int variant) {
  const int index = decode_candidate_index(variant);
  if (index < 0 || current_device_major() < 8) return false;
  if (kDecodeCandidates[index].ksplit == 1) return true;
  const DecodeDevice& d = decode_device();
  return static_cast<size_t>(index) < d.resident.size() && d.resident[static_cast<size_t>(index)][0][0] > 0;
}

KernelStatus linear_decode(const PackedWeightView& w, const LinearArgs& a, const DecodeChoice& choice) {
  if (w.family != KernelFamily::kSm80) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: weight not in sm80 layout");
  if (a.m < 1 || a.m > kMaxDecodeRows) return VS_KERNEL_FAIL(kBadShape, "sm80::linear_decode: m must be 1..16");
  const int major = current_device_major();
  if (major < 8) return VS_KERNEL_FAIL(kUnsupported, "linear: sm80-family weights on a device below sm_80");
  if (choice.l2_prefetch_kib < -1) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: l2_prefetch_kib must be >= -1");
  const bool fp8 = w.format == WeightFormat::kFp8;
  Params p{};
  p.codes = reinterpret_cast<const uint4*>(w.codes);
  p.scales = reinterpret_cast<const uint16_t*>(w.scales);
  p.x = static_cast<const __half*>(a.x);
  p.y = a.y;
  p.channel_scales = w.channel_scales;
  p.global_scale = w.global_scale;
  // NVFP4: the decoded codes carry 2^-14 (nvfp4_bits.h), the fp32 sums get it back with the global scale.
  p.out_scale = fp8 ? w.tensor_scale * 256.0f : w.global_scale * 16384.0f;
  p.n = static_cast<int>(w.n);
  p.k = static_cast<int>(w.k);
  p.m = static_cast<int>(a.m);
  p.n_tiles = row_tiles(w);
  p.kblocks = static_cast<int>(sm80_kblocks(fp8, w.k));
  p.y_f32 = a.y_f32;
  p.ldy = a.y_stride > 0 ? a.y_stride : w.n;
  p.pdl = a.pdl && major >= 9;
  const int nt = token_tiles(a.m);
  const int index = choice.variant == 0 ? default_index(fp8, p.n_tiles, nt) : decode_candidate_index(choice.variant);
  if (index < 0) return VS_KERNEL_FAIL(kBadArgument, "sm80::linear_decode: variant is not a kDecodeCandidates id (decode_pick.h)");
  if (choice.variant != 0 && !decode_variant_runs_here(choice.variant)) {
    return VS_KERNEL_FAIL(kUnsupported, "sm80::linear_decode: this variant's clusters do not run on this device");
  }
  const Variant& v = variant_at(fp8, nt, index);
  if (fp8) {
    const int64_t budget = int64_t{1024} * (choice.l2_prefetch_kib >= 0 ? choice.l2_prefetch_kib : kFp8PrefetchKib);
    const int64_t kblock_bytes = int64_t{p.n_tiles} * 512;  // one k-block of every tile
    p.pf_kblocks = static_cast<int>(std::min<int64_t>(p.kblocks, (budget + kblock_bytes - 1) / kblock_bytes));
  }
  const int blocks = (p.n_tiles + v.tiles_per_block - 1) / v.tiles_per_block * v.ksplit;
  const auto kernel = a.x_layout == XLayout::kTokenChunked ? v.kernel_chunked_x : v.kernel;
  const cudaError_t err = launch_decode(kernel, p, blocks, v.warps * 32, v.ksplit, static_cast<cudaStream_t>(a.stream));
  VS_CUDA_TRY(err);
  return KernelStatus::Ok();
}

KernelStatus dequantize_f16(const PackedWeightView& w, int64_t row0, int64_t rows, void* out_f16, void* stream) {
  if (row0 % 16 != 0 || rows <= 0 || row0 + rows > w.n) return VS_KERNEL_FAIL(kBadShape, "sm80::dequantize_f16: bad row range");
  const bool fp8 = w.format == WeightFormat::kFp8;
  const int kblocks = static_cast<int>(sm80_kblocks(fp8, w.k));
  return detail::launch_dequant(fp8 ? dequant_kernel<true> : dequant_kernel<false>, w, 16, kblocks, row0, rows,
                                out_f16, stream);
}

}  // namespace voltserve::kernels::sm80
