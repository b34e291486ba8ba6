// Per-element math and block-shape arithmetic of the attention kernels (attention_kernels.cuh), shared by the device
// code, the launch plan (attention_plan.cpp) and the CPU tests (tests/kernels/attention_math_test.cpp checks them
// against the reference, attention_ref.cpp). CUDA-free: VS_HD functions compile for host and device alike.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.h"
#include "common/step_desc.h"

namespace voltserve::kernels::attention::detail {

// Segments of up to this many rows take the split-context decode kernel, longer ones the prefill kernel.
inline constexpr int32_t kMaxDecodeTokens = 16;
// Attend blocks (decode and prefill): 8 warps; each warp holds up to 6 q vectors (q, running max, running sum and
// output accumulator) in registers: a q group (one row's 6 q heads of a 27B GQA group).
inline constexpr int32_t kWarps = 8;
inline constexpr int32_t kQPerWarp = 6;
inline constexpr int32_t kQPerBlock = kWarps * kQPerWarp;  // q vectors a prefill block serves at once
// Keys a warp scores at once: one key row per warp-wide load, 4 rows in flight, a 4-way transposed reduction.
inline constexpr int32_t kKeysPerBatch = 4;
// Split-context decode: splits of at least 128 positions and at most 32 per sequence (so the combine kernel holds one
// split per lane).
inline constexpr int32_t kMinSplitLen = 128;
inline constexpr int32_t kMaxSplits = 32;
// Prep kernel (norm + RoPE + cache write): one warp per head vector of one row.
inline constexpr int32_t kPrepWarps = 4;
inline constexpr int32_t kMaxRotaryHalf = 128;  // rotary_dim / 2 <= head_dim / 2 <= 128
inline constexpr int32_t kMaxHeadDim = 256;

// How one sequence's context is split for the decode kernel: splits [i * len, min((i + 1) * len, ctx)) for
// i < count, len the first of 128, 192, 256, 384, 512, 768, 1024, ... (alternately x1.5 and x4/3; multiples of 64)
// that needs at most 32 splits. A function of the sequence's own context only, so a sequence's result does not
// depend on the batch it runs in nor on the launch bounds; and constant over long ranges of contexts, so a verify
// row at position p sees the same splits as plain decoding at p (whose context is shorter) unless the two straddle a
// step of the ladder, which never happens up to 4096 positions: verification then reproduces plain decoding bit for
// bit (the decode block's structure does not depend on its row count either).
struct SplitPlan {
  int32_t len;
  int32_t count;
};
VS_HD SplitPlan split_plan(int32_t ctx) {
  int32_t len = kMinSplitLen;
  while ((ctx + len - 1) / len > kMaxSplits) len = (len & (len - 1)) == 0 ? len + len / 2 : len / 3 * 4;
  return SplitPlan{len, (ctx + len - 1) / len};
}

// Warps of an attend block serving nq q vectors at once (the prefill kernel): `groups` warps of up to kQPerWarp
// consecutive q vectors each, replicated `teams` times (a power of two); team i takes key batches i, i + teams, ...
// of the block's key range and the teams' partial softmax states are merged in a fixed tree. Warps beyond
// groups * teams idle. The decode kernel always runs {1 group, 8 teams}, one q group after another.
struct TeamLayout {
  int32_t groups;
  int32_t teams;
};
VS_HD TeamLayout team_layout(int32_t nq) {
  const int32_t groups = (nq + kQPerWarp - 1) / kQPerWarp;
  int32_t teams = 1;
  while (teams * 2 * groups <= kWarps) teams *= 2;
  return TeamLayout{groups, teams};
}

// Rows of one sequence a prefill block takes (its q vectors are rows x group, at most kQPerBlock).
VS_HD int32_t rows_per_chunk(int32_t group) { return kQPerBlock / group; }

// After the 4-key transposed reduction a lane holds the full dot product of key (lane >> 3) & 3 (lanes 8b..8b+7
// hold key b, identically); lane 8b is the one a key's probability is read from.
VS_HD int32_t key_of_lane(int32_t lane) { return (lane >> 3) & 3; }
VS_HD int32_t lane_of_key(int32_t key) { return key << 3; }

// Launch bounds the kernels check every SeqDesc against (DeviceArgs: n_rows, max_seq_tokens, max_context).
struct Bounds {
  int32_t n_rows;
  int32_t max_seq_tokens;
  int32_t max_context;
};
// A sequence the kernels process: not padding, inside the bounds (entries outside them are skipped, never read or
// written past the buffers the bounds sized). Written so that no sum can overflow.
VS_HD bool seq_valid(const SeqDesc& s, const Bounds& b) {
  return s.n_tokens > 0 && s.n_past >= 0 && s.row0 >= 0 && s.page_offset >= 0 && s.n_tokens <= b.max_seq_tokens &&
         s.row0 <= b.n_rows - s.n_tokens && s.n_past <= b.max_context - s.n_tokens;
}
VS_HD bool seq_is_decode(const SeqDesc& s) { return s.n_tokens <= kMaxDecodeTokens; }

// Row of position pos in a paged cache [n_pages * page_size, width] (step_desc.h).
VS_HD int64_t cache_row(const int32_t* page_table, int32_t page_offset, int32_t page_size, int32_t pos) {
  return static_cast<int64_t>(page_table[page_offset + pos / page_size]) * page_size + pos % page_size;
}

// (1 + w) RMSNorm: the reference's scale 1 / sqrt(mean(x^2) + eps) (norm_ref.cpp), applied as (x * inv) * w.
VS_HD float rms_inv(float sum_sq, int32_t n, float eps) { return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps); }

// NeoX RoPE of the pair (x0, x1) = (x[j], x[j + rotary_dim / 2]) at angle theta (cos c, sin s): the new x[j] (lo)
// and x[j + rotary_dim / 2] (hi), as in attention_ref.cpp.
VS_HD float rope_lo(float x0, float x1, float c, float s) { return x0 * c - x1 * s; }
VS_HD float rope_hi(float x0, float x1, float c, float s) { return x1 * c + x0 * s; }

VS_HD float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// Merging two partial softmax states (m = running max, l = sum of exp(score - m), acc = sum of exp(score - m) * v)
// over disjoint key sets: both rescaled to the larger max. A state that has seen no unmasked key has m = -inf,
// l = 0, acc = 0 and gets factor 0 (never exp(-inf - -inf) = NaN).
struct MergeScales {
  float m;
  float c1;
  float c2;
};
VS_HD MergeScales merge_scales(float m1, float m2) {
  const float m = fmaxf(m1, m2);
  if (m == -INFINITY) return MergeScales{m, 0.0f, 0.0f};
  return MergeScales{m, m1 == -INFINITY ? 0.0f : expf(m1 - m), m2 == -INFINITY ? 0.0f : expf(m2 - m)};
}

// inv_freq[j] = rope_theta^(-2j / rotary_dim) for j < rotary_dim / 2, computed on the host exactly as the reference
// does (so device angles pos * inv_freq[j] equal the reference's bit for bit).
inline void rope_inv_freq(float rope_theta, int32_t rotary_dim, float* inv_freq) {
  for (int32_t j = 0; j < rotary_dim / 2; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    inv_freq[j] = 1.0f / std::pow(rope_theta, exponent);
  }
}

}  // namespace voltserve::kernels::attention::detail
