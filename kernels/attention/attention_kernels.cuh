// Device code of gated attention (attention.h): four kernels that attention.cu launches in this order from the
// LaunchPlan (attention_plan.h), each instantiated for an fp16 (CacheF16) or e4m3 (CacheF8) KV cache. Portable: fp32
// FMA arithmetic, fp16 loads/stores and integer bit operations only (no tensor cores, bf16, FP8 conversions, cp.async
// or ldmatrix), so the same code runs from sm_70 up. Tested against attention_ref.cpp by
// tests/kernels/attention_gpu_test.cpp (GPU) and tests/kernels/attention_emu_test.cpp (CPU, SIMT emulator).
//
// This header uses a small CUDA vocabulary only (__global__/__device__/__shared__, thread and block indices,
// __syncthreads/__syncwarp, __shfl_sync/__shfl_xor_sync, the fp16 conversions, uint2/uint4/float2/float4): nvcc
// compiles it after <cuda_fp16.h> (attention.cu), the host compiler after tests/kernels/simt_emu.h, which provides
// the same names.
//
// 1. attention_prep_kernel  grid (row, group of 4 head vectors), 128 threads: one warp per head vector of one
//    row. q head: (1+w) RMSNorm, partial NeoX RoPE at the row's position, fp32 into q_ws. kv head: the same for the
//    key, then key and value (unchanged) into the paged cache (fp16, or e4m3 of x / scale). Lane l holds dims l + 32 i (coalesced fp32
//    loads); the rotation partner of a dim lives in another lane, so the normed vector goes through shared memory
//    (one buffer per warp, __syncwarp).
// 2. attention_decode_split_kernel  grid (split x q group, kv head, sequence), 256 threads; sequences of <= 16
//    rows. A block serves one group of 6 q vectors of the kv head's GQA group (one row's q heads at group 6) over
//    one split of the context (split-context flash decoding), by all 8 warps as teams over the split's key batches.
//    A verify's groups are side-by-side blocks: at a short context the splits alone leave most SMs idle, and at a
//    long one more blocks keep more K/V reads in flight (the split's rows come from DRAM once, the other groups'
//    blocks find them mostly in L2). Splits depend on the sequence's own context only (split_plan) and the block
//    structure not on the row count, so results are batch invariant and a verify row equals plain decoding bit for
//    bit. Writes per-split partial (max, sum, unnormalised output) per q vector into the workspace.
// 3. attention_combine_kernel  grid (sequence, row), 256 threads: one warp per q head merges the row's <= 32
//    splits (one per lane), divides, multiplies by sigmoid(gate) and writes the output (fp16 or fp32).
// 4. attention_prefill_kernel  grid (tile, kv head), 256 threads; sequences of > 16 rows: a tile is 48 / group rows
//    of one sequence (8 rows at group 6), its q vectors attend over the cached keys and the causal part of the
//    step's own in one pass (online softmax over 4-key batches straight from the paged cache), then the same
//    epilogue as the combine.
//
// Attend blocks (decode and prefill), per warp: q vectors in registers, lane l holding dims [l * D/32, (l+1) * D/32)
// (one 16-byte load per lane and key row at D = 256). A batch of 4 keys is loaded (4 K rows + 4 V rows, coalesced,
// page looked up per key; the warp's next batch is in flight while it computes this one). Each q vector's 4 partial
// dot products are reduced across the warp in one transposed butterfly (4 values per lane, 6 shuffles), after which
// lanes 8b..8b+7 hold key b's score; the online softmax keeps one max per q vector (warp-uniform) and one sum per
// lane, and the output accumulator is lane-major like q. Warps split the block's q vectors into groups of 6 and its
// key batches over `teams` (decode: 1 group at a time, 8 teams; prefill: team_layout); the teams' states are merged
// in a fixed tree through shared memory. fp32
// throughout; K/V are fp16 or e4m3 only in memory (an e4m3 row is half the bytes: 8 per lane at D = 256). At D = 256 a warp holds 6 q vectors + 6 accumulators + two key batches
// (~240 registers), so one 256-thread block runs per SM, each warp with one 4 KB batch in flight while it computes.
#pragma once

#include <cstdint>

#include "attention/attention_math.h"
#include "attention/attention_plan.h"
#include "common/e4m3_codec.h"
#include "common/pdl_device.h"

namespace voltserve::kernels::attention::detail {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int32_t imin(int32_t x, int32_t y) { return x < y ? x : y; }
__device__ __forceinline__ int32_t imax(int32_t x, int32_t y) { return x > y ? x : y; }

__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(kFullMask, v, mask); }
__device__ __forceinline__ int32_t shfl_xor(int32_t v, int mask) { return __shfl_xor_sync(kFullMask, v, mask); }
__device__ __forceinline__ float shfl_from(float v, int lane) { return __shfl_sync(kFullMask, v, lane); }
__device__ __forceinline__ int32_t shfl_from(int32_t v, int lane) { return __shfl_sync(kFullMask, v, lane); }

