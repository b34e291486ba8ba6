// synth_checkpoint (voltserve/synth.h): plan the config and every tensor, then stream each tensor's bytes from the
// synthetic generators into its shard in 64 MiB pieces, so memory stays at one piece whatever the model's size.
#include "model/synth_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "linear/synthetic.h"
#include "model/quantize_plan.h"
#include "model/tensor_names.h"
#include "model/weight_provider.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr uint64_t kPiece = 64ull << 20;

// Files a tokenizer folder may hold that a model folder carries (HF's names).
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",          "tokenizer_config.json", "vocab.json",
                                           "merges.txt",              "special_tokens_map.json",
                                           "added_tokens.json",       "chat_template.jinja",   "chat_template.json",
                                           "generation_config.json",  "preprocessor_config.json"};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The decoder layer index in "…layers.<i>.…" (not mtp.layers), or -1.
int64_t layer_of(const std::string& module) {
  if (is_mtp_tensor(module)) return -1;
  const size_t p = module.find("layers.");
  if (p == std::string::npos || (p > 0 && module[p - 1] != '.')) return -1;
  size_t q = p + 7;
  int64_t i = 0;
  bool digits = false;
  while (q < module.size() && std::isdigit(static_cast<unsigned char>(module[q]))) {
    i = i * 10 + (module[q++] - '0');
    digits = true;
  }
  return digits ? i : -1;
}

bool config_names_format(const ordered_json& qc, SynthFormat format) {
  if (!qc.is_object() || qc.value("quant_method", "") != "modelopt") return false;
  const std::string algo = upper(qc.value("quant_algo", ""));
  if (format == SynthFormat::kNvfp4) return algo == "NVFP4" || algo == "W4A16_NVFP4";
  if (format == SynthFormat::kMixed) return algo == "MIXED_PRECISION" && qc.contains("quantized_layers");
  return false;
}

// hf_quant_config.json for a config.json quantization_config the input already had.
ordered_json hf_quant_of(const ordered_json& qc) {
  ordered_json q;
  q["quant_algo"] = qc.at("quant_algo");
  q["kv_cache_quant_algo"] = qc.contains("kv_cache_quant_algo") ? qc["kv_cache_quant_algo"] : ordered_json(nullptr);
  if (qc.contains("quantized_layers")) {
    q["quantized_layers"] = qc["quantized_layers"];
  } else {
    q["group_size"] = qc.value("group_size", 16);
    q["exclude_modules"] = qc.contains("ignore") ? qc["ignore"] : ordered_json::array();
  }
  ordered_json producer = qc.contains("producer") ? qc["producer"] : ordered_json{{"name", "voltserve"}};
  return {{"producer", producer}, {"quantization", q}};
}

class Planner {
 public:
  explicit Planner(const ModelConfig& c) : c_(c) {}
  std::vector<std::vector<SynthTensor>> groups;

  void linear(WeightProvider& src, const std::string& module, int64_t n, int64_t k) {
    const kernels::HostWeightRef r = src.linear(module, n, k).value();
    std::vector<SynthTensor> g;
    auto add = [&](std::string name, const char* dtype, std::vector<int64_t> shape, uint64_t bytes, SynthFill fill,
                   uint64_t seed) {
      SynthTensor t;
      t.planned = {std::move(name), dtype, std::move(shape), bytes};
      t.fill = fill;
      t.seed = seed;
      g.push_back(std::move(t));
    };
    const auto un = static_cast<uint64_t>(n), uk = static_cast<uint64_t>(k);
    if (r.format == WeightFormat::kNvfp4) {
      add(module + ".weight", "U8", {n, k / 2}, un * (uk / 2), SynthFill::kNvfp4Codes, r.synthetic_seed);
      add(module + ".weight_scale", "F8_E4M3", {n, k / 16}, un * (uk / 16), SynthFill::kNvfp4Scales,
          r.synthetic_seed ^ 0x5ca1e);
      add(module + ".weight_scale_2", "F32", {}, 4, SynthFill::kScalar, 0);
      g.back().scalar = kernels::kSyntheticNvfp4GlobalScale;
    } else if (r.format == WeightFormat::kFp8) {
      add(module + ".weight", "F8_E4M3", {n, k}, un * uk, SynthFill::kFp8Codes, r.synthetic_seed);
      add(module + ".weight_scale", "F32", {}, 4, SynthFill::kScalar, 0);
      g.back().scalar = kernels::kSyntheticFp8TensorScale;
    } else {
      add(module + ".weight", "BF16", {n, k}, un * uk * 2, SynthFill::kDense, r.synthetic_seed);
    }
    groups.push_back(std::move(g));
  }

