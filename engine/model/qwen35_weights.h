// Qwen35Weights: every tensor of the Qwen3.5 text model, loaded from a WeightProvider (a checkpoint, or synthetic
// weights of a config's shapes) into a Backend (MODEL.md §5.1):
// linear layers in their checkpoint format via load_linear(), projections that read the same input merged into one
// backend weight (attention q|k|v, GDN qkv|z|b|a, MLP gate|up), the zero-centred norms with their "+1" added here
// (never for the plain-weight GDN gated norm), conv1d reshaped to [channels, K]. Tested through tests/golden.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/weight_provider.h"
#include "voltserve/status.h"

namespace voltserve {

struct Qwen35AttentionLayer {
  // [q_proj | k_proj | v_proj]: q_rows = n_heads * 2 * head_dim (per head [query | gate]), then 2 x kv_rows.
  std::unique_ptr<PreparedLinear> qkv;
  int64_t q_rows = 0;
  int64_t kv_rows = 0;                     // n_kv_heads * head_dim
  std::unique_ptr<PreparedLinear> o_proj;  // [hidden, n_heads * head_dim]
  AttentionWeights norms;                  // q_norm / k_norm, (1 + w)
  // The FP8 KV-cache scales of a ModelOpt or compressed-tensors export (stored = x / scale); 1 without.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

// Reads the optional KV-cache scales of the attention module `attn` ("...self_attn.") into layer.k_scale / v_scale:
// ModelOpt's attn.k_proj.k_scale / attn.v_proj.v_scale, else compressed-tensors' attn.k_scale / attn.v_scale, else 1.
Status load_kv_scales(WeightProvider& source, const std::string& attn, Qwen35AttentionLayer& layer);

struct Qwen35GdnLayer {
  // [in_proj_qkv | in_proj_z | in_proj_b | in_proj_a]: conv_dim, n_v_heads * head_v_dim, n_v_heads, n_v_heads rows.
  std::unique_ptr<PreparedLinear> in_proj;
  std::unique_ptr<PreparedLinear> out_proj;  // [hidden, n_v_heads * head_v_dim]
  GdnWeights w;
};

struct Qwen35Layer {
  LayerType type = LayerType::kLinearAttention;
  Tensor input_norm;  // [1, hidden], (1 + w)
  Tensor post_norm;   // [1, hidden], (1 + w)
  Qwen35AttentionLayer attn;  // full-attention layers
  Qwen35GdnLayer gdn;         // linear-attention layers
  std::unique_ptr<PreparedLinear> gate_up;    // [gate_proj | up_proj]: 2 x intermediate rows
  std::unique_ptr<PreparedLinear> down_proj;  // [hidden, intermediate]
};

struct Qwen35Weights {
  std::unique_ptr<PreparedLinear> embed;    // [vocab, hidden]
  std::unique_ptr<PreparedLinear> lm_head;  // [vocab, hidden]; null when tied (use embed)
  Tensor final_norm;                        // [1, hidden], (1 + w)
  std::vector<Qwen35Layer> layers;
  const PreparedLinear& output() const { return lm_head ? *lm_head : *embed; }
};

// Loads the text model's weights from `source` (vision and mtp.* tensors are not touched). Errors name the tensor.
Result<Qwen35Weights> load_qwen35_weights(WeightProvider& source, const ModelConfig& config, Backend& backend);

}  // namespace voltserve