__device__ __forceinline__ float half_bits_to_float(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}
__device__ __forceinline__ uint16_t float_to_half_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }

// Packed fp16 of one lane's DPL consecutive dims: half i in bits 16 * (i % 2) of word i / 2.
template <int DPL>
struct HalfWords {
  uint32_t w[(DPL + 1) / 2];
};

// p: element offset a multiple of DPL in a 16-byte aligned buffer with rows of 32 * DPL halves, so the widest load
// that divides DPL halves is aligned (16 bytes at DPL = 8).
template <int DPL>
__device__ __forceinline__ void load_halves(const uint16_t* p, HalfWords<DPL>& h) {
  if constexpr (DPL % 8 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 8; ++i) {
      const uint4 u = reinterpret_cast<const uint4*>(p)[i];
      h.w[4 * i] = u.x;
      h.w[4 * i + 1] = u.y;
      h.w[4 * i + 2] = u.z;
      h.w[4 * i + 3] = u.w;
    }
  } else if constexpr (DPL % 4 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 4; ++i) {
      const uint2 u = reinterpret_cast<const uint2*>(p)[i];
      h.w[2 * i] = u.x;
      h.w[2 * i + 1] = u.y;
    }
  } else if constexpr (DPL % 2 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) h.w[i] = reinterpret_cast<const uint32_t*>(p)[i];
  } else {
#pragma unroll
    for (int i = 0; i < (DPL + 1) / 2; ++i) h.w[i] = 0;
#pragma unroll
    for (int i = 0; i < DPL; ++i) h.w[i / 2] |= static_cast<uint32_t>(p[i]) << (16 * (i % 2));
  }
}

template <int DPL>
__device__ __forceinline__ void zero_halves(HalfWords<DPL>& h) {
#pragma unroll
  for (int i = 0; i < (DPL + 1) / 2; ++i) h.w[i] = 0;
}

template <int DPL>
__device__ __forceinline__ void halves_to_float(const HalfWords<DPL>& h, float (&f)[DPL]) {
#pragma unroll
  for (int i = 0; i < DPL; ++i) f[i] = half_bits_to_float(h.w[i / 2] >> (16 * (i % 2)));
}

// DPL consecutive floats at p (16-byte aligned when DPL % 4 == 0, 8-byte when DPL % 2 == 0).
template <int DPL>
__device__ __forceinline__ void load_floats(const float* p, float (&f)[DPL]) {
  if constexpr (DPL % 4 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 4; ++i) {
      const float4 u = reinterpret_cast<const float4*>(p)[i];
      f[4 * i] = u.x;
      f[4 * i + 1] = u.y;
      f[4 * i + 2] = u.z;
      f[4 * i + 3] = u.w;
    }
  } else if constexpr (DPL % 2 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const float2 u = reinterpret_cast<const float2*>(p)[i];
      f[2 * i] = u.x;
      f[2 * i + 1] = u.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < DPL; ++i) f[i] = p[i];
  }
}

template <int DPL>
__device__ __forceinline__ void store_floats(float* p, const float (&f)[DPL]) {
  if constexpr (DPL % 4 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 4; ++i) {
      reinterpret_cast<float4*>(p)[i] = float4{f[4 * i], f[4 * i + 1], f[4 * i + 2], f[4 * i + 3]};
    }
  } else if constexpr (DPL % 2 == 0) {
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) reinterpret_cast<float2*>(p)[i] = float2{f[2 * i], f[2 * i + 1]};
  } else {
#pragma unroll
    for (int i = 0; i < DPL; ++i) p[i] = f[i];
  }
}

// ---- cache formats ----
// The kernels are instantiated per KV-cache element format: C::Elem is one stored element, C::Words<DPL> one lane's
// DPL consecutive elements of a row as loaded, C::to_float decodes them, C::encode stores one. The fp8 decode yields
// x / 256 (e4m3x2_to_half2_div256): make_plan folds the 256 and the per-layer scales into KernelArgs::scale (keys)
// and v_mul (values), so dequantization is bit operations and one fp16 conversion per element, in registers.
struct CacheF16 {
  using Elem = uint16_t;
  template <int DPL>
  using Words = HalfWords<DPL>;
  template <int DPL>
  __device__ __forceinline__ static void load(const Elem* p, Words<DPL>& h) { load_halves<DPL>(p, h); }
  template <int DPL>
  __device__ __forceinline__ static void zero(Words<DPL>& h) { zero_halves<DPL>(h); }
  template <int DPL>
  __device__ __forceinline__ static void to_float(const Words<DPL>& h, float (&f)[DPL]) { halves_to_float<DPL>(h, f); }
  __device__ __forceinline__ static Elem encode(float x, float /*scale*/) { return float_to_half_bits(x); }
};