  void values(WeightProvider& src, const std::string& name, std::vector<int64_t> shape) {
    SynthTensor t;
    t.values = src.values(name, shape).value();
    // The real exports keep A_log and the GDN gated norm in F32, every other parameter in BF16 (MODEL.md §5.1).
    const bool f32 = name.ends_with("A_log") || name.ends_with("linear_attn.norm.weight");
    t.planned = {name, f32 ? "F32" : "BF16", std::move(shape), t.values.size() * (f32 ? 4u : 2u)};
    t.fill = SynthFill::kValues;
    groups.push_back({std::move(t)});
  }

  // The order of load_qwen35_weights (SyntheticWeights numbers its tensors in call order).
  void text_model(uint64_t seed) {
    SyntheticWeights src(c_, seed, "synth");
    const std::string& p = c_.tensor_prefix;
    const int64_t H = c_.hidden_size;
    linear(src, p + "embed_tokens", c_.vocab_size, H);
    if (!c_.tie_word_embeddings) linear(src, std::string(kLmHeadModule), c_.vocab_size, H);
    values(src, p + "norm.weight", {H});
    for (int64_t i = 0; i < c_.n_layers; ++i) {
      auto m = [&](std::string_view suffix) { return layer_module(p, i, suffix); };
      values(src, m("input_layernorm.weight"), {H});
      values(src, m("post_attention_layernorm.weight"), {H});
      if (c_.layer_types[static_cast<size_t>(i)] == LayerType::kFullAttention) {
        attention(src, m("self_attn."));
      } else {
        const int64_t conv_dim = c_.linear_conv_dim(), vdim = c_.linear_value_dim();
        const int64_t nv = c_.linear_n_value_heads;
        linear(src, m("linear_attn.in_proj_qkv"), conv_dim, H);
        linear(src, m("linear_attn.in_proj_z"), vdim, H);
        linear(src, m("linear_attn.in_proj_b"), nv, H);
        linear(src, m("linear_attn.in_proj_a"), nv, H);
        linear(src, m("linear_attn.out_proj"), H, vdim);
        values(src, m("linear_attn.conv1d.weight"), {conv_dim, 1, c_.linear_conv_kernel_dim});
        values(src, m("linear_attn.A_log"), {nv});
        values(src, m("linear_attn.dt_bias"), {nv});
        values(src, m("linear_attn.norm.weight"), {c_.linear_value_head_dim});
      }
      mlp(src, m("mlp."));
    }
  }

  // The order of MtpHead::load.
  void mtp_head(uint64_t seed) {
    SyntheticWeights src(c_, seed, "synth");
    const int64_t H = c_.hidden_size;
    const std::string m(kMtpPrefix);
    linear(src, m + "fc", H, 2 * H);
    values(src, m + "pre_fc_norm_embedding.weight", {H});
    values(src, m + "pre_fc_norm_hidden.weight", {H});
    values(src, m + "norm.weight", {H});
    const std::string p = m + "layers.0.";
    values(src, p + "input_layernorm.weight", {H});
    values(src, p + "post_attention_layernorm.weight", {H});
    attention(src, p + "self_attn.");
    mlp(src, p + "mlp.");
  }

 private:
  void attention(WeightProvider& src, const std::string& a) {
    const int64_t H = c_.hidden_size, hd = c_.head_dim, nh = c_.n_heads, nkv = c_.n_kv_heads;
    linear(src, a + "q_proj", nh * hd * 2, H);
    linear(src, a + "k_proj", nkv * hd, H);
    linear(src, a + "v_proj", nkv * hd, H);
    linear(src, a + "o_proj", H, nh * hd);
    values(src, a + "q_norm.weight", {hd});
    values(src, a + "k_norm.weight", {hd});
  }
  void mlp(WeightProvider& src, const std::string& m) {
    linear(src, m + "gate_proj", c_.intermediate_size, c_.hidden_size);
    linear(src, m + "up_proj", c_.intermediate_size, c_.hidden_size);
    linear(src, m + "down_proj", c_.hidden_size, c_.intermediate_size);
  }
  const ModelConfig& c_;
};

