// Text prefix detection, vision / mtp classification and name helpers.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "model/tensor_names.h"

using namespace voltserve;

TEST_CASE("text prefix: VLM export, text-only export, neither", "[unit]") {
  const std::vector<std::string> vlm = {"lm_head.weight", "model.language_model.embed_tokens.weight",
                                        "model.visual.blocks.0.attn.qkv.weight", "mtp.fc.weight"};
  CHECK(*detect_text_prefix(vlm) == "model.language_model.");
  const std::vector<std::string> text = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"};
  CHECK(*detect_text_prefix(text) == "model.");
  const std::vector<std::string> none = {"transformer.wte.weight"};
  auto r = detect_text_prefix(none);
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.status().message(), Catch::Matchers::ContainsSubstring("transformer.wte.weight"));
}

TEST_CASE("vision and mtp tensors are recognised", "[unit]") {
  CHECK(is_vision_tensor("model.visual.blocks.0.norm1.weight"));
  CHECK(is_vision_tensor("visual.merger.mlp.0.weight"));
  CHECK_FALSE(is_vision_tensor("model.language_model.layers.0.mlp.up_proj.weight"));
  CHECK(is_mtp_tensor("mtp.layers.0.self_attn.q_proj.weight"));
  CHECK_FALSE(is_mtp_tensor("model.mtp.x"));
  CHECK(layer_module("model.", 3, "self_attn.q_proj") == "model.layers.3.self_attn.q_proj");
  CHECK(strip_text_prefix("model.language_model.norm.weight") == "norm.weight");
  CHECK(strip_text_prefix("model.norm.weight") == "norm.weight");
  CHECK(strip_text_prefix("lm_head.weight") == "lm_head.weight");
}
