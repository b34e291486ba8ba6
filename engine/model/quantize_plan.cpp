// Per-tensor decisions of `voltserve quantize` and the ModelOpt config files describing them (see quantize_plan.h).
#include "model/quantize_plan.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include "model/quant_config.h"
#include "model/tensor_names.h"

namespace voltserve {
namespace {

using nlohmann::ordered_json;

// The decoder Linears a ModelOpt export quantizes (MODEL.md §5.2): MLP (dense and MoE experts), attention q/k/v/o,
// GDN in_proj_qkv / in_proj_z (in_proj_qkvz where fused) and out_proj. in_proj_a/b (tiny, numerically sensitive),
// conv1d, routers and everything that is not a Linear stay as they are.
constexpr std::array<std::string_view, 11> kQuantizedLinears = {
    "gate_proj", "up_proj", "down_proj", "q_proj", "k_proj", "v_proj", "o_proj",
    "in_proj_qkv", "in_proj_z", "in_proj_qkvz", "out_proj"};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "…layers.<digits>.…" anywhere in the name.
bool in_decoder_layer(std::string_view name) {
  for (size_t p = name.find("layers."); p != std::string_view::npos; p = name.find("layers.", p + 1)) {
    if (p > 0 && name[p - 1] != '.') continue;
    size_t q = p + 7;
    const size_t digits = q;
    while (q < name.size() && std::isdigit(static_cast<unsigned char>(name[q]))) ++q;
    if (q > digits && q < name.size() && name[q] == '.') return true;
  }
  return false;
}

const char* algo_of(TensorAction a, QuantizeFormat format) {
  if (a == TensorAction::kFp8) return "FP8";
  // Weights only: no calibration runs, so there are no activation scales (input_scale) to make it W4A4.
  (void)format;
  return "W4A16_NVFP4";
}

ordered_json producer() { return {{"name", "voltserve"}, {"version", "0.1.0"}}; }

ordered_json weights_scheme(const std::string& algo) {
  if (algo == "FP8") return {{"dynamic", false}, {"num_bits", 8}, {"type", "float"}};
  return {{"dynamic", false}, {"num_bits", 4}, {"type", "float"}, {"group_size", 16}};
}

}  // namespace

std::string quantizable_linear_module(std::string_view tensor, size_t ndim) {
  if (ndim != 2 || !ends_with(tensor, ".weight")) return "";
  const std::string_view module = tensor.substr(0, tensor.size() - 7);
  if (module == kLmHeadModule) return std::string(module);
  if (is_mtp_tensor(tensor) || is_vision_tensor(tensor) || !in_decoder_layer(module)) return "";
  const size_t dot = module.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? module : module.substr(dot + 1);
  if (std::find(kQuantizedLinears.begin(), kQuantizedLinears.end(), last) == kQuantizedLinears.end()) return "";
  return std::string(module);
}

TensorAction plan_tensor(std::string_view tensor, size_t ndim, const QuantizeOptions& options) {
  const std::string module = quantizable_linear_module(tensor, ndim);
  if (module.empty()) return TensorAction::kKeep;
  for (const auto& pattern : options.keep) {
    if (module_pattern_matches(pattern, tensor) || module_pattern_matches(pattern, module)) return TensorAction::kKeep;
  }
  const bool head = module == kLmHeadModule;
  switch (options.format) {
    case QuantizeFormat::kNvfp4:
      return head && !options.quantize_lm_head ? TensorAction::kKeep : TensorAction::kNvfp4;
    case QuantizeFormat::kFp8:
      return head && !options.quantize_lm_head ? TensorAction::kKeep : TensorAction::kFp8;
    case QuantizeFormat::kMixed: {
      if (head) return TensorAction::kNvfp4;
      const size_t dot = module.rfind('.');
      const std::string_view last = std::string_view(module).substr(dot + 1);
      const bool mlp = last == "gate_proj" || last == "up_proj" || last == "down_proj";
      return mlp ? TensorAction::kNvfp4 : TensorAction::kFp8;
    }
  }
  return TensorAction::kKeep;
}

ordered_json hf_quant_config_json(QuantizeFormat format, const std::vector<ModuleQuant>& modules) {
  ordered_json q;
  if (format == QuantizeFormat::kMixed) {
    q["quant_algo"] = "MIXED_PRECISION";
    q["kv_cache_quant_algo"] = nullptr;
    ordered_json layers = ordered_json::object();
    for (const auto& m : modules) {
      if (m.action == TensorAction::kKeep) continue;
      ordered_json entry = {{"quant_algo", algo_of(m.action, format)}};
      if (m.action == TensorAction::kNvfp4) entry["group_size"] = 16;
      layers[m.module] = entry;
    }
    q["quantized_layers"] = layers;
  } else {
    q["quant_algo"] = format == QuantizeFormat::kFp8 ? "FP8" : "W4A16_NVFP4";
    q["kv_cache_quant_algo"] = nullptr;
    if (format == QuantizeFormat::kNvfp4) q["group_size"] = 16;
    std::set<std::string> exclude;
    for (const auto& m : modules) {
      if (m.action != TensorAction::kKeep) continue;
      // One wildcard for the MTP head and the vision tower, as ModelOpt writes them; exact names otherwise.
      if (is_mtp_tensor(m.module)) {
        exclude.insert("mtp.*");
      } else if (is_vision_tensor(m.module)) {
        exclude.insert(m.module.rfind("model.visual", 0) == 0 ? "model.visual*" : "*visual*");
      } else {
        exclude.insert(m.module);
      }
    }
    q["exclude_modules"] = std::vector<std::string>(exclude.begin(), exclude.end());
  }
  return {{"producer", producer()}, {"quantization", q}};
}

ordered_json quantization_config_json(const ordered_json& hf) {
  const ordered_json& q = hf.at("quantization");
  const std::string algo = q.at("quant_algo").get<std::string>();
  ordered_json out;
  out["quant_method"] = "modelopt";
  out["quant_algo"] = algo;
  out["kv_cache_scheme"] = nullptr;
  ordered_json groups = ordered_json::object();
  if (algo == "MIXED_PRECISION") {
    // One group per format, targeting the modules of that format.
    std::vector<std::string> fp8, nvfp4;
    for (const auto& [module, layer] : q.at("quantized_layers").items()) {
      (layer.at("quant_algo") == "FP8" ? fp8 : nvfp4).push_back(module);
    }
    int g = 0;
    for (const auto& [targets, a] :
         {std::pair{nvfp4, std::string("W4A16_NVFP4")}, std::pair{fp8, std::string("FP8")}}) {
      if (targets.empty()) continue;
      groups["group_" + std::to_string(g++)] = {{"weights", weights_scheme(a)}, {"targets", targets}};
    }
    out["config_groups"] = groups;
    out["ignore"] = ordered_json::array();
    out["quantized_layers"] = q.at("quantized_layers");
  } else {
    groups["group_0"] = {{"weights", weights_scheme(algo)}, {"targets", {"Linear"}}};
    out["config_groups"] = groups;
    out["ignore"] = q.at("exclude_modules");
    if (q.contains("group_size")) out["group_size"] = q.at("group_size");
  }
  out["producer"] = hf.at("producer");
  return out;
}

}  // namespace voltserve