size_t element_size(const std::string& dtype) {
  if (dtype == "BF16") return 2;
  if (dtype == "F32") return 4;
  return 1;
}

// Splits [0, n) over up to `threads` threads.
template <class Fn>
void parallel(uint64_t n, int threads, Fn body) {
  const uint64_t per = std::max<uint64_t>(1 << 16, (n + static_cast<uint64_t>(threads) - 1) / threads);
  std::vector<std::thread> pool;
  for (uint64_t b = per; b < n; b += per) pool.emplace_back([=, &body] { body(b, std::min(n, b + per)); });
  body(0, std::min(n, per));
  for (auto& t : pool) t.join();
}

int thread_count(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency())));
}

void fill_range(const SynthTensor& t, uint64_t e0, uint64_t e1, uint8_t* out) {
  using namespace kernels;
  switch (t.fill) {
    case SynthFill::kNvfp4Codes:  // the expressions of synthetic_fill_host (kernels/linear/synthetic_ref.cpp)
      for (uint64_t i = e0; i < e1; ++i) out[i - e0] = static_cast<uint8_t>(synthetic_hash(t.seed, i) >> 24);
      break;
    case SynthFill::kNvfp4Scales:
      for (uint64_t i = e0; i < e1; ++i) out[i - e0] = synthetic_nvfp4_scale(synthetic_hash(t.seed, i));
      break;
    case SynthFill::kFp8Codes:
      for (uint64_t i = e0; i < e1; ++i) out[i - e0] = synthetic_fp8_code(synthetic_hash(t.seed, i));
      break;
    case SynthFill::kDense:
      for (uint64_t i = e0; i < e1; ++i) {
        const uint16_t b = float_to_bf16(synthetic_dense_value(synthetic_hash(t.seed, i)));
        std::memcpy(out + 2 * (i - e0), &b, 2);
      }
      break;
    case SynthFill::kScalar:
      std::memcpy(out, &t.scalar, 4);
      break;
    case SynthFill::kValues:
      for (uint64_t i = e0; i < e1; ++i) {
        if (t.planned.dtype == "F32") {
          std::memcpy(out + 4 * (i - e0), &t.values[i], 4);
        } else {
          const uint16_t b = float_to_bf16(t.values[i]);
          std::memcpy(out + 2 * (i - e0), &b, 2);
        }
      }
      break;
  }
}

void fill_parallel(const SynthTensor& t, uint64_t offset, std::span<uint8_t> out, int threads) {
  const size_t es = element_size(t.planned.dtype);
  const uint64_t e0 = offset / es, n = out.size() / es;
  if (t.fill == SynthFill::kScalar || t.fill == SynthFill::kValues || threads <= 1) {
    fill_range(t, e0, e0 + n, out.data());
    return;
  }
  parallel(n, threads, [&](uint64_t a, uint64_t b) { fill_range(t, e0 + a, e0 + b, out.data() + a * es); });
}

}  // namespace

uint16_t float_to_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

Result<SynthFormat> parse_synth_format(const std::string& name) {
  if (name == "nvfp4") return SynthFormat::kNvfp4;
  if (name == "mixed") return SynthFormat::kMixed;
  if (name == "bf16") return SynthFormat::kBf16;
  return invalid_argument("--format \"" + name + "\" is not one of nvfp4, mixed, bf16");
}

const char* synth_format_name(SynthFormat format) {
  switch (format) {
    case SynthFormat::kNvfp4: return "nvfp4";
    case SynthFormat::kMixed: return "mixed";
    case SynthFormat::kBf16: return "bf16";
  }
  return "?";
}

