// ModelConfig: the Qwen3.5/3.6/3.8 text-model hyper-parameters from config.json (model_type "qwen3_5_text", or
// "qwen3_5" with a nested text_config; MODEL.md §1), with transformers' defaults for absent fields, plus eos ids
// (config.json + generation_config.json), the checkpoint's tensor prefix and its quantization config.
// Tested in tests/model/model_config_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model/quant_config.h"
#include "voltserve/status.h"

namespace voltserve {

enum class LayerType { kLinearAttention, kFullAttention };

struct ModelConfig {
  std::string model_type;            // outer model_type: "qwen3_5_text" or "qwen3_5"
  std::string dtype;                 // "bfloat16", ... as written ("dtype" or "torch_dtype"); informational
  int64_t hidden_size = 0;
  int64_t n_layers = 0;
  std::vector<LayerType> layer_types;  // n_layers entries (from layer_types or full_attention_interval)
  // Full ("gated") attention
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  bool attn_output_gate = true;      // q_proj holds [q | gate] per head
  // Gated DeltaNet (linear attention)
  int64_t linear_n_key_heads = 0;
  int64_t linear_n_value_heads = 0;  // a multiple of linear_n_key_heads
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;
  // MLP, vocabulary, norms
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  // RoPE (plain "default" rope only; text-only M-RoPE equals 1-D RoPE, MODEL.md §1.1)
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.25;
  int64_t rotary_dim = 0;            // int(head_dim * partial_rotary_factor), even
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  int64_t mtp_num_hidden_layers = 0;
  bool mtp_use_dedicated_embeddings = false;
  std::vector<int32_t> eos_token_ids;  // generation_config.json's first, then config.json's; no duplicates
  std::string tensor_prefix;         // "model.language_model." or "model." (detected from the tensor names)
  QuantConfig quantization;

  bool is_full_attention(int64_t layer) const { return layer_types[static_cast<size_t>(layer)] == LayerType::kFullAttention; }
  int64_t n_full_attention_layers() const;
  int64_t n_linear_attention_layers() const;
  int64_t linear_key_dim() const { return linear_n_key_heads * linear_key_head_dim; }      // q and k width
  int64_t linear_value_dim() const { return linear_n_value_heads * linear_value_head_dim; }  // v and z width
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }     // in_proj_qkv rows
};

// Reads config.json (+ generation_config.json, hf_quant_config.json when present) and the checkpoint's tensor
// names (for the prefix). Errors name the file and the field: NotFound (no config.json), InvalidArgument (bad JSON,
// wrong type or inconsistent value, e.g. layer_types of the wrong length), Unimplemented (model_type other than
// qwen3_5/qwen3_5_text, rope_type other than "default", hidden_act other than silu, attention_bias true, ...).
Result<ModelConfig> load_model_config(const std::filesystem::path& model_dir);
// Same from JSON text (tests). `tensor_names` gives the prefix; empty -> derived from model_type.
Result<ModelConfig> parse_model_config(std::string_view config_json, std::string_view generation_config_json,
                                       std::string_view hf_quant_config_json,
                                       const std::vector<std::string>& tensor_names);

}  // namespace voltserve