// One lane's DPL e4m3 codes: code i in bits 8 * (i % 4) of word i / 4.
template <int DPL>
struct Fp8Words {
  uint32_t w[(DPL + 3) / 4];
};

struct CacheF8 {
  using Elem = uint8_t;
  template <int DPL>
  using Words = Fp8Words<DPL>;
  // p: byte offset a multiple of DPL in a 16-byte aligned buffer with rows of 32 * DPL bytes (half the fp16 row).
  template <int DPL>
  __device__ __forceinline__ static void load(const Elem* p, Words<DPL>& c) {
    if constexpr (DPL % 8 == 0) {
#pragma unroll
      for (int i = 0; i < DPL / 8; ++i) {
        const uint2 u = reinterpret_cast<const uint2*>(p)[i];
        c.w[2 * i] = u.x;
        c.w[2 * i + 1] = u.y;
      }
    } else if constexpr (DPL % 4 == 0) {
#pragma unroll
      for (int i = 0; i < DPL / 4; ++i) c.w[i] = reinterpret_cast<const uint32_t*>(p)[i];
    } else {
#pragma unroll
      for (int i = 0; i < (DPL + 3) / 4; ++i) c.w[i] = 0;
#pragma unroll
      for (int i = 0; i < DPL; ++i) c.w[i / 4] |= static_cast<uint32_t>(p[i]) << (8 * (i % 4));
    }
  }
  template <int DPL>
  __device__ __forceinline__ static void zero(Words<DPL>& c) {
#pragma unroll
    for (int i = 0; i < (DPL + 3) / 4; ++i) c.w[i] = 0;
  }
  template <int DPL>
  __device__ __forceinline__ static void to_float(const Words<DPL>& c, float (&f)[DPL]) {
#pragma unroll
    for (int i = 0; i < DPL; i += 2) {
      const uint32_t h = fp::e4m3x2_to_half2_div256((c.w[i / 4] >> (8 * (i % 4))) & 0xFFFFu);
      f[i] = half_bits_to_float(h);
      if (i + 1 < DPL) f[i + 1] = half_bits_to_float(h >> 16);
    }
  }
  // x / scale, as the reference stores it (IEEE division).
  __device__ __forceinline__ static Elem encode(float x, float scale) { return fp::float_to_e4m3(x / scale); }
};

// Compact index of sequence s's first decode row among the partial-result slots: the rows of the valid decode
// sequences before it (every warp of a block computes it; the same everywhere).
__device__ __forceinline__ int32_t decode_slot_base(const KernelArgs& a, int32_t s, const Bounds& b, int lane) {
  int32_t sum = 0;
  for (int32_t i0 = 0; i0 < s; i0 += 32) {
    const int32_t i = i0 + lane;
    int32_t n = 0;
    if (i < s) {
      const SeqDesc d = a.seqs[i];
      if (seq_valid(d, b) && seq_is_decode(d)) n = d.n_tokens;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) n += shfl_xor(n, o);
    sum += n;
  }
  return sum;
}

// Prefill tile `tile` (tiles numbered over the valid prefill sequences in order, ceil(n_tokens / rows_per_chunk)
// each): its sequence and chunk. False when tile is past the last one (the grid is an upper bound).
__device__ __forceinline__ bool find_prefill_tile(const KernelArgs& a, int32_t tile, int lane, int32_t* seq,
                                                  int32_t* chunk) {
  const Bounds b{a.n_rows, a.max_seq_tokens, a.max_context};
  int32_t before = 0;  // tiles of the sequences before i0
  for (int32_t i0 = 0; i0 < a.n_seqs; i0 += 32) {
    const int32_t i = i0 + lane;
    int32_t cnt = 0;
    if (i < a.n_seqs) {
      const SeqDesc d = a.seqs[i];
      if (seq_valid(d, b) && !seq_is_decode(d)) cnt = (d.n_tokens + a.rows_per_chunk - 1) / a.rows_per_chunk;
    }
    int32_t incl = cnt;  // inclusive prefix sum over the lanes
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t y = shfl_from(incl, lane >= o ? lane - o : lane);
      if (lane >= o) incl += y;
    }
    const int32_t total = shfl_from(incl, 31);
    if (tile < before + total) {
      const int32_t first = before + incl - cnt;  // this lane's first tile
      int32_t src = cnt > 0 && tile >= first && tile < first + cnt ? lane : -1;  // exactly one lane
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) src = imax(src, shfl_xor(src, o));
      *seq = i0 + src;
      *chunk = tile - shfl_from(first, src);
      return true;
    }
    before += total;
  }
  return false;
}

