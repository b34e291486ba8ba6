// Qwen35Model::forward: the decoder stack of MODEL.md §2.3 over Backend ops.
#include "model/qwen35_model.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "model/checkpoint.h"

namespace voltserve {

namespace {
constexpr int32_t kDefaultLogitsRows = 64;
}  // namespace

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
  CheckpointWeights source(checkpoint, m->config_);
  VS_ASSIGN_OR_RETURN(m->weights_, load_qwen35_weights(source, m->config_, backend));
  m->set_params();
  return m;
}

Result<std::unique_ptr<Qwen35Model>> Qwen35Model::load_synthetic(const std::filesystem::path& config_file,
                                                                 uint64_t seed, Backend& backend) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config_file, ec)) {
    return not_found("model config " + config_file.string() + " does not exist");
  }
  std::ifstream in(config_file);
  std::stringstream text;
  text << in.rdbuf();
  VS_ASSIGN_OR_RETURN(ModelConfig config, parse_model_config(text.str(), "", "", {}));
  std::unique_ptr<Qwen35Model> m(new Qwen35Model());
  m->config_ = std::move(config);
  m->backend_ = &backend;
  SyntheticWeights source(m->config_, seed, config_file.string());
  VS_ASSIGN_OR_RETURN(m->weights_, load_qwen35_weights(source, m->config_, backend));
  m->set_params();
  return m;
}

Result<std::unique_ptr<Qwen35Model>> Qwen35Model::load(const ModelConfig& config, WeightProvider& weights,
                                                       Backend& backend) {
  std::unique_ptr<Qwen35Model> m(new Qwen35Model());
  m->config_ = config;
  m->backend_ = &backend;
  VS_ASSIGN_OR_RETURN(m->weights_, load_qwen35_weights(weights, m->config_, backend));
  m->set_params();
  return m;
}

void Qwen35Model::set_params() {
  const ModelConfig& c = config_;
  attn_params_.n_heads = static_cast<int32_t>(c.n_heads);
  attn_params_.n_kv_heads = static_cast<int32_t>(c.n_kv_heads);
  attn_params_.head_dim = static_cast<int32_t>(c.head_dim);
  attn_params_.rotary_dim = static_cast<int32_t>(c.rotary_dim);
  attn_params_.rope_theta = static_cast<float>(c.rope_theta);
  attn_params_.rms_norm_eps = static_cast<float>(c.rms_norm_eps);
  gdn_params_.n_k_heads = static_cast<int32_t>(c.linear_n_key_heads);
  gdn_params_.n_v_heads = static_cast<int32_t>(c.linear_n_value_heads);
  gdn_params_.head_k_dim = static_cast<int32_t>(c.linear_key_head_dim);
  gdn_params_.head_v_dim = static_cast<int32_t>(c.linear_value_head_dim);
  gdn_params_.conv_kernel = static_cast<int32_t>(c.linear_conv_kernel_dim);
  gdn_params_.rms_norm_eps = static_cast<float>(c.rms_norm_eps);
}

