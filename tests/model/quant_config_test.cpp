// Quantization configs: ModelOpt single-format and MIXED_PRECISION, compressed-tensors groups/ignore, and the
// configs voltserve refuses.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <nlohmann/json.hpp>

#include "model/quant_config.h"

using namespace voltserve;
using Catch::Matchers::ContainsSubstring;
using nlohmann::json;

TEST_CASE("module patterns: fnmatch wildcards and re: regexes", "[unit]") {
  CHECK(module_pattern_matches("lm_head", "lm_head"));
  CHECK_FALSE(module_pattern_matches("lm_head", "lm_head2"));
  CHECK(module_pattern_matches("*.linear_attn.conv1d*", "model.layers.0.linear_attn.conv1d"));
  CHECK(module_pattern_matches("model.layers.1*", "model.layers.1.mlp.up_proj"));
  CHECK(module_pattern_matches("model.layers.1*", "model.layers.12.mlp.up_proj"));  // prefix wildcard, as ModelOpt
  CHECK(module_pattern_matches("model.layers.?.mlp*", "model.layers.3.mlp.down_proj"));
  CHECK_FALSE(module_pattern_matches("*mlp", "model.layers.3.mlp.down_proj"));
  CHECK(module_pattern_matches("re:.*in_proj_[ab]$", "model.layers.0.linear_attn.in_proj_a"));
  CHECK_FALSE(module_pattern_matches("re:.*in_proj_[ab]$", "model.layers.0.linear_attn.in_proj_qkv"));
  CHECK(module_pattern_matches("re:model\\.layers", "model.layers.0.x"));  // re.match: anchored at the start only
  CHECK_FALSE(module_pattern_matches("re:layers", "model.layers.0.x"));
  CHECK_FALSE(module_pattern_matches("re:([", "anything"));  // invalid regex matches nothing
}

TEST_CASE("ModelOpt NVFP4 with exclude_modules", "[unit]") {
  const json hq = {{"producer", {{"name", "modelopt"}, {"version", "0.42"}}},
                   {"quantization",
                    {{"quant_algo", "NVFP4"},
                     {"kv_cache_quant_algo", "FP8"},
                     {"group_size", 16},
                     {"exclude_modules", {"lm_head", "*.linear_attn.in_proj_a*", "model.language_model.layers.1*"}}}}};
  auto r = parse_quant_config(hq.dump(), "");
  REQUIRE(r.is_ok());
  CHECK(r->method == QuantMethod::kModelOpt);
  CHECK(r->kv_cache_quant_algo == "FP8");
  CHECK(r->expected("model.layers.0.mlp.gate_proj") == LayerQuant::kNvfp4);
  CHECK(r->expected("lm_head") == LayerQuant::kNone);
  CHECK(r->expected("model.layers.0.linear_attn.in_proj_a") == LayerQuant::kNone);
  // The exclude pattern uses the VLM prefix; a text-only name still matches it.
  CHECK(r->expected("model.layers.1.mlp.up_proj") == LayerQuant::kNone);
  CHECK(r->expected("model.language_model.layers.1.mlp.up_proj") == LayerQuant::kNone);
  CHECK(r->expected("model.layers.2.mlp.up_proj") == LayerQuant::kNvfp4);
}

TEST_CASE("ModelOpt MIXED_PRECISION: listed layers only", "[unit]") {
  const json hq = {{"quantization",
                    {{"quant_algo", "MIXED_PRECISION"},
                     {"kv_cache_quant_algo", nullptr},
                     {"quantized_layers",
                      {{"model.language_model.layers.0.mlp.gate_proj", {{"quant_algo", "W4A16_NVFP4"}, {"group_size", 16}}},
                       {"model.language_model.layers.0.self_attn.q_proj", {{"quant_algo", "FP8"}}},
                       {"model.language_model.layers.0.mlp.down_proj", {{"quant_algo", "nvfp4"}, {"group_size", 16}}},
                       {"model.language_model.layers.0.self_attn.o_proj", {{"quant_algo", "FP8_PER_CHANNEL_PER_TOKEN"}}},
                       {"lm_head", {{"quant_algo", "W4A16_NVFP4"}, {"group_size", 16}}}}}}}};
  auto r = parse_quant_config(hq.dump(), "");
  REQUIRE(r.is_ok());
  CHECK(r->expected("model.layers.0.mlp.gate_proj") == LayerQuant::kW4A16Nvfp4);
  CHECK(r->expected("model.language_model.layers.0.mlp.gate_proj") == LayerQuant::kW4A16Nvfp4);
  CHECK(r->expected("model.layers.0.mlp.down_proj") == LayerQuant::kNvfp4);
  CHECK(r->expected("model.layers.0.self_attn.q_proj") == LayerQuant::kFp8);
  CHECK(r->expected("model.layers.0.self_attn.o_proj") == LayerQuant::kFp8PerChannel);
  CHECK(r->expected("lm_head") == LayerQuant::kW4A16Nvfp4);
  CHECK(r->expected("model.layers.0.mlp.up_proj") == LayerQuant::kNone);  // not listed
  CHECK(r->expected("model.layers.0.linear_attn.in_proj_a") == LayerQuant::kNone);
}