// ---- 1. prep ----

template <int DPL, class C>
__global__ void __launch_bounds__(kPrepThreads) attention_prep_kernel(const KernelArgs a) {
  pdl_start();  // programmatic dependent launch: nothing is touched before the previous kernel is done
  constexpr int32_t kD = 32 * DPL;
  __shared__ int32_t found;
  __shared__ float normed[kPrepWarps][kD];
  const int32_t row = static_cast<int32_t>(blockIdx.x);
  if (threadIdx.x == 0) found = -1;
  __syncthreads();
  const Bounds b{a.n_rows, a.max_seq_tokens, a.max_context};
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < a.n_seqs; i += static_cast<int32_t>(kPrepThreads)) {
    const SeqDesc d = a.seqs[i];
    if (seq_valid(d, b) && row >= d.row0 && row < d.row0 + d.n_tokens) found = i;
  }
  __syncthreads();
  const int32_t s = found;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int32_t task = static_cast<int32_t>(blockIdx.y) * kPrepWarps + warp;
  if (s < 0 || task >= a.n_heads + a.n_kv_heads) return;
  const SeqDesc d = a.seqs[s];
  const int32_t pos = d.n_past + (row - d.row0);
  const bool is_q = task < a.n_heads;
  const int32_t g = task - a.n_heads;  // kv head (when !is_q)
  const float* src = is_q ? a.qg + row * a.qg_stride + static_cast<int64_t>(task) * 2 * kD
                          : a.k + row * a.k_stride + static_cast<int64_t>(g) * kD;
  const float* w = is_q ? a.q_norm : a.k_norm;

  float x[DPL];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    x[i] = src[lane + 32 * i];
    sum_sq += x[i] * x[i];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum_sq += shfl_xor(sum_sq, o);
  const float inv = rms_inv(sum_sq, kD, a.eps);
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    x[i] = x[i] * inv * w[lane + 32 * i];
    normed[warp][lane + 32 * i] = x[i];
  }
  __syncwarp();
  const int32_t half = a.rotary_dim / 2;
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    const int32_t dim = lane + 32 * i;
    if (dim < a.rotary_dim) {
      const int32_t j = dim < half ? dim : dim - half;
      const float theta = static_cast<float>(pos) * a.inv_freq[j];
      float sn, cs;
      sincosf(theta, &sn, &cs);
      x[i] = dim < half ? rope_lo(x[i], normed[warp][dim + half], cs, sn) : rope_hi(normed[warp][j], x[i], cs, sn);
    }
  }
  if (is_q) {
    float* dst = a.q_ws + (static_cast<int64_t>(row) * a.n_heads + task) * kD;
#pragma unroll
    for (int i = 0; i < DPL; ++i) dst[lane + 32 * i] = x[i];
  } else {
    const int64_t off = cache_row(a.page_table, d.page_offset, a.page_size, pos) * a.n_kv_heads * kD +
                        static_cast<int64_t>(g) * kD;
    const float* vsrc = a.v + row * a.v_stride + static_cast<int64_t>(g) * kD;
    auto* kc = static_cast<typename C::Elem*>(a.k_cache);
    auto* vc = static_cast<typename C::Elem*>(a.v_cache);
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      kc[off + lane + 32 * i] = C::encode(x[i], a.k_scale);
      vc[off + lane + 32 * i] = C::encode(vsrc[lane + 32 * i], a.v_scale);
    }
  }
}

// ---- attend core (decode and prefill) ----

// The K and V rows (this lane's dims) of 4 consecutive keys; zeros for keys at or past `end`.
template <int DPL, class C>
struct KeyBatch {
  typename C::template Words<DPL> k[kKeysPerBatch];
  typename C::template Words<DPL> v[kKeysPerBatch];
};

// Keys j0 .. j0 + 3 (all zeros when j0 >= end): lanes 0..3 look up the cache rows (the page table read never goes
// past the sequence's pages), then every lane loads its dims of each row.
template <int DPL, class C>
__device__ __forceinline__ void load_batch(const KernelArgs& a, int32_t page_offset, int32_t j0, int32_t end,
                                           const typename C::Elem* k_base, const typename C::Elem* v_base,
                                           int64_t row_stride, int lane, KeyBatch<DPL, C>& kb) {
  int32_t crow = -1;
  if (lane < kKeysPerBatch && j0 + lane < end) {
    crow = static_cast<int32_t>(cache_row(a.page_table, page_offset, a.page_size, j0 + lane));
  }
#pragma unroll
  for (int b = 0; b < kKeysPerBatch; ++b) {
    const int32_t r = shfl_from(crow, b);
    if (r >= 0) {
      C::template load<DPL>(k_base + r * row_stride, kb.k[b]);
      C::template load<DPL>(v_base + r * row_stride, kb.v[b]);
    } else {
      C::template zero<DPL>(kb.k[b]);
      C::template zero<DPL>(kb.v[b]);
    }
  }
}

