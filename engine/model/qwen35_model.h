// Qwen35Model: the Qwen3.5/3.6/3.8 hybrid text model's forward pass (MODEL.md §2), written once against Backend:
// embedding, pre-norm decoder layers (Gated DeltaNet or gated full attention, then SwiGLU) with each layer's final
// add fused into the next norm, final norm, lm_head and sampling for the step's output rows. Activations live in a
// workspace sized once for the largest step (configure()), so a step's tensors are the same views every time.
// Tested against transformers' logits and greedy continuations in tests/golden/qwen35_golden_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/qwen35_weights.h"
#include "voltserve/status.h"

namespace voltserve {

// Sequence state of every layer: paged KV for the full-attention layers, conv + recurrent slots (and, for
// speculative verification, per-token checkpoints) for the GDN ones.
struct Qwen35Cache {
  int32_t page_size = 16;
  int32_t n_pages = 0;
  int32_t n_slots = 0;
  int32_t max_verify_tokens = 0;
  int32_t n_snapshots = 0;  // prefix-cache snapshot rows of every GDN layer (GdnStateLayer::conv_snap)
  std::vector<KvCacheLayer> kv;    // one per layer (empty tensors for GDN layers)
  std::vector<GdnStateLayer> gdn;  // one per layer (empty tensors for attention layers)
};

// The step the model must hold (its workspace and the backend's step buffers).
struct ModelStepLimits {
  int32_t max_tokens = 256;     // token rows per step
  int32_t max_seqs = 16;        // sequences per step
  int32_t max_page_refs = 0;    // page-table entries per step
  int32_t max_bias = 0;         // logit_bias entries per step
  int32_t logits_rows = 0;      // rows of the lm_head's logits workspace (outputs are processed in such chunks);
                                // 0: min(max_tokens, 64)
  int32_t n_slots = 1;
  int32_t n_vocab_real = 0;
  int64_t scratch_bytes = 0;    // kernel scratch the backend reserves now (StepLimits::scratch_bytes)
};

class Qwen35Model {
 public:
  // Reads config.json (+ generation_config.json) and the checkpoint of `model_dir` into `backend`'s memory.
  static Result<std::unique_ptr<Qwen35Model>> load(const std::filesystem::path& model_dir, Backend& backend);
  // A model of the real shapes and formats of `config_file` (a config.json, its quantization_config deciding each
  // layer's format) with seeded synthetic weights (benchmarks; see model/weight_provider.h).
  static Result<std::unique_ptr<Qwen35Model>> load_synthetic(const std::filesystem::path& config_file, uint64_t seed,
                                                             Backend& backend);
  // The weights of `config` from `weights` (model/model_source.h opens a folder or a synthetic config once, so that
  // the memory plan and the load read the same source).
  static Result<std::unique_ptr<Qwen35Model>> load(const ModelConfig& config, WeightProvider& weights,
                                                   Backend& backend);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return *backend_; }
  // What the MTP head shares with the model: the embedding, the lm_head, and, after forward(), the final-normed
  // hidden states of the step's rows ([n_tokens, hidden], activation dtype; valid until the next forward()).
  const PreparedLinear& embedding() const { return *weights_.embed; }
  const PreparedLinear& output() const { return weights_.output(); }
  Tensor final_hidden(int64_t n_tokens) const { return workspace_.normed.first_rows(n_tokens); }
  // The same rows before the final norm (fp32 on every backend: the MTP head's input, normed there in fp32).
  Tensor final_residual(int64_t n_tokens) const { return workspace_.residual.first_rows(n_tokens); }
  const Tensor& final_norm() const { return weights_.final_norm; }

  // Allocates the workspace and the backend's step buffers for steps within `limits` (once).
  Status configure(const ModelStepLimits& limits);
  const ModelStepLimits& limits() const { return limits_; }

  // The KV pages' element type (model/kv_cache_dtype.h); until set, the backend's activation dtype. fp8 pages get
  // each layer's checkpoint scales (Qwen35AttentionLayer::k_scale / v_scale).
  void set_kv_cache_dtype(DType dtype) { kv_dtype_ = dtype; }
  DType kv_cache_dtype() const;
  Result<Qwen35Cache> alloc_cache(int32_t page_size, int32_t n_pages, int32_t n_slots, int32_t max_verify_tokens,
                                  int32_t n_snapshots = 0) const;
  // Zeroes the conv and recurrent state of `slot` in every GDN layer and its sampling penalty state.
  Status reset_slot(Qwen35Cache& cache, int32_t slot) const;
  // Keeps the GDN state after token `index` of the slot's last verify item (checkpoint -> state, every layer).
  Status commit(Qwen35Cache& cache, int32_t slot, int32_t index) const;
  // Prefix caching: every GDN layer's state of `slot` into snapshot row `snapshot` and back; KV page src -> dst in
  // every attention layer.
  Status save_state(Qwen35Cache& cache, int32_t slot, int32_t snapshot) const;
  Status load_state(Qwen35Cache& cache, int32_t snapshot, int32_t slot) const;
  Status copy_page(Qwen35Cache& cache, int32_t src_page, int32_t dst_page) const;

  // One batched step; the batch is assumed valid (the runner checks it). Structured-output masks may still be in
  // the making: the backend calls batch.complete_masks when it needs them. defer: the step ends with
  // Backend::end_step_deferred (result stays empty; its rows come with take_deferred).
  Status forward(const StepBatch& batch, Qwen35Cache& cache, StepResult& result, bool defer = false) const;

 private:
  Qwen35Model() = default;
  std::optional<DType> kv_dtype_;
  void set_params();
  // The activations of one step: views of the workspace's first T rows.
  struct Activations {
    Tensor residual;   // [T, hidden] fp32, the residual stream h
    Tensor normed;     // [T, hidden] act, the input of the next linear
    Tensor mixed;      // [T, hidden] fp32, a mixer's or the MLP's output
    Tensor attn_proj;  // [T, q_rows + 2 kv_rows] fp32
    Tensor attn_out;   // [T, n_heads * head_dim] act
    Tensor gdn_proj;   // [T, conv_dim + v_dim + 2 n_v_heads] fp32
    Tensor gdn_out;    // [T, v_dim] act
    Tensor gate_up;    // [T, 2 intermediate] fp32
    Tensor mlp_act;    // [T, intermediate] act
    Tensor hidden;     // [n_outputs, hidden] act, the final-normed output rows
    Tensor logits;     // [logits_rows, vocab] fp32
  };
  Activations activations(int64_t n_tokens, int64_t n_outputs) const;
  Status forward_once(const StepBatch& batch, Qwen35Cache& cache, StepResult& result, bool defer) const;
  void attention_mixer(const Qwen35Layer& layer, size_t index, const Activations& act, Qwen35Cache& cache) const;
  void gdn_mixer(const Qwen35Layer& layer, size_t index, const Activations& act, Qwen35Cache& cache) const;

  ModelConfig config_;
  Backend* backend_ = nullptr;
  Qwen35Weights weights_;
  AttentionParams attn_params_;
  GdnParams gdn_params_;
  ModelStepLimits limits_;
  bool configured_ = false;
  Activations workspace_;  // sized for limits_.max_tokens rows
};

}  // namespace voltserve
