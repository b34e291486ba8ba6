// config.json parsing for the Qwen3.5 family (transformers' Qwen3_5TextConfig defaults for absent fields).
#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "model/tensor_names.h"

namespace voltserve {
namespace {

using nlohmann::json;

// Reads typed fields of one JSON object; every error names the file and the field path.
class Fields {
 public:
  Fields(const json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  std::string where(const char* key) const { return "config.json: " + path_ + key; }

  Result<int64_t> positive_int(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      return invalid_argument(where(key) + " must be a positive integer, got " + v.dump());
    }
    return v.get<int64_t>();
  }
  Result<int64_t> non_negative_int(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return invalid_argument(where(key) + " must be a non-negative integer, got " + v.dump());
    }
    return v.get<int64_t>();
  }
  Result<double> positive_number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
      return invalid_argument(where(key) + " must be a positive number, got " + v.dump());
    }
    return v.get<double>();
  }
  Result<bool> boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!obj_[key].is_boolean()) return invalid_argument(where(key) + " must be true or false, got " + obj_[key].dump());
    return obj_[key].get<bool>();
  }
  Result<std::string> string(const char* key, std::string fallback) const {
    if (!has(key)) return fallback;
    if (!obj_[key].is_string()) return invalid_argument(where(key) + " must be a string, got " + obj_[key].dump());
    return obj_[key].get<std::string>();
  }
  const json& raw(const char* key) const { return obj_[key]; }

 private:
  const json& obj_;
  std::string path_;
};

// eos_token_id may be an int, a list of ints, or null.
Status append_eos(const json& obj, const std::string& where, std::vector<int32_t>& out) {
  if (!obj.is_object() || !obj.contains("eos_token_id") || obj["eos_token_id"].is_null()) return Status::ok();
  const json& v = obj["eos_token_id"];
  std::vector<json> items;
  if (v.is_array()) {
    items.assign(v.begin(), v.end());
  } else {
    items.push_back(v);
  }
  for (const auto& item : items) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > INT32_MAX) {
      return invalid_argument(where + " eos_token_id must be a non-negative integer or a list of them, got " + v.dump());
    }
    const auto id = static_cast<int32_t>(item.get<int64_t>());
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return Status::ok();
}

Result<std::string> read_text(const std::filesystem::path& path, bool required) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (required) return not_found(path.string() + ": no such file");
    return std::string();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int64_t ModelConfig::n_full_attention_layers() const {
  return std::count(layer_types.begin(), layer_types.end(), LayerType::kFullAttention);
}
int64_t ModelConfig::n_linear_attention_layers() const {
  return std::count(layer_types.begin(), layer_types.end(), LayerType::kLinearAttention);
}

