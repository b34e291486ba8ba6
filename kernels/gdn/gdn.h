// The Gated DeltaNet mixer of the Qwen3.5 hybrid (MODEL.md §2.6, §3) after its input projections: causal depthwise
// conv over the qkv channels continuing the slot's conv state, SiLU, per-head L2 norm of q and k (eps 1e-6 inside
// the sqrt) with q then scaled by 1/sqrt(head_k_dim), beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)
// in fp32, the gated delta rule (v-head j reads q/k head j / (n_v_heads / n_k_heads)) continuing the slot's fp32
// recurrent state — token by token (MODEL.md §2.6) or in chunks of 64 (the WY form, MODEL.md §3) — and the per-head
// gated RMSNorm y = (w * rmsnorm(o)) * silu(z). The reference (gdn_ref.cpp, fp32, CUDA-free) is the CPU backend's
// implementation and the oracle of the device kernels (tests/kernels/gdn_gpu_test.cpp). CUDA-free header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/host_device.h"
#include "common/host_parallel.h"
#include "common/kernel_status.h"
#include "common/step_desc.h"

namespace voltserve::kernels::gdn {

struct Params {
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;   // a multiple of n_k_heads
  int32_t head_k_dim = 0;  // 128 on every Qwen3.5 model; kernels support multiples of 8 up to 128
  int32_t head_v_dim = 0;  // likewise (the tiny fixtures have 24)
  int32_t conv_kernel = 4;  // taps K >= 2 (the device kernels take K <= 8); the last tap multiplies the current token
  float rms_norm_eps = 1e-6f;  // of the gated RMSNorm
  int32_t conv_dim() const { return 2 * n_k_heads * head_k_dim + n_v_heads * head_v_dim; }
  int32_t conv_state_width() const { return conv_dim() * (conv_kernel - 1); }
  int64_t recurrent_state_size() const { return int64_t{n_v_heads} * head_k_dim * head_v_dim; }
};

// Per-layer parameters, fp32 (host memory for the reference, device memory for the kernels).
struct Weights {
  const float* conv = nullptr;         // [conv_dim, conv_kernel]
  const float* a_log = nullptr;        // [n_v_heads]
  const float* dt_bias = nullptr;      // [n_v_heads]
  const float* norm_weight = nullptr;  // [head_v_dim], the plain gated-norm weight (no +1)
};

// Per-layer state, fp32, indexed by SeqDesc::slot.
//   conv      [n_slots, conv_dim * (K - 1)]: per channel c the last K-1 pre-conv inputs, oldest first, at
//             c * (K - 1) + tap
//   recurrent [n_slots, n_v_heads, head_k_dim, head_v_dim]: S_j[d_k][d_v] (HF / FLA layout)
// Checkpoints (speculative verify, SeqDesc::ckpt >= 0): after token t (0-based in the step) of such a sequence,
// its conv and recurrent state are also written to checkpoint (ckpt, t) — rows ckpt * max_ckpt_tokens + t of
//   conv_ckpt      [n_ckpt * max_ckpt_tokens, conv_dim * (K - 1)]
//   recurrent_ckpt [n_ckpt * max_ckpt_tokens, n_v_heads * head_k_dim * head_v_dim]
// Within a recurrent checkpoint row each v-head's dk * dv floats are in the checkpoint layout (ckpt_offset below),
// not the slot's [dk][dv]. A verify item has n_tokens <= max_ckpt_tokens. commit (below) copies a checkpoint back
// into a slot (transposing).
struct State {
  float* conv = nullptr;
  float* recurrent = nullptr;
  float* conv_ckpt = nullptr;
  float* recurrent_ckpt = nullptr;
  int32_t max_ckpt_tokens = 0;
};

// Where state entry S[d][e] of one v-head lies inside that head's dk * dv floats of a recurrent checkpoint row:
// value-column quads outermost, [dv / 4][dk][4], so the recurrent kernel's per-token checkpoint store (a lane's 4
// consecutive columns of row d, lanes on consecutive rows) is one contiguous 512-byte run per warp instruction,
// whole 32-byte sectors, where the slot layout [dk][dv] (HF / FLA) would scatter half sectors over 32 rows (2.5x
// slower on the H200, bench/RESULTS.md). (The reference also takes head_v_dim % 4 != 0: the last columns follow,
// [dk][dv % 4].)
VS_HD int64_t ckpt_offset(int32_t dk, int32_t dv, int32_t d, int32_t e) {
  const int32_t quads = dv / 4 * 4;
  if (e >= quads) return int64_t{quads} * dk + int64_t{d} * (dv - quads) + (e - quads);
  return (int64_t{e} / 4 * dk + d) * 4 + e % 4;
}

enum class Mode {
  kAuto,        // chunked for segments longer than one chunk (64 tokens), token by token otherwise
  kSequential,  // always token by token
  kChunked,     // always chunked (except sequences with checkpoints, which are always token by token)
};

// Inputs (strides in elements; rows as in SeqDesc): qkv [T, conv_dim] (in_proj_qkv output: [q | k | v], each
// head-major), z [T, n_v_heads * head_v_dim], b and a [T, n_v_heads]. out [T, n_v_heads * head_v_dim].
struct RefArgs {
  const float* qkv = nullptr;
  int64_t qkv_stride = 0;
  const float* z = nullptr;
  int64_t z_stride = 0;
  const float* b = nullptr;
  int64_t b_stride = 0;
  const float* a = nullptr;
  int64_t a_stride = 0;
  Weights w;
  State state;
  const SeqDesc* seqs = nullptr;
  int32_t n_seqs = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  Mode mode = Mode::kAuto;
  const HostParallel* parallel = nullptr;
};
void gdn_ref(const Params& p, const RefArgs& a);

// One checkpoint copied into a slot's main state: the state after token `index` of the verify item that wrote
// checkpoint set `ckpt` (speculative decoding keeps the state of the last accepted token).
struct Commit {
  int32_t slot = -1;
  int32_t ckpt = -1;
  int32_t index = 0;
};
// Commits with a negative slot / ckpt or an index outside [0, max_ckpt_tokens) are skipped, as on the device.
void commit_ref(const Params& p, const State& s, const Commit* commits, int32_t n_commits);

// Device form: every pointer is device memory; out is fp16 (the out_proj input) or fp32.
struct DeviceArgs {
  const float* qkv = nullptr;
  int64_t qkv_stride = 0;
  const float* z = nullptr;
  int64_t z_stride = 0;
  const float* b = nullptr;
  int64_t b_stride = 0;
  const float* a = nullptr;
  int64_t a_stride = 0;
  Weights w;
  State state;
  const SeqDesc* seqs = nullptr;
  int32_t n_seqs = 0;
  void* out = nullptr;
  int64_t out_stride = 0;
  DType out_dtype = DType::kF16;
  Mode mode = Mode::kAuto;
  // Host-known upper bounds that size the launches (may exceed the step's actual values; see attention.h).
  int32_t n_rows = 0;
  int32_t max_seq_tokens = 0;
  void* workspace = nullptr;  // scratch: conv outputs, beta, g, chunk intermediates
  size_t workspace_bytes = 0;
  void* stream = nullptr;
  // Programmatic dependent launch (sm_90+ only; kernels/common/pdl.cuh): the kernels may be scheduled while the
  // previous kernel in the stream still runs; the recurrent kernel reads its state before waiting for it.
  bool pdl = false;
};
// Scratch of the device form: per token row the conv outputs and gates, and the chunked form's W, U, Qe, P
// (gdn_math.h WorkspaceLayout; 140 KB per row on the 27B shapes, whatever the mode). 256-byte aligned.
size_t workspace_bytes(const Params& p, int32_t n_rows, int32_t n_seqs, int32_t max_seq_tokens);
// Checks shapes and pointers on the host (kernels/gdn/gdn_plan.cpp), then launches on a.stream (kernels/gdn/gdn.cu:
// the kernels and their launch shapes). Sequences with checkpoints, and the others as `mode` decides (kAuto:
// n_tokens <= 64), run token by token with the state in registers; the rest run the chunked form.
KernelStatus gdn_forward(const Params& p, const DeviceArgs& a);
// Applies every commit to each of n_layers layers of one model (a host array of their device states; the same Params
// and max_ckpt_tokens): one launch per 64 layers, so a verify round's rollback is one kernel rather than one per
// layer. commits: device array of n_commits entries.
KernelStatus commit(const Params& p, const State* layers, int32_t n_layers, const Commit* commits, int32_t n_commits,
                    void* stream);

}  // namespace voltserve::kernels::gdn
