// The host side of the Gated DeltaNet device form: argument checks and the launch plan (which kernels, their
// grids and their flat arguments) that gdn.cu launches and tests/kernels/gdn_emulator.h replays on the CPU.
// CUDA-free; tested by tests/kernels/gdn_blocks_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/kernel_status.h"
#include "common/step_desc.h"
#include "gdn/gdn.h"

namespace voltserve::kernels::gdn {

// Everything a GDN kernel reads, flattened (passed by value to every kernel). Pointers are device memory (host
// memory under the emulator). Strides in elements.
struct KernelArgs {
  int32_t n_k_heads = 0, n_v_heads = 0, head_k_dim = 0, head_v_dim = 0;
  int32_t conv_kernel = 0;  // K
  int32_t ratio = 0;        // n_v_heads / n_k_heads: v-head j reads q/k head j / ratio
  int32_t conv_dim = 0;     // 2 * n_k_heads * head_k_dim + n_v_heads * head_v_dim
  int32_t conv_width = 0;   // conv_dim * (K - 1): one slot's conv state
  float q_scale = 0.0f;     // 1 / sqrt(head_k_dim)
  float rms_norm_eps = 0.0f;
  int32_t n_rows = 0, max_seq_tokens = 0, n_seqs = 0;
  Mode mode = Mode::kAuto;
  bool ckpt_enabled = false;  // State::recurrent_ckpt != nullptr (then conv_ckpt is too)
  bool out_f16 = true;
  int32_t max_ckpt_tokens = 0;

  const float* qkv = nullptr;  // [rows, conv_dim] at qkv_stride
  int64_t qkv_stride = 0;
  const float* z = nullptr;  // [rows, n_v_heads * head_v_dim]
  int64_t z_stride = 0;
  const float* b = nullptr;  // [rows, n_v_heads]
  int64_t b_stride = 0;
  const float* a = nullptr;  // [rows, n_v_heads]
  int64_t a_stride = 0;
  const float* conv_w = nullptr;       // [conv_dim, K]
  const float* a_log = nullptr;        // [n_v_heads]
  const float* dt_bias = nullptr;      // [n_v_heads]
  const float* norm_weight = nullptr;  // [head_v_dim]
  float* conv_state = nullptr;         // [slots, conv_width]
  float* rec_state = nullptr;          // [slots, n_v_heads, head_k_dim, head_v_dim]
  float* conv_ckpt = nullptr;          // [ckpt rows, conv_width]
  float* rec_ckpt = nullptr;           // [ckpt rows, n_v_heads * head_k_dim * head_v_dim]
  const SeqDesc* seqs = nullptr;
  void* out = nullptr;  // [rows, n_v_heads * head_v_dim] fp16 or fp32 at out_stride
  int64_t out_stride = 0;

