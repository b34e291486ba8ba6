// QuantConfig: what the checkpoint's quantization config says about each Linear module (MODEL.md §5.2, §5.3):
// ModelOpt hf_quant_config.json / quantization_config (NVFP4, W4A16_NVFP4, FP8, FP8 per-channel,
// MIXED_PRECISION with quantized_layers, exclude_modules wildcards) and compressed-tensors (config_groups with
// targets, ignore). It only states the expectation; load_linear() checks it against the tensors present.
// Tested in tests/model/quant_config_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

enum class QuantMethod { kNone, kModelOpt, kCompressedTensors };

// What the config expects a Linear's weight to be.
enum class LayerQuant {
  kNone,         // unquantized (BF16/F16/F32)
  kNvfp4,        // NVFP4 weights; activations quantized too when the checkpoint has input scales (W4A4)
  kW4A16Nvfp4,   // NVFP4 weights, 16-bit activations
  kFp8,          // FP8 E4M3 weights, per-tensor scale (activations per-tensor FP8)
  kFp8PerChannel // FP8 E4M3 weights, one scale per output row
};

const char* layer_quant_name(LayerQuant quant);
const char* quant_method_name(QuantMethod method);

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  std::string quant_algo;             // "NVFP4", "FP8", "MIXED_PRECISION", ...; "" when unquantized
  std::string source;                 // "hf_quant_config.json" or "config.json quantization_config" (messages)
  LayerQuant default_quant = LayerQuant::kNone;  // for modules not excluded (non-MIXED modes)
  int64_t group_size = 16;
  std::string kv_cache_quant_algo;    // "FP8" or ""
  // ModelOpt MIXED_PRECISION: module path -> format; modules not listed are unquantized.
  std::vector<std::pair<std::string, LayerQuant>> quantized_layers;
  // ModelOpt exclude_modules / compressed-tensors ignore: fnmatch wildcards ("lm_head", "*.conv1d*") or "re:<regex>".
  std::vector<std::string> exclude;
  // compressed-tensors config_groups: (targets, format) per group; target "Linear" matches every Linear.
  std::vector<std::pair<std::vector<std::string>, LayerQuant>> groups;

  bool is_quantized() const { return method != QuantMethod::kNone; }
  // The expected format of a Linear module, given its full name as in the checkpoint
  // ("model.layers.0.mlp.gate_proj", "lm_head"). Matching also tries the name with the other text prefix
  // ("model.language_model." <-> "model.") because exporters write the module paths of the model they ran.
  LayerQuant expected(std::string_view module) const;
};

// Reads `model_dir`/hf_quant_config.json if present, else config.json's "quantization_config" (top level or inside
// "text_config"). Errors name the file and field: Unimplemented for quant methods / algorithms voltserve cannot run
// (e.g. quant_method "fp8" block-wise, "gptq", quant_algo "W4A8_AWQ"), InvalidArgument for malformed fields or a
// hf_quant_config.json that contradicts quantization_config.
Result<QuantConfig> load_quant_config(const std::filesystem::path& model_dir);
// Same from JSON text (tests): `hf_quant_config` may be empty (absent); `quantization_config` is the JSON object
// of config.json's "quantization_config" or empty (absent).
Result<QuantConfig> parse_quant_config(std::string_view hf_quant_config, std::string_view quantization_config);

// fnmatch-style match with '*' and '?' (ModelOpt's exclude patterns), or a Python re.match when the pattern
// starts with "re:" (compressed-tensors). An invalid regex matches nothing.
bool module_pattern_matches(std::string_view pattern, std::string_view module);

}  // namespace voltserve
