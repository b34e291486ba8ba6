// Host checks and launch plans of the Gated DeltaNet device form (gdn_plan.h), and workspace_bytes (gdn.h).
// Plain C++ (built with and without CUDA): gdn.cu launches the plans, tests/kernels/gdn_emulator.h replays them.
#include "gdn/gdn_plan.h"

#include <cmath>

#include "gdn/gdn_blocks.h"
#include "gdn/gdn_math.h"

namespace voltserve::kernels::gdn {
namespace {

bool aligned(const void* p, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0; }

KernelStatus check_params(const Params& p) {
  if (p.n_k_heads <= 0 || p.n_v_heads <= 0 || p.n_v_heads % p.n_k_heads != 0) {
    return VS_KERNEL_FAIL(kBadShape, "gdn: n_v_heads must be a positive multiple of n_k_heads");
  }
  for (int32_t d : {p.head_k_dim, p.head_v_dim}) {
    if (d < kHeadDimStep || d > kMaxHeadDim || d % kHeadDimStep != 0) {
      return VS_KERNEL_FAIL(kUnsupported, "gdn: head_k_dim and head_v_dim must be multiples of 8 in [8, 128]");
    }
  }
  if (p.conv_kernel < 2 || p.conv_kernel > kMaxConvTaps) {
    return VS_KERNEL_FAIL(kUnsupported, "gdn: conv_kernel must be in [2, 8]");
  }
  if (p.n_v_heads > 65535) return VS_KERNEL_FAIL(kUnsupported, "gdn: n_v_heads above the grid limit");
  if (!(p.rms_norm_eps >= 0.0f)) return VS_KERNEL_FAIL(kBadArgument, "gdn: rms_norm_eps must be >= 0");
  return KernelStatus::Ok();
}

Launch launch(bool run, Dim3 grid, int32_t threads, int64_t smem_floats) {
  Launch l;
  l.run = run;
  l.grid = grid;
  l.threads = static_cast<uint32_t>(threads);
  l.smem_bytes = static_cast<size_t>(smem_floats) * sizeof(float);
  return l;
}

uint32_t ceil_div(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

size_t workspace_bytes(const Params& p, int32_t n_rows, int32_t n_seqs, int32_t max_seq_tokens) {
  (void)n_seqs;
  (void)max_seq_tokens;
  if (n_rows <= 0) return 0;
  return static_cast<size_t>(workspace_layout(p.n_k_heads, p.n_v_heads, p.head_k_dim, p.head_v_dim, n_rows).total) *
         sizeof(float);
}

KernelStatus plan_forward(const Params& p, const DeviceArgs& a, ForwardPlan* plan, const PlanOptions& opt) {
  if (plan == nullptr) return VS_KERNEL_FAIL(kBadArgument, "gdn: plan is null");
  *plan = ForwardPlan{};
  if (KernelStatus st = check_params(p); !st.ok()) return st;
  if (a.n_seqs < 0 || a.n_rows < 0 || a.max_seq_tokens < 0) {
    return VS_KERNEL_FAIL(kBadShape, "gdn: n_seqs, n_rows and max_seq_tokens must be >= 0");
  }
  if (a.mode != Mode::kAuto && a.mode != Mode::kSequential && a.mode != Mode::kChunked) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: mode must be kAuto, kSequential or kChunked");
  }
  if (a.out_dtype != DType::kF16 && a.out_dtype != DType::kF32) {
    return VS_KERNEL_FAIL(kUnsupported, "gdn: out_dtype must be kF16 or kF32");
  }
  if (opt.pass_cols != 0 && opt.pass_cols != 16 && opt.pass_cols != 32) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: pass_cols must be 0, 16 or 32");
  }
  plan->stream = a.stream;
  plan->pdl = a.pdl;
  if (a.n_seqs == 0 || a.n_rows == 0 || a.max_seq_tokens == 0) return KernelStatus::Ok();
  if (a.n_seqs > 65535) return VS_KERNEL_FAIL(kUnsupported, "gdn: n_seqs above the grid limit (65535)");
  if (a.max_seq_tokens > (1 << 20)) return VS_KERNEL_FAIL(kUnsupported, "gdn: max_seq_tokens above 2^20");

