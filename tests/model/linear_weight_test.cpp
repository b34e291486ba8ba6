// Weight formats: hand-computed NVFP4 (ModelOpt and compressed-tensors) and FP8 values, dense fallbacks,
// linear_ref against a plain matmul of the dequantized weight, and the inconsistent combinations.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "model/linear_weight.h"
#include "safetensors_writer.h"

using namespace voltserve;
using namespace voltserve::testing;
using Catch::Matchers::ContainsSubstring;
using nlohmann::json;

namespace {

const std::string kMod = "model.layers.0.mlp.gate_proj";

QuantConfig modelopt(const std::string& algo, const std::vector<std::string>& exclude = {}) {
  json hq = {{"quantization", {{"quant_algo", algo}, {"group_size", 16}, {"exclude_modules", exclude}}}};
  return *parse_quant_config(hq.dump(), "");
}

QuantConfig compressed_nvfp4() {
  json qc = {{"quant_method", "compressed-tensors"},
             {"format", "nvfp4-pack-quantized"},
             {"config_groups",
              {{"g", {{"targets", {"Linear"}}, {"weights", {{"num_bits", 4}, {"type", "float"}, {"group_size", 16}}}}}}}};
  return *parse_quant_config("", qc.dump());
}

Checkpoint open(const std::vector<RawTensor>& tensors) {
  const auto dir = temp_dir("linear");
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
  auto c = Checkpoint::open(dir);
  REQUIRE(c.is_ok());
  return *c;
}

// n = 2, k = 32: two groups of 16 per row.
//   row 0, group 0 scale 0x38 (1.0); byte 0 = 0x21: k=0 code 1 (0.5), k=1 code 2 (1.0); others 0
//   row 0, group 1 scale 0x40 (2.0); byte 8 = 0xF7: k=16 code 7 (6), k=17 code 15 (-6)
//   row 1, group 0 scale 0x30 (0.5); byte 0 = 0x9C: k=0 code 12 (-2), k=1 code 9 (-0.5)
//   row 1, group 1 scale 0x01 (2^-9, subnormal); byte 15 = 0x50: k=30 code 0, k=31 code 5 (3)
std::vector<uint8_t> nvfp4_codes() {
  std::vector<uint8_t> c(2 * 16, 0);
  c[0] = 0x21;
  c[8] = 0xF7;
  c[16 + 0] = 0x9C;
  c[16 + 15] = 0x50;
  return c;
}
std::vector<uint8_t> nvfp4_scales() { return {0x38, 0x40, 0x30, 0x01}; }

std::vector<float> nvfp4_expected(float global) {
  std::vector<float> w(64, 0.0f);
  w[0] = 0.5f * 1.0f * global;
  w[1] = 1.0f * 1.0f * global;
  w[16] = 6.0f * 2.0f * global;
  w[17] = -6.0f * 2.0f * global;
  w[32 + 0] = -2.0f * 0.5f * global;
  w[32 + 1] = -0.5f * 0.5f * global;
  w[32 + 31] = 3.0f * (1.0f / 512.0f) * global;
  return w;
}

std::vector<float> naive_matmul(const std::vector<float>& w, const std::vector<float>& x, int64_t m, int64_t n,
                                int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      double acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += static_cast<double>(x[i * k + j]) * w[r * k + j];
      y[i * n + r] = static_cast<float>(acc);
    }
  }
  return y;
}

}  // namespace

TEST_CASE("NVFP4 ModelOpt: hand-computed dequantization", "[unit]") {
  auto ckpt = open({u8_tensor(kMod + ".weight", "U8", {2, 16}, nvfp4_codes()),
                    u8_tensor(kMod + ".weight_scale", "F8_E4M3", {2, 2}, nvfp4_scales()),
                    f32_tensor(kMod + ".weight_scale_2", {}, {0.25f})});
  auto w = load_linear(ckpt, modelopt("NVFP4"), kMod, 2, 32);
  REQUIRE(w.is_ok());
  CHECK(w->format == WeightFormat::kNvfp4);
  CHECK(w->source == WeightSource::kModelOpt);
  CHECK(w->global_scale == 0.25f);
  CHECK_FALSE(w->input_scale.has_value());
  CHECK(dequantize(*w) == nvfp4_expected(0.25f));
}