Result<SynthConfig> synth_config(const std::string& config_text, const std::string& what, SynthFormat format,
                                 int64_t layers) {
  ordered_json config = ordered_json::parse(config_text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return invalid_argument(what + ": not a valid JSON object");
  ordered_json& text = config.contains("text_config") && config["text_config"].is_object() ? config["text_config"]
                                                                                          : config;
  // The config's own quantization config (top level or in text_config), then none: the format decides.
  ordered_json own;
  for (ordered_json* c : {&config, &text}) {
    if (c->contains("quantization_config")) {
      if (own.is_null()) own = (*c)["quantization_config"];
      c->erase("quantization_config");
    }
  }
  if (layers < 0) return invalid_argument("--layers " + std::to_string(layers) + " must be positive");
  if (layers > 0) {
    const int64_t have = text.value("num_hidden_layers", int64_t{0});
    if (layers > have) {
      return invalid_argument("--layers " + std::to_string(layers) + ": " + what + " has only " +
                              std::to_string(have) + " decoder layers (num_hidden_layers)");
    }
    text["num_hidden_layers"] = layers;
    // layer_types must list exactly num_hidden_layers entries; without it the loader derives the same first layers
    // from full_attention_interval.
    if (text.contains("layer_types") && text["layer_types"].is_array() &&
        static_cast<int64_t>(text["layer_types"].size()) >= layers) {
      text["layer_types"].erase(text["layer_types"].begin() + layers, text["layer_types"].end());
    }
  }
  // Shapes and names first, unquantized.
  VS_ASSIGN_OR_RETURN(ModelConfig plain, parse_model_config(config.dump(), "", "", {}));
  SynthConfig out;
  if (format != SynthFormat::kBf16) {
    ordered_json qc;
    if (config_names_format(own, format)) {
      qc = own;
      if (qc.contains("quantized_layers") && layers > 0) {  // the layers cut away
        ordered_json kept = ordered_json::object();
        for (const auto& [module, q] : qc["quantized_layers"].items()) {
          if (layer_of(module) < layers) kept[module] = q;
        }
        qc["quantized_layers"] = kept;
      }
      out.hf_quant = hf_quant_of(qc);
    } else {
      QuantizeOptions qo;
      qo.format = format == SynthFormat::kMixed ? QuantizeFormat::kMixed : QuantizeFormat::kNvfp4;
      std::vector<ModuleQuant> modules;
      Planner planner(plain);
      planner.text_model(0);
      if (plain.mtp_num_hidden_layers > 0) planner.mtp_head(1);
      for (const auto& g : planner.groups) {
        const PlannedTensor& t = g.front().planned;
        if (t.shape.size() != 2 || !t.name.ends_with(".weight") || t.name.find("embed_tokens") != std::string::npos) {
          continue;
        }
        const std::string module = t.name.substr(0, t.name.size() - 7);
        TensorAction a = plan_tensor(t.name, 2, qo);
        if (a == TensorAction::kNvfp4 && t.shape[1] % 16 != 0) a = TensorAction::kKeep;
        modules.push_back({module, a});
      }
      out.hf_quant = hf_quant_config_json(qo.format, modules);
      qc = quantization_config_json(out.hf_quant);
    }
    config["quantization_config"] = qc;
  }
  const std::string hf_text = out.hf_quant.is_null() ? std::string() : out.hf_quant.dump();
  VS_ASSIGN_OR_RETURN(out.model, parse_model_config(config.dump(), "", hf_text, {}));
  out.config = std::move(config);
  return out;
}

std::vector<std::vector<SynthTensor>> plan_synth_tensors(const ModelConfig& config, uint64_t seed) {
  Planner p(config);
  p.text_model(seed);
  if (config.mtp_num_hidden_layers > 0) p.mtp_head(seed + 1);
  return std::move(p.groups);
}

void fill_synth_bytes(const SynthTensor& t, uint64_t offset, std::span<uint8_t> out) {
  fill_parallel(t, offset, out, 1);
}

Result<SynthSummary> synth_checkpoint(const SynthOptions& options,
                                      const std::function<void(const SynthProgress&)>& progress) {
  const fs::path config_file(options.config_file), out(options.out_dir);
  std::error_code ec;
  if (options.config_file.empty() || !fs::is_regular_file(config_file, ec)) {
    return not_found("--config " + options.config_file + ": no such file");
  }
  if (options.out_dir.empty()) return invalid_argument("--out is required");
  std::vector<fs::path> tokenizer_files;
  if (!options.tokenizer_dir.empty()) {
    const fs::path td(options.tokenizer_dir);
    if (!fs::is_directory(td, ec)) return not_found("--tokenizer " + options.tokenizer_dir + ": no such folder");
    for (const char* name : kTokenizerFiles) {
      if (fs::is_regular_file(td / name, ec)) tokenizer_files.push_back(td / name);
    }
    if (!fs::is_regular_file(td / "tokenizer.json", ec) && !fs::is_regular_file(td / "tokenizer_config.json", ec)) {
      return invalid_argument("--tokenizer " + options.tokenizer_dir +
                              ": has neither tokenizer.json nor tokenizer_config.json");
    }
  }
  VS_ASSIGN_OR_RETURN(std::string text, read_text_file(config_file));
  VS_ASSIGN_OR_RETURN(SynthConfig sc, synth_config(text, config_file.string(), options.format, options.layers));
  VS_RETURN_IF_ERROR(prepare_checkpoint_folder(out, options.force));

  const auto groups = plan_synth_tensors(sc.model, options.seed);
  std::vector<std::vector<PlannedTensor>> planned;
  std::vector<const SynthTensor*> order;
  SynthProgress p;
  for (const auto& g : groups) {
    planned.emplace_back();
    for (const auto& t : g) {
      planned.back().push_back(t.planned);
      order.push_back(&t);
      p.bytes_total += t.planned.n_bytes;
    }
  }
  const std::vector<ShardPlan> shards = plan_shards(planned, std::max<uint64_t>(1, options.max_shard_bytes));
  const int threads = thread_count(options.threads);
  SynthSummary summary;
  // config.json first: an unwritable folder fails here, before any data is generated.
  VS_RETURN_IF_ERROR(write_text_file(out / "config.json", sc.config.dump(2) + "\n"));
  summary.files.push_back("config.json");
  if (!sc.hf_quant.is_null()) {
    VS_RETURN_IF_ERROR(write_text_file(out / "hf_quant_config.json", sc.hf_quant.dump(2) + "\n"));
    summary.files.push_back("hf_quant_config.json");
  }
  std::vector<uint8_t> piece;
  size_t next = 0;
  p.total = static_cast<int64_t>(order.size());
  for (const auto& shard : shards) {
    VS_ASSIGN_OR_RETURN(SafetensorsFileWriter writer, SafetensorsFileWriter::create(out / shard.file, shard));
    for (size_t j = 0; j < shard.tensors.size(); ++j) {
      const SynthTensor& t = *order[next++];
      for (uint64_t off = 0; off < t.planned.n_bytes; off += kPiece) {
        piece.resize(std::min(kPiece, t.planned.n_bytes - off));
        fill_parallel(t, off, piece, threads);
        VS_RETURN_IF_ERROR(writer.write(piece));
      }
      summary.bytes += t.planned.n_bytes;
      p.index = static_cast<int64_t>(next);
      p.name = t.planned.name;
      p.bytes_done = summary.bytes;
      if (progress) progress(p);
    }
    VS_RETURN_IF_ERROR(writer.finish());
    summary.files.push_back(shard.file);
  }
  if (shards.size() > 1) {
    VS_RETURN_IF_ERROR(write_text_file(out / "model.safetensors.index.json", shard_index_json(shards)));
    summary.files.push_back("model.safetensors.index.json");
  }
  for (const auto& f : tokenizer_files) {
    fs::copy_file(f, out / f.filename(), fs::copy_options::overwrite_existing, ec);
    if (ec) return internal_error("copying " + f.string() + " to " + out.string() + ": " + ec.message());
    summary.files.push_back(f.filename().string());
  }
  std::sort(summary.files.begin(), summary.files.end());
  summary.tensors = static_cast<int64_t>(order.size());
  summary.layers = sc.model.n_layers;
  summary.mtp = sc.model.mtp_num_hidden_layers > 0;
  summary.shards = static_cast<int64_t>(shards.size());
  return summary;
}

}  // namespace voltserve