TEST_CASE("config.json quantization_config in ModelOpt's flat form", "[unit]") {
  const json qc = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"ignore", {"lm_head", "mtp*"}}};
  auto r = parse_quant_config("", qc.dump());
  REQUIRE(r.is_ok());
  CHECK(r->source == "config.json quantization_config");
  CHECK(r->expected("model.layers.3.self_attn.k_proj") == LayerQuant::kFp8);
  CHECK(r->expected("mtp.fc") == LayerQuant::kNone);
}

TEST_CASE("compressed-tensors NVFP4 groups and ignore", "[unit]") {
  const json qc = {{"quant_method", "compressed-tensors"},
                   {"format", "nvfp4-pack-quantized"},
                   {"config_groups",
                    {{"group_0",
                      {{"targets", {"Linear"}},
                       {"weights", {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16}}},
                       {"input_activations", nullptr}}}}},
                   {"ignore", {"lm_head", "re:.*linear_attn\\.in_proj_[ab]$"}}};
  auto r = parse_quant_config("", qc.dump());
  REQUIRE(r.is_ok());
  CHECK(r->method == QuantMethod::kCompressedTensors);
  CHECK(r->expected("model.layers.0.mlp.up_proj") == LayerQuant::kW4A16Nvfp4);
  CHECK(r->expected("model.layers.0.linear_attn.in_proj_b") == LayerQuant::kNone);
  CHECK(r->expected("lm_head") == LayerQuant::kNone);

  json w4a4 = qc;
  w4a4["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 4}, {"type", "float"}, {"dynamic", "local"}};
  CHECK(parse_quant_config("", w4a4.dump())->expected("model.layers.0.mlp.up_proj") == LayerQuant::kNvfp4);

  json fp8 = qc;
  fp8["format"] = "float-quantized";
  fp8["config_groups"]["group_0"]["weights"] = {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}};
  CHECK(parse_quant_config("", fp8.dump())->expected("model.layers.0.mlp.up_proj") == LayerQuant::kFp8PerChannel);
}

TEST_CASE("unsupported or contradictory quantization configs are clear errors", "[unit]") {
  auto block_fp8 = parse_quant_config("", R"({"quant_method": "fp8", "weight_block_size": [128, 128]})");
  REQUIRE_FALSE(block_fp8.is_ok());
  CHECK(block_fp8.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(block_fp8.status().message(), ContainsSubstring("quant_method \"fp8\""));

  auto awq = parse_quant_config(R"({"quantization": {"quant_algo": "W4A8_AWQ"}})", "");
  REQUIRE_FALSE(awq.is_ok());
  CHECK_THAT(awq.status().message(), ContainsSubstring("hf_quant_config.json"));
  CHECK_THAT(awq.status().message(), ContainsSubstring("W4A8_AWQ"));

  auto mixed_layer = parse_quant_config(
      R"({"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {"a.b": {"quant_algo": "INT8_SQ"}}}})", "");
  REQUIRE_FALSE(mixed_layer.is_ok());
  CHECK_THAT(mixed_layer.status().message(), ContainsSubstring("quantized_layers[\"a.b\"]"));

  auto no_layers = parse_quant_config(R"({"quantization": {"quant_algo": "MIXED_PRECISION"}})", "");
  REQUIRE_FALSE(no_layers.is_ok());
  CHECK_THAT(no_layers.status().message(), ContainsSubstring("quantized_layers"));

  auto conflict = parse_quant_config(R"({"quantization": {"quant_algo": "NVFP4"}})",
                                     R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"],
                                         "weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
                                         "format": "nvfp4-pack-quantized"})");
  REQUIRE_FALSE(conflict.is_ok());
  CHECK_THAT(conflict.status().message(), ContainsSubstring("contradicts"));

  auto algo_conflict = parse_quant_config(R"({"quantization": {"quant_algo": "NVFP4"}})",
                                          R"({"quant_method": "modelopt", "quant_algo": "FP8"})");
  REQUIRE_FALSE(algo_conflict.is_ok());
  CHECK_THAT(algo_conflict.status().message(), ContainsSubstring("contradicts"));

  auto group16 = parse_quant_config(R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})", "");
  REQUIRE_FALSE(group16.is_ok());
  CHECK_THAT(group16.status().message(), ContainsSubstring("group_size 32"));

  auto none = parse_quant_config("", "");
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->is_quantized());
  CHECK(none->expected("lm_head") == LayerQuant::kNone);
}