// One block's work: q vectors idx < nq are (row t0 + idx / group of the sequence, q head g * group + idx % group);
// q vector idx sees keys [key_begin, key_end) up to its own position n_past + t (causal).
struct AttendTask {
  int32_t row0;
  int32_t n_past;
  int32_t t0;
  int32_t nq;
  int32_t g;
  int32_t page_offset;
  int32_t key_begin;
  int32_t key_end;
};

// A warp's online-softmax state for its q group: m warp-uniform, l per lane until attend_warp's end (then the
// warp's total), acc lane-major (dims lane * DPL + i). attend_block starts it at (-inf, 0, 0).
template <int DPL>
struct WarpState {
  float acc[kQPerWarp][DPL];
  float m[kQPerWarp];
  float l[kQPerWarp];
};

// Scores keys j0 .. j0 + 3 (kb) against the warp's q vectors and folds them into the online softmax state.
template <int DPL, class C>
__device__ __forceinline__ void attend_batch(const KernelArgs& a, const KeyBatch<DPL, C>& kb, int32_t j0, int32_t key_end,
                                             const float (&q)[kQPerWarp][DPL], const int32_t (&lim)[kQPerWarp],
                                             int lane, WarpState<DPL>& st) {
  const bool hi16 = (lane & 16) != 0;
  const bool hi8 = (lane & 8) != 0;
  float kf[kKeysPerBatch][DPL];
#pragma unroll
  for (int b = 0; b < kKeysPerBatch; ++b) C::template to_float<DPL>(kb.k[b], kf[b]);

  const int32_t my_key = j0 + key_of_lane(lane);
  float p[kQPerWarp];
#pragma unroll
  for (int qi = 0; qi < kQPerWarp; ++qi) {
    // Unused slots (q = 0, lim = -1) run too: every score is masked, p = 0, and they are never written; without
    // per-slot branches the loop is straight-line code (no convergence bookkeeping around the shuffles).
    float part[kKeysPerBatch];
#pragma unroll
    for (int b = 0; b < kKeysPerBatch; ++b) {
      part[b] = 0.0f;
#pragma unroll
      for (int i = 0; i < DPL; ++i) part[b] += q[qi][i] * kf[b][i];
    }
    // Transposed butterfly: xor 16 halves the keys a lane carries (lanes with bit 4 keep keys 2, 3), xor 8 halves
    // them again (bit 3 keeps the odd key); xor 4, 2, 1 finish the sum. Lane l ends with key (l >> 3) & 3.
    float k0 = hi16 ? part[2] : part[0];
    float k1 = hi16 ? part[3] : part[1];
    k0 += shfl_xor(hi16 ? part[0] : part[2], 16);
    k1 += shfl_xor(hi16 ? part[1] : part[3], 16);
    float dot = hi8 ? k1 : k0;
    dot += shfl_xor(hi8 ? k0 : k1, 8);
    dot += shfl_xor(dot, 4);
    dot += shfl_xor(dot, 2);
    dot += shfl_xor(dot, 1);
    const float score = my_key <= lim[qi] && my_key < key_end ? dot * a.scale : -INFINITY;
    float batch_max = fmaxf(score, shfl_xor(score, 8));
    batch_max = fmaxf(batch_max, shfl_xor(batch_max, 16));
    if (batch_max > st.m[qi]) {  // warp-uniform; the first time m = -inf and the factor is exp(-inf) = 0
      const float c = expf(st.m[qi] - batch_max);
      st.l[qi] *= c;
#pragma unroll
      for (int i = 0; i < DPL; ++i) st.acc[qi][i] *= c;
      st.m[qi] = batch_max;
    }
    p[qi] = score == -INFINITY ? 0.0f : expf(score - st.m[qi]);
    st.l[qi] += p[qi];
  }
#pragma unroll
  for (int b = 0; b < kKeysPerBatch; ++b) {
    float vf[DPL];
    C::template to_float<DPL>(kb.v[b], vf);
#pragma unroll
    for (int qi = 0; qi < kQPerWarp; ++qi) {
      const float pb = shfl_from(p[qi], lane_of_key(b));
#pragma unroll
      for (int i = 0; i < DPL; ++i) st.acc[qi][i] += pb * vf[i];
    }
  }
}

