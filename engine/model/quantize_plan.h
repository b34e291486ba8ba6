// What `voltserve quantize` does with each tensor of a BF16 checkpoint (MODEL.md §5.2 "Which layers stay BF16") and
// the ModelOpt config that describes the result (hf_quant_config.json and config.json quantization_config), so the
// loader's QuantConfig::expected() agrees with the tensors written. Tested in tests/model/checkpoint_quantize_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "voltserve/quantize.h"

namespace voltserve {

enum class TensorAction { kKeep, kNvfp4, kFp8 };

// The module of a quantizable Linear weight ("model.layers.3.mlp.up_proj.weight" -> "model.layers.3.mlp.up_proj",
// "lm_head.weight" -> "lm_head"), or "" when the tensor is not one (norms, conv1d, in_proj_a/b, A_log, dt_bias,
// embeddings, mtp.*, vision tensors, and 1-D or 3-D tensors).
std::string quantizable_linear_module(std::string_view tensor, size_t ndim);

// The action for `tensor` under `options` (format, --keep patterns matched against the tensor and its module name,
// quantize_lm_head). The format only decides among the quantizable Linears; everything else is kept.
TensorAction plan_tensor(std::string_view tensor, size_t ndim, const QuantizeOptions& options);

// One output module and what happened to it, for the config files.
struct ModuleQuant {
  std::string module;
  TensorAction action = TensorAction::kKeep;
};

// hf_quant_config.json: NVFP4 / FP8 modes list the kept Linear-like modules in exclude_modules (mtp.* collapsed to
// "mtp.*"); mixed mode writes MIXED_PRECISION with quantized_layers and no exclude_modules (MODEL.md §5.2).
nlohmann::ordered_json hf_quant_config_json(QuantizeFormat format, const std::vector<ModuleQuant>& modules);
// config.json's quantization_config for the same (quant_method modelopt, config_groups, ignore, producer).
nlohmann::ordered_json quantization_config_json(const nlohmann::ordered_json& hf_quant_config);

}  // namespace voltserve
