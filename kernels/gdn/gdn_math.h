// Scalar math and index rules shared by the Gated DeltaNet device kernels (gdn.cu, through gdn_blocks.h) and their
// CPU emulation (tests/kernels/gdn_emulator.h): gates, norms, which sequences take which path, the workspace
// layout. Each formula matches gdn_ref.cpp; tests/kernels/gdn_blocks_test.cpp checks them. CUDA-free (VS_HD).
#pragma once

#include <math.h>

#include <cstdint>

#include "common/host_device.h"
#include "common/step_desc.h"
#include "gdn/gdn.h"

// Full unrolling of the fixed-trip loops that index register arrays (nvcc keeps such arrays in registers only
// when every index is a compile-time constant); host compilers take the plain loop.
#if defined(__CUDACC__)
#define GDN_UNROLL _Pragma("unroll")
#else
#define GDN_UNROLL
#endif

namespace voltserve::kernels::gdn {

constexpr int32_t kChunkTokens = 64;  // chunk length of the WY form (gdn_ref.cpp, MODEL.md §3)
constexpr int32_t kMaxHeadDim = 128;  // head_k_dim and head_v_dim: multiples of kHeadDimStep up to this
constexpr int32_t kHeadDimStep = 8;   // the recurrent kernel gives each warp 8 value columns
constexpr int32_t kMaxConvTaps = 8;   // conv_kernel K: 2..8 (the conv kernel keeps K-1+16 inputs in registers)
constexpr float kL2NormEps = 1e-6f;   // inside the sqrt of the q / k L2 norms

VS_HD int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }

// The reference's scalar functions, in its operation order (gdn_ref.cpp).
VS_HD float silu(float x) { return x / (1.0f + expf(-x)); }
VS_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// torch.nn.functional.softplus with beta 1 and threshold 20.
VS_HD float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
// g = -exp(A_log) * softplus(a + dt_bias): the per-token log decay of one v-head (<= 0).
VS_HD float log_decay(float a_log, float a, float dt_bias) { return -expf(a_log) * softplus(a + dt_bias); }
// 1 / ||x|| of a q or k head from its sum of squares.
VS_HD float l2_inv(float sum_sq) { return 1.0f / sqrtf(sum_sq + kL2NormEps); }
// 1 / rms of an n-element row from its sum of squares (norm_ref.cpp's rms_norm_row_ref).
VS_HD float rms_inv(float sum_sq, int32_t n, float eps) { return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps); }
// One element of the gated RMSNorm: (o * inv * w) * silu(z).
VS_HD float gated_norm(float o, float inv, float w, float z) { return o * inv * w * silu(z); }

// Tokens of sequence s that the kernels process: n_tokens, cut to the host-known bounds so that no kernel reads or
// writes outside the step's rows (a descriptor beyond them is a caller bug; the cut keeps memory safe). Padding
// entries (n_tokens <= 0) and entries without a slot give 0.
VS_HD int32_t seq_tokens(const SeqDesc& s, int32_t n_rows, int32_t max_seq_tokens) {
  if (s.n_tokens <= 0 || s.slot < 0 || s.row0 < 0 || s.row0 >= n_rows) return 0;
  return imin(imin(s.n_tokens, max_seq_tokens), n_rows - s.row0);
}

// A verify item: its state after every token is also written to checkpoint set s.ckpt (as gdn_ref decides).
VS_HD bool seq_has_ckpt(const SeqDesc& s, bool ckpt_enabled) { return ckpt_enabled && s.ckpt >= 0; }

// Whether a segment of T tokens runs the chunked (WY) form; otherwise token by token (gdn_ref's rule).
VS_HD bool seq_chunked(Mode mode, int32_t T, bool has_ckpt) {
  return !has_ckpt && (mode == Mode::kChunked || (mode == Mode::kAuto && T > kChunkTokens));
}

// Workspace sections, in floats from the (256-byte aligned) workspace start; each section starts on a 64-float
// boundary. Rows are the step's token rows (SeqDesc::row0 + t), so no section needs per-sequence offsets.
struct WorkspaceLayout {
  int64_t conv = 0;   // [n_rows, conv_dim]: q (L2-normed, scaled) | k (L2-normed) | v, after conv and SiLU
  int64_t beta = 0;   // [n_rows, n_v_heads]
  int64_t g = 0;      // [n_rows, n_v_heads] log decay
  int64_t gam = 0;    // [n_rows, n_v_heads] chunked: cumulative log decay inside the row's chunk
  int64_t w = 0;      // [n_rows, n_v_heads, head_k_dim] chunked: W = (I + A)^-1 (beta e^gam K)
  int64_t u = 0;      // [n_rows, n_v_heads, head_v_dim] chunked: U = (I + A)^-1 (beta V)
  int64_t qe = 0;     // [n_rows, n_v_heads, head_k_dim] chunked: e^gam Q - (QK^T . Gamma) W
  int64_t p = 0;      // [n_rows, n_v_heads, head_v_dim] chunked: (QK^T . Gamma) U, then the output o in place
  int64_t total = 0;  // floats
};

VS_HD int64_t round_up64(int64_t x) { return (x + 63) / 64 * 64; }

VS_HD WorkspaceLayout workspace_layout(int32_t n_k_heads, int32_t n_v_heads, int32_t head_k_dim, int32_t head_v_dim,
                                       int32_t n_rows) {
  const int64_t rows = n_rows;
  const int64_t conv_dim = 2 * int64_t{n_k_heads} * head_k_dim + int64_t{n_v_heads} * head_v_dim;
  WorkspaceLayout l;
  int64_t at = 0;
  l.conv = at;
  at += round_up64(rows * conv_dim);
  l.beta = at;
  at += round_up64(rows * n_v_heads);
  l.g = at;
  at += round_up64(rows * n_v_heads);
  l.gam = at;
  at += round_up64(rows * n_v_heads);
  l.w = at;
  at += round_up64(rows * n_v_heads * head_k_dim);
  l.u = at;
  at += round_up64(rows * n_v_heads * head_v_dim);
  l.qe = at;
  at += round_up64(rows * n_v_heads * head_k_dim);
  l.p = at;
  at += round_up64(rows * n_v_heads * head_v_dim);
  l.total = at;
  return l;
}

}  // namespace voltserve::kernels::gdn
