// load_qwen35_weights: tensor names and shapes of the Qwen3.5 text model (MODEL.md §5.1) -> Backend weights.
#include "model/qwen35_weights.h"

#include <string>

#include "model/tensor_names.h"

namespace voltserve {
namespace {

struct LinearPart {
  std::string module;
  int64_t n;
};

class Loader {
 public:
  Loader(WeightProvider& source, Backend& backend) : src_(source), backend_(backend) {}

  // One backend weight from one or several modules that share k (their rows concatenated in order).
  Result<std::unique_ptr<PreparedLinear>> linear(std::initializer_list<LinearPart> parts, int64_t k) {
    std::vector<kernels::HostWeightRef> refs;
    std::string what;
    for (const LinearPart& p : parts) {
      VS_ASSIGN_OR_RETURN(kernels::HostWeightRef r, src_.linear(p.module, p.n, k));
      refs.push_back(r);
      what += (what.empty() ? "" : " + ") + p.module;
    }
    return backend_.prepare_linear(refs, what);
  }

  // A small parameter of exactly `shape`, as fp32. `plus_one` adds the zero-centred norm's 1.
  Result<Tensor> vector(const std::string& name, std::initializer_list<int64_t> shape, bool plus_one = false) {
    const std::vector<int64_t> want(shape);
    VS_ASSIGN_OR_RETURN(std::vector<float> values, src_.values(name, want));
    if (plus_one) {
      for (float& v : values) v += 1.0f;
    }
    // Rank-1 parameters become one row; the conv weight [channels, 1, K] becomes [channels, K].
    const int64_t rows = want.size() >= 2 ? want[0] : 1;
    return backend_.upload(values, rows, static_cast<int64_t>(values.size()) / rows, name);
  }

 private:
  WeightProvider& src_;
  Backend& backend_;
};

}  // namespace

Status load_kv_scales(WeightProvider& source, const std::string& attn, Qwen35AttentionLayer& layer) {
  // ModelOpt's names first (MODEL.md), then compressed-tensors' (kv_cache_scheme exports put them on self_attn).
  auto scale = [&](const char* modelopt, const char* ct) -> Result<float> {
    VS_ASSIGN_OR_RETURN(const std::optional<float> mo, source.optional_scalar(attn + modelopt));
    if (mo) return *mo;
    VS_ASSIGN_OR_RETURN(const std::optional<float> c, source.optional_scalar(attn + ct));
    return c.value_or(1.0f);
  };
  VS_ASSIGN_OR_RETURN(layer.k_scale, scale("k_proj.k_scale", "k_scale"));
  VS_ASSIGN_OR_RETURN(layer.v_scale, scale("v_proj.v_scale", "v_scale"));
  return Status::ok();
}

Result<Qwen35Weights> load_qwen35_weights(WeightProvider& source, const ModelConfig& config, Backend& backend) {
  Loader ld(source, backend);
  const std::string& prefix = config.tensor_prefix;
  const int64_t H = config.hidden_size;
  Qwen35Weights w;
  VS_ASSIGN_OR_RETURN(w.embed, ld.linear({{prefix + "embed_tokens", config.vocab_size}}, H));
  if (!config.tie_word_embeddings || source.own_lm_head()) {
    if (!source.has_lm_head()) {
      return not_found(source.describe() + ": tie_word_embeddings is false but the checkpoint has no " +
                       std::string(kLmHeadModule) + ".weight");
    }
    VS_ASSIGN_OR_RETURN(w.lm_head, ld.linear({{std::string(kLmHeadModule), config.vocab_size}}, H));
  }
  VS_ASSIGN_OR_RETURN(w.final_norm, ld.vector(prefix + "norm.weight", {H}, /*plus_one=*/true));

  for (int64_t i = 0; i < config.n_layers; ++i) {
    Qwen35Layer L;
    L.type = config.layer_types[static_cast<size_t>(i)];
    auto m = [&](std::string_view suffix) { return layer_module(prefix, i, suffix); };
    VS_ASSIGN_OR_RETURN(L.input_norm, ld.vector(m("input_layernorm.weight"), {H}, true));
    VS_ASSIGN_OR_RETURN(L.post_norm, ld.vector(m("post_attention_layernorm.weight"), {H}, true));
    if (L.type == LayerType::kFullAttention) {
      const int64_t hd = config.head_dim, nh = config.n_heads, nkv = config.n_kv_heads;
      if (!config.attn_output_gate) {
        return unimplemented(source.describe() + ": attn_output_gate = false is not supported");
      }
      L.attn.q_rows = nh * hd * 2;
      L.attn.kv_rows = nkv * hd;
      VS_ASSIGN_OR_RETURN(L.attn.qkv, ld.linear({{m("self_attn.q_proj"), L.attn.q_rows},
                                                 {m("self_attn.k_proj"), L.attn.kv_rows},
                                                 {m("self_attn.v_proj"), L.attn.kv_rows}},
                                                H));
      VS_ASSIGN_OR_RETURN(L.attn.o_proj, ld.linear({{m("self_attn.o_proj"), H}}, nh * hd));
      VS_ASSIGN_OR_RETURN(L.attn.norms.q_norm, ld.vector(m("self_attn.q_norm.weight"), {hd}, true));
      VS_ASSIGN_OR_RETURN(L.attn.norms.k_norm, ld.vector(m("self_attn.k_norm.weight"), {hd}, true));
      VS_RETURN_IF_ERROR(load_kv_scales(source, m("self_attn."), L.attn));
    } else {
      const int64_t conv_dim = config.linear_conv_dim(), vdim = config.linear_value_dim();
      const int64_t nv = config.linear_n_value_heads, K = config.linear_conv_kernel_dim;
      VS_ASSIGN_OR_RETURN(L.gdn.in_proj, ld.linear({{m("linear_attn.in_proj_qkv"), conv_dim},
                                                    {m("linear_attn.in_proj_z"), vdim},
                                                    {m("linear_attn.in_proj_b"), nv},
                                                    {m("linear_attn.in_proj_a"), nv}},
                                                   H));
      VS_ASSIGN_OR_RETURN(L.gdn.out_proj, ld.linear({{m("linear_attn.out_proj"), H}}, vdim));
      VS_ASSIGN_OR_RETURN(L.gdn.w.conv, ld.vector(m("linear_attn.conv1d.weight"), {conv_dim, 1, K}));
      VS_ASSIGN_OR_RETURN(L.gdn.w.a_log, ld.vector(m("linear_attn.A_log"), {nv}));
      VS_ASSIGN_OR_RETURN(L.gdn.w.dt_bias, ld.vector(m("linear_attn.dt_bias"), {nv}));
      VS_ASSIGN_OR_RETURN(L.gdn.w.norm_weight,
                          ld.vector(m("linear_attn.norm.weight"), {config.linear_value_head_dim}));
    }
    VS_ASSIGN_OR_RETURN(L.gate_up, ld.linear({{m("mlp.gate_proj"), config.intermediate_size},
                                              {m("mlp.up_proj"), config.intermediate_size}},
                                             H));
    VS_ASSIGN_OR_RETURN(L.down_proj, ld.linear({{m("mlp.down_proj"), H}}, config.intermediate_size));
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace voltserve