template <int DPL, class C>
__device__ __forceinline__ void attend_warp(const KernelArgs& a, const AttendTask& task, int32_t grp, int32_t team,
                                            int32_t teams, int lane, WarpState<DPL>& st) {
  constexpr int32_t kD = 32 * DPL;
  float q[kQPerWarp][DPL];
  int32_t lim[kQPerWarp];  // last visible position of each q vector (-1: an unused slot)
  int32_t lim_max = -1;
#pragma unroll
  for (int qi = 0; qi < kQPerWarp; ++qi) {
#pragma unroll
    for (int i = 0; i < DPL; ++i) q[qi][i] = 0.0f;
    lim[qi] = -1;
    const int32_t idx = grp * kQPerWarp + qi;
    if (idx < task.nq) {
      const int32_t t = task.t0 + idx / a.group;
      const int32_t h = task.g * a.group + idx % a.group;
      load_floats<DPL>(a.q_ws + (static_cast<int64_t>(task.row0 + t) * a.n_heads + h) * kD + lane * DPL, q[qi]);
      lim[qi] = task.n_past + t;
      lim_max = imax(lim_max, lim[qi]);
    }
  }
  const int32_t key_end = imin(task.key_end, lim_max + 1);  // no key after that is visible to this warp
  const int64_t row_stride = static_cast<int64_t>(a.n_kv_heads) * kD;
  const auto* k_base = static_cast<const typename C::Elem*>(a.k_cache) + static_cast<int64_t>(task.g) * kD + lane * DPL;
  const auto* v_base = static_cast<const typename C::Elem*>(a.v_cache) + static_cast<int64_t>(task.g) * kD + lane * DPL;
  // Each iteration first issues the loads of the warp's next batch (page lookups and K/V rows), then computes the
  // current one, so a warp's memory latency overlaps its own arithmetic.
  const int32_t step = kKeysPerBatch * teams;
  KeyBatch<DPL, C> cur, next;
  int32_t j0 = task.key_begin + kKeysPerBatch * team;
  load_batch<DPL, C>(a, task.page_offset, j0, key_end, k_base, v_base, row_stride, lane, cur);
  for (; j0 < key_end; j0 += step) {
    load_batch<DPL, C>(a, task.page_offset, j0 + step, key_end, k_base, v_base, row_stride, lane, next);
    attend_batch<DPL, C>(a, cur, j0, key_end, q, lim, lane, st);
    cur = next;  // register moves (a ping-pong of two buffers saves them but needs ~18 more registers)
  }
  // Each lane summed the probabilities of its key class; add the four classes (lanes 8 and 16 apart).
#pragma unroll
  for (int qi = 0; qi < kQPerWarp; ++qi) {
    st.l[qi] += shfl_xor(st.l[qi], 8);
    st.l[qi] += shfl_xor(st.l[qi], 16);
  }
}

// Floats of merge scratch per q vector: acc (head_dim), m, l.
template <int DPL>
inline constexpr int32_t kMergeRow = 32 * DPL + 2;
// Merge scratch: the upper half of the teams write their states (at most 4 warps: teams * groups <= 8).
template <int DPL>
inline constexpr int32_t kMergeFloats = (kWarps / 2) * kQPerWarp * kMergeRow<DPL>;

