// config.json parsing: both model types, layer layouts, RoPE, tying, eos ids, MTP, and refused features.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "safetensors_writer.h"

using namespace voltserve;
using Catch::Matchers::ContainsSubstring;
using nlohmann::json;

namespace {

json text_config() {
  return json{{"model_type", "qwen3_5_text"},
              {"hidden_size", 64},
              {"intermediate_size", 96},
              {"num_hidden_layers", 4},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"head_dim", 32},
              {"linear_conv_kernel_dim", 4},
              {"linear_key_head_dim", 16},
              {"linear_value_head_dim", 24},
              {"linear_num_key_heads", 2},
              {"linear_num_value_heads", 6},
              {"vocab_size", 384},
              {"rms_norm_eps", 1e-6},
              {"max_position_embeddings", 4096},
              {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}},
              {"tie_word_embeddings", false},
              {"eos_token_id", 7}};
}

Result<ModelConfig> parse(const json& cfg, const std::string& gen = "", const std::vector<std::string>& names = {}) {
  return parse_model_config(cfg.dump(), gen, "", names);
}

std::string error_of(const json& cfg) {
  auto r = parse(cfg);
  REQUIRE_FALSE(r.is_ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("config: qwen3_5_text with explicit layer_types and rope_parameters", "[unit]") {
  json cfg = text_config();
  cfg["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "full_attention"};
  auto r = parse(cfg, R"({"eos_token_id": [9, 7]})", {"model.embed_tokens.weight", "lm_head.weight"});
  REQUIRE(r.is_ok());
  const ModelConfig& c = *r;
  CHECK(c.model_type == "qwen3_5_text");
  CHECK(c.hidden_size == 64);
  CHECK(c.n_layers == 4);
  CHECK(c.layer_types == std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kFullAttention,
                                                LayerType::kLinearAttention, LayerType::kFullAttention});
  CHECK(c.n_full_attention_layers() == 2);
  CHECK(c.n_heads == 4);
  CHECK(c.n_kv_heads == 2);
  CHECK(c.head_dim == 32);
  CHECK(c.linear_n_key_heads == 2);
  CHECK(c.linear_n_value_heads == 6);
  CHECK(c.linear_conv_dim() == 2 * 32 + 144);
  CHECK(c.rope_theta == 1e7);
  CHECK(c.partial_rotary_factor == 0.25);
  CHECK(c.rotary_dim == 8);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.attn_output_gate);
  CHECK(c.mtp_num_hidden_layers == 0);
  CHECK(c.eos_token_ids == std::vector<int32_t>{9, 7});  // generation_config first, no duplicates
  CHECK(c.tensor_prefix == "model.");
  CHECK_FALSE(c.quantization.is_quantized());
}

TEST_CASE("config: full_attention_interval builds the layout like transformers", "[unit]") {
  json cfg = text_config();
  cfg["num_hidden_layers"] = 8;
  cfg["full_attention_interval"] = 4;
  auto r = parse(cfg);
  REQUIRE(r.is_ok());
  for (int64_t i = 0; i < 8; ++i) CHECK(r->is_full_attention(i) == ((i + 1) % 4 == 0));
  cfg.erase("full_attention_interval");  // default interval is 4 too
  cfg["full_attention_interval"] = 2;
  auto r2 = parse(cfg);
  REQUIRE(r2.is_ok());
  CHECK(r2->n_full_attention_layers() == 4);
}

TEST_CASE("config: qwen3_5 with nested text_config, top-level tie and eos, VLM prefix", "[unit]") {
  json inner = text_config();
  inner.erase("tie_word_embeddings");
  inner["mtp_num_hidden_layers"] = 1;
  inner["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}, {"mrope_section", {11, 11, 10}},
                              {"mrope_interleaved", true}};
  inner["partial_rotary_factor"] = 0.5;
  json cfg = {{"model_type", "qwen3_5"}, {"text_config", inner}, {"tie_word_embeddings", true},
              {"eos_token_id", 248044}};
  auto r = parse(cfg, "", {"model.language_model.embed_tokens.weight", "model.visual.x", "mtp.fc.weight"});
  REQUIRE(r.is_ok());
  CHECK(r->model_type == "qwen3_5");
  CHECK(r->tie_word_embeddings);
  CHECK(r->mtp_num_hidden_layers == 1);
  CHECK(r->partial_rotary_factor == 0.5);  // top-level of text_config, not in rope_parameters
  CHECK(r->rotary_dim == 16);
  CHECK(r->tensor_prefix == "model.language_model.");
  CHECK(r->eos_token_ids == std::vector<int32_t>{7, 248044});
}

TEST_CASE("config: rope_parameters wins over top-level values, defaults without rope_parameters", "[unit]") {
  json cfg = text_config();
  cfg["partial_rotary_factor"] = 0.5;
  cfg["rope_theta"] = 5.0;
  auto r = parse(cfg);
  REQUIRE(r.is_ok());
  CHECK(r->partial_rotary_factor == 0.25);
  CHECK(r->rope_theta == 1e7);
  cfg.erase("rope_parameters");
  auto r2 = parse(cfg);
  REQUIRE(r2.is_ok());
  CHECK(r2->partial_rotary_factor == 0.5);
  CHECK(r2->rope_theta == 5.0);
  cfg.erase("partial_rotary_factor");
  cfg.erase("rope_theta");
  auto r3 = parse(cfg);
  REQUIRE(r3.is_ok());
  CHECK(r3->partial_rotary_factor == 0.25);  // transformers' Qwen3.5 default
  CHECK(r3->rope_theta == 10000.0);
}

TEST_CASE("config: unsupported rope types and features are refused by name", "[unit]") {
  json cfg = text_config();
  cfg["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 1e7}};
  auto yarn = parse(cfg);
  REQUIRE_FALSE(yarn.is_ok());
  CHECK(yarn.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(yarn.status().message(), ContainsSubstring("rope_parameters.rope_type"));
  CHECK_THAT(yarn.status().message(), ContainsSubstring("yarn"));

  json nested = {{"model_type", "qwen3_5"}, {"text_config", cfg}};
  CHECK_THAT(error_of(nested), ContainsSubstring("text_config.rope_parameters.rope_type"));

  json legacy = text_config();
  legacy.erase("rope_parameters");
  legacy["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  CHECK_THAT(error_of(legacy), ContainsSubstring("rope_scaling.rope_type \"linear\""));

  json act = text_config();
  act["hidden_act"] = "gelu";
  CHECK_THAT(error_of(act), ContainsSubstring("hidden_act"));
  json bias = text_config();
  bias["attention_bias"] = true;
  CHECK_THAT(error_of(bias), ContainsSubstring("attention_bias"));
  json mlp_only = text_config();
  mlp_only["mlp_only_layers"] = {1};
  CHECK_THAT(error_of(mlp_only), ContainsSubstring("mlp_only_layers"));
  json other = text_config();
  other["model_type"] = "llama";
  CHECK_THAT(error_of(other), ContainsSubstring("model_type \"llama\""));
}

TEST_CASE("config: malformed values name the field", "[unit]") {
  json cfg = text_config();
  cfg["layer_types"] = {"linear_attention", "full_attention"};
  CHECK_THAT(error_of(cfg), ContainsSubstring("layer_types has 2 entries but num_hidden_layers is 4"));
  cfg = text_config();
  cfg["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention", "full_attention"};
  CHECK_THAT(error_of(cfg), ContainsSubstring("layer_types[1]"));
  cfg = text_config();
  cfg["hidden_size"] = "64";
  CHECK_THAT(error_of(cfg), ContainsSubstring("hidden_size must be a positive integer"));
  cfg = text_config();
  cfg["num_key_value_heads"] = 3;
  CHECK_THAT(error_of(cfg), ContainsSubstring("not a multiple of num_key_value_heads"));
  cfg = text_config();
  cfg["linear_num_value_heads"] = 5;
  CHECK_THAT(error_of(cfg), ContainsSubstring("linear_num_value_heads"));
  cfg = text_config();
  cfg["eos_token_id"] = "x";
  CHECK_THAT(error_of(cfg), ContainsSubstring("eos_token_id"));
  json vlm = {{"model_type", "qwen3_5"}};
  CHECK_THAT(error_of(vlm), ContainsSubstring("text_config"));
  auto bad = parse_model_config("{not json", "", "", {});
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), ContainsSubstring("config.json"));
}

TEST_CASE("config: untied config without lm_head tensor is an error", "[unit]") {
  auto r = parse(text_config(), "", {"model.embed_tokens.weight"});
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), ContainsSubstring("lm_head.weight"));
}

TEST_CASE("config: load_model_config reads the folder", "[unit]") {
  const auto dir = voltserve::testing::temp_dir("config");
  json cfg = text_config();
  cfg["tie_word_embeddings"] = true;
  voltserve::testing::write_file(dir / "config.json", cfg.dump());
  voltserve::testing::write_file(dir / "generation_config.json", R"({"eos_token_id": 5})");
  voltserve::testing::write_file(
      dir / "model.safetensors",
      voltserve::testing::safetensors_bytes({voltserve::testing::f32_tensor("model.embed_tokens.weight", {1}, {1.0f})}));
  auto r = load_model_config(dir);
  REQUIRE(r.is_ok());
  CHECK(r->eos_token_ids == std::vector<int32_t>{5, 7});
  CHECK(r->tensor_prefix == "model.");
  auto missing = load_model_config(dir / "nope");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), ContainsSubstring("config.json"));
}