  const int64_t conv_dim = p.conv_dim();
  const int64_t v_width = int64_t{p.n_v_heads} * p.head_v_dim;
  if (a.qkv == nullptr || a.z == nullptr || a.b == nullptr || a.a == nullptr || a.seqs == nullptr || a.out == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: qkv, z, b, a, seqs and out must be set");
  }
  if (a.w.conv == nullptr || a.w.a_log == nullptr || a.w.dt_bias == nullptr || a.w.norm_weight == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: a weight pointer is null");
  }
  if (a.state.conv == nullptr || a.state.recurrent == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: state.conv and state.recurrent must be set");
  }
  if (a.qkv_stride < conv_dim || a.z_stride < v_width || a.b_stride < p.n_v_heads || a.a_stride < p.n_v_heads ||
      a.out_stride < v_width) {
    return VS_KERNEL_FAIL(kBadShape, "gdn: a row stride is smaller than its row");
  }
  // The recurrent state (and its checkpoints) are read and written as float4; the workspace sections start on
  // 256-byte boundaries of a 256-byte aligned workspace.
  if (!aligned(a.state.recurrent, 16) || !aligned(a.state.recurrent_ckpt, 16)) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: recurrent state and checkpoints must be 16-byte aligned");
  }
  const bool ckpt = a.state.recurrent_ckpt != nullptr;
  if (ckpt && (a.state.conv_ckpt == nullptr || a.state.max_ckpt_tokens <= 0)) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: recurrent checkpoints need conv_ckpt and max_ckpt_tokens > 0");
  }
  if (a.workspace == nullptr || !aligned(a.workspace, 256)) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn: workspace must be set and 256-byte aligned");
  }
  const WorkspaceLayout lay = workspace_layout(p.n_k_heads, p.n_v_heads, p.head_k_dim, p.head_v_dim, a.n_rows);
  if (a.workspace_bytes < static_cast<size_t>(lay.total) * sizeof(float)) {
    return VS_KERNEL_FAIL(kWorkspaceTooSmall, "gdn: workspace smaller than workspace_bytes()");
  }

  KernelArgs& k = plan->k;
  k.n_k_heads = p.n_k_heads;
  k.n_v_heads = p.n_v_heads;
  k.head_k_dim = p.head_k_dim;
  k.head_v_dim = p.head_v_dim;
  k.conv_kernel = p.conv_kernel;
  k.ratio = p.n_v_heads / p.n_k_heads;
  k.conv_dim = static_cast<int32_t>(conv_dim);
  k.conv_width = p.conv_state_width();
  k.q_scale = 1.0f / std::sqrt(static_cast<float>(p.head_k_dim));  // gdn_ref's value
  k.rms_norm_eps = p.rms_norm_eps;
  k.n_rows = a.n_rows;
  k.max_seq_tokens = a.max_seq_tokens;
  k.n_seqs = a.n_seqs;
  k.mode = a.mode;
  k.ckpt_enabled = ckpt;
  k.out_f16 = a.out_dtype == DType::kF16;
  k.max_ckpt_tokens = ckpt ? a.state.max_ckpt_tokens : 0;
  k.qkv = a.qkv;
  k.qkv_stride = a.qkv_stride;
  k.z = a.z;
  k.z_stride = a.z_stride;
  k.b = a.b;
  k.b_stride = a.b_stride;
  k.a = a.a;
  k.a_stride = a.a_stride;
  k.conv_w = a.w.conv;
  k.a_log = a.w.a_log;
  k.dt_bias = a.w.dt_bias;
  k.norm_weight = a.w.norm_weight;
  k.conv_state = a.state.conv;
  k.rec_state = a.state.recurrent;
  k.conv_ckpt = ckpt ? a.state.conv_ckpt : nullptr;
  k.rec_ckpt = ckpt ? a.state.recurrent_ckpt : nullptr;
  k.seqs = a.seqs;
  k.out = a.out;
  k.out_stride = a.out_stride;
  float* ws = static_cast<float*>(a.workspace);
  k.ws_conv = ws + lay.conv;
  k.ws_beta = ws + lay.beta;
  k.ws_g = ws + lay.g;
  k.ws_gam = ws + lay.gam;
  k.ws_w = ws + lay.w;
  k.ws_u = ws + lay.u;
  k.ws_qe = ws + lay.qe;
  k.ws_p = ws + lay.p;

  const uint32_t seqs = static_cast<uint32_t>(a.n_seqs);
  const uint32_t nv = static_cast<uint32_t>(p.n_v_heads);
  const bool chunked = a.mode == Mode::kChunked || (a.mode == Mode::kAuto && a.max_seq_tokens > kChunkTokens);
  plan->conv = launch(
      true, {static_cast<uint32_t>(2 * p.n_k_heads + p.n_v_heads), ceil_div(a.max_seq_tokens, kConvTokens), seqs},
      kConvThreads, kConvSmemFloats);
  plan->recurrent = launch(true, {nv, seqs, 1}, 4 * p.head_v_dim, recurrent_smem_floats(p.head_k_dim, p.head_v_dim));
  plan->prep = launch(chunked, {ceil_div(a.max_seq_tokens, kChunkTokens), nv, seqs}, kPrepThreads, kPrepSmemFloats);
  int32_t cols = opt.pass_cols;
  if (cols == 0) {
    const int64_t blocks16 = int64_t{a.n_seqs} * p.n_v_heads * ceil_div(p.head_v_dim, 16);
    cols = opt.sm_count > 0 && blocks16 > 2 * int64_t{opt.sm_count} ? 32 : 16;
  }
  plan->pass_cols = cols;
  plan->state_pass =
      launch(chunked, {ceil_div(p.head_v_dim, cols), nv, seqs}, pass_threads(cols), pass_smem_floats(cols));
  plan->norm = launch(chunked, {static_cast<uint32_t>(a.max_seq_tokens), seqs, 1}, kNormThreads, 0);
  return KernelStatus::Ok();
}