TEST_CASE("NVFP4 compressed-tensors: the global scale is a divisor", "[unit]") {
  auto ckpt = open({u8_tensor(kMod + ".weight_packed", "U8", {2, 16}, nvfp4_codes()),
                    u8_tensor(kMod + ".weight_scale", "F8_E4M3", {2, 2}, nvfp4_scales()),
                    f32_tensor(kMod + ".weight_global_scale", {1}, {4.0f}),
                    f32_tensor(kMod + ".input_global_scale", {1}, {8.0f})});
  auto w = load_linear(ckpt, compressed_nvfp4(), kMod, 2, 32);
  REQUIRE(w.is_ok());
  CHECK(w->source == WeightSource::kCompressedTensors);
  CHECK(w->global_scale == 0.25f);
  REQUIRE(w->input_scale.has_value());
  CHECK(*w->input_scale == 0.125f);
  // Same codes and scales as the ModelOpt case with weight_scale_2 = 1/4: identical weights.
  CHECK(dequantize(*w) == nvfp4_expected(0.25f));
}

TEST_CASE("NVFP4: k not a multiple of 16 uses a partial last group", "[unit]") {
  // n = 1, k = 20: 10 bytes, 2 groups. k=18 is byte 9 low nibble.
  std::vector<uint8_t> codes(10, 0);
  codes[9] = 0x0A;  // k=18: code 10 (-1)
  auto ckpt = open({u8_tensor(kMod + ".weight", "U8", {1, 10}, codes),
                    u8_tensor(kMod + ".weight_scale", "F8_E4M3", {1, 2}, {0x38, 0x48}),  // 1.0, 4.0
                    f32_tensor(kMod + ".weight_scale_2", {}, {1.0f})});
  auto w = load_linear(ckpt, modelopt("NVFP4"), kMod, 1, 20);
  REQUIRE(w.is_ok());
  const auto d = dequantize(*w);
  CHECK(d[18] == -4.0f);
  CHECK(d[19] == 0.0f);
}

TEST_CASE("FP8 per-tensor and per-channel: hand-computed", "[unit]") {
  // 0x38 = 1, 0xC0 = -2, 0x7E = 448, 0x01 = 2^-9
  const std::vector<uint8_t> codes = {0x38, 0xC0, 0x7E, 0x01};
  SECTION("per-tensor") {
    auto ckpt = open({u8_tensor(kMod + ".weight", "F8_E4M3", {2, 2}, codes),
                      f32_tensor(kMod + ".weight_scale", {}, {0.25f}), f32_tensor(kMod + ".input_scale", {}, {0.5f})});
    auto w = load_linear(ckpt, modelopt("FP8"), kMod, 2, 2);
    REQUIRE(w.is_ok());
    CHECK(w->format == WeightFormat::kFp8);
    CHECK_FALSE(w->per_channel);
    CHECK(*w->input_scale == 0.5f);
    CHECK(dequantize(*w) == std::vector<float>{0.25f, -0.5f, 112.0f, 1.0f / 2048.0f});
  }
  SECTION("per-channel") {
    auto ckpt = open({u8_tensor(kMod + ".weight", "F8_E4M3", {2, 2}, codes),
                      f32_tensor(kMod + ".weight_scale", {2}, {0.5f, 4.0f})});
    auto w = load_linear(ckpt, modelopt("FP8_PER_CHANNEL_PER_TOKEN"), kMod, 2, 2);
    REQUIRE(w.is_ok());
    CHECK(w->per_channel);
    CHECK(dequantize(*w) == std::vector<float>{0.5f, -1.0f, 1792.0f, 4.0f / 512.0f});
  }
  SECTION("per-tensor config with a per-channel scale is an error") {
    auto ckpt = open({u8_tensor(kMod + ".weight", "F8_E4M3", {2, 2}, codes),
                      f32_tensor(kMod + ".weight_scale", {2}, {0.5f, 4.0f})});
    auto w = load_linear(ckpt, modelopt("FP8"), kMod, 2, 2);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("per-tensor FP8"));
    CHECK_THAT(w.status().message(), ContainsSubstring(kMod + ".weight_scale"));
  }
}

