// Launch plan of the device form of gated attention: the host-side argument checks, the workspace layout, the
// kernel parameter block and the grids of the four kernels (attention_kernels.cuh). CUDA-free, so the launcher
// (attention.cu) and the CPU tests that run the kernels through a SIMT emulator (tests/kernels/attention_emu_test.cpp)
// use the same plan.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention/attention.h"
#include "attention/attention_math.h"

namespace voltserve::kernels::attention::detail {

// Where the scratch lives inside DeviceArgs::workspace (byte offsets, each 256-byte aligned).
struct WorkspaceLayout {
  size_t q_offset = 0;         // q_ws [n_rows, n_heads, head_dim] fp32: normed, rotated queries
  size_t part_acc_offset = 0;  // part_acc [slots, splits, n_heads, head_dim] fp32: per-split unnormalised outputs
  size_t part_ml_offset = 0;   // part_ml [slots, splits, n_heads, 2] fp32: per-split (running max, sum of exp)
  size_t total = 0;
  int32_t slots = 0;   // decode rows the partials have room for: min(n_rows, n_seqs * min(16, max_seq_tokens))
  int32_t splits = 0;  // splits per decode row: min(kMaxSplits, ceil(max_context / kMinSplitLen))
};
WorkspaceLayout workspace_layout(const Params& p, int32_t n_rows, int32_t n_seqs, int32_t max_seq_tokens,
                                 int32_t max_context);

// The parameter block every kernel takes (by value). Device pointers; fp16 data as raw uint16_t bits, e4m3 as bytes.
struct KernelArgs {
  const float* qg;  // [rows, qg_stride]: per head [query | gate]
  int64_t qg_stride;
  const float* k;  // [rows, k_stride]
  int64_t k_stride;
  const float* v;  // [rows, v_stride]
  int64_t v_stride;
  const float* q_norm;  // [head_dim]
  const float* k_norm;  // [head_dim]
  void* k_cache;        // [n_pages * page_size, n_kv_heads * head_dim] fp16 or e4m3 (the kernels' instantiation)
  void* v_cache;
  const SeqDesc* seqs;
  const int32_t* page_table;
  void* out;  // [rows, out_stride] fp16 or fp32
  int64_t out_stride;
  float* q_ws;      // see WorkspaceLayout
  float* part_acc;
  float* part_ml;
  int32_t n_seqs;
  int32_t slots;
  int32_t splits;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t rotary_dim;
  int32_t page_size;
  int32_t group;           // n_heads / n_kv_heads
  int32_t rows_per_chunk;  // rows_per_chunk(group): rows of a prefill tile
  int32_t n_rows;
  int32_t max_seq_tokens;
  int32_t max_context;
  int32_t out_f16;  // 1: out is fp16, 0: fp32
  float eps;
  float scale;    // score factor: 1 / sqrt(head_dim) as the reference computes it; fp8: times k_scale * 256
  float v_mul;    // output factor of the V sum: 1; fp8: v_scale * 256 (the fast e4m3 decode yields x / 256)
  float k_scale;  // fp8: stored key = e4m3(key / k_scale); 1 for fp16
  float v_scale;
  float inv_freq[kMaxRotaryHalf];
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// Launch order on one stream: prep (every row), decode + combine (segments of <= 16 rows), prefill (longer ones).
struct LaunchPlan {
  KernelArgs args{};
  bool empty = true;  // nothing to launch (no rows or no sequences)
  Dim3 prep_grid;     // x: row, y: group of kPrepWarps head vectors (n_heads q heads, then n_kv_heads k/v heads)
  Dim3 decode_grid;   // x: split + splits * q group (6 q vectors), y: kv head, z: sequence
  Dim3 combine_grid;  // x: sequence, y: row of the sequence
  Dim3 prefill_grid;  // x: tile (rows_per_chunk rows of one sequence; an upper bound), y: kv head
  bool run_prefill = false;  // max_seq_tokens > 16
};
inline constexpr uint32_t kPrepThreads = kPrepWarps * 32;
inline constexpr uint32_t kAttendThreads = kWarps * 32;
inline constexpr uint32_t kCombineThreads = kWarps * 32;

// Checks shapes and pointers (no device access) and fills the plan.
KernelStatus make_plan(const Params& p, const DeviceArgs& a, LaunchPlan* plan);

}  // namespace voltserve::kernels::attention::detail