KernelStatus plan_commit(const Params& p, const State* layers, int32_t n_layers, const Commit* commits,
                         int32_t n_commits, void* stream, CommitPlan* plan) {
  if (plan == nullptr) return VS_KERNEL_FAIL(kBadArgument, "gdn commit: plan is null");
  *plan = CommitPlan{};
  if (KernelStatus st = check_params(p); !st.ok()) return st;
  if (n_commits < 0) return VS_KERNEL_FAIL(kBadShape, "gdn commit: n_commits must be >= 0");
  plan->stream = stream;
  if (n_commits == 0) return KernelStatus::Ok();
  if (n_commits > 65535) return VS_KERNEL_FAIL(kUnsupported, "gdn commit: n_commits above the grid limit (65535)");
  if (n_layers < 1 || n_layers > kMaxCommitLayers) {
    return VS_KERNEL_FAIL(kBadShape, "gdn commit: n_layers must be 1 ..= 64 per launch");
  }
  if (commits == nullptr || layers == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "gdn commit: commits and layers must be set");
  }
  CommitArgs& k = plan->k;
  k.max_ckpt_tokens = layers[0].max_ckpt_tokens;
  for (int32_t l = 0; l < n_layers; ++l) {
    const State& s = layers[l];
    if (s.conv == nullptr || s.recurrent == nullptr || s.conv_ckpt == nullptr || s.recurrent_ckpt == nullptr ||
        s.max_ckpt_tokens <= 0) {
      return VS_KERNEL_FAIL(kBadArgument,
                            "gdn commit: every layer's states, checkpoints and max_ckpt_tokens must be set");
    }
    if (s.max_ckpt_tokens != k.max_ckpt_tokens) {
      return VS_KERNEL_FAIL(kBadShape, "gdn commit: the layers' max_ckpt_tokens differ");
    }
    if (!aligned(s.recurrent, 16) || !aligned(s.recurrent_ckpt, 16)) {
      return VS_KERNEL_FAIL(kBadArgument, "gdn commit: recurrent state and checkpoints must be 16-byte aligned");
    }
    k.layers[l] = CommitLayer{s.conv, s.recurrent, s.conv_ckpt, s.recurrent_ckpt};
  }
  k.conv_width = p.conv_state_width();
  k.state_size = p.recurrent_state_size();
  k.head_k_dim = p.head_k_dim;
  k.head_v_dim = p.head_v_dim;
  k.commits = commits;
  k.n_commits = n_commits;
  k.rec_blocks = static_cast<int32_t>(ceil_div(k.state_size, kCommitRecFloats));
  const uint32_t conv_blocks = ceil_div(k.conv_width, kCommitConvFloats);
  plan->copy = launch(true,
                      {static_cast<uint32_t>(k.rec_blocks) + conv_blocks, static_cast<uint32_t>(n_commits),
                       static_cast<uint32_t>(n_layers)},
                      kCommitThreads, 0);
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::gdn