TEST_CASE("dense BF16/F16/F32 weights, and BF16 where the config expected quantization", "[unit]") {
  const std::vector<float> v = {1.0f, -2.0f, 0.5f, 3.25f, -0.125f, 8.0f};
  for (const char* dtype : {"BF16", "F32", "F16"}) {
    RawTensor t;
    if (std::string(dtype) == "BF16") {
      t = bf16_tensor(kMod + ".weight", {2, 3}, v);
    } else if (std::string(dtype) == "F32") {
      t = f32_tensor(kMod + ".weight", {2, 3}, v);
    } else {
      // F16 bit patterns of the same values.
      t = u8_tensor(kMod + ".weight", "F16", {2, 3},
                    as_bytes(std::vector<uint16_t>{0x3C00, 0xC000, 0x3800, 0x4280, 0xB000, 0x4800}));
    }
    auto ckpt = open({t});
    // Under an NVFP4 config the plain weight is still unambiguous (ModelOpt's mtp.fc quirk).
    auto w = load_linear(ckpt, modelopt("NVFP4"), kMod, 2, 3);
    REQUIRE(w.is_ok());
    CHECK(w->format == WeightFormat::kDense);
    CHECK(dequantize(*w) == v);
  }
}

TEST_CASE("linear_ref equals a plain matmul of the dequantized weight for every format", "[unit]") {
  std::mt19937 rng(7);
  const int64_t n = 24, k = 48, m = 5;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> scale_code(0x20, 0x50);  // normal e4m3 scales 2^-3 .. 2^3
  std::vector<uint8_t> codes(static_cast<size_t>(n * k / 2)), scales(static_cast<size_t>(n * k / 16)),
      fp8(static_cast<size_t>(n * k));
  for (auto& c : codes) c = static_cast<uint8_t>(byte(rng));
  for (auto& s : scales) s = static_cast<uint8_t>(scale_code(rng));
  for (auto& c : fp8) {
    c = static_cast<uint8_t>(byte(rng));
    if ((c & 0x7F) == 0x7F) c = 0x10;  // no NaN codes
  }
  std::vector<float> x(static_cast<size_t>(m * k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);

  auto ckpt = open({u8_tensor("a.weight", "U8", {n, k / 2}, codes), u8_tensor("a.weight_scale", "F8_E4M3", {n, k / 16}, scales),
                    f32_tensor("a.weight_scale_2", {}, {0.0123f}), u8_tensor("b.weight", "F8_E4M3", {n, k}, fp8),
                    f32_tensor("b.weight_scale", {}, {0.037f})});
  json hq = {{"quantization",
              {{"quant_algo", "MIXED_PRECISION"},
               {"quantized_layers", {{"a", {{"quant_algo", "NVFP4"}, {"group_size", 16}}}, {"b", {{"quant_algo", "FP8"}}}}}}}};
  const QuantConfig q = *parse_quant_config(hq.dump(), "");
  for (const char* module : {"a", "b"}) {
    auto w = load_linear(ckpt, q, module, n, k);
    REQUIRE(w.is_ok());
    const auto d = dequantize(*w);
    std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
    const kernels::HostWeightRef ref = w->host_ref();
    kernels::linear_ref(ref, x.data(), m, y.data(), 1);
    const auto expect = naive_matmul(d, x, m, n, k);
    for (size_t i = 0; i < y.size(); ++i) {
      CHECK(std::abs(y[i] - expect[i]) <= 1e-5f * (1.0f + std::abs(expect[i])));
    }
    // Threads split the rows; every output is one sum in a fixed order, so the split changes nothing.
    std::vector<float> y2(static_cast<size_t>(m * n), 0.0f);
    kernels::linear_ref(ref, x.data(), m, y2.data(), 3);
    CHECK(y2 == y);
  }
  // Round trip of a single NVFP4 element: the code table and nibble order, independently of the decoder.
  auto a = load_linear(ckpt, q, "a", n, k);
  const auto d = dequantize(*a);
  const float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  const int64_t row = 5, col = 37;
  const uint8_t byte_val = codes[static_cast<size_t>(row * k / 2 + col / 2)];
  const uint8_t code = col % 2 == 0 ? (byte_val & 0xF) : (byte_val >> 4);
  const uint8_t sc = scales[static_cast<size_t>(row * k / 16 + col / 16)];
  const float scale = std::ldexp(1.0f + static_cast<float>(sc & 7) / 8.0f, ((sc >> 3) & 0xF) - 7);
  CHECK(d[static_cast<size_t>(row * k + col)] == kE2m1[code] * scale * 0.0123f);
}

TEST_CASE("inconsistent config/tensor combinations are clear errors", "[unit]") {
  const auto nvfp4 = std::vector<RawTensor>{u8_tensor(kMod + ".weight", "U8", {2, 16}, nvfp4_codes()),
                                            u8_tensor(kMod + ".weight_scale", "F8_E4M3", {2, 2}, nvfp4_scales()),
                                            f32_tensor(kMod + ".weight_scale_2", {}, {0.25f})};
  SECTION("NVFP4 tensors where the config says FP8") {
    auto w = load_linear(open(nvfp4), modelopt("FP8"), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("'" + kMod + "'"));
    CHECK_THAT(w.status().message(), ContainsSubstring("ModelOpt NVFP4"));
    CHECK_THAT(w.status().message(), ContainsSubstring("says FP8"));
    CHECK_THAT(w.status().message(), ContainsSubstring("weight_scale_2 F32"));
  }
  SECTION("NVFP4 tensors for an excluded module") {
    auto w = load_linear(open(nvfp4), modelopt("NVFP4", {"model.layers.0.mlp*"}), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("says unquantized"));
  }
  SECTION("NVFP4 tensors on an unquantized checkpoint") {
    auto w = load_linear(open(nvfp4), QuantConfig{}, kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("unquantized"));
  }
  SECTION("U8 weight without weight_scale_2") {
    auto w = load_linear(open({nvfp4[0], nvfp4[1]}), modelopt("NVFP4"), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("weight_scale_2"));
  }
  SECTION("U8 weight without weight_scale") {
    auto w = load_linear(open({nvfp4[0], nvfp4[2]}), modelopt("NVFP4"), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring(".weight_scale"));
  }
  SECTION("wrong code shape names the tensor and both shapes") {
    auto w = load_linear(open(nvfp4), modelopt("NVFP4"), kMod, 2, 64);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring(kMod + ".weight"));
    CHECK_THAT(w.status().message(), ContainsSubstring("shape [2, 16], expected [2, 32]"));
  }
  SECTION("block scales stored as F32 instead of E4M3") {
    auto w = load_linear(open({nvfp4[0], f32_tensor(kMod + ".weight_scale", {2, 2}, {1, 1, 1, 1}), nvfp4[2]}),
                         modelopt("NVFP4"), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("dtype F32, expected F8_E4M3"));
  }
  SECTION("weight_packed under a ModelOpt config") {
    auto w = load_linear(open({u8_tensor(kMod + ".weight_packed", "U8", {2, 16}, nvfp4_codes()),
                               u8_tensor(kMod + ".weight_scale", "F8_E4M3", {2, 2}, nvfp4_scales()),
                               f32_tensor(kMod + ".weight_global_scale", {}, {4.0f})}),
                         modelopt("NVFP4"), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("compressed-tensors"));
  }
  SECTION("BF16 weight with scales") {
    auto w = load_linear(open({bf16_tensor(kMod + ".weight", {1, 2}, {1, 2}), f32_tensor(kMod + ".weight_scale", {}, {1})}),
                         modelopt("FP8"), kMod, 1, 2);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("BF16 weight with quantization scales"));
  }
  SECTION("FP8 weight without a scale") {
    auto w = load_linear(open({u8_tensor(kMod + ".weight", "F8_E4M3", {1, 2}, {0x38, 0x38})}), modelopt("FP8"), kMod, 1, 2);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("without " + kMod + ".weight_scale"));
  }
  SECTION("non-positive global scale") {
    auto w = load_linear(open({nvfp4[0], nvfp4[1], f32_tensor(kMod + ".weight_scale_2", {}, {0.0f})}),
                         modelopt("NVFP4"), kMod, 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("positive finite"));
  }
  SECTION("missing module") {
    auto w = load_linear(open(nvfp4), modelopt("NVFP4"), "model.layers.9.mlp.up_proj", 2, 32);
    REQUIRE_FALSE(w.is_ok());
    CHECK(w.status().code() == StatusCode::kNotFound);
    CHECK_THAT(w.status().message(), ContainsSubstring("model.layers.9.mlp.up_proj.weight"));
  }
  SECTION("I32 weight") {
    auto w = load_linear(open({u8_tensor(kMod + ".weight", "I32", {1, 1}, {0, 0, 0, 0})}), QuantConfig{}, kMod, 1, 1);
    REQUIRE_FALSE(w.is_ok());
    CHECK_THAT(w.status().message(), ContainsSubstring("dtype I32"));
  }
}
