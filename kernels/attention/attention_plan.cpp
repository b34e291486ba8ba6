// Launch plan of the device form of gated attention (attention_plan.h): argument checks, workspace layout, grids.
// CUDA-free; tested through tests/kernels/attention_emu_test.cpp and attention_gpu_test.cpp.
#include "attention/attention_plan.h"

#include <algorithm>
#include <cmath>

namespace voltserve::kernels::attention {
namespace detail {
namespace {

constexpr size_t kAlign = 256;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool aligned(const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

WorkspaceLayout workspace_layout(const Params& p, int32_t n_rows, int32_t n_seqs, int32_t max_seq_tokens,
                                 int32_t max_context) {
  WorkspaceLayout w;
  if (n_rows <= 0 || n_seqs <= 0 || max_seq_tokens <= 0 || max_context <= 0 || p.n_heads <= 0 || p.head_dim <= 0) {
    return w;
  }
  const int64_t per_row = static_cast<int64_t>(p.n_heads) * p.head_dim;
  const int64_t decode_rows = std::min<int64_t>(
      n_rows, static_cast<int64_t>(n_seqs) * std::min<int32_t>(kMaxDecodeTokens, max_seq_tokens));
  w.slots = static_cast<int32_t>(decode_rows);
  w.splits = static_cast<int32_t>(std::min<int64_t>(kMaxSplits, ceil_div(max_context, kMinSplitLen)));
  w.q_offset = 0;
  w.part_acc_offset = align_up(static_cast<size_t>(n_rows) * per_row * sizeof(float));
  const size_t parts = static_cast<size_t>(w.slots) * w.splits * p.n_heads;
  w.part_ml_offset = w.part_acc_offset + align_up(parts * p.head_dim * sizeof(float));
  w.total = w.part_ml_offset + align_up(parts * 2 * sizeof(float));
  return w;
}

KernelStatus make_plan(const Params& p, const DeviceArgs& a, LaunchPlan* plan) {
  *plan = LaunchPlan{};
  if (p.n_heads < 1 || p.n_kv_heads < 1 || p.n_heads % p.n_kv_heads != 0) {
    return VS_KERNEL_FAIL(kBadShape, "gated_attention: n_heads and n_kv_heads must be positive, n_kv_heads | n_heads");
  }
  if (p.head_dim < 32 || p.head_dim > kMaxHeadDim || p.head_dim % 32 != 0) {
    return VS_KERNEL_FAIL(kBadShape, "gated_attention: head_dim must be a multiple of 32 in [32, 256]");
  }
  if (p.rotary_dim < 0 || p.rotary_dim > p.head_dim || p.rotary_dim % 2 != 0) {
    return VS_KERNEL_FAIL(kBadShape, "gated_attention: rotary_dim must be even and in [0, head_dim]");
  }
  if (p.page_size < 1) return VS_KERNEL_FAIL(kBadShape, "gated_attention: page_size must be >= 1");
  const int32_t group = p.n_heads / p.n_kv_heads;
  if (group > kQPerBlock) {
    return VS_KERNEL_FAIL(kUnsupported, "gated_attention: more than 48 q heads per kv head");
  }
  if (!(p.rope_theta > 0.0f) || !std::isfinite(p.rope_theta)) {
    return VS_KERNEL_FAIL(kBadArgument, "gated_attention: rope_theta must be positive and finite");
  }
  if (!(p.rms_norm_eps >= 0.0f) || !std::isfinite(p.rms_norm_eps)) {
    return VS_KERNEL_FAIL(kBadArgument, "gated_attention: rms_norm_eps must be >= 0 and finite");
  }
  if (a.cache_dtype != DType::kF16 && a.cache_dtype != DType::kF8E4M3) {
    return VS_KERNEL_FAIL(kUnsupported, "gated_attention: the KV cache must be fp16 or fp8 (e4m3)");
  }
  const bool fp8 = a.cache_dtype == DType::kF8E4M3;
  if (fp8 && (!(a.k_scale > 0.0f) || !std::isfinite(a.k_scale) || !(a.v_scale > 0.0f) || !std::isfinite(a.v_scale))) {
    return VS_KERNEL_FAIL(kBadArgument, "gated_attention: fp8 KV scales must be positive and finite");
  }
  if (a.out_dtype != DType::kF16 && a.out_dtype != DType::kF32) {
    return VS_KERNEL_FAIL(kBadArgument, "gated_attention: out_dtype must be kF16 or kF32");
  }
  if (a.n_seqs < 0 || a.n_rows < 0 || a.max_seq_tokens < 0 || a.max_context < 0) {
    return VS_KERNEL_FAIL(kBadShape, "gated_attention: negative n_seqs, n_rows, max_seq_tokens or max_context");
  }
  // Grid limits: sequences index grid z of the decode kernel; rows and contexts stay far from int32 overflow.
  if (a.n_seqs > 65535) return VS_KERNEL_FAIL(kBadShape, "gated_attention: more than 65535 sequences");
  if (a.n_rows > (1 << 30) || a.max_context > (1 << 30)) {
    return VS_KERNEL_FAIL(kBadShape, "gated_attention: n_rows or max_context above 2^30");
  }
  if (a.n_rows == 0 || a.n_seqs == 0 || a.max_seq_tokens == 0 || a.max_context == 0) {
    return KernelStatus::Ok();  // no sequence can have a token: nothing to do
  }
  if (a.qg == nullptr || a.k == nullptr || a.v == nullptr || a.q_norm == nullptr || a.k_norm == nullptr ||
      a.k_cache == nullptr || a.v_cache == nullptr || a.seqs == nullptr || a.page_table == nullptr ||
      a.out == nullptr || a.workspace == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "gated_attention: a required pointer is null");
  }
  const int64_t hd = p.head_dim;
  if (a.qg_stride < p.n_heads * 2 * hd || a.k_stride < p.n_kv_heads * hd || a.v_stride < p.n_kv_heads * hd ||
      a.out_stride < p.n_heads * hd) {
    return VS_KERNEL_FAIL(kBadShape, "gated_attention: a row stride is smaller than its row");
  }
  // The kernels read cache rows with 16-byte (fp16) or 8-byte (fp8) loads and the workspace with float4 loads.
  if (!aligned(a.k_cache, 16) || !aligned(a.v_cache, 16) || !aligned(a.workspace, 16)) {
    return VS_KERNEL_FAIL(kBadArgument, "gated_attention: k_cache, v_cache and workspace must be 16-byte aligned");
  }
  const WorkspaceLayout w = workspace_layout(p, a.n_rows, a.n_seqs, a.max_seq_tokens, a.max_context);
  if (a.workspace_bytes < w.total) {
    return VS_KERNEL_FAIL(kWorkspaceTooSmall, "gated_attention: workspace smaller than workspace_bytes()");
  }
  if (p.n_kv_heads > 65535) return VS_KERNEL_FAIL(kBadShape, "gated_attention: more than 65535 kv heads");
  const int32_t chunk_rows = rows_per_chunk(group);

  KernelArgs& k = plan->args;
  k.qg = a.qg;
  k.qg_stride = a.qg_stride;
  k.k = a.k;
  k.k_stride = a.k_stride;
  k.v = a.v;
  k.v_stride = a.v_stride;
  k.q_norm = a.q_norm;
  k.k_norm = a.k_norm;
  k.k_cache = a.k_cache;
  k.v_cache = a.v_cache;
  k.seqs = a.seqs;
  k.page_table = a.page_table;
  k.out = a.out;
  k.out_stride = a.out_stride;
  char* ws = static_cast<char*>(a.workspace);
  k.q_ws = reinterpret_cast<float*>(ws + w.q_offset);
  k.part_acc = reinterpret_cast<float*>(ws + w.part_acc_offset);
  k.part_ml = reinterpret_cast<float*>(ws + w.part_ml_offset);
  k.n_seqs = a.n_seqs;
  k.slots = w.slots;
  k.splits = w.splits;
  k.n_heads = p.n_heads;
  k.n_kv_heads = p.n_kv_heads;
  k.head_dim = p.head_dim;
  k.rotary_dim = p.rotary_dim;
  k.page_size = p.page_size;
  k.group = group;
  k.rows_per_chunk = chunk_rows;
  k.n_rows = a.n_rows;
  k.max_seq_tokens = a.max_seq_tokens;
  k.max_context = a.max_context;
  k.out_f16 = a.out_dtype == DType::kF16 ? 1 : 0;
  k.eps = p.rms_norm_eps;
  k.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));  // as the reference
  k.k_scale = fp8 ? a.k_scale : 1.0f;
  k.v_scale = fp8 ? a.v_scale : 1.0f;
  // The fp8 decode yields stored / 256 (common/e4m3_codec.h): the 256 and the layer's scales go into the two factors.
  k.v_mul = fp8 ? a.v_scale * 256.0f : 1.0f;
  if (fp8) k.scale *= a.k_scale * 256.0f;
  std::fill(std::begin(k.inv_freq), std::end(k.inv_freq), 0.0f);
  rope_inv_freq(p.rope_theta, p.rotary_dim, k.inv_freq);