Status Qwen35Model::configure(const ModelStepLimits& limits) {
  if (configured_) return internal_error("Qwen35Model::configure called twice");
  if (limits.max_tokens < 1 || limits.max_seqs < 1 || limits.n_slots < 1) {
    return invalid_argument("model step limits: max_tokens, max_seqs and n_slots must be >= 1");
  }
  limits_ = limits;
  // Output rows go through the lm_head in chunks of this many: a [rows, vocab] fp32 buffer (64 MiB at the
  // Qwen3.5 vocabulary for 64 rows).
  if (limits_.logits_rows <= 0) limits_.logits_rows = std::min(limits_.max_tokens, kDefaultLogitsRows);
  const ModelConfig& c = config_;
  Backend& be = *backend_;
  const int64_t T = limits_.max_tokens;
  const DType act = be.activation_dtype();
  const int64_t q_rows = c.n_heads * c.head_dim * 2, kv_rows = c.n_kv_heads * c.head_dim;
  const int64_t gdn_rows = c.linear_conv_dim() + c.linear_value_dim() + 2 * c.linear_n_value_heads;
  Activations& w = workspace_;
  VS_ASSIGN_OR_RETURN(w.residual, be.alloc(T, c.hidden_size, DType::kF32, "workspace residual"));
  VS_ASSIGN_OR_RETURN(w.normed, be.alloc(T, c.hidden_size, act, "workspace normed"));
  VS_ASSIGN_OR_RETURN(w.mixed, be.alloc(T, c.hidden_size, DType::kF32, "workspace mixed"));
  if (c.n_full_attention_layers() > 0) {
    VS_ASSIGN_OR_RETURN(w.attn_proj, be.alloc(T, q_rows + 2 * kv_rows, DType::kF32, "workspace attention q|k|v"));
    VS_ASSIGN_OR_RETURN(w.attn_out, be.alloc(T, c.n_heads * c.head_dim, act, "workspace attention out"));
  }
  if (c.n_linear_attention_layers() > 0) {
    VS_ASSIGN_OR_RETURN(w.gdn_proj, be.alloc(T, gdn_rows, DType::kF32, "workspace GDN qkv|z|b|a"));
    VS_ASSIGN_OR_RETURN(w.gdn_out, be.alloc(T, c.linear_value_dim(), act, "workspace GDN out"));
  }
  VS_ASSIGN_OR_RETURN(w.gate_up, be.alloc(T, 2 * c.intermediate_size, DType::kF32, "workspace MLP gate|up"));
  VS_ASSIGN_OR_RETURN(w.mlp_act, be.alloc(T, c.intermediate_size, act, "workspace MLP activation"));
  VS_ASSIGN_OR_RETURN(w.hidden, be.alloc(T, c.hidden_size, act, "workspace output hidden states"));
  VS_ASSIGN_OR_RETURN(w.logits, be.alloc(limits_.logits_rows, c.vocab_size, DType::kF32, "workspace logits"));

  StepLimits sl;
  sl.max_tokens = limits_.max_tokens;
  sl.max_seqs = limits_.max_seqs;
  sl.max_page_refs = limits_.max_page_refs;
  sl.max_bias = limits_.max_bias;
  sl.vocab_size = static_cast<int32_t>(c.vocab_size);
  sl.n_vocab_real = limits_.n_vocab_real > 0 ? limits_.n_vocab_real : static_cast<int32_t>(c.vocab_size);
  sl.hidden_size = static_cast<int32_t>(c.hidden_size);
  sl.n_slots = limits_.n_slots;
  sl.scratch_bytes = limits_.scratch_bytes;
  VS_RETURN_IF_ERROR(be.configure(sl));
  configured_ = true;
  return Status::ok();
}

DType Qwen35Model::kv_cache_dtype() const {
  return kv_dtype_.value_or(backend_->activation_dtype());  // CPU fp32, CUDA fp16 (DESIGN.md §3)
}

