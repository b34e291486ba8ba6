// Backend: the op interface the Qwen3.5 forward pass is written against once (engine/model/qwen35_model.cpp).
// Ops are coarse and fused (a whole gated-attention or Gated DeltaNet mixer is one call) so a device backend can
// fuse freely; the CPU backend (backend/cpu/) is the fp32 reference, tested in tests/golden against transformers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "voltserve/status.h"

namespace voltserve {

struct LinearWeight;

// A row-major matrix of activations or small parameters in backend memory: [rows, cols], fp32 on the CPU.
// Copies share the storage (the shared_ptr keeps it alive); `data` points into it.
struct Tensor {
  std::shared_ptr<float> storage;
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t numel() const { return rows * cols; }
  float* row(int64_t r) const { return data + r * cols; }
};

// A linear layer's weight prepared for this backend (CPU: dequantized fp32 [n, k]). y = x W^T, W is [n, k].
class PreparedLinear {
 public:
  virtual ~PreparedLinear() = default;
  virtual int64_t n() const = 0;  // output features
  virtual int64_t k() const = 0;  // input features
};

// One sequence's share of a batched step: its tokens are rows [row0, row0 + n_tokens) of the activations,
// at positions n_past .. n_past + n_tokens - 1.
struct SeqSegment {
  int32_t row0 = 0;
  int32_t n_tokens = 0;
  int32_t n_past = 0;
  int32_t slot = -1;                    // recurrent-state slot (GDN layers)
  std::span<const int32_t> page_table;  // KV pages covering positions [0, n_past + n_tokens) (attention layers)
};

// Gated full attention (MODEL.md §2.5). Norm weights arrive with the zero-centred "+1" already added.
struct AttentionParams {
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rotary_dim = 0;  // NeoX pairs (j, j + rotary_dim/2) for j < rotary_dim/2; the rest passes through
  float rope_theta = 10000.0f;
  float rms_norm_eps = 1e-6f;
  int32_t page_size = 16;
};
struct AttentionWeights {
  Tensor q_norm;  // [1, head_dim], (1 + w)
  Tensor k_norm;  // [1, head_dim], (1 + w)
};
// Paged KV memory of one attention layer: row `page * page_size + offset` holds one position's
// [n_kv_heads * head_dim] keys (k) or values (v).
struct KvCacheLayer {
  Tensor k;  // [n_pages * page_size, n_kv_heads * head_dim]
  Tensor v;
};

// Gated DeltaNet mixer (MODEL.md §2.6).
struct GdnParams {
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;  // a multiple of n_k_heads; v-head j reads q/k head j / (n_v_heads / n_k_heads)
  int32_t head_k_dim = 0;
  int32_t head_v_dim = 0;
  int32_t conv_kernel = 4;
  float rms_norm_eps = 1e-6f;
  int32_t conv_dim() const { return 2 * n_k_heads * head_k_dim + n_v_heads * head_v_dim; }
};
struct GdnWeights {
  Tensor conv;         // [conv_dim, conv_kernel]; the last tap multiplies the current token
  Tensor a_log;        // [1, n_v_heads]
  Tensor dt_bias;      // [1, n_v_heads]
  Tensor norm_weight;  // [1, head_v_dim], the plain weight of the gated RMSNorm (no +1)
};
// Per-slot recurrent state of one GDN layer.
struct GdnStateLayer {
  Tensor conv;       // [n_slots, conv_dim * (conv_kernel - 1)]: the last K-1 pre-conv qkv inputs, [channel][tap]
  Tensor recurrent;  // [n_slots, n_v_heads * head_k_dim * head_v_dim]: S[j][d_k][d_v], fp32
};

// How a GDN mixer processes a multi-token segment; both give the same result up to fp32 rounding.
enum class GdnMode {
  kAuto,        // chunked for segments longer than one chunk, sequential otherwise
  kSequential,  // the token-by-token delta rule (MODEL.md §2.6)
  kChunked,     // the chunked WY form with chunks of 64 (MODEL.md §3)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Memory. alloc() returns zeroed storage.
  virtual Tensor alloc(int64_t rows, int64_t cols) = 0;
  virtual Tensor upload(std::span<const float> host, int64_t rows, int64_t cols) = 0;
  virtual void download(const Tensor& t, std::span<float> host) = 0;
  virtual void zero(Tensor& t, int64_t row_begin, int64_t row_end) = 0;
  virtual Result<std::unique_ptr<PreparedLinear>> prepare_linear(const LinearWeight& w) = 0;

  // out[i] = table row ids[i] (the embedding as a [vocab, hidden] linear weight, shared with a tied lm_head).
  virtual void embed(const PreparedLinear& table, std::span<const int32_t> ids, Tensor& out) = 0;
  // out = x / sqrt(mean(x^2) + eps) * w, per row. `w` already holds (1 + w) for the zero-centred norms.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // residual += x; out = rms_norm(residual) (the pre-norm decoder layer's add-then-norm).
  virtual void rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) = 0;
  // out = x W^T for the first x.rows rows; out is [x.rows, n].
  virtual void linear(const PreparedLinear& w, const Tensor& x, Tensor& out) = 0;
  // out[r] = x[rows[r]]
  virtual void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) = 0;
  // out = silu(gate) * up, elementwise.
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // residual += x
  virtual void add(const Tensor& x, Tensor& residual) = 0;

  // Gated attention after the projections. qg: q_proj output [T, n_heads * 2 * head_dim] (per head [query|gate]);
  // k, v: [T, n_kv_heads * head_dim]. Writes each token's normed, rotated key and its value into the cache, attends
  // causally over the sequence's cached positions, and writes o * sigmoid(gate) to out [T, n_heads * head_dim].
  virtual void gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg,
                               const Tensor& k, const Tensor& v, std::span<const SeqSegment> segs,
                               KvCacheLayer& cache, Tensor& out) = 0;

  // Gated DeltaNet after the projections. qkv: in_proj_qkv output [T, conv_dim]; z: [T, n_v_heads * head_v_dim];
  // b, a: [T, n_v_heads]. Runs the causal conv + SiLU (continuing the slot's conv state), the L2 norms, the
  // delta rule (continuing the slot's recurrent state) and the gated RMSNorm; out is [T, n_v_heads * head_v_dim].
  virtual void gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z,
                         const Tensor& b, const Tensor& a, std::span<const SeqSegment> segs, GdnStateLayer& state,
                         Tensor& out) = 0;
};

struct CpuBackendOptions {
  int32_t n_threads = 0;  // 0: min(hardware threads, 8)
  GdnMode gdn_mode = GdnMode::kAuto;
};
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

}  // namespace voltserve