// All warps of the block call this (it has __syncthreads). Warp w serves q group grp0 + w % tl.groups as team
// w / tl.groups; returns true in the warps that hold final states (team 0), with their q group in *grp.
template <int DPL, class C>
__device__ __forceinline__ bool attend_block(const KernelArgs& a, const AttendTask& task, TeamLayout tl, int32_t grp0,
                                             float* merge, WarpState<DPL>& st, int32_t* grp) {
  constexpr int32_t kD = 32 * DPL;
  constexpr int32_t kRow = kMergeRow<DPL>;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int32_t local = warp % tl.groups;  // the group's place in the merge scratch
  *grp = grp0 + local;
  const int32_t team = warp / tl.groups;
  const bool active = team < tl.teams;
#pragma unroll
  for (int qi = 0; qi < kQPerWarp; ++qi) {
    st.m[qi] = -INFINITY;  // the state of no key seen
    st.l[qi] = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) st.acc[qi][i] = 0.0f;
  }
  if (active) attend_warp<DPL, C>(a, task, *grp, team, tl.teams, lane, st);
  // Tree merge: round `stride` folds team t + stride into team t (t < stride), so team 0 ends with
  // ((0+4) + (2+6)) + ((1+5) + (3+7)) at 8 teams.
  for (int32_t stride = tl.teams / 2; stride >= 1; stride /= 2) {
    if (active && team >= stride && team < 2 * stride) {
      float* slot = merge + ((team - stride) * tl.groups + local) * kQPerWarp * kRow;
#pragma unroll
      for (int qi = 0; qi < kQPerWarp; ++qi) {
#pragma unroll
        for (int i = 0; i < DPL; ++i) slot[qi * kRow + lane * DPL + i] = st.acc[qi][i];
        if (lane == 0) {
          slot[qi * kRow + kD] = st.m[qi];
          slot[qi * kRow + kD + 1] = st.l[qi];
        }
      }
    }
    __syncthreads();
    if (active && team < stride) {
      const float* slot = merge + (team * tl.groups + local) * kQPerWarp * kRow;
#pragma unroll
      for (int qi = 0; qi < kQPerWarp; ++qi) {
        const MergeScales ms = merge_scales(st.m[qi], slot[qi * kRow + kD]);
        st.l[qi] = st.l[qi] * ms.c1 + slot[qi * kRow + kD + 1] * ms.c2;
#pragma unroll
        for (int i = 0; i < DPL; ++i) st.acc[qi][i] = st.acc[qi][i] * ms.c1 + slot[qi * kRow + lane * DPL + i] * ms.c2;
        st.m[qi] = ms.m;
      }
    }
    __syncthreads();
  }
  return active && team == 0;
}

// out[row, h * head_dim + dims] = acc / l * sigmoid(gate), the gate being q_proj's raw second half of head h.
template <int DPL>
__device__ __forceinline__ void write_output(const KernelArgs& a, int64_t row, int32_t h, int lane,
                                             const float (&acc)[DPL], float l) {
  constexpr int32_t kD = 32 * DPL;
  const float* gate = a.qg + row * a.qg_stride + static_cast<int64_t>(h) * 2 * kD + kD + lane * DPL;
  const int64_t o = row * a.out_stride + static_cast<int64_t>(h) * kD + lane * DPL;
  const float inv_l = a.v_mul / l;  // v_mul: the V cache's dequantization factor (1 for fp16)
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    const float y = acc[i] * inv_l * sigmoid(gate[i]);
    if (a.out_f16 != 0) {
      static_cast<uint16_t*>(a.out)[o + i] = float_to_half_bits(y);
    } else {
      static_cast<float*>(a.out)[o + i] = y;
    }
  }
}

// ---- 2. decode ----

template <int DPL, class C>
__global__ void __launch_bounds__(kAttendThreads, 1) attention_decode_split_kernel(const KernelArgs a) {
  pdl_start();
  constexpr int32_t kD = 32 * DPL;
  __shared__ float merge[kMergeFloats<DPL>];
  const int32_t split = static_cast<int32_t>(blockIdx.x) % a.splits;
  const int32_t gi = static_cast<int32_t>(blockIdx.x) / a.splits;  // q group
  const int32_t g = static_cast<int32_t>(blockIdx.y);
  const int32_t s = static_cast<int32_t>(blockIdx.z);
  const Bounds b{a.n_rows, a.max_seq_tokens, a.max_context};
  const SeqDesc d = a.seqs[s];
  if (!seq_valid(d, b) || !seq_is_decode(d)) return;
  const int32_t ctx = d.n_past + d.n_tokens;
  const SplitPlan sp = split_plan(ctx);
  if (split >= sp.count) return;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int32_t base = decode_slot_base(a, s, b, lane);
  if (base > a.slots - d.n_tokens) return;  // only when seqs overlap rows (the slots are sized by n_rows)
  AttendTask task;
  task.row0 = d.row0;
  task.n_past = d.n_past;
  task.t0 = 0;
  task.nq = d.n_tokens * a.group;
  task.g = g;
  task.page_offset = d.page_offset;
  task.key_begin = split * sp.len;
  task.key_end = imin(task.key_begin + sp.len, ctx);
  // One q group (a row's 6 q heads at group 6) per block, by all 8 warps as teams: the same block structure whatever
  // the row count, so a verify row's result equals plain decoding's bit for bit, and a verify's groups run side by
  // side (blocks of one split read its K/V rows from DRAM once, the others mostly from L2).
  const int32_t groups = (task.nq + kQPerWarp - 1) / kQPerWarp;
  if (gi >= groups) return;
  WarpState<DPL> st;
  int32_t grp = 0;
  if (!attend_block<DPL, C>(a, task, TeamLayout{1, kWarps}, gi, merge, st, &grp)) return;
#pragma unroll
  for (int qi = 0; qi < kQPerWarp; ++qi) {
    const int32_t idx = grp * kQPerWarp + qi;
    if (idx >= task.nq) continue;
    const int32_t t = idx / a.group;
    const int32_t h = g * a.group + idx % a.group;
    const int64_t part = (static_cast<int64_t>(base + t) * a.splits + split) * a.n_heads + h;
    store_floats<DPL>(a.part_acc + part * kD + lane * DPL, st.acc[qi]);
    if (lane == 0) {
      a.part_ml[2 * part] = st.m[qi];
      a.part_ml[2 * part + 1] = st.l[qi];
    }
  }
}

