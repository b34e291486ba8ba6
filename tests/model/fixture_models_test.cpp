// Every fixture model under tests/fixtures/models/ (BF16 and quantized): its config parses and every Linear
// of the text model loads with the shape the config implies and dequantizes to finite values.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "model/linear_weight.h"
#include "model/tensor_names.h"

using namespace voltserve;

namespace {

struct LinearSpec {
  std::string module;
  int64_t n, k;
};

std::vector<LinearSpec> text_linears(const ModelConfig& c) {
  std::vector<LinearSpec> out;
  const std::string& p = c.tensor_prefix;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (c.is_full_attention(i)) {
      const int64_t q_rows = c.n_heads * c.head_dim * (c.attn_output_gate ? 2 : 1);
      out.push_back({layer_module(p, i, "self_attn.q_proj"), q_rows, c.hidden_size});
      out.push_back({layer_module(p, i, "self_attn.k_proj"), c.n_kv_heads * c.head_dim, c.hidden_size});
      out.push_back({layer_module(p, i, "self_attn.v_proj"), c.n_kv_heads * c.head_dim, c.hidden_size});
      out.push_back({layer_module(p, i, "self_attn.o_proj"), c.hidden_size, c.n_heads * c.head_dim});
    } else {
      out.push_back({layer_module(p, i, "linear_attn.in_proj_qkv"), c.linear_conv_dim(), c.hidden_size});
      out.push_back({layer_module(p, i, "linear_attn.in_proj_z"), c.linear_value_dim(), c.hidden_size});
      out.push_back({layer_module(p, i, "linear_attn.in_proj_b"), c.linear_n_value_heads, c.hidden_size});
      out.push_back({layer_module(p, i, "linear_attn.in_proj_a"), c.linear_n_value_heads, c.hidden_size});
      out.push_back({layer_module(p, i, "linear_attn.out_proj"), c.hidden_size, c.linear_value_dim()});
    }
    out.push_back({layer_module(p, i, "mlp.gate_proj"), c.intermediate_size, c.hidden_size});
    out.push_back({layer_module(p, i, "mlp.up_proj"), c.intermediate_size, c.hidden_size});
    out.push_back({layer_module(p, i, "mlp.down_proj"), c.hidden_size, c.intermediate_size});
  }
  if (!c.tie_word_embeddings) out.push_back({"lm_head", c.vocab_size, c.hidden_size});
  return out;
}

}  // namespace

TEST_CASE("fixture models: config and every text Linear load", "[unit]") {
  const std::filesystem::path root = std::filesystem::path(VOLTSERVE_SOURCE_DIR) / "tests/fixtures/models";
  int n_models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (!std::filesystem::exists(entry.path() / "config.json")) continue;
    const std::string name = entry.path().filename().string();
    INFO("model " << name);
    auto config = load_model_config(entry.path());
    REQUIRE(config.is_ok());
    auto ckpt = Checkpoint::open(entry.path());
    REQUIRE(ckpt.is_ok());
    REQUIRE(ckpt->contains(config->tensor_prefix + "embed_tokens.weight"));
    int n_quantized = 0;
    for (const auto& spec : text_linears(*config)) {
      INFO("linear " << spec.module);
      auto w = load_linear(*ckpt, *config, spec.module, spec.n, spec.k);
      REQUIRE(w.is_ok());
      if (w->format != WeightFormat::kDense) ++n_quantized;
      const auto d = dequantize(*w);
      CHECK(std::all_of(d.begin(), d.end(), [](float v) { return std::isfinite(v); }));
    }
    // A quantized checkpoint must actually contain quantized layers.
    CHECK((n_quantized > 0) == config->quantization.is_quantized());
    ++n_models;
  }
  CHECK(n_models >= 1);
}
