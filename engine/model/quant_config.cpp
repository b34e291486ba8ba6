// Parsing of ModelOpt (hf_quant_config.json, config.json quantization_config) and compressed-tensors quantization
// configs into the per-module expectation load_linear() checks the tensors against.
#include "model/quant_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/tensor_names.h"

namespace voltserve {
namespace {

using nlohmann::json;

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// fnmatch with '*' and '?' only (ModelOpt writes "name*" prefix wildcards and "*.conv1d*" style patterns).
bool glob_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// ModelOpt's quant_algo spellings (modelopt/torch/export/quant_utils.py process_layer_quant_config; older exports
// write the lower-case format names).
Result<LayerQuant> modelopt_algo(const std::string& algo, const std::string& where) {
  const std::string a = upper(algo);
  if (a == "NVFP4") return LayerQuant::kNvfp4;
  if (a == "W4A16_NVFP4" || a == "NVFP4_W4A16") return LayerQuant::kW4A16Nvfp4;
  if (a == "FP8") return LayerQuant::kFp8;
  if (a == "FP8_PER_CHANNEL_PER_TOKEN" || a == "FP8_PC_PT") return LayerQuant::kFp8PerChannel;
  return unimplemented(where + ": quant_algo \"" + algo +
                       "\" is not supported (supported: NVFP4, W4A16_NVFP4, FP8, FP8_PER_CHANNEL_PER_TOKEN, "
                       "MIXED_PRECISION)");
}

Result<std::vector<std::string>> string_list(const json& v, const std::string& where) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_array()) return invalid_argument(where + " must be a list of strings");
  for (const auto& e : v) {
    if (!e.is_string()) return invalid_argument(where + " must be a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// ModelOpt: either hf_quant_config.json {"quantization": {...}} or config.json's flat
// {"quant_method": "modelopt", "quant_algo": ..., "ignore": [...], "quantized_layers": {...}}.
Result<QuantConfig> parse_modelopt(const json& root, const std::string& source) {
  const json& q = root.contains("quantization") ? root["quantization"] : root;
  if (!q.is_object()) return invalid_argument(source + ": \"quantization\" must be an object");
  QuantConfig cfg;
  cfg.method = QuantMethod::kModelOpt;
  cfg.source = source;
  if (!q.contains("quant_algo") || !q["quant_algo"].is_string()) {
    return invalid_argument(source + ": missing string field \"quant_algo\"");
  }
  cfg.quant_algo = q["quant_algo"].get<std::string>();
  if (q.contains("kv_cache_quant_algo") && q["kv_cache_quant_algo"].is_string()) {
    cfg.kv_cache_quant_algo = q["kv_cache_quant_algo"].get<std::string>();
  }
  if (q.contains("group_size")) {
    if (!q["group_size"].is_number_integer()) return invalid_argument(source + ": \"group_size\" must be an integer");
    cfg.group_size = q["group_size"].get<int64_t>();
  }
  for (const char* key : {"exclude_modules", "ignore"}) {
    if (q.contains(key)) {
      VS_ASSIGN_OR_RETURN(auto list, string_list(q[key], source + ": \"" + key + "\""));
      cfg.exclude.insert(cfg.exclude.end(), list.begin(), list.end());
    }
  }
  if (upper(cfg.quant_algo) == "MIXED_PRECISION") {
    if (!q.contains("quantized_layers") || !q["quantized_layers"].is_object()) {
      return invalid_argument(source + ": quant_algo MIXED_PRECISION needs a \"quantized_layers\" object");
    }
    for (const auto& [module, layer] : q["quantized_layers"].items()) {
      const std::string where = source + ": quantized_layers[\"" + module + "\"]";
      if (!layer.is_object() || !layer.contains("quant_algo") || !layer["quant_algo"].is_string()) {
        return invalid_argument(where + " needs a string \"quant_algo\"");
      }
      VS_ASSIGN_OR_RETURN(LayerQuant lq, modelopt_algo(layer["quant_algo"].get<std::string>(), where));
      if (layer.contains("group_size") && layer["group_size"].is_number_integer() &&
          layer["group_size"].get<int64_t>() != 16 && (lq == LayerQuant::kNvfp4 || lq == LayerQuant::kW4A16Nvfp4)) {
        return unimplemented(where + ": NVFP4 group_size " + layer["group_size"].dump() + " (only 16 exists)");
      }
      cfg.quantized_layers.emplace_back(module, lq);
    }
    cfg.default_quant = LayerQuant::kNone;  // MIXED: modules not listed are unquantized
  } else {
    VS_ASSIGN_OR_RETURN(cfg.default_quant, modelopt_algo(cfg.quant_algo, source));
    if ((cfg.default_quant == LayerQuant::kNvfp4 || cfg.default_quant == LayerQuant::kW4A16Nvfp4) &&
        cfg.group_size != 16) {
      return unimplemented(source + ": NVFP4 group_size " + std::to_string(cfg.group_size) + " (only 16 exists)");
    }
  }
  return cfg;
}

// compressed-tensors: one scheme per config group.
Result<LayerQuant> ct_scheme(const json& group, const std::string& top_format, const std::string& where) {
  if (!group.is_object()) return invalid_argument(where + " must be an object");
  const std::string format = group.contains("format") && group["format"].is_string()
                                 ? group["format"].get<std::string>() : top_format;
  const json w = group.contains("weights") ? group["weights"] : json();
  if (!w.is_object()) return invalid_argument(where + ": missing \"weights\" scheme");
  const int64_t bits = w.contains("num_bits") && w["num_bits"].is_number_integer() ? w["num_bits"].get<int64_t>() : 0;
  const std::string type = w.contains("type") && w["type"].is_string() ? w["type"].get<std::string>() : "";
  const std::string strategy = w.contains("strategy") && w["strategy"].is_string() ? w["strategy"].get<std::string>() : "";
  const bool has_act = group.contains("input_activations") && group["input_activations"].is_object();
  if (bits == 4 && type == "float") {
    if (format != "nvfp4-pack-quantized") {
      return unimplemented(where + ": 4-bit float weights in format \"" + format + "\" (supported: nvfp4-pack-quantized)");
    }
    const int64_t gs = w.contains("group_size") && w["group_size"].is_number_integer() ? w["group_size"].get<int64_t>() : 16;
    if (gs != 16) return unimplemented(where + ": NVFP4 group_size " + std::to_string(gs) + " (only 16 exists)");
    return has_act ? LayerQuant::kNvfp4 : LayerQuant::kW4A16Nvfp4;
  }
  if (bits == 8 && type == "float") {
    if (strategy == "tensor") return LayerQuant::kFp8;
    if (strategy == "channel") return LayerQuant::kFp8PerChannel;
    return unimplemented(where + ": FP8 weight strategy \"" + strategy + "\" (supported: tensor, channel)");
  }
  return unimplemented(where + ": weights of " + std::to_string(bits) + "-bit type \"" + type +
                       "\" (supported: NVFP4 nvfp4-pack-quantized, FP8 float-quantized)");
}

Result<QuantConfig> parse_compressed_tensors(const json& root, const std::string& source) {
  QuantConfig cfg;
  cfg.method = QuantMethod::kCompressedTensors;
  cfg.source = source;
  cfg.quant_algo = root.contains("format") && root["format"].is_string() ? root["format"].get<std::string>() : "";
  if (!root.contains("config_groups") || !root["config_groups"].is_object() || root["config_groups"].empty()) {
    return invalid_argument(source + ": compressed-tensors config needs a non-empty \"config_groups\" object");
  }
  for (const auto& [name, group] : root["config_groups"].items()) {
    const std::string where = source + ": config_groups[\"" + name + "\"]";
    VS_ASSIGN_OR_RETURN(LayerQuant lq, ct_scheme(group, cfg.quant_algo, where));
    VS_ASSIGN_OR_RETURN(auto targets, string_list(group.contains("targets") ? group["targets"] : json(),
                                                  where + ".targets"));
    if (targets.empty()) return invalid_argument(where + ": \"targets\" is empty");
    cfg.groups.emplace_back(std::move(targets), lq);
  }
  if (root.contains("ignore")) {
    VS_ASSIGN_OR_RETURN(cfg.exclude, string_list(root["ignore"], source + ": \"ignore\""));
  }
  if (root.contains("kv_cache_scheme") && root["kv_cache_scheme"].is_object()) cfg.kv_cache_quant_algo = "FP8";
  return cfg;
}

Result<QuantConfig> parse_quantization_config_object(const json& qc, const std::string& source) {
  if (!qc.is_object()) return invalid_argument(source + " must be a JSON object");
  if (!qc.contains("quant_method") || !qc["quant_method"].is_string()) {
    return invalid_argument(source + ": missing string field \"quant_method\"");
  }
  const std::string method = qc["quant_method"].get<std::string>();
  if (method == "modelopt") return parse_modelopt(qc, source);
  if (method == "compressed-tensors") return parse_compressed_tensors(qc, source);
  return unimplemented(source + ": quant_method \"" + method +
                       "\" is not supported (supported: modelopt NVFP4/FP8, compressed-tensors NVFP4/FP8)");
}

Result<std::string> read_optional(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> name_variants(std::string_view module) {
  std::vector<std::string> out{std::string(module)};
  const std::string_view bare = strip_text_prefix(module);
  if (bare.size() != module.size()) {
    for (std::string_view p : {kVlmTextPrefix, kTextOnlyPrefix}) {
      std::string v = std::string(p) + std::string(bare);
      if (v != module) out.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace

const char* layer_quant_name(LayerQuant quant) {
  switch (quant) {
    case LayerQuant::kNone: return "unquantized";
    case LayerQuant::kNvfp4: return "NVFP4";
    case LayerQuant::kW4A16Nvfp4: return "W4A16_NVFP4";
    case LayerQuant::kFp8: return "FP8";
    case LayerQuant::kFp8PerChannel: return "FP8_PER_CHANNEL";
  }
  return "?";
}

const char* quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone: return "none";
    case QuantMethod::kModelOpt: return "modelopt";
    case QuantMethod::kCompressedTensors: return "compressed-tensors";
  }
  return "?";
}

bool module_pattern_matches(std::string_view pattern, std::string_view module) {
  if (pattern.substr(0, 3) == "re:") {
    try {
      const std::regex re(std::string(pattern.substr(3)));
      // Python's re.match: anchored at the start, not necessarily at the end.
      return std::regex_search(module.begin(), module.end(), re, std::regex_constants::match_continuous);
    } catch (const std::regex_error&) {
      return false;
    }
  }
  return glob_match(pattern, module);
}

LayerQuant QuantConfig::expected(std::string_view module) const {
  if (method == QuantMethod::kNone) return LayerQuant::kNone;
  const auto variants = name_variants(module);
  const auto any_matches = [&](std::string_view pattern) {
    return std::any_of(variants.begin(), variants.end(),
                       [&](const std::string& v) { return module_pattern_matches(pattern, v); });
  };
  for (const auto& pattern : exclude) {
    if (any_matches(pattern)) return LayerQuant::kNone;
  }
  if (method == QuantMethod::kModelOpt) {
    if (!quantized_layers.empty() || upper(quant_algo) == "MIXED_PRECISION") {
      for (const auto& [name, quant] : quantized_layers) {
        if (any_matches(name)) return quant;
      }
      return LayerQuant::kNone;
    }
    return default_quant;
  }
  // compressed-tensors: the first group whose targets name this module ("Linear" names every Linear).
  for (const auto& [targets, quant] : groups) {
    for (const auto& target : targets) {
      if (target == "Linear" || any_matches(target)) return quant;
    }
  }
  return LayerQuant::kNone;
}

Result<QuantConfig> parse_quant_config(std::string_view hf_quant_config, std::string_view quantization_config) {
  std::optional<QuantConfig> from_config;
  if (!quantization_config.empty()) {
    const json qc = json::parse(quantization_config, nullptr, false);
    if (qc.is_discarded()) return invalid_argument("config.json quantization_config is not valid JSON");
    VS_ASSIGN_OR_RETURN(QuantConfig c, parse_quantization_config_object(qc, "config.json quantization_config"));
    from_config = std::move(c);
  }
  if (!hf_quant_config.empty()) {
    const json hq = json::parse(hf_quant_config, nullptr, false);
    if (hq.is_discarded() || !hq.is_object()) return invalid_argument("hf_quant_config.json is not a valid JSON object");
    if (!hq.contains("quantization")) return invalid_argument("hf_quant_config.json: missing \"quantization\" object");
    VS_ASSIGN_OR_RETURN(QuantConfig c, parse_modelopt(hq, "hf_quant_config.json"));
    if (from_config && from_config->method != QuantMethod::kModelOpt) {
      return invalid_argument(std::string("hf_quant_config.json (modelopt) contradicts config.json quantization_config "
                                          "(quant_method ") + quant_method_name(from_config->method) + ")");
    }
    if (from_config && upper(from_config->quant_algo) != upper(c.quant_algo)) {
      return invalid_argument("hf_quant_config.json quant_algo \"" + c.quant_algo +
                              "\" contradicts config.json quantization_config quant_algo \"" +
                              from_config->quant_algo + "\"");
    }
    return c;  // the exporter's own file is the source of truth
  }
  if (from_config) return *std::move(from_config);
  return QuantConfig{};
}

Result<QuantConfig> load_quant_config(const std::filesystem::path& model_dir) {
  VS_ASSIGN_OR_RETURN(std::string hf_text, read_optional(model_dir / "hf_quant_config.json"));
  VS_ASSIGN_OR_RETURN(std::string cfg_text, read_optional(model_dir / "config.json"));
  std::string qc_text;
  if (!cfg_text.empty()) {
    const json cfg = json::parse(cfg_text, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) {
      return invalid_argument((model_dir / "config.json").string() + ": not a valid JSON object");
    }
    if (cfg.contains("quantization_config") && !cfg["quantization_config"].is_null()) {
      qc_text = cfg["quantization_config"].dump();
    } else if (cfg.contains("text_config") && cfg["text_config"].is_object() &&
               cfg["text_config"].contains("quantization_config") &&
               !cfg["text_config"]["quantization_config"].is_null()) {
      qc_text = cfg["text_config"]["quantization_config"].dump();
    }
  }
  auto result = parse_quant_config(hf_text, qc_text);
  if (!result.is_ok()) {
    return Status(result.status().code(), model_dir.string() + ": " + result.status().message());
  }
  return result;
}

}  // namespace voltserve