  plan->empty = false;
  plan->prep_grid = {static_cast<uint32_t>(a.n_rows),
                     static_cast<uint32_t>(ceil_div(p.n_heads + p.n_kv_heads, kPrepWarps)), 1};
  // x: split + splits * q group; the q groups (kQPerWarp q vectors each) of a sequence's rows (<= 16).
  const int64_t q_groups = ceil_div(int64_t{std::min<int32_t>(kMaxDecodeTokens, a.max_seq_tokens)} * group, kQPerWarp);
  plan->decode_grid = {static_cast<uint32_t>(w.splits * q_groups), static_cast<uint32_t>(p.n_kv_heads),
                       static_cast<uint32_t>(a.n_seqs)};
  plan->combine_grid = {static_cast<uint32_t>(a.n_seqs),
                        static_cast<uint32_t>(std::min<int32_t>(kMaxDecodeTokens, a.max_seq_tokens)), 1};
  plan->run_prefill = a.max_seq_tokens > kMaxDecodeTokens;
  if (plan->run_prefill) {
    // Every prefill sequence (> 16 rows) has ceil(n / chunk_rows) tiles <= n / chunk_rows + 1, and there are at most
    // min(n_seqs, n_rows / 17) of them.
    const int64_t tiles = ceil_div(a.n_rows, chunk_rows) + std::min<int64_t>(a.n_seqs, a.n_rows / (kMaxDecodeTokens + 1));
    plan->prefill_grid = {static_cast<uint32_t>(tiles), static_cast<uint32_t>(p.n_kv_heads), 1};
  }
  return KernelStatus::Ok();
}

}  // namespace detail

size_t workspace_bytes(const Params& p, int32_t n_rows, int32_t n_seqs, int32_t max_seq_tokens, int32_t max_context) {
  return detail::workspace_layout(p, n_rows, n_seqs, max_seq_tokens, max_context).total;
}

}  // namespace voltserve::kernels::attention