Result<Qwen35Cache> Qwen35Model::alloc_cache(int32_t page_size, int32_t n_pages, int32_t n_slots,
                                             int32_t max_verify_tokens, int32_t n_snapshots) const {
  Backend& be = *backend_;
  Qwen35Cache cache;
  cache.page_size = page_size;
  cache.n_pages = n_pages;
  cache.n_slots = n_slots;
  cache.max_verify_tokens = max_verify_tokens;
  cache.n_snapshots = n_snapshots;
  cache.kv.resize(weights_.layers.size());
  cache.gdn.resize(weights_.layers.size());
  const DType kv_dtype = kv_cache_dtype();
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const std::string layer = "layer " + std::to_string(i);
    if (weights_.layers[i].type == LayerType::kFullAttention) {
      const int64_t width = config_.n_kv_heads * config_.head_dim;
      const int64_t rows = static_cast<int64_t>(n_pages) * page_size;
      VS_ASSIGN_OR_RETURN(cache.kv[i].k, be.alloc(rows, width, kv_dtype, layer + " K cache"));
      VS_ASSIGN_OR_RETURN(cache.kv[i].v, be.alloc(rows, width, kv_dtype, layer + " V cache"));
      if (kv_dtype == DType::kF8E4M3) {
        cache.kv[i].k_scale = weights_.layers[i].attn.k_scale;
        cache.kv[i].v_scale = weights_.layers[i].attn.v_scale;
      }
    } else {
      const GdnParams& g = gdn_params_;
      const int64_t conv_width = static_cast<int64_t>(g.conv_dim()) * (g.conv_kernel - 1);
      const int64_t state = static_cast<int64_t>(g.n_v_heads) * g.head_k_dim * g.head_v_dim;
      GdnStateLayer& s = cache.gdn[i];
      VS_ASSIGN_OR_RETURN(s.conv, be.alloc(n_slots, conv_width, DType::kF32, layer + " conv state"));
      VS_ASSIGN_OR_RETURN(s.recurrent, be.alloc(n_slots, state, DType::kF32, layer + " recurrent state"));
      if (max_verify_tokens > 0) {
        const int64_t rows = static_cast<int64_t>(n_slots) * max_verify_tokens;
        VS_ASSIGN_OR_RETURN(s.conv_ckpt, be.alloc(rows, conv_width, DType::kF32, layer + " conv checkpoints"));
        VS_ASSIGN_OR_RETURN(s.recurrent_ckpt, be.alloc(rows, state, DType::kF32, layer + " state checkpoints"));
      }
      if (n_snapshots > 0) {
        VS_ASSIGN_OR_RETURN(s.conv_snap, be.alloc(n_snapshots, conv_width, DType::kF32, layer + " conv snapshots"));
        VS_ASSIGN_OR_RETURN(s.recurrent_snap,
                            be.alloc(n_snapshots, state, DType::kF32, layer + " recurrent snapshots"));
      }
    }
  }
  return cache;
}

Status Qwen35Model::reset_slot(Qwen35Cache& cache, int32_t slot) const {
  for (auto& g : cache.gdn) {
    if (!g.conv.empty()) backend_->zero_rows(g.conv, slot, slot + 1);
    if (!g.recurrent.empty()) backend_->zero_rows(g.recurrent, slot, slot + 1);
  }
  return backend_->reset_sampling_slot(slot);
}

Status Qwen35Model::commit(Qwen35Cache& cache, int32_t slot, int32_t index) const {
  return backend_->gdn_commit(gdn_params_, cache.gdn, slot, index);
}

Status Qwen35Model::save_state(Qwen35Cache& cache, int32_t slot, int32_t snapshot) const {
  for (auto& g : cache.gdn) {
    if (!g.recurrent.empty()) VS_RETURN_IF_ERROR(backend_->save_state(g, slot, snapshot));
  }
  return Status::ok();
}

Status Qwen35Model::load_state(Qwen35Cache& cache, int32_t snapshot, int32_t slot) const {
  for (auto& g : cache.gdn) {
    if (!g.recurrent.empty()) VS_RETURN_IF_ERROR(backend_->load_state(g, snapshot, slot));
  }
  return Status::ok();
}

Status Qwen35Model::copy_page(Qwen35Cache& cache, int32_t src_page, int32_t dst_page) const {
  for (auto& kv : cache.kv) {
    if (!kv.k.empty()) VS_RETURN_IF_ERROR(backend_->copy_kv_page(kv, cache.page_size, src_page, dst_page));
  }
  return Status::ok();
}

Qwen35Model::Activations Qwen35Model::activations(int64_t n_tokens, int64_t n_outputs) const {
  const Activations& w = workspace_;
  Activations a;
  a.residual = w.residual.first_rows(n_tokens);
  a.normed = w.normed.first_rows(n_tokens);
  a.mixed = w.mixed.first_rows(n_tokens);
  a.attn_proj = w.attn_proj.first_rows(n_tokens);
  a.attn_out = w.attn_out.first_rows(n_tokens);
  a.gdn_proj = w.gdn_proj.first_rows(n_tokens);
  a.gdn_out = w.gdn_out.first_rows(n_tokens);
  a.gate_up = w.gate_up.first_rows(n_tokens);
  a.mlp_act = w.mlp_act.first_rows(n_tokens);
  a.hidden = w.hidden.first_rows(n_outputs);
  a.logits = w.logits;
  return a;
}

