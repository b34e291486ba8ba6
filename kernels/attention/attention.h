// Gated full attention of the Qwen3.5 hybrid (MODEL.md §2.5) after the q/k/v projections, over a paged KV cache:
// per-head [query | gate] split of q_proj's output, (1+w) RMSNorm of q and k per head, partial NeoX RoPE, GQA
// (q head h reads kv head h / (n_heads / n_kv_heads)), causal softmax in fp32, output times sigmoid(gate).
// The reference (attention_ref.cpp, fp32, CUDA-free) is the CPU backend's implementation and the oracle of the
// device kernels (tests/kernels/attention_gpu_test.cpp). CUDA-free header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/host_parallel.h"
#include "common/kernel_status.h"
#include "common/step_desc.h"

namespace voltserve::kernels::attention {

struct Params {
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;   // divides n_heads
  int32_t head_dim = 0;     // 256 on every Qwen3.5 model; kernels support any multiple of 32 up to 256
  int32_t rotary_dim = 0;   // even, <= head_dim: NeoX pairs (j, j + rotary_dim/2) for j < rotary_dim/2 are rotated
  float rope_theta = 1e7f;  // inv_freq[j] = rope_theta^(-2j/rotary_dim); angle = position * inv_freq[j] in fp32
  float rms_norm_eps = 1e-6f;
  int32_t page_size = 16;   // positions per KV page
};

// Inputs, for both forms (strides in elements, rows = the step's token rows; sequence s owns rows
// [seqs[s].row0, seqs[s].row0 + seqs[s].n_tokens) at positions n_past .. n_past + n_tokens - 1):
//   qg [T, n_heads * 2 * head_dim]: per head h, [query (head_dim) | gate (head_dim)] (q_proj output, un-normed)
//   k, v [T, n_kv_heads * head_dim]: k_proj / v_proj outputs (un-normed, un-rotated)
//   q_norm, k_norm [head_dim]: the (1 + w) RMSNorm weights
// Effects, for every sequence:
//   1. each token's key is normed (over head_dim, per kv head) and rotated at its position, and stored with its value
//      into the cache: cache row page_table[page_offset + pos / page_size] * page_size + pos % page_size;
//   2. each token's query (normed, rotated) attends over positions 0 .. its own of the same sequence (the cached
//      ones and this step's, causally), scale 1/sqrt(head_dim);
//   3. out[row, h * head_dim + d] = o[d] * sigmoid(gate[d]) (the raw gate half, neither normed nor rotated).
// Entries with n_tokens == 0 are skipped. Sequences never share pages they write.

struct RefArgs {
  const float* qg = nullptr;
  int64_t qg_stride = 0;
  const float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  // [n_pages * page_size, n_kv_heads * head_dim] of cache_dtype: kF32 (the default), kF16, kBF16 (round to nearest
  // even) or kF8E4M3 (stored = e4m3(x / scale), as the device form stores it); read back exactly as stored.
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  DType cache_dtype = DType::kF32;
  float k_scale = 1.0f;  // kF8E4M3 only
  float v_scale = 1.0f;
  const SeqDesc* seqs = nullptr;
  int32_t n_seqs = 0;
  const int32_t* page_table = nullptr;
  float* out = nullptr;  // [T, n_heads * head_dim]
  int64_t out_stride = 0;
  const HostParallel* parallel = nullptr;
};
void gated_attention_ref(const Params& p, const RefArgs& a);

// Device form: every pointer is device memory; k_cache, v_cache and workspace 16-byte aligned (as cudaMalloc's
// are). The KV cache holds fp16 (cache_dtype kF16) or e4m3 (kF8E4M3: stored = e4m3(x / scale), rounded to nearest
// even and saturated to +-448, common/e4m3_codec.h; decoded in registers, fp32 arithmetic as for fp16). out is fp16
// (the o_proj input) or fp32.
struct DeviceArgs {
  const float* qg = nullptr;
  int64_t qg_stride = 0;
  const float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  DType cache_dtype = DType::kF16;
  float k_scale = 1.0f;  // kF8E4M3: the layer's per-tensor scales (the checkpoint's k_scale / v_scale, else 1)
  float v_scale = 1.0f;
  const SeqDesc* seqs = nullptr;
  int32_t n_seqs = 0;  // entries in seqs (padding entries with n_tokens == 0 allowed)
  const int32_t* page_table = nullptr;
  void* out = nullptr;
  int64_t out_stride = 0;
  DType out_dtype = DType::kF16;
  // Host-known upper bounds that size the launches (a captured CUDA graph keeps them, so they may exceed the
  // step's actual values; kernels read the real ones from seqs). An entry outside them (rows past n_rows, more
  // than max_seq_tokens rows, context past max_context) is skipped like padding: nothing is read or written for it.
  // Cache rows are addressed with 32-bit row indices (n_pages * page_size < 2^31).
  int32_t n_rows = 0;          // >= the step's token rows
  int32_t max_seq_tokens = 0;  // >= every seqs[i].n_tokens
  int32_t max_context = 0;     // >= every seqs[i].n_past + seqs[i].n_tokens
  void* workspace = nullptr;   // scratch (normed, rotated queries; split-context partial results)
  size_t workspace_bytes = 0;
  void* stream = nullptr;      // cudaStream_t
  bool pdl = false;            // programmatic dependent launch (sm_90+ only; kernels/common/pdl.cuh)
};

// Scratch the device form needs for these bounds.
size_t workspace_bytes(const Params& p, int32_t n_rows, int32_t n_seqs, int32_t max_seq_tokens, int32_t max_context);

// Checks shapes and pointers on the host, then launches on a.stream. Segments of up to 16 tokens (decode and
// speculative verify) take the decode kernel (split over the context for long sequences); longer ones the
// flash-style prefill kernel.
KernelStatus gated_attention(const Params& p, const DeviceArgs& a);

}  // namespace voltserve::kernels::attention
