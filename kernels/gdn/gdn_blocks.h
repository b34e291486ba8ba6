// The Gated DeltaNet kernels' bodies, one function per kernel and thread block, written against a small context
// (Ctx: tid, nthreads, sync(), shfl_xor(), shfl(), store_f16()) so that the same code runs as CUDA kernels
// (gdn.cu: __syncthreads, warp shuffles) and on the CPU (tests/kernels/gdn_emulator.h: one fiber per CUDA thread,
// barriers for the syncs and shuffles), where it is tested against gdn_ref.cpp. CUDA-free (VS_HD).
//
// Pipeline of one gdn_forward (ForwardPlan, gdn_plan.h), fp32 throughout:
//   conv_block        causal conv + SiLU, L2 norms, beta, g           -> workspace conv / beta / g; conv state
//   recurrent_block   token by token, state in registers, gated norm  -> out; recurrent state (+ checkpoints)
//   chunk_prep_block  per chunk of 64: gam, A, forward substitution   -> workspace gam / W / U / Qe / P
//   state_pass_block  per (head, 16 / 32 value columns): chunks in order -> workspace P := o; recurrent state
//   chunked_norm_block gated norm of the chunked rows                  -> out
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "gdn/gdn_math.h"
#include "gdn/gdn_plan.h"

