// --kv-cache-dtype resolution (engine/model/kv_cache_dtype.h): auto follows the checkpoint's kv_cache_quant_algo,
// the explicit choices win, anything else is an error naming the option; and the per-layer FP8 scales a checkpoint
// carries (load_kv_scales, engine/model/qwen35_weights.h) under ModelOpt's or compressed-tensors' names.
#include <catch2/catch_test_macros.hpp>

#include <map>
#include <optional>
#include <string>

#include "model/kv_cache_dtype.h"
#include "model/quantized_head.h"
#include "model/qwen35_weights.h"

using namespace voltserve;

TEST_CASE("kv cache dtype: auto is fp8 where the checkpoint asks for it, else the activation dtype", "[unit]") {
  ModelConfig plain;
  ModelConfig asks;
  asks.quantization.kv_cache_quant_algo = "FP8";
  CHECK(*resolve_kv_cache_dtype("auto", plain, DType::kF16) == DType::kF16);
  CHECK(*resolve_kv_cache_dtype("", plain, DType::kF32) == DType::kF32);
  CHECK(*resolve_kv_cache_dtype("auto", asks, DType::kF16) == DType::kF8E4M3);
  CHECK(*resolve_kv_cache_dtype("fp16", asks, DType::kF32) == DType::kF16);
  CHECK(*resolve_kv_cache_dtype("bf16", plain, DType::kF16) == DType::kBF16);
  CHECK(*resolve_kv_cache_dtype("fp8", plain, DType::kF32) == DType::kF8E4M3);
  const auto bad = resolve_kv_cache_dtype("e5m2", plain, DType::kF16);
  REQUIRE(!bad.is_ok());
  CHECK(bad.status().to_string().find("--kv-cache-dtype") != std::string::npos);
  CHECK(bad.status().to_string().find("e5m2") != std::string::npos);
  CHECK(kv_cache_dtype_name(DType::kF8E4M3) == "fp8");
  CHECK(kv_cache_dtype_name(DType::kF16) == "fp16");
}

namespace {

// Scalars by name; nothing else is asked for.
class Scalars final : public WeightProvider {
 public:
  explicit Scalars(std::map<std::string, float> v) : v_(std::move(v)) {}
  Result<kernels::HostWeightRef> linear(const std::string&, int64_t, int64_t) override {
    return invalid_argument("no linears");
  }
  Result<std::vector<float>> values(const std::string&, const std::vector<int64_t>&) override {
    return invalid_argument("no values");
  }
  Result<std::optional<float>> optional_scalar(const std::string& name) override {
    auto it = v_.find(name);
    if (it == v_.end()) return std::optional<float>{};
    if (!(it->second > 0.0f)) return invalid_argument(name + " must be positive");
    return std::optional<float>{it->second};
  }
  bool has_lm_head() const override { return false; }
  std::string describe() const override { return "scalars"; }

 private:
  std::map<std::string, float> v_;
};

}  // namespace

TEST_CASE("kv cache scales: ModelOpt's k_proj.k_scale, else compressed-tensors' k_scale, else 1", "[unit]") {
  const std::string a = "model.layers.3.self_attn.";
  Scalars src({{a + "k_proj.k_scale", 0.25f}, {a + "v_scale", 0.5f}, {a + "k_scale", 9.0f}});
  Qwen35AttentionLayer layer;
  REQUIRE(load_kv_scales(src, a, layer).is_ok());
  CHECK(layer.k_scale == 0.25f);  // ModelOpt's name wins over compressed-tensors'
  CHECK(layer.v_scale == 0.5f);
  Qwen35AttentionLayer other;
  REQUIRE(load_kv_scales(src, "model.layers.7.self_attn.", other).is_ok());
  CHECK(other.k_scale == 1.0f);
  CHECK(other.v_scale == 1.0f);
  // The lm_head quantizer's wrapper passes the scalars through (else --lm-head fp8 would drop the KV scales).
  ModelConfig config;
  QuantizedHeadWeights wrapped(src, config, WeightFormat::kFp8, /*shape_only=*/true);
  Qwen35AttentionLayer via;
  REQUIRE(load_kv_scales(wrapped, a, via).is_ok());
  CHECK(via.k_scale == 0.25f);
  CHECK(via.v_scale == 0.5f);
  Scalars bad({{a + "v_proj.v_scale", -1.0f}});
  CHECK_FALSE(load_kv_scales(bad, a, layer).is_ok());
}
