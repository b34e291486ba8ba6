// --kv-cache-dtype resolution (engine/model/kv_cache_dtype.h): auto follows the checkpoint's kv_cache_quant_algo,
// the explicit choices win, anything else is an error naming the option.
#include <catch2/catch_test_macros.hpp>

#include "model/kv_cache_dtype.h"

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