  // Workspace sections (gdn_math.h WorkspaceLayout).
  float* ws_conv = nullptr;
  float* ws_beta = nullptr;
  float* ws_g = nullptr;
  float* ws_gam = nullptr;
  float* ws_w = nullptr;
  float* ws_u = nullptr;
  float* ws_qe = nullptr;
  float* ws_p = nullptr;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

struct Launch {
  bool run = false;
  Dim3 grid;
  uint32_t threads = 0;
  size_t smem_bytes = 0;
};

// The kernels of one gdn_forward, in stream order. The chunked ones run only when some sequence may take the
// chunked form (kChunked, or kAuto with max_seq_tokens > 64); their blocks skip sequences that do not.
struct ForwardPlan {
  KernelArgs k;
  Launch conv;             // grid (2 n_k + n_v heads, ceil(max_seq_tokens / 16), n_seqs)
  Launch recurrent;        // grid (n_v_heads, n_seqs), 4 * head_v_dim threads
  Launch prep;             // grid (ceil(max_seq_tokens / 64), n_v_heads, n_seqs)
  Launch state_pass;       // grid (ceil(head_v_dim / pass_cols), n_v_heads, n_seqs), 8 pass_cols threads
  Launch norm;             // grid (max_seq_tokens, n_seqs)
  int32_t pass_cols = 16;  // value columns per state-pass block: 16 or 32 (gdn_blocks.h state_pass_block)
  void* stream = nullptr;
  bool pdl = false;  // DeviceArgs::pdl
};

struct PlanOptions {
  // Multiprocessors of the device (gdn_forward asks the runtime). The state pass takes 16 columns per block while
  // those blocks fit one wave at two per multiprocessor, else 32 (half the blocks, each re-reading W / Qe / K half
  // as often): on the H200 the 27B layer at batch 1 (384 blocks of 16 > 264 slots) passes 2048 tokens in 1.24 ms
  // at 32 columns against 1.97 ms at 16 (bench_gdn, bench/RESULTS.md).
  int32_t sm_count = 0;
  int32_t pass_cols = 0;  // 16 or 32 forces the width (tests, benchmark); 0 picks as above
};

// The kernels of a ForwardPlan, in the order gdn_forward launches them.
enum class Stage { kConv, kRecurrent, kPrep, kStatePass, kNorm };
constexpr Stage kStages[] = {Stage::kConv, Stage::kRecurrent, Stage::kPrep, Stage::kStatePass, Stage::kNorm};
inline const char* stage_name(Stage s) {
  switch (s) {
    case Stage::kConv:
      return "conv";
    case Stage::kRecurrent:
      return "recurrent";
    case Stage::kPrep:
      return "prep";
    case Stage::kStatePass:
      return "state_pass";
    case Stage::kNorm:
      return "norm";
  }
  return "?";
}

inline const Launch& stage_launch(const ForwardPlan& plan, Stage s) {
  switch (s) {
    case Stage::kConv:
      return plan.conv;
    case Stage::kRecurrent:
      return plan.recurrent;
    case Stage::kPrep:
      return plan.prep;
    case Stage::kStatePass:
      return plan.state_pass;
    case Stage::kNorm:
      break;
  }
  return plan.norm;
}

// Checks p and a (shapes, pointers, strides, alignment, workspace size) and fills the plan. n_seqs == 0,
// n_rows == 0 or max_seq_tokens == 0 give a plan that launches nothing.
KernelStatus plan_forward(const Params& p, const DeviceArgs& a, ForwardPlan* plan, const PlanOptions& opt = {});

// CUDA builds only (gdn.cu): launches one stage of the plan on plan.stream if the plan runs it (the benchmark
// times the stages one by one; gdn_forward launches all of them).
KernelStatus launch_stage(const ForwardPlan& plan, Stage stage);

// One layer's state and checkpoints in a commit launch (gdn.h State without max_ckpt_tokens, which they share).
struct CommitLayer {
  float* conv_state = nullptr;
  float* rec_state = nullptr;
  const float* conv_ckpt = nullptr;
  const float* rec_ckpt = nullptr;
};
// Layers per commit launch: their pointers travel in the kernel's parameters (64 x 32 bytes, inside the 4 KB every
// architecture takes); commit() launches once per 64 layers.
constexpr int32_t kMaxCommitLayers = 64;

struct CommitArgs {
  CommitLayer layers[kMaxCommitLayers];  // grid.z of the launch indexes them
  int32_t max_ckpt_tokens = 0;
  int32_t conv_width = 0;
  int64_t state_size = 0;  // n_v_heads * head_k_dim * head_v_dim (a multiple of 4)
  int32_t head_k_dim = 0;
  int32_t head_v_dim = 0;  // a multiple of 8
  const Commit* commits = nullptr;
  int32_t n_commits = 0;
  int32_t rec_blocks = 0;  // blocks of grid.x that copy the recurrent state; the rest copy the conv state
};

struct CommitPlan {
  CommitArgs k;
  Launch copy;  // grid (rec_blocks + conv blocks, n_commits, n_layers)
  void* stream = nullptr;
};

// layers: n_layers (1 ..= kMaxCommitLayers) layers of one model (the same Params and max_ckpt_tokens), host array
// of device pointers; commits: device array, applied to every layer.
KernelStatus plan_commit(const Params& p, const State* layers, int32_t n_layers, const Commit* commits,
                         int32_t n_commits, void* stream, CommitPlan* plan);

}  // namespace voltserve::kernels::gdn