Result<ModelConfig> parse_model_config(std::string_view config_json, std::string_view generation_config_json,
                                       std::string_view hf_quant_config_json,
                                       const std::vector<std::string>& tensor_names) {
  const json root = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return invalid_argument("config.json: not a valid JSON object");
  ModelConfig c;
  if (!root.contains("model_type") || !root["model_type"].is_string()) {
    return invalid_argument("config.json: missing string field model_type (expected \"qwen3_5\" or \"qwen3_5_text\")");
  }
  c.model_type = root["model_type"].get<std::string>();
  const json* text = &root;
  std::string path;
  if (c.model_type == "qwen3_5") {
    if (!root.contains("text_config") || !root["text_config"].is_object()) {
      return invalid_argument("config.json: model_type \"qwen3_5\" needs a \"text_config\" object");
    }
    text = &root["text_config"];
    path = "text_config.";
    if (text->contains("model_type") && (*text)["model_type"] != "qwen3_5_text") {
      return unimplemented("config.json: text_config.model_type " + (*text)["model_type"].dump() +
                           " is not supported (expected \"qwen3_5_text\")");
    }
  } else if (c.model_type != "qwen3_5_text") {
    return unimplemented("config.json: model_type \"" + c.model_type +
                         "\" is not supported (voltserve runs \"qwen3_5\" and \"qwen3_5_text\")");
  }
  const Fields f(*text, path);
  const Fields top(root, "");

  VS_ASSIGN_OR_RETURN(c.vocab_size, f.positive_int("vocab_size", 248320));
  VS_ASSIGN_OR_RETURN(c.hidden_size, f.positive_int("hidden_size", 4096));
  VS_ASSIGN_OR_RETURN(c.intermediate_size, f.positive_int("intermediate_size", 12288));
  VS_ASSIGN_OR_RETURN(c.n_layers, f.positive_int("num_hidden_layers", 32));
  VS_ASSIGN_OR_RETURN(c.n_heads, f.positive_int("num_attention_heads", 16));
  VS_ASSIGN_OR_RETURN(c.n_kv_heads, f.positive_int("num_key_value_heads", 4));
  VS_ASSIGN_OR_RETURN(c.head_dim, f.positive_int("head_dim", 256));
  VS_ASSIGN_OR_RETURN(c.max_position_embeddings, f.positive_int("max_position_embeddings", 32768));
  VS_ASSIGN_OR_RETURN(c.rms_norm_eps, f.positive_number("rms_norm_eps", 1e-6));
  VS_ASSIGN_OR_RETURN(c.linear_conv_kernel_dim, f.positive_int("linear_conv_kernel_dim", 4));
  VS_ASSIGN_OR_RETURN(c.linear_key_head_dim, f.positive_int("linear_key_head_dim", 128));
  VS_ASSIGN_OR_RETURN(c.linear_value_head_dim, f.positive_int("linear_value_head_dim", 128));
  VS_ASSIGN_OR_RETURN(c.linear_n_key_heads, f.positive_int("linear_num_key_heads", 16));
  VS_ASSIGN_OR_RETURN(c.linear_n_value_heads, f.positive_int("linear_num_value_heads", 32));
  VS_ASSIGN_OR_RETURN(c.attn_output_gate, f.boolean("attn_output_gate", true));
  VS_ASSIGN_OR_RETURN(c.mtp_num_hidden_layers, f.non_negative_int("mtp_num_hidden_layers", 0));
  VS_ASSIGN_OR_RETURN(c.mtp_use_dedicated_embeddings, f.boolean("mtp_use_dedicated_embeddings", false));
  VS_ASSIGN_OR_RETURN(c.dtype, f.string("dtype", ""));
  if (c.dtype.empty()) {
    VS_ASSIGN_OR_RETURN(c.dtype, f.string("torch_dtype", ""));
  }

  // The tie flag of a qwen3_5 (VLM) config is the top-level one (transformers ties on the model's own config).
  VS_ASSIGN_OR_RETURN(const bool text_tie, f.boolean("tie_word_embeddings", false));
  c.tie_word_embeddings = text_tie;
  if (text != &root && top.has("tie_word_embeddings")) {
    VS_ASSIGN_OR_RETURN(c.tie_word_embeddings, top.boolean("tie_word_embeddings", false));
  }

  // Features this engine does not implement: refuse them by name rather than compute something else.
  VS_ASSIGN_OR_RETURN(const std::string act, f.string("hidden_act", "silu"));
  if (act != "silu") return unimplemented(f.where("hidden_act") + " \"" + act + "\" is not supported (only \"silu\")");
  VS_ASSIGN_OR_RETURN(const bool bias, f.boolean("attention_bias", false));
  if (bias) return unimplemented(f.where("attention_bias") + " true is not supported (Qwen3.5 has no biases)");
  VS_ASSIGN_OR_RETURN(const std::string gate_type, f.string("output_gate_type", "silu"));
  if (gate_type != "silu" && gate_type != "swish") {
    return unimplemented(f.where("output_gate_type") + " \"" + gate_type + "\" is not supported (silu/swish)");
  }
  if (f.has("mlp_only_layers")) {
    const json& v = f.raw("mlp_only_layers");
    if (!v.is_array()) return invalid_argument(f.where("mlp_only_layers") + " must be a list");
    if (!v.empty()) return unimplemented(f.where("mlp_only_layers") + " " + v.dump() + " is not supported (must be [])");
  }
  if (f.has("layer_scale")) {
    const json& v = f.raw("layer_scale");
    if (!(v.is_boolean() && !v.get<bool>())) {
      return unimplemented(f.where("layer_scale") + " " + v.dump() + " is not supported");
    }
  }

  // Layer layout.
  if (f.has("layer_types")) {
    const json& lt = f.raw("layer_types");
    if (!lt.is_array()) return invalid_argument(f.where("layer_types") + " must be a list of strings");
    if (static_cast<int64_t>(lt.size()) != c.n_layers) {
      return invalid_argument(f.where("layer_types") + " has " + std::to_string(lt.size()) +
                              " entries but num_hidden_layers is " + std::to_string(c.n_layers));
    }
    for (size_t i = 0; i < lt.size(); ++i) {
      if (lt[i] == "linear_attention") {
        c.layer_types.push_back(LayerType::kLinearAttention);
      } else if (lt[i] == "full_attention") {
        c.layer_types.push_back(LayerType::kFullAttention);
      } else {
        return invalid_argument(f.where("layer_types") + "[" + std::to_string(i) + "] is " + lt[i].dump() +
                                " (expected \"linear_attention\" or \"full_attention\")");
      }
    }
  } else {
    VS_ASSIGN_OR_RETURN(const int64_t interval, f.positive_int("full_attention_interval", 4));
    for (int64_t i = 0; i < c.n_layers; ++i) {
      c.layer_types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
    }
  }

  // RoPE: rope_parameters (or the legacy rope_scaling), then top-level rope_theta / partial_rotary_factor.
  const char* rope_key = f.has("rope_parameters") ? "rope_parameters" : (f.has("rope_scaling") ? "rope_scaling" : nullptr);
  c.rope_theta = 10000.0;
  c.partial_rotary_factor = 0.25;
  VS_ASSIGN_OR_RETURN(c.rope_theta, f.positive_number("rope_theta", c.rope_theta));
  if (top.has("partial_rotary_factor") && text != &root) {
    VS_ASSIGN_OR_RETURN(c.partial_rotary_factor, top.positive_number("partial_rotary_factor", c.partial_rotary_factor));
  }
  VS_ASSIGN_OR_RETURN(c.partial_rotary_factor, f.positive_number("partial_rotary_factor", c.partial_rotary_factor));
  if (rope_key != nullptr) {
    const json& rp = f.raw(rope_key);
    if (!rp.is_object()) return invalid_argument(f.where(rope_key) + " must be an object");
    const Fields r(rp, path + rope_key + ".");
    std::string rope_type = "default";
    if (r.has("rope_type")) {
      VS_ASSIGN_OR_RETURN(rope_type, r.string("rope_type", "default"));
    } else if (r.has("type")) {
      VS_ASSIGN_OR_RETURN(rope_type, r.string("type", "default"));
    }
    if (rope_type != "default") {
      return unimplemented(r.where("rope_type") + " \"" + rope_type +
                           "\" is not supported (only plain RoPE, \"default\")");
    }
    VS_ASSIGN_OR_RETURN(c.rope_theta, r.positive_number("rope_theta", c.rope_theta));
    VS_ASSIGN_OR_RETURN(c.partial_rotary_factor, r.positive_number("partial_rotary_factor", c.partial_rotary_factor));
  }
  if (c.partial_rotary_factor > 1.0) {
    return invalid_argument(f.where("partial_rotary_factor") + " must be in (0, 1], got " +
                            std::to_string(c.partial_rotary_factor));
  }
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0) {
    return invalid_argument("config.json: head_dim " + std::to_string(c.head_dim) + " * partial_rotary_factor " +
                            std::to_string(c.partial_rotary_factor) + " gives rotary_dim " +
                            std::to_string(c.rotary_dim) + ", which must be positive and even");
  }

  // Shape consistency the forward pass relies on.
  if (c.n_heads % c.n_kv_heads != 0) {
    return invalid_argument(f.where("num_attention_heads") + " " + std::to_string(c.n_heads) +
                            " is not a multiple of num_key_value_heads " + std::to_string(c.n_kv_heads));
  }
  if (c.linear_n_value_heads % c.linear_n_key_heads != 0) {
    return invalid_argument(f.where("linear_num_value_heads") + " " + std::to_string(c.linear_n_value_heads) +
                            " is not a multiple of linear_num_key_heads " + std::to_string(c.linear_n_key_heads));
  }

  // Stop ids: generation_config.json's list first (it is what generation uses), then config.json's.
  if (!generation_config_json.empty()) {
    const json gen = json::parse(generation_config_json, nullptr, false);
    if (gen.is_discarded() || !gen.is_object()) {
      return invalid_argument("generation_config.json: not a valid JSON object");
    }
    VS_RETURN_IF_ERROR(append_eos(gen, "generation_config.json:", c.eos_token_ids));
  }
  VS_RETURN_IF_ERROR(append_eos(*text, "config.json: " + path, c.eos_token_ids));
  if (text != &root) VS_RETURN_IF_ERROR(append_eos(root, "config.json:", c.eos_token_ids));

  // Quantization (config.json's quantization_config at the top level or inside text_config).
  std::string qc_text;
  if (top.has("quantization_config")) {
    qc_text = root["quantization_config"].dump();
  } else if (f.has("quantization_config")) {
    qc_text = f.raw("quantization_config").dump();
  }
  VS_ASSIGN_OR_RETURN(c.quantization, parse_quant_config(hf_quant_config_json, qc_text));

  // Tensor prefix, and a tie flag that matches the tensors.
  if (tensor_names.empty()) {
    c.tensor_prefix = c.model_type == "qwen3_5" ? std::string(kVlmTextPrefix) : std::string(kTextOnlyPrefix);
  } else {
    VS_ASSIGN_OR_RETURN(c.tensor_prefix, detect_text_prefix(tensor_names));
    const bool has_lm_head =
        std::any_of(tensor_names.begin(), tensor_names.end(),
                    [](const std::string& n) { return n == "lm_head.weight" || n == "lm_head.weight_packed"; });
    if (!c.tie_word_embeddings && !has_lm_head) {
      return invalid_argument(
          "config.json: tie_word_embeddings is false but the checkpoint has no lm_head.weight");
    }
  }
  return c;
}

Result<ModelConfig> load_model_config(const std::filesystem::path& model_dir) {
  VS_ASSIGN_OR_RETURN(std::string config_text, read_text(model_dir / "config.json", true));
  VS_ASSIGN_OR_RETURN(std::string gen_text, read_text(model_dir / "generation_config.json", false));
  VS_ASSIGN_OR_RETURN(std::string hq_text, read_text(model_dir / "hf_quant_config.json", false));
  std::vector<std::string> names;
  auto ckpt = Checkpoint::open(model_dir);
  if (ckpt.is_ok()) {
    names = ckpt->names();
  } else if (ckpt.status().code() != StatusCode::kNotFound) {
    return ckpt.status();
  }
  auto result = parse_model_config(config_text, gen_text, hq_text, names);
  if (!result.is_ok()) {
    return Status(result.status().code(), model_dir.string() + ": " + result.status().message());
  }
  return result;
}

}  // namespace voltserve