namespace voltserve::kernels::gdn {

struct alignas(8) F2 {
  float x, y;
};
struct alignas(16) F4 {
  float x, y, z, w;
};

template <class Ctx>
VS_HD float warp_allsum(Ctx& ctx, float v) {
  for (int m = 16; m >= 1; m /= 2) v += ctx.shfl_xor(v, m);
  return v;
}

template <class Ctx>
VS_HD void store_out(Ctx& ctx, const KernelArgs& a, int64_t idx, float v) {
  if (a.out_f16) {
    ctx.store_f16(static_cast<uint16_t*>(a.out) + idx, v);
  } else {
    static_cast<float*>(a.out)[idx] = v;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// conv_block: block (head h of the 2 n_k + n_v conv heads [q heads | k heads | v heads], token tile, sequence),
// kConvThreads threads, thread = one channel of the head (threads >= the head width idle). Each thread keeps its
// channel's K-1+16 inputs and K taps in registers. The L2 norm of a q / k head is a block reduction per token.
// The conv state of a channel is read and advanced only by its tile-0 block, and by the same thread, so no other
// block can see it half-written: the new state (the last K-1 inputs of [old state | segment]) and the checkpoints
// are read from the old state and from qkv, never from this kernel's outputs.
constexpr int32_t kConvThreads = 128;
constexpr int32_t kConvTokens = 16;  // tokens per block (>= kMaxConvTaps - 1: only tile 0 reads the conv state)
constexpr int32_t kConvSmemFloats = kConvTokens * (kConvThreads / 32);  // per-token, per-warp partial sums
static_assert(kConvTokens >= kMaxConvTaps - 1, "a tile other than tile 0 must not reach back into the conv state");
static_assert(kConvThreads >= kMaxHeadDim, "one thread per channel of a head");

template <class Ctx>
VS_HD void conv_block(Ctx& ctx, const KernelArgs& a, int32_t head, int32_t tile, int32_t seq_index, float* smem) {
  const SeqDesc s = a.seqs[seq_index];
  const int32_t T = seq_tokens(s, a.n_rows, a.max_seq_tokens);
  const int32_t t0 = tile * kConvTokens;
  if (t0 >= T) return;  // uniform over the block
  const int32_t n_here = imin(kConvTokens, T - t0);
  const int32_t dk = a.head_k_dim, dv = a.head_v_dim;
  int32_t kind, base, width;  // kind 0: q head, 1: k head, 2: v head
  if (head < a.n_k_heads) {
    kind = 0, base = head * dk, width = dk;
  } else if (head < 2 * a.n_k_heads) {
    kind = 1, base = a.n_k_heads * dk + (head - a.n_k_heads) * dk, width = dk;
  } else {
    kind = 2, base = 2 * a.n_k_heads * dk + (head - 2 * a.n_k_heads) * dv, width = dv;
  }
  const int32_t cl = ctx.tid;
  const bool active = cl < width;
  const int32_t c = base + cl;  // channel
  const int32_t K = a.conv_kernel;
  const int32_t hist = K - 1;
  float* state_c = a.conv_state + static_cast<int64_t>(s.slot) * a.conv_width + static_cast<int64_t>(c) * hist;
  const float* x_c = a.qkv + static_cast<int64_t>(s.row0) * a.qkv_stride + c;  // token t at t * qkv_stride

  float w[kMaxConvTaps];
  GDN_UNROLL
  for (int32_t tap = 0; tap < kMaxConvTaps; ++tap) {
    w[tap] = active && tap < K ? a.conv_w[static_cast<int64_t>(c) * K + tap] : 0.0f;
  }
  // win[i] is the input of token t0 + i - (K-1): the old conv state (oldest first) for negative tokens.
  float win[kConvTokens + kMaxConvTaps - 1];
  GDN_UNROLL
  for (int32_t i = 0; i < kConvTokens + kMaxConvTaps - 1; ++i) {
    const int32_t t = t0 + i - hist;
    float x = 0.0f;
    if (active && i < kConvTokens + hist) {
      if (t < 0) {
        x = state_c[t + hist];
      } else if (t < T) {
        x = x_c[static_cast<int64_t>(t) * a.qkv_stride];
      }
    }
    win[i] = x;
  }
  float y[kConvTokens];
  GDN_UNROLL
  for (int32_t tt = 0; tt < kConvTokens; ++tt) {
    float acc = 0.0f;
    GDN_UNROLL
    for (int32_t tap = 0; tap < kMaxConvTaps; ++tap) {
      if (tap < K) acc += w[tap] * win[tt + tap];
    }
    y[tt] = silu(acc);
  }

  float mul[kConvTokens];
  GDN_UNROLL
  for (int32_t tt = 0; tt < kConvTokens; ++tt) mul[tt] = 1.0f;
  if (kind != 2) {  // uniform over the block: L2 norm per token over the head's channels
    const int32_t n_warps = ctx.nthreads / 32;
    const int32_t warp = ctx.tid / 32, lane = ctx.tid % 32;
    GDN_UNROLL
    for (int32_t tt = 0; tt < kConvTokens; ++tt) {
      const float part = warp_allsum(ctx, active && tt < n_here ? y[tt] * y[tt] : 0.0f);
      if (lane == 0) smem[tt * n_warps + warp] = part;
    }
    ctx.sync();
    const float scale = kind == 0 ? a.q_scale : 1.0f;
    GDN_UNROLL
    for (int32_t tt = 0; tt < kConvTokens; ++tt) {
      float sum_sq = 0.0f;
      for (int32_t wi = 0; wi < n_warps; ++wi) sum_sq += smem[tt * n_warps + wi];
      mul[tt] = l2_inv(sum_sq) * scale;
    }
  }
  if (active) {
    GDN_UNROLL
    for (int32_t tt = 0; tt < kConvTokens; ++tt) {
      if (tt < n_here) a.ws_conv[static_cast<int64_t>(s.row0 + t0 + tt) * a.conv_dim + c] = y[tt] * mul[tt];
    }
  }

  if (tile == 0 && active) {
    // Checkpoint t holds the K-1 inputs ending at token t; then the state advances to those ending at T-1. Both
    // read the old state before this thread overwrites it (it is the only one that touches channel c's state).
    if (seq_has_ckpt(s, a.ckpt_enabled)) {
      const int64_t ck_row0 = static_cast<int64_t>(s.ckpt) * a.max_ckpt_tokens;
      const int32_t n_ck = imin(T, a.max_ckpt_tokens);
      for (int32_t t = 0; t < n_ck; ++t) {
        float* dst = a.conv_ckpt + (ck_row0 + t) * a.conv_width + static_cast<int64_t>(c) * hist;
        for (int32_t tap = 0; tap < hist; ++tap) {
          const int32_t u = t + 1 + tap - hist;
          dst[tap] = u < 0 ? state_c[u + hist] : x_c[static_cast<int64_t>(u) * a.qkv_stride];
        }
      }
    }
    float next[kMaxConvTaps - 1];
    GDN_UNROLL
    for (int32_t tap = 0; tap < kMaxConvTaps - 1; ++tap) {
      const int32_t u = T + tap - hist;
      next[tap] = tap >= hist ? 0.0f : (u < 0 ? state_c[u + hist] : x_c[static_cast<int64_t>(u) * a.qkv_stride]);
    }
    GDN_UNROLL
    for (int32_t tap = 0; tap < kMaxConvTaps - 1; ++tap) {
      if (tap < hist) state_c[tap] = next[tap];
    }
  }

  if (head == 0) {  // beta and g of every v-head for this tile's tokens
    for (int32_t idx = ctx.tid; idx < n_here * a.n_v_heads; idx += ctx.nthreads) {
      const int32_t tt = idx / a.n_v_heads, j = idx % a.n_v_heads;
      const int64_t row = s.row0 + t0 + tt;
      a.ws_beta[row * a.n_v_heads + j] = sigmoid(a.b[row * a.b_stride + j]);
      a.ws_g[row * a.n_v_heads + j] = log_decay(a.a_log[j], a.a[row * a.a_stride + j], a.dt_bias[j]);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// delta_step: one token of the gated delta rule (MODEL.md §2.6) for one warp's 8 value columns e0..e0+7.
// Lane l holds st[i][c] = S[l + 32 i][e0 + c] (rows >= head_k_dim are zero), k[i] / q[i] the token's k / q at row
// l + 32 i, and v_c = v[e0 + ((l >> 1) & 7)]. With S' = decay * S and u = S'^T k:
//   delta = beta (v - u);  S = S' + k delta^T;  o = S^T q = S'^T q + delta (k . q)
// so u, S'^T q and k . q come from one pass over the registers and one reduction: the 16 partial sums (u for 8
// columns, S'^T q for 8) are reduce-scattered over the 32 lanes (lane l ends with slot l >> 1: lanes 0..15 hold
// u[(l >> 1)], lanes 16..31 hold (S'^T q)[(l - 16) >> 1]), then delta is broadcast back.
// Returns o[e0 + ((l - 16) >> 1)] on lanes 16..31 (garbage on lanes 0..15).
template <class Ctx>
VS_HD float reduce_scatter16(Ctx& ctx, const float (&p)[16]) {
  const int32_t lane = ctx.tid & 31;
  float h8[8], h4[4], h2[2];
  const bool up16 = (lane & 16) != 0;
  GDN_UNROLL
  for (int32_t s = 0; s < 8; ++s) {
    const float send = up16 ? p[s] : p[s + 8];
    const float keep = up16 ? p[s + 8] : p[s];
    h8[s] = keep + ctx.shfl_xor(send, 16);
  }
  const bool up8 = (lane & 8) != 0;
  GDN_UNROLL
  for (int32_t s = 0; s < 4; ++s) {
    const float send = up8 ? h8[s] : h8[s + 4];
    const float keep = up8 ? h8[s + 4] : h8[s];
    h4[s] = keep + ctx.shfl_xor(send, 8);
  }
  const bool up4 = (lane & 4) != 0;
  GDN_UNROLL
  for (int32_t s = 0; s < 2; ++s) {
    const float send = up4 ? h4[s] : h4[s + 2];
    const float keep = up4 ? h4[s + 2] : h4[s];
    h2[s] = keep + ctx.shfl_xor(send, 4);
  }
  const bool up2 = (lane & 2) != 0;
  float h1 = (up2 ? h2[1] : h2[0]) + ctx.shfl_xor(up2 ? h2[0] : h2[1], 2);
  h1 += ctx.shfl_xor(h1, 1);
  return h1;
}

template <class Ctx>
VS_HD float delta_step(Ctx& ctx, float (&st)[4][8], const float (&k)[4], const float (&q)[4], float decay, float beta,
                       float v_c) {
  float p[16];
  float kq = 0.0f;
  GDN_UNROLL
  for (int32_t c = 0; c < 8; ++c) p[c] = p[8 + c] = 0.0f;
  GDN_UNROLL
  for (int32_t i = 0; i < 4; ++i) {
    kq += k[i] * q[i];
    GDN_UNROLL
    for (int32_t c = 0; c < 8; ++c) {
      st[i][c] *= decay;
      p[c] += st[i][c] * k[i];
      p[8 + c] += st[i][c] * q[i];
    }
  }
  kq = warp_allsum(ctx, kq);
  const float sum = reduce_scatter16(ctx, p);
  const int32_t lane = ctx.tid & 31;
  const float delta_mine = lane < 16 ? beta * (v_c - sum) : 0.0f;  // delta[(lane >> 1)] on lanes 0..15
  const float o = sum + ctx.shfl_xor(delta_mine, 16) * kq;         // lanes 16..31: S'^T q + delta (k . q)
  float delta[8];
  GDN_UNROLL
  for (int32_t c = 0; c < 8; ++c) delta[c] = ctx.shfl(delta_mine, 2 * c);
  GDN_UNROLL
  for (int32_t i = 0; i < 4; ++i) {
    GDN_UNROLL
    for (int32_t c = 0; c < 8; ++c) st[i][c] += k[i] * delta[c];
  }
  return o;
}

// ---------------------------------------------------------------------------------------------------------------
// recurrent_block: block (v-head j, sequence) for sequences that run token by token; head_v_dim / 8 warps (4 *
// head_v_dim threads). Warp w owns value columns 8w..8w+7 of S_j, lane l rows l, l+32, l+64, l+96: the head's
// 64 KiB state (at 128 x 128) is read from the slot once into registers (each thread 32 floats), updated over all
// the segment's tokens and written back once; a checkpointed sequence also writes it after every token. Warps are
// independent inside the token loop (delta_step needs only shuffles); block syncs only stage kRecTokens tokens of
// q / k / v / z / beta / decay in shared memory and close each tile with the fused gated RMSNorm epilogue.
//
//   shared memory (floats), kRecTokens = 16 rows each:
//   q_s [16][dk] | k_s [16][dk] | v_s [16][dv] | z_s [16][dv] | o_s [16][dv] | beta_s [16] | decay_s [16]
constexpr int32_t kRecTokens = 16;

VS_HD int64_t recurrent_smem_floats(int32_t dk, int32_t dv) { return int64_t{kRecTokens} * (2 * dk + 3 * dv + 2); }

template <class Ctx>
VS_HD void recurrent_block(Ctx& ctx, const KernelArgs& a, int32_t j, int32_t seq_index, float* smem) {
  const SeqDesc s = a.seqs[seq_index];
  const int32_t T = seq_tokens(s, a.n_rows, a.max_seq_tokens);
  const bool ckpt = seq_has_ckpt(s, a.ckpt_enabled);
  if (T == 0 || seq_chunked(a.mode, T, ckpt)) {  // uniform over the block
    ctx.dep_wait();  // every block waits (pdl.cuh): the kernel must not complete before the previous one
    return;
  }
  const int32_t dk = a.head_k_dim, dv = a.head_v_dim, nv = a.n_v_heads;
  const int32_t kh = j / a.ratio;
  const int32_t lane = ctx.tid & 31, warp = ctx.tid >> 5, n_warps = ctx.nthreads >> 5;
  const int32_t e0 = warp * 8;
  const int32_t my_col = e0 + ((lane >> 1) & 7);
  const int64_t head_state = int64_t{dk} * dv;
  const int64_t state_size = head_state * nv;
  float* S = a.rec_state + static_cast<int64_t>(s.slot) * state_size + j * head_state;
  float* q_s = smem;
  float* k_s = q_s + kRecTokens * dk;
  float* v_s = k_s + kRecTokens * dk;
  float* z_s = v_s + kRecTokens * dv;
  float* o_s = z_s + kRecTokens * dv;
  float* beta_s = o_s + kRecTokens * dv;
  float* decay_s = beta_s + kRecTokens;

  float st[4][8];
  GDN_UNROLL
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t d = lane + 32 * i;
    F4 lo{0.0f, 0.0f, 0.0f, 0.0f}, hi{0.0f, 0.0f, 0.0f, 0.0f};
    if (d < dk) {
      lo = *reinterpret_cast<const F4*>(S + d * dv + e0);
      hi = *reinterpret_cast<const F4*>(S + d * dv + e0 + 4);
    }
    st[i][0] = lo.x, st[i][1] = lo.y, st[i][2] = lo.z, st[i][3] = lo.w;
    st[i][4] = hi.x, st[i][5] = hi.y, st[i][6] = hi.z, st[i][7] = hi.w;
  }
  // Only this layer's recurrent kernel writes its state, so the load above may overlap the previous kernel (the
  // conv, under programmatic dependent launch); its outputs (ws_conv, beta, g) are read only after this wait.
  ctx.dep_wait();
  const int64_t ck_row0 = ckpt ? static_cast<int64_t>(s.ckpt) * a.max_ckpt_tokens : 0;

  for (int32_t t0 = 0; t0 < T; t0 += kRecTokens) {
    const int32_t n = imin(kRecTokens, T - t0);
    for (int32_t idx = ctx.tid; idx < kRecTokens * dk; idx += ctx.nthreads) {
      const int32_t tt = idx / dk, d = idx % dk;
      const float* row = a.ws_conv + static_cast<int64_t>(s.row0 + t0 + tt) * a.conv_dim;
      q_s[idx] = tt < n ? row[kh * dk + d] : 0.0f;
      k_s[idx] = tt < n ? row[(a.n_k_heads + kh) * dk + d] : 0.0f;
    }
    for (int32_t idx = ctx.tid; idx < kRecTokens * dv; idx += ctx.nthreads) {
      const int32_t tt = idx / dv, e = idx % dv;
      const int64_t r = s.row0 + t0 + tt;
      v_s[idx] = tt < n ? a.ws_conv[r * a.conv_dim + 2 * a.n_k_heads * dk + static_cast<int64_t>(j) * dv + e] : 0.0f;
      z_s[idx] = tt < n ? a.z[r * a.z_stride + static_cast<int64_t>(j) * dv + e] : 0.0f;
    }
    for (int32_t tt = ctx.tid; tt < kRecTokens; tt += ctx.nthreads) {
      const int64_t r = s.row0 + t0 + tt;
      beta_s[tt] = tt < n ? a.ws_beta[r * nv + j] : 0.0f;
      decay_s[tt] = tt < n ? expf(a.ws_g[r * nv + j]) : 1.0f;
    }
    ctx.sync();

    for (int32_t tt = 0; tt < n; ++tt) {
      float k[4], q[4];
      GDN_UNROLL
      for (int32_t i = 0; i < 4; ++i) {
        const int32_t d = lane + 32 * i;
        k[i] = d < dk ? k_s[tt * dk + d] : 0.0f;
        q[i] = d < dk ? q_s[tt * dk + d] : 0.0f;
      }
      const float o = delta_step(ctx, st, k, q, decay_s[tt], beta_s[tt], v_s[tt * dv + my_col]);
      if (lane >= 16 && (lane & 1) == 0) o_s[tt * dv + my_col] = o;
      if (ckpt && t0 + tt < a.max_ckpt_tokens) {
        float* C = a.rec_ckpt + (ck_row0 + t0 + tt) * state_size + j * head_state;
        GDN_UNROLL
        for (int32_t i = 0; i < 4; ++i) {
          const int32_t d = lane + 32 * i;
          if (d < dk) {
            *reinterpret_cast<F4*>(C + ckpt_offset(dk, dv, d, e0)) = F4{st[i][0], st[i][1], st[i][2], st[i][3]};
            *reinterpret_cast<F4*>(C + ckpt_offset(dk, dv, d, e0 + 4)) = F4{st[i][4], st[i][5], st[i][6], st[i][7]};
          }
        }
      }
    }
    ctx.sync();  // o_s complete

    // Gated RMSNorm over the head's dv outputs of each token: one warp per token.
    for (int32_t tt = warp; tt < n; tt += n_warps) {
      float sum_sq = 0.0f;
      for (int32_t e = lane; e < dv; e += 32) sum_sq += o_s[tt * dv + e] * o_s[tt * dv + e];
      const float inv = rms_inv(warp_allsum(ctx, sum_sq), dv, a.rms_norm_eps);
      const int64_t out_row = static_cast<int64_t>(s.row0 + t0 + tt) * a.out_stride + static_cast<int64_t>(j) * dv;
      for (int32_t e = lane; e < dv; e += 32) {
        store_out(ctx, a, out_row + e, gated_norm(o_s[tt * dv + e], inv, a.norm_weight[e], z_s[tt * dv + e]));
      }
    }
    ctx.sync();  // the next tile restages the buffers
  }

  GDN_UNROLL
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t d = lane + 32 * i;
    if (d < dk) {
      *reinterpret_cast<F4*>(S + d * dv + e0) = F4{st[i][0], st[i][1], st[i][2], st[i][3]};
      *reinterpret_cast<F4*>(S + d * dv + e0 + 4) = F4{st[i][4], st[i][5], st[i][6], st[i][7]};
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// chunk_prep_block: block (chunk, v-head j, sequence) of a chunked sequence, kPrepThreads threads; everything that
// does not depend on the entering state, for the chunk's L <= 64 tokens (gam, beta, k, q, v of head j):
//   gam = cumsum(g)                         one thread, in order (the reference's sum)
//   A_it   = beta_i (k_i . k_t) e^(gam_i - gam_t), t < i      (strictly lower)
//   Aqk_it = (q_i . k_t) e^(gam_i - gam_t),        t <= i     (lower with the diagonal)
//   (I + A) U = beta V,  (I + A) W = beta e^gam K               forward substitution, one thread per column
//   P = Aqk U,  Qe = e^gam Q - Aqk W
// so that the state pass can form O = e^gam Q S + Aqk (U - W S) as P + Qe S (the same sum, grouped so that the
// sequential pass needs no 64 x 64 product). A and Aqk come from 4 x 4 register tiles (thread (ti, tt) owns rows
// 4ti.., columns 4tt..) over K and Q staged transposed in 64-row slices of head_k_dim; the column threads keep their
// 64-entry column in registers (fully unrolled loops) and read A / Aqk rows as broadcasts.
//
//   shared memory (floats): region [2][64][68]: Kt | Qt ([d][token], one 64-row slice of head_k_dim) while A and
//   Aqk are accumulated, then A | Aqk ([token i][token t]); gam_s [64]; beta_s [64]
constexpr int32_t kPrepThreads = 256;  // >= head_k_dim + head_v_dim column threads
constexpr int32_t kPrepStride = 68;    // row stride of the 64 x 64 tiles: 16-byte rows for float4 reads
constexpr int32_t kPrepSmemFloats = 2 * 64 * kPrepStride + 2 * 64;

template <class Ctx>
VS_HD void chunk_prep_block(Ctx& ctx, const KernelArgs& a, int32_t chunk, int32_t j, int32_t seq_index, float* smem) {
  const SeqDesc s = a.seqs[seq_index];
  const int32_t T = seq_tokens(s, a.n_rows, a.max_seq_tokens);
  if (T == 0 || !seq_chunked(a.mode, T, seq_has_ckpt(s, a.ckpt_enabled))) return;
  const int32_t c0 = chunk * kChunkTokens;
  if (c0 >= T) return;
  const int32_t L = imin(kChunkTokens, T - c0);
  const int32_t dk = a.head_k_dim, dv = a.head_v_dim, nv = a.n_v_heads;
  const int32_t kh = j / a.ratio;
  const int64_t row_c = s.row0 + c0;  // the chunk's first row
  const int64_t q_off = int64_t{kh} * dk, k_off = int64_t{a.n_k_heads + kh} * dk;
  const int64_t v_off = 2 * int64_t{a.n_k_heads} * dk + int64_t{j} * dv;
  float* Kt = smem;
  float* Qt = smem + 64 * kPrepStride;
  float* A = smem;
  float* Aqk = smem + 64 * kPrepStride;
  float* gam_s = smem + 2 * 64 * kPrepStride;
  float* beta_s = gam_s + 64;
  const int32_t tid = ctx.tid;

  if (tid < 64) {
    gam_s[tid] = tid < L ? a.ws_g[(row_c + tid) * nv + j] : 0.0f;
    beta_s[tid] = tid < L ? a.ws_beta[(row_c + tid) * nv + j] : 0.0f;
  }
  ctx.sync();
  if (tid == 0) {
    float acc = 0.0f;
    for (int32_t i = 0; i < 64; ++i) {
      acc += gam_s[i];
      gam_s[i] = acc;
      if (i < L) a.ws_gam[(row_c + i) * nv + j] = acc;
    }
  }

  const int32_t ti = tid >> 4, tt = tid & 15;
  float akk[4][4], aqk[4][4];
  GDN_UNROLL
  for (int32_t r = 0; r < 4; ++r) {
    GDN_UNROLL
    for (int32_t c = 0; c < 4; ++c) akk[r][c] = aqk[r][c] = 0.0f;
  }
  for (int32_t d0 = 0; d0 < dk; d0 += 64) {
    const int32_t ds = imin(64, dk - d0);
    for (int32_t idx = tid; idx < 64 * 64; idx += ctx.nthreads) {
      const int32_t i = idx >> 6, dd = idx & 63;
      const bool valid = i < L && dd < ds;
      const float* row = a.ws_conv + (row_c + i) * a.conv_dim + d0 + dd;
      Kt[dd * kPrepStride + i] = valid ? row[k_off] : 0.0f;
      Qt[dd * kPrepStride + i] = valid ? row[q_off] : 0.0f;
    }
    ctx.sync();
    for (int32_t dd = 0; dd < ds; ++dd) {
      const F4 ak = *reinterpret_cast<const F4*>(Kt + dd * kPrepStride + 4 * ti);
      const F4 aq = *reinterpret_cast<const F4*>(Qt + dd * kPrepStride + 4 * ti);
      const F4 b = *reinterpret_cast<const F4*>(Kt + dd * kPrepStride + 4 * tt);
      const float ka[4] = {ak.x, ak.y, ak.z, ak.w}, qa[4] = {aq.x, aq.y, aq.z, aq.w}, kb[4] = {b.x, b.y, b.z, b.w};
      GDN_UNROLL
      for (int32_t r = 0; r < 4; ++r) {
        GDN_UNROLL
        for (int32_t c = 0; c < 4; ++c) {
          akk[r][c] += ka[r] * kb[c];
          aqk[r][c] += qa[r] * kb[c];
        }
      }
    }
    ctx.sync();  // Kt / Qt reads done: the region is restaged or becomes A / Aqk
  }
  GDN_UNROLL
  for (int32_t r = 0; r < 4; ++r) {
    const int32_t i = 4 * ti + r;
    GDN_UNROLL
    for (int32_t c = 0; c < 4; ++c) {
      const int32_t t = 4 * tt + c;
      // exp only where t <= i: above the diagonal gam_i - gam_t > 0 could overflow.
      A[i * kPrepStride + t] = t < i && i < L ? beta_s[i] * akk[r][c] * expf(gam_s[i] - gam_s[t]) : 0.0f;
      Aqk[i * kPrepStride + t] = t <= i && i < L ? aqk[r][c] * expf(gam_s[i] - gam_s[t]) : 0.0f;
    }
  }
  ctx.sync();

  const bool is_u = tid < dv;
  const bool is_w = !is_u && tid < dv + dk;
  if (!is_u && !is_w) return;                 // no syncs follow
  const int32_t col = is_u ? tid : tid - dv;  // value column e (U, P) or key column d (W, Qe)
  float x[64];
  GDN_UNROLL
  for (int32_t i = 0; i < 64; ++i) {
    x[i] = 0.0f;
    if (i < L) {
      const float* row = a.ws_conv + (row_c + i) * a.conv_dim;
      x[i] = is_u ? beta_s[i] * row[v_off + col] : beta_s[i] * expf(gam_s[i]) * row[k_off + col];
    }
  }
  // x_i -= sum_{t < i} A_it x_t, t ascending (the reference's order); A rows are read as float4 broadcasts.
  GDN_UNROLL
  for (int32_t i = 1; i < 64; ++i) {
    float acc = x[i];
    GDN_UNROLL
    for (int32_t t4 = 0; t4 < 16; ++t4) {
      if (4 * t4 < i) {
        const F4 r = *reinterpret_cast<const F4*>(A + i * kPrepStride + 4 * t4);
        acc -= r.x * x[4 * t4];
        if (4 * t4 + 1 < i) acc -= r.y * x[4 * t4 + 1];
        if (4 * t4 + 2 < i) acc -= r.z * x[4 * t4 + 2];
        if (4 * t4 + 3 < i) acc -= r.w * x[4 * t4 + 3];
      }
    }
    x[i] = acc;
  }
  float* xw = is_u ? a.ws_u : a.ws_w;
  float* yw = is_u ? a.ws_p : a.ws_qe;
  const int32_t width = is_u ? dv : dk;
  GDN_UNROLL
  for (int32_t i = 0; i < 64; ++i) {
    float acc = 0.0f;
    GDN_UNROLL
    for (int32_t t4 = 0; t4 < 16; ++t4) {
      if (4 * t4 <= i) {
        const F4 r = *reinterpret_cast<const F4*>(Aqk + i * kPrepStride + 4 * t4);
        acc += r.x * x[4 * t4];
        if (4 * t4 + 1 <= i) acc += r.y * x[4 * t4 + 1];
        if (4 * t4 + 2 <= i) acc += r.z * x[4 * t4 + 2];
        if (4 * t4 + 3 <= i) acc += r.w * x[4 * t4 + 3];
      }
    }
    if (i < L) {
      const int64_t at = ((row_c + i) * nv + j) * width + col;
      xw[at] = x[i];
      yw[at] = is_u ? acc : expf(gam_s[i]) * a.ws_conv[(row_c + i) * a.conv_dim + q_off + col] - acc;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// state_pass_block<kCols>: block (kCols value columns e0.., v-head j, sequence) of a chunked sequence, 8 kCols
// threads: the sequential pass over the chunks. The state's value columns are independent given W, Qe and K, so
// each block carries only S[:, e0..e0+kCols-1] (in shared memory, read from the slot once, written back once):
//   X = [W; Qe] S            (64 + 64) x dk x kCols, Wt / Qt staged transposed in 64-row slices of dk
//   V' = U - X_W;  o = P + X_Q  (written over P)
//   S = e^gam_last S + Kd^T V',  Kd_i = e^(gam_last - gam_i) k_i, staged in 64-row slices of dk
// Thread (rg = tid / (kCols/4), cg = tid % (kCols/4)) owns rows 2rg, 2rg+1 and columns 4cg..4cg+3 of X / V' (and of
// each 64-row slice of S). kCols = 16 (46 KiB of shared memory, twice the blocks: for few sequences) or 32 (57 KiB,
// half the re-reads of W / Qe / K from L2: for many); ForwardPlan::pass_cols picks one.
//
//   shared memory (floats): S_s [128][kCols] | V_s [64][kCols] | kd_s [64] |
//   stage: Wt [64][66] | Qt [64][66]  (GEMM X: [d][token], float2 reads along tokens)
//          Kd [64][68]                (S update: [token][d], same region)
constexpr int32_t kPassWStride = 66;
constexpr int32_t kPassKStride = 68;
VS_HD constexpr int32_t pass_threads(int32_t cols) { return 8 * cols; }
VS_HD constexpr int32_t pass_smem_floats(int32_t cols) {
  return kMaxHeadDim * cols + 64 * cols + 64 + 2 * 64 * kPassWStride;
}

template <int32_t kCols, class Ctx>
VS_HD void state_pass_block(Ctx& ctx, const KernelArgs& a, int32_t slice, int32_t j, int32_t seq_index, float* smem) {
  static_assert(kCols == 16 || kCols == 32, "state pass: 16 or 32 value columns per block");
  const SeqDesc s = a.seqs[seq_index];
  const int32_t T = seq_tokens(s, a.n_rows, a.max_seq_tokens);
  if (T == 0 || !seq_chunked(a.mode, T, seq_has_ckpt(s, a.ckpt_enabled))) return;
  const int32_t dk = a.head_k_dim, dv = a.head_v_dim, nv = a.n_v_heads;
  const int32_t e0 = slice * kCols;
  if (e0 >= dv) return;
  const int32_t kh = j / a.ratio;
  const int64_t k_off = int64_t{a.n_k_heads + kh} * dk;
  const int64_t head_state = int64_t{dk} * dv;
  float* S = a.rec_state + static_cast<int64_t>(s.slot) * head_state * nv + j * head_state;
  float* S_s = smem;
  float* V_s = S_s + kMaxHeadDim * kCols;
  float* kd_s = V_s + 64 * kCols;
  float* Wt = kd_s + 64;
  float* Qt = Wt + 64 * kPassWStride;
  float* Kd = Wt;
  const int32_t tid = ctx.tid;
  const int32_t rg = tid / (kCols / 4), cg = tid % (kCols / 4);

  for (int32_t idx = tid; idx < kMaxHeadDim * kCols; idx += ctx.nthreads) {
    const int32_t d = idx / kCols, e = idx % kCols;
    S_s[idx] = d < dk && e0 + e < dv ? S[d * dv + e0 + e] : 0.0f;
  }
  ctx.sync();

  for (int32_t c0 = 0; c0 < T; c0 += kChunkTokens) {
    const int32_t L = imin(kChunkTokens, T - c0);
    const int64_t row_c = s.row0 + c0;
    const float gam_last = a.ws_gam[(row_c + L - 1) * nv + j];
    const float e_last = expf(gam_last);
    if (tid < 64) kd_s[tid] = tid < L ? expf(gam_last - a.ws_gam[(row_c + tid) * nv + j]) : 0.0f;
    float u[2][4], pp[2][4], xw[2][4], xq[2][4];
    GDN_UNROLL
    for (int32_t r = 0; r < 2; ++r) {
      GDN_UNROLL
      for (int32_t c = 0; c < 4; ++c) {
        const int32_t i = 2 * rg + r, e = e0 + 4 * cg + c;
        const bool valid = i < L && e < dv;
        const int64_t at = ((row_c + i) * nv + j) * dv + e;
        u[r][c] = valid ? a.ws_u[at] : 0.0f;
        pp[r][c] = valid ? a.ws_p[at] : 0.0f;
        xw[r][c] = xq[r][c] = 0.0f;
      }
    }
    for (int32_t d0 = 0; d0 < dk; d0 += 64) {
      const int32_t ds = imin(64, dk - d0);
      for (int32_t idx = tid; idx < 64 * 64; idx += ctx.nthreads) {
        const int32_t i = idx >> 6, dd = idx & 63;
        const bool valid = i < L && dd < ds;
        const int64_t at = ((row_c + i) * nv + j) * dk + d0 + dd;
        Wt[dd * kPassWStride + i] = valid ? a.ws_w[at] : 0.0f;
        Qt[dd * kPassWStride + i] = valid ? a.ws_qe[at] : 0.0f;
      }
      ctx.sync();
      for (int32_t dd = 0; dd < ds; ++dd) {
        const F2 w2 = *reinterpret_cast<const F2*>(Wt + dd * kPassWStride + 2 * rg);
        const F2 q2 = *reinterpret_cast<const F2*>(Qt + dd * kPassWStride + 2 * rg);
        const F4 s4 = *reinterpret_cast<const F4*>(S_s + (d0 + dd) * kCols + 4 * cg);
        const float wr[2] = {w2.x, w2.y}, qr[2] = {q2.x, q2.y}, sc[4] = {s4.x, s4.y, s4.z, s4.w};
        GDN_UNROLL
        for (int32_t r = 0; r < 2; ++r) {
          GDN_UNROLL
          for (int32_t c = 0; c < 4; ++c) {
            xw[r][c] += wr[r] * sc[c];
            xq[r][c] += qr[r] * sc[c];
          }
        }
      }
      ctx.sync();  // stage reads done
    }
    GDN_UNROLL
    for (int32_t r = 0; r < 2; ++r) {
      GDN_UNROLL
      for (int32_t c = 0; c < 4; ++c) {
        const int32_t i = 2 * rg + r, e = e0 + 4 * cg + c;
        V_s[i * kCols + 4 * cg + c] = u[r][c] - xw[r][c];
        if (i < L && e < dv) a.ws_p[((row_c + i) * nv + j) * dv + e] = pp[r][c] + xq[r][c];
      }
    }
    // No sync here: the S-update loop's first sync (after staging Kd) also publishes V_s, and the stage region
    // is free since the last sync of the loop above.
    for (int32_t d0 = 0; d0 < dk; d0 += 64) {
      const int32_t ds = imin(64, dk - d0);
      for (int32_t idx = tid; idx < 64 * 64; idx += ctx.nthreads) {
        const int32_t i = idx >> 6, dd = idx & 63;
        const bool valid = i < L && dd < ds;
        Kd[i * kPassKStride + dd] = valid ? kd_s[i] * a.ws_conv[(row_c + i) * a.conv_dim + k_off + d0 + dd] : 0.0f;
      }
      ctx.sync();
      float acc[2][4];
      GDN_UNROLL
      for (int32_t r = 0; r < 2; ++r) {
        GDN_UNROLL
        for (int32_t c = 0; c < 4; ++c) acc[r][c] = 0.0f;
      }
      for (int32_t i = 0; i < 64; ++i) {
        const F2 k2 = *reinterpret_cast<const F2*>(Kd + i * kPassKStride + 2 * rg);
        const F4 v4 = *reinterpret_cast<const F4*>(V_s + i * kCols + 4 * cg);
        const float kr[2] = {k2.x, k2.y}, vc[4] = {v4.x, v4.y, v4.z, v4.w};
        GDN_UNROLL
        for (int32_t r = 0; r < 2; ++r) {
          GDN_UNROLL
          for (int32_t c = 0; c < 4; ++c) acc[r][c] += kr[r] * vc[c];
        }
      }
      GDN_UNROLL
      for (int32_t r = 0; r < 2; ++r) {
        const int32_t d = d0 + 2 * rg + r;
        if (d < dk) {
          GDN_UNROLL
          for (int32_t c = 0; c < 4; ++c) {
            float& sv = S_s[d * kCols + 4 * cg + c];
            sv = e_last * sv + acc[r][c];
          }
        }
      }
      ctx.sync();  // Kd reads and S_s updates done
    }
  }

  for (int32_t idx = tid; idx < kMaxHeadDim * kCols; idx += ctx.nthreads) {
    const int32_t d = idx / kCols, e = idx % kCols;
    if (d < dk && e0 + e < dv) S[d * dv + e0 + e] = S_s[idx];
  }
}

// ---------------------------------------------------------------------------------------------------------------
// chunked_norm_block: block (token t, sequence) of a chunked sequence, kNormThreads threads, one warp per v-head:
// the gated RMSNorm of the state pass's outputs (workspace p) into out.
constexpr int32_t kNormThreads = 256;

template <class Ctx>
VS_HD void chunked_norm_block(Ctx& ctx, const KernelArgs& a, int32_t t, int32_t seq_index) {
  const SeqDesc s = a.seqs[seq_index];
  const int32_t T = seq_tokens(s, a.n_rows, a.max_seq_tokens);
  if (t >= T || !seq_chunked(a.mode, T, seq_has_ckpt(s, a.ckpt_enabled))) return;
  const int32_t dv = a.head_v_dim, nv = a.n_v_heads;
  const int32_t lane = ctx.tid & 31, warp = ctx.tid >> 5, n_warps = ctx.nthreads >> 5;
  const int64_t row = s.row0 + t;
  for (int32_t j = warp; j < nv; j += n_warps) {
    const float* o = a.ws_p + (row * nv + j) * dv;
    float sum_sq = 0.0f;
    for (int32_t e = lane; e < dv; e += 32) sum_sq += o[e] * o[e];
    const float inv = rms_inv(warp_allsum(ctx, sum_sq), dv, a.rms_norm_eps);
    const float* zr = a.z + row * a.z_stride + static_cast<int64_t>(j) * dv;
    for (int32_t e = lane; e < dv; e += 32) {
      store_out(ctx, a, row * a.out_stride + static_cast<int64_t>(j) * dv + e,
                gated_norm(o[e], inv, a.norm_weight[e], zr[e]));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// commit_block: block (part, commit, layer): parts 0 .. rec_blocks-1 copy kCommitRecFloats floats each of the layer's
// recurrent checkpoint row into the slot (float4, transposed from the checkpoint layout), the others
// kCommitConvFloats of its conv checkpoint row. Commits with a negative slot / ckpt or an index outside
// [0, max_ckpt_tokens) are skipped.
constexpr int32_t kCommitThreads = 256;
constexpr int32_t kCommitRecFloats = kCommitThreads * 4 * 4;  // four float4 per thread
constexpr int32_t kCommitConvFloats = kCommitThreads * 4;

template <class Ctx>
VS_HD void commit_block(Ctx& ctx, const CommitArgs& a, int32_t part, int32_t ci, int32_t layer) {
  const Commit c = a.commits[ci];
  const CommitLayer& L = a.layers[layer];
  if (c.slot < 0 || c.ckpt < 0 || c.index < 0 || c.index >= a.max_ckpt_tokens) return;
  const int64_t row = static_cast<int64_t>(c.ckpt) * a.max_ckpt_tokens + c.index;
  if (part < a.rec_blocks) {
    // Written in the slot's order (whole sectors), gathered from the checkpoint layout (gdn.h ckpt_offset).
    const float* src = L.rec_ckpt + row * a.state_size;
    F4* dst = reinterpret_cast<F4*>(L.rec_state + static_cast<int64_t>(c.slot) * a.state_size);
    const int64_t n4 = a.state_size / 4, head4 = int64_t{a.head_k_dim} * a.head_v_dim / 4, row4 = a.head_v_dim / 4;
    const int64_t begin = static_cast<int64_t>(part) * (kCommitRecFloats / 4);
    for (int64_t i = begin + ctx.tid; i < begin + kCommitRecFloats / 4 && i < n4; i += ctx.nthreads) {
      const int64_t head = i / head4, r = i % head4;
      const int32_t d = static_cast<int32_t>(r / row4), e = static_cast<int32_t>(r % row4) * 4;
      dst[i] = *reinterpret_cast<const F4*>(src + head * head4 * 4 + ckpt_offset(a.head_k_dim, a.head_v_dim, d, e));
    }
  } else {
    const float* src = L.conv_ckpt + row * a.conv_width;
    float* dst = L.conv_state + static_cast<int64_t>(c.slot) * a.conv_width;
    const int64_t begin = static_cast<int64_t>(part - a.rec_blocks) * kCommitConvFloats;
    for (int64_t i = begin + ctx.tid; i < begin + kCommitConvFloats && i < a.conv_width; i += ctx.nthreads)
      dst[i] = src[i];
  }
}

}  // namespace voltserve::kernels::gdn