// ---- 3. combine ----

template <int DPL>
__global__ void __launch_bounds__(kCombineThreads, 1) attention_combine_kernel(const KernelArgs a) {
  pdl_start();
  constexpr int32_t kD = 32 * DPL;
  static_assert(kMaxSplits <= 32, "one split per lane");
  const int32_t s = static_cast<int32_t>(blockIdx.x);
  const int32_t t = static_cast<int32_t>(blockIdx.y);
  const Bounds b{a.n_rows, a.max_seq_tokens, a.max_context};
  const SeqDesc d = a.seqs[s];
  if (!seq_valid(d, b) || !seq_is_decode(d) || t >= d.n_tokens) return;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int32_t base = decode_slot_base(a, s, b, lane);
  if (base > a.slots - d.n_tokens) return;
  const SplitPlan sp = split_plan(d.n_past + d.n_tokens);
  const int64_t row = static_cast<int64_t>(d.row0) + t;
  for (int32_t h = warp; h < a.n_heads; h += kWarps) {
    const int64_t part0 = static_cast<int64_t>(base + t) * a.splits * a.n_heads + h;  // split i: + i * n_heads
    float m = -INFINITY;
    float l = 0.0f;
    if (lane < sp.count) {
      const int64_t pi = part0 + static_cast<int64_t>(lane) * a.n_heads;
      m = a.part_ml[2 * pi];
      l = a.part_ml[2 * pi + 1];
    }
    float m_all = m;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m_all = fmaxf(m_all, shfl_xor(m_all, o));
    // Split 0 holds position 0, visible to every row: m_all is finite and l_all > 0.
    const float w = m == -INFINITY ? 0.0f : expf(m - m_all);
    float l_all = w * l;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l_all += shfl_xor(l_all, o);
    float o_acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) o_acc[i] = 0.0f;
    for (int32_t i = 0; i < sp.count; ++i) {
      const float wi = shfl_from(w, i);
      if (wi == 0.0f) continue;  // a split with no visible key (or a negligible one): adds exactly nothing
      float part[DPL];
      load_floats<DPL>(a.part_acc + (part0 + static_cast<int64_t>(i) * a.n_heads) * kD + lane * DPL, part);
#pragma unroll
      for (int k = 0; k < DPL; ++k) o_acc[k] += wi * part[k];
    }
    write_output<DPL>(a, row, h, lane, o_acc, l_all);
  }
}

// ---- 4. prefill ----

template <int DPL, class C>
__global__ void __launch_bounds__(kAttendThreads, 1) attention_prefill_kernel(const KernelArgs a) {
  pdl_start();
  __shared__ float merge[kMergeFloats<DPL>];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  int32_t s = 0;
  int32_t chunk = 0;
  if (!find_prefill_tile(a, static_cast<int32_t>(blockIdx.x), lane, &s, &chunk)) return;
  const SeqDesc d = a.seqs[s];
  const int32_t g = static_cast<int32_t>(blockIdx.y);
  const int32_t t0 = chunk * a.rows_per_chunk;
  const int32_t rows = imin(a.rows_per_chunk, d.n_tokens - t0);
  AttendTask task;
  task.row0 = d.row0;
  task.n_past = d.n_past;
  task.t0 = t0;
  task.nq = rows * a.group;
  task.g = g;
  task.page_offset = d.page_offset;
  task.key_begin = 0;
  task.key_end = d.n_past + t0 + rows;  // one past the tile's last position
  WarpState<DPL> st;
  int32_t grp = 0;
  if (!attend_block<DPL, C>(a, task, team_layout(task.nq), 0, merge, st, &grp)) return;
#pragma unroll
  for (int qi = 0; qi < kQPerWarp; ++qi) {
    const int32_t idx = grp * kQPerWarp + qi;
    if (idx >= task.nq) continue;
    const int32_t t = t0 + idx / a.group;
    const int32_t h = g * a.group + idx % a.group;
    // Position 0 is visible to every row: l > 0.
    write_output<DPL>(a, static_cast<int64_t>(d.row0) + t, h, lane, st.acc[qi], st.l[qi]);
  }
}

}  // namespace voltserve::kernels::attention::detail
