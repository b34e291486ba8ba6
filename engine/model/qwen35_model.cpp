// Qwen35Model::forward: the decoder stack of MODEL.md §2.3 over Backend ops.
#include "model/qwen35_model.h"

#include "model/checkpoint.h"

namespace voltserve {

Result<std::unique_ptr<Qwen35Model>> Qwen35Model::load(const std::filesystem::path& model_dir, Backend& backend) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    return not_found("model folder " + model_dir.string() + " does not exist or is not a directory");
  }
  VS_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  VS_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(model_dir));
  std::unique_ptr<Qwen35Model> m(new Qwen35Model());
  m->config_ = std::move(config);
  m->backend_ = &backend;
  VS_ASSIGN_OR_RETURN(m->weights_, load_qwen35_weights(checkpoint, m->config_, backend));
  const ModelConfig& c = m->config_;
  m->attn_params_.n_heads = static_cast<int32_t>(c.n_heads);
  m->attn_params_.n_kv_heads = static_cast<int32_t>(c.n_kv_heads);
  m->attn_params_.head_dim = static_cast<int32_t>(c.head_dim);
  m->attn_params_.rotary_dim = static_cast<int32_t>(c.rotary_dim);
  m->attn_params_.rope_theta = static_cast<float>(c.rope_theta);
  m->attn_params_.rms_norm_eps = static_cast<float>(c.rms_norm_eps);
  m->gdn_params_.n_k_heads = static_cast<int32_t>(c.linear_n_key_heads);
  m->gdn_params_.n_v_heads = static_cast<int32_t>(c.linear_n_value_heads);
  m->gdn_params_.head_k_dim = static_cast<int32_t>(c.linear_key_head_dim);
  m->gdn_params_.head_v_dim = static_cast<int32_t>(c.linear_value_head_dim);
  m->gdn_params_.conv_kernel = static_cast<int32_t>(c.linear_conv_kernel_dim);
  m->gdn_params_.rms_norm_eps = static_cast<float>(c.rms_norm_eps);
  return m;
}

Qwen35Cache Qwen35Model::alloc_cache(int32_t page_size, int32_t n_pages, int32_t n_slots) const {
  Qwen35Cache cache;
  cache.page_size = page_size;
  cache.n_pages = n_pages;
  cache.n_slots = n_slots;
  cache.kv.resize(weights_.layers.size());
  cache.gdn.resize(weights_.layers.size());
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    if (weights_.layers[i].type == LayerType::kFullAttention) {
      const int64_t width = config_.n_kv_heads * config_.head_dim;
      cache.kv[i].k = backend_->alloc(static_cast<int64_t>(n_pages) * page_size, width);
      cache.kv[i].v = backend_->alloc(static_cast<int64_t>(n_pages) * page_size, width);
    } else {
      const GdnParams& g = gdn_params_;
      cache.gdn[i].conv = backend_->alloc(n_slots, static_cast<int64_t>(g.conv_dim()) * (g.conv_kernel - 1));
      cache.gdn[i].recurrent =
          backend_->alloc(n_slots, static_cast<int64_t>(g.n_v_heads) * g.head_k_dim * g.head_v_dim);
    }
  }
  return cache;
}

void Qwen35Model::reset_slot(Qwen35Cache& cache, int32_t slot) const {
  for (auto& g : cache.gdn) {
    if (g.conv.data) backend_->zero(g.conv, slot, slot + 1);
    if (g.recurrent.data) backend_->zero(g.recurrent, slot, slot + 1);
  }
}

void Qwen35Model::attention_mixer(const Qwen35Layer& layer, size_t index, const Tensor& x,
                                  std::span<const SeqSegment> segs, Qwen35Cache& cache, Tensor& out) const {
  Backend& be = *backend_;
  const int64_t T = x.rows;
  const auto& a = layer.attn;
  Tensor qg = be.alloc(T, a.q_proj->n());
  Tensor k = be.alloc(T, a.k_proj->n());
  Tensor v = be.alloc(T, a.v_proj->n());
  Tensor o = be.alloc(T, a.o_proj->k());
  be.linear(*a.q_proj, x, qg);
  be.linear(*a.k_proj, x, k);
  be.linear(*a.v_proj, x, v);
  AttentionParams p = attn_params_;
  p.page_size = cache.page_size;
  be.gated_attention(p, a.norms, qg, k, v, segs, cache.kv[index], o);
  be.linear(*a.o_proj, o, out);
}

void Qwen35Model::gdn_mixer(const Qwen35Layer& layer, size_t index, const Tensor& x,
                            std::span<const SeqSegment> segs, Qwen35Cache& cache, Tensor& out) const {
  Backend& be = *backend_;
  const int64_t T = x.rows;
  const auto& g = layer.gdn;
  Tensor qkv = be.alloc(T, g.in_proj_qkv->n());
  Tensor z = be.alloc(T, g.in_proj_z->n());
  Tensor b = be.alloc(T, g.in_proj_b->n());
  Tensor a = be.alloc(T, g.in_proj_a->n());
  Tensor o = be.alloc(T, g.out_proj->k());
  be.linear(*g.in_proj_qkv, x, qkv);
  be.linear(*g.in_proj_z, x, z);
  be.linear(*g.in_proj_b, x, b);
  be.linear(*g.in_proj_a, x, a);
  be.gdn_layer(gdn_params_, g.w, qkv, z, b, a, segs, cache.gdn[index], o);
  be.linear(*g.out_proj, o, out);
}

Status Qwen35Model::forward(std::span<const int32_t> tokens, std::span<const SeqSegment> segs, Qwen35Cache& cache,
                            std::span<const int32_t> logit_rows, std::vector<float>& logits) const {
  Backend& be = *backend_;
  const auto T = static_cast<int64_t>(tokens.size());
  const int64_t H = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);

  Tensor residual = be.alloc(T, H);  // the residual stream h, fp32
  Tensor normed = be.alloc(T, H);
  Tensor mixed = be.alloc(T, H);
  Tensor gate = be.alloc(T, config_.intermediate_size);
  Tensor up = be.alloc(T, config_.intermediate_size);
  be.embed(*weights_.embed, tokens, residual);

  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const Qwen35Layer& L = weights_.layers[i];
    // h = h + mixer(norm(h))
    be.rms_norm(residual, L.input_norm, eps, normed);
    if (L.type == LayerType::kFullAttention) {
      attention_mixer(L, i, normed, segs, cache, mixed);
    } else {
      gdn_mixer(L, i, normed, segs, cache, mixed);
    }
    // h = h + mlp(norm(h))
    be.rms_norm_residual(mixed, residual, L.post_norm, eps, normed);
    be.linear(*L.gate_proj, normed, gate);
    be.linear(*L.up_proj, normed, up);
    be.swiglu(gate, up, gate);
    be.linear(*L.down_proj, gate, mixed);
    be.add(mixed, residual);
  }

  const auto n_out = static_cast<int64_t>(logit_rows.size());
  logits.assign(static_cast<size_t>(n_out * config_.vocab_size), 0.0f);
  if (n_out == 0) return Status::ok();
  Tensor picked = be.alloc(n_out, H);
  Tensor picked_normed = be.alloc(n_out, H);
  Tensor out = be.alloc(n_out, config_.vocab_size);
  be.gather_rows(residual, logit_rows, picked);
  be.rms_norm(picked, weights_.final_norm, eps, picked_normed);
  be.linear(weights_.output(), picked_normed, out);
  be.download(out, logits);
  return Status::ok();
}

}  // namespace voltserve