void Qwen35Model::attention_mixer(const Qwen35Layer& layer, size_t index, const Activations& act,
                                  Qwen35Cache& cache) const {
  Backend& be = *backend_;
  const auto& a = layer.attn;
  Tensor proj = act.attn_proj;
  Tensor out = act.attn_out;
  Tensor mixed = act.mixed;
  be.linear(*a.qkv, act.normed, proj);
  AttentionParams p = attn_params_;
  p.page_size = cache.page_size;
  be.gated_attention(p, a.norms, proj.columns(0, a.q_rows), proj.columns(a.q_rows, a.kv_rows),
                     proj.columns(a.q_rows + a.kv_rows, a.kv_rows), cache.kv[index], out);
  be.linear(*a.o_proj, out, mixed);
}

void Qwen35Model::gdn_mixer(const Qwen35Layer& layer, size_t index, const Activations& act,
                            Qwen35Cache& cache) const {
  Backend& be = *backend_;
  const auto& g = layer.gdn;
  const int64_t conv_dim = gdn_params_.conv_dim();
  const int64_t vdim = static_cast<int64_t>(gdn_params_.n_v_heads) * gdn_params_.head_v_dim;
  const int64_t nv = gdn_params_.n_v_heads;
  Tensor proj = act.gdn_proj;
  Tensor out = act.gdn_out;
  Tensor mixed = act.mixed;
  be.linear(*g.in_proj, act.normed, proj);
  be.gdn_layer(gdn_params_, g.w, proj.columns(0, conv_dim), proj.columns(conv_dim, vdim),
               proj.columns(conv_dim + vdim, nv), proj.columns(conv_dim + vdim + nv, nv), cache.gdn[index], out);
  be.linear(*g.out_proj, out, mixed);
}

Status Qwen35Model::forward(const StepBatch& batch, Qwen35Cache& cache, StepResult& result, bool defer) const {
  if (!configured_) return internal_error("Qwen35Model::forward before configure");
  return run_step(*backend_, [&] { return forward_once(batch, cache, result, defer); });
}

Status Qwen35Model::forward_once(const StepBatch& batch, Qwen35Cache& cache, StepResult& result, bool defer) const {
  Backend& be = *backend_;
  VS_RETURN_IF_ERROR(be.begin_step(batch));
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const int64_t I = config_.intermediate_size;
  const Activations act = activations(batch.n_tokens(), static_cast<int64_t>(batch.outputs.size()));
  Tensor residual = act.residual;
  Tensor normed = act.normed;
  Tensor mixed = act.mixed;
  Tensor gate_up = act.gate_up;
  Tensor mlp_act = act.mlp_act;

  be.embed(*weights_.embed, residual);
  be.rms_norm(residual, weights_.layers.front().input_norm, eps, normed);
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const Qwen35Layer& L = weights_.layers[i];
    // h = h + mixer(norm(h))
    if (L.type == LayerType::kFullAttention) {
      attention_mixer(L, i, act, cache);
    } else {
      gdn_mixer(L, i, act, cache);
    }
    be.rms_norm_residual(mixed, residual, L.post_norm, eps, normed);
    // h = h + mlp(norm(h)), fused with the next layer's input norm (the final norm after the last layer)
    be.linear(*L.gate_up, normed, gate_up);
    be.swiglu(gate_up.columns(0, I), gate_up.columns(I, I), mlp_act);
    be.linear(*L.down_proj, mlp_act, mixed);
    const Tensor& next_norm = i + 1 < weights_.layers.size() ? weights_.layers[i + 1].input_norm : weights_.final_norm;
    be.rms_norm_residual(mixed, residual, next_norm, eps, normed);
  }
  if (!batch.outputs.empty()) {
    Tensor hidden = act.hidden;
    Tensor logits = act.logits;
    be.gather_output_rows(normed, hidden);
    be.lm_head_outputs(weights_.output(), hidden, logits);
  }
  return defer ? be.end_step_deferred() : be.end_step(result);
}

}  // namespace voltserve
