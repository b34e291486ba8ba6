// MtpHead: loading mtp.* (MODEL.md §4.1) and one pass of the head (§4.2) over Backend ops.
#include "model/mtp_head.h"

#include <algorithm>
#include <string>

#include "linear/synthetic.h"
#include "model/draft_vocab.h"
#include "model/tensor_names.h"

namespace voltserve {
namespace {

constexpr int32_t kMaxLogitsRows = 64;

std::string mtp_name(std::string_view suffix) { return std::string(kMtpPrefix) + std::string(suffix); }

}  // namespace

Result<bool> parse_mtp_nvfp4(std::string_view option) {
  if (option == "keep") return false;
  if (option.empty() || option == "nvfp4") return true;
  return invalid_argument("mtp format: unknown '" + std::string(option) +
                          "' (keep: as the checkpoint stores mtp.*, or nvfp4: quantized at load)");
}

bool checkpoint_has_mtp(const Checkpoint& checkpoint) { return checkpoint.contains(mtp_name("fc.weight")); }

Result<std::unique_ptr<MtpHead>> MtpHead::load(WeightProvider& source, const ModelConfig& config, Backend& backend,
                                               const PreparedLinear& embed, const PreparedLinear& lm_head,
                                               const Tensor& final_norm, const MtpLoadOptions& options) {
  if (config.mtp_num_hidden_layers < 1) {
    return not_found(source.describe() + ": config.json has mtp_num_hidden_layers 0: the model has no MTP head");
  }
  if (config.mtp_use_dedicated_embeddings) {
    return unimplemented(source.describe() + ": mtp_use_dedicated_embeddings = true is not supported");
  }
  std::unique_ptr<MtpHead> h(new MtpHead());
  h->config_ = config;
  h->backend_ = &backend;
  h->embed_ = &embed;
  h->lm_head_ = &lm_head;
  h->final_norm_ = final_norm;
  const int64_t H = config.hidden_size, hd = config.head_dim, nh = config.n_heads, nkv = config.n_kv_heads;
  // A dense weight quantized to NVFP4 at load (options.nvfp4); synthetic or sizing-only weights change format.
  auto to_nvfp4 = [&](kernels::HostWeightRef r) -> Result<kernels::HostWeightRef> {
    // NVFP4 scales blocks of 16 along k; a dense weight of another width stays as it is.
    if (!options.nvfp4 || r.format != WeightFormat::kDense || r.k % 16 != 0) return r;
    if (r.codes == nullptr || options.shape_only) {
      r.format = WeightFormat::kNvfp4;
      r.codes = r.scales = nullptr;
      r.channel_scales = nullptr;
      r.global_scale = kernels::kSyntheticNvfp4GlobalScale;
      return r;
    }
    VS_ASSIGN_OR_RETURN(std::unique_ptr<QuantizedWeight> q, quantize_weight(r, WeightFormat::kNvfp4));
    h->kept_.push_back(std::move(q));
    return h->kept_.back()->ref;
  };
  auto linear = [&](std::initializer_list<std::pair<std::string, int64_t>> parts,
                    int64_t k) -> Result<std::unique_ptr<PreparedLinear>> {
    std::vector<kernels::HostWeightRef> refs;
    std::string what;
    for (const auto& [module, n] : parts) {
      VS_ASSIGN_OR_RETURN(kernels::HostWeightRef r, source.linear(module, n, k));
      VS_ASSIGN_OR_RETURN(r, to_nvfp4(r));
      refs.push_back(r);
      what += (what.empty() ? "" : " + ") + module;
    }
    return backend.prepare_linear(refs, what);
  };
  auto norm = [&](const std::string& name, int64_t n) -> Result<Tensor> {  // zero-centred: (1 + w)
    VS_ASSIGN_OR_RETURN(std::vector<float> v, source.values(name, {n}));
    for (float& x : v) x += 1.0f;
    return backend.upload(v, 1, n, name);
  };
  MtpWeights& w = h->w_;
  VS_ASSIGN_OR_RETURN(w.fc, linear({{mtp_name("fc"), H}}, 2 * H));
  VS_ASSIGN_OR_RETURN(w.pre_fc_norm_embedding, norm(mtp_name("pre_fc_norm_embedding.weight"), H));
  VS_ASSIGN_OR_RETURN(w.pre_fc_norm_hidden, norm(mtp_name("pre_fc_norm_hidden.weight"), H));
  VS_ASSIGN_OR_RETURN(w.norm, norm(mtp_name("norm.weight"), H));
  Qwen35Layer& L = w.layer;
  L.type = LayerType::kFullAttention;
  const std::string p = mtp_name("layers.0.");
  VS_ASSIGN_OR_RETURN(L.input_norm, norm(p + "input_layernorm.weight", H));
  VS_ASSIGN_OR_RETURN(L.post_norm, norm(p + "post_attention_layernorm.weight", H));
  L.attn.q_rows = nh * hd * 2;
  L.attn.kv_rows = nkv * hd;
  VS_ASSIGN_OR_RETURN(L.attn.qkv, linear({{p + "self_attn.q_proj", L.attn.q_rows},
                                          {p + "self_attn.k_proj", L.attn.kv_rows},
                                          {p + "self_attn.v_proj", L.attn.kv_rows}},
                                         H));
  VS_ASSIGN_OR_RETURN(L.attn.o_proj, linear({{p + "self_attn.o_proj", H}}, nh * hd));
  VS_ASSIGN_OR_RETURN(L.attn.norms.q_norm, norm(p + "self_attn.q_norm.weight", hd));
  VS_ASSIGN_OR_RETURN(L.attn.norms.k_norm, norm(p + "self_attn.k_norm.weight", hd));
  VS_RETURN_IF_ERROR(load_kv_scales(source, p + "self_attn.", L.attn));
  VS_ASSIGN_OR_RETURN(L.gate_up, linear({{p + "mlp.gate_proj", config.intermediate_size},
                                         {p + "mlp.up_proj", config.intermediate_size}},
                                        H));
  VS_ASSIGN_OR_RETURN(L.down_proj, linear({{p + "mlp.down_proj", H}}, config.intermediate_size));

  // The draft vocabulary's rows of the output head (the embedding table where they are tied).
  const int64_t n_draft_rows = options.shape_only ? options.draft_vocab_rows
                                                  : static_cast<int64_t>(options.draft_ids.size());
  if (n_draft_rows > 0 && n_draft_rows < config.vocab_size) {
    const std::string module = config.tie_word_embeddings && !source.has_lm_head()
                                   ? config.tensor_prefix + "embed_tokens"
                                   : std::string(kLmHeadModule);
    VS_ASSIGN_OR_RETURN(kernels::HostWeightRef full, source.linear(module, config.vocab_size, H));
    kernels::HostWeightRef rows = full;
    if (options.shape_only) {
      rows.n = n_draft_rows;
    } else {
      VS_ASSIGN_OR_RETURN(std::unique_ptr<QuantizedWeight> g, gather_weight_rows(full, options.draft_ids));
      h->kept_.push_back(std::move(g));
      rows = h->kept_.back()->ref;
    }
    VS_ASSIGN_OR_RETURN(rows, to_nvfp4(rows));
    VS_ASSIGN_OR_RETURN(h->draft_head_,
                        backend.prepare_linear({&rows, 1}, "draft lm_head (" + std::to_string(n_draft_rows) + " rows)"));
    h->draft_ids_ = options.draft_ids;
    const std::vector<int32_t> ids = options.shape_only ? std::vector<int32_t>(static_cast<size_t>(n_draft_rows))
                                                        : options.draft_ids;
    VS_ASSIGN_OR_RETURN(h->draft_map_, backend.upload_ids(ids, "MTP draft vocabulary ids"));
  }
  // The host copies were uploaded (device backends) or are kept for the CPU backend's reads.
  AttentionParams& ap = h->attn_params_;
  ap.n_heads = static_cast<int32_t>(nh);
  ap.n_kv_heads = static_cast<int32_t>(nkv);
  ap.head_dim = static_cast<int32_t>(hd);
  ap.rotary_dim = static_cast<int32_t>(config.rotary_dim);
  ap.rope_theta = static_cast<float>(config.rope_theta);
  ap.rms_norm_eps = static_cast<float>(config.rms_norm_eps);
  return h;
}

Status MtpHead::configure(int32_t max_rows, int32_t max_outputs) {
  if (max_rows_ > 0) return internal_error("MtpHead::configure called twice");
  if (max_rows < 1 || max_outputs < 1) return invalid_argument("MtpHead::configure: max_rows and max_outputs >= 1");
  max_rows_ = max_rows;
  max_outputs_ = max_outputs;
  Backend& be = *backend_;
  const ModelConfig& c = config_;
  const DType act = be.activation_dtype();
  const int64_t T = max_rows, H = c.hidden_size;
  const auto& a = w_.layer.attn;
  VS_ASSIGN_OR_RETURN(ws_.embedded, be.alloc(T, H, DType::kF32, "MTP workspace embedded"));
  VS_ASSIGN_OR_RETURN(ws_.hidden32, be.alloc(T, H, DType::kF32, "MTP workspace fp32 hidden"));
  VS_ASSIGN_OR_RETURN(ws_.concat, be.alloc(T, 2 * H, act, "MTP workspace concat"));
  VS_ASSIGN_OR_RETURN(ws_.residual, be.alloc(T, H, DType::kF32, "MTP workspace residual"));
  VS_ASSIGN_OR_RETURN(ws_.normed, be.alloc(T, H, act, "MTP workspace normed"));
  VS_ASSIGN_OR_RETURN(ws_.attn_proj, be.alloc(T, a.q_rows + 2 * a.kv_rows, DType::kF32, "MTP workspace q|k|v"));
  VS_ASSIGN_OR_RETURN(ws_.attn_out, be.alloc(T, c.n_heads * c.head_dim, act, "MTP workspace attention out"));
  VS_ASSIGN_OR_RETURN(ws_.mixed, be.alloc(T, H, DType::kF32, "MTP workspace mixed"));
  VS_ASSIGN_OR_RETURN(ws_.gate_up, be.alloc(T, 2 * c.intermediate_size, DType::kF32, "MTP workspace gate|up"));
  VS_ASSIGN_OR_RETURN(ws_.mlp_act, be.alloc(T, c.intermediate_size, act, "MTP workspace MLP activation"));
  VS_ASSIGN_OR_RETURN(ws_.logits, be.alloc(std::min(max_outputs, kMaxLogitsRows), draft_rows(), DType::kF32,
                                           "MTP workspace draft logits"));
  VS_ASSIGN_OR_RETURN(ws_.out_act, be.alloc(max_outputs, H, act, "MTP workspace output rows"));
  for (Tensor& t : hidden_out_) {
    VS_ASSIGN_OR_RETURN(t, be.alloc(max_outputs, H, DType::kF32, "MTP output hidden states"));
  }
  return Status::ok();
}

int64_t MtpHead::draft_rows() const { return draft_head_ ? draft_head_->n() : config_.vocab_size; }

Result<KvCacheLayer> MtpHead::alloc_cache(int32_t page_size, int32_t n_pages, DType dtype) const {
  KvCacheLayer kv;
  const int64_t width = config_.n_kv_heads * config_.head_dim;
  const int64_t rows = static_cast<int64_t>(n_pages) * page_size;
  VS_ASSIGN_OR_RETURN(kv.k, backend_->alloc(rows, width, dtype, "MTP layer K cache"));
  VS_ASSIGN_OR_RETURN(kv.v, backend_->alloc(rows, width, dtype, "MTP layer V cache"));
  if (dtype == DType::kF8E4M3) {
    kv.k_scale = w_.layer.attn.k_scale;
    kv.v_scale = w_.layer.attn.v_scale;
  }
  return kv;
}

Status MtpHead::forward(const StepBatch& batch, const Tensor& hidden_in, Input input, KvCacheLayer& cache,
                        int32_t page_size, StepResult& result, MtpPass pass) {
  if (max_rows_ == 0) return internal_error("MtpHead::forward before configure");
  // The pass writes h' into the other buffer; it becomes current once the pass succeeded (a graph-replaying
  // backend may run the pass more than once: run_step).
  const int next = 1 - current_;
  const Status s =
      run_step(*backend_, [&] { return forward_once(batch, hidden_in, input, cache, page_size, next, pass, result); });
  if (!s.is_ok()) return s;
  if (!batch.outputs.empty()) current_ = next;
  if (!pass.defer) map_drafts(result);
  return s;
}

Status MtpHead::take_drafts(std::vector<StepResult>& passes, size_t n_steps) {
  VS_RETURN_IF_ERROR(backend_->take_deferred(passes));
  for (size_t i = n_steps; i < passes.size(); ++i) map_drafts(passes[i]);
  return Status::ok();
}

void MtpHead::map_drafts(StepResult& result) const {
  if (draft_ids_.empty()) return;
  for (RowResult& r : result.rows) {
    if (r.token >= 0 && r.token < static_cast<int32_t>(draft_ids_.size())) r.token = draft_ids_[static_cast<size_t>(r.token)];
  }
}

Status MtpHead::forward_once(const StepBatch& batch, const Tensor& hidden_in, Input input, KvCacheLayer& cache,
                             int32_t page_size, int next, MtpPass pass, StepResult& result) {
  const int64_t T = batch.n_tokens();
  const auto n_out = static_cast<int64_t>(batch.outputs.size());
  if (hidden_in.dtype != DType::kF32) return internal_error("MtpHead::forward: the hidden input must be fp32");
  if (T > max_rows_ || n_out > max_outputs_ || hidden_in.rows < T) {
    return internal_error("MTP pass of " + std::to_string(T) + " rows and " + std::to_string(n_out) +
                          " outputs exceeds its workspace (" + std::to_string(max_rows_) + ", " +
                          std::to_string(max_outputs_) + ")");
  }
  Backend& be = *backend_;
  const ModelConfig& c = config_;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const Qwen35Layer& L = w_.layer;
  VS_RETURN_IF_ERROR(be.begin_step(batch));
  Tensor embedded = ws_.embedded.first_rows(T);
  Tensor concat = ws_.concat.first_rows(T);
  Tensor e_part = concat.columns(0, H);
  Tensor h_part = concat.columns(H, H);
  Tensor residual = ws_.residual.first_rows(T);
  Tensor normed = ws_.normed.first_rows(T);
  Tensor proj = ws_.attn_proj.first_rows(T);
  Tensor attn_out = ws_.attn_out.first_rows(T);
  Tensor mixed = ws_.mixed.first_rows(T);
  Tensor gate_up = ws_.gate_up.first_rows(T);
  Tensor mlp_act = ws_.mlp_act.first_rows(T);
  const Tensor hidden = hidden_in.first_rows(T);
  Tensor hidden32 = ws_.hidden32.first_rows(T);

  // u = fc([norm(embed(x_{i+1})) ; norm(h_i)])
  switch (pass.tokens) {
    case MtpTokens::kBatch: be.embed(*embed_, embedded); break;
    case MtpTokens::kPassSamples: be.embed_samples(*embed_, draft_map_, embedded); break;
    case MtpTokens::kStepSamples: be.embed_samples(*embed_, Tensor{}, embedded); break;
  }
  be.rms_norm(embedded, w_.pre_fc_norm_embedding, eps, e_part);
  if (input == Input::kMainResidual) {
    be.rms_norm(hidden, final_norm_, eps, hidden32);  // h_i, as the main model's final norm forms it
    be.rms_norm(hidden32, w_.pre_fc_norm_hidden, eps, h_part);
  } else {
    be.rms_norm(hidden, w_.pre_fc_norm_hidden, eps, h_part);
  }
  be.linear(*w_.fc, concat, residual);
  // the full-attention decoder layer (MODEL.md §2.3, §2.5, §2.4), then mtp.norm
  be.rms_norm(residual, L.input_norm, eps, normed);
  be.linear(*L.attn.qkv, normed, proj);
  AttentionParams p = attn_params_;
  p.page_size = page_size;
  be.gated_attention(p, L.attn.norms, proj.columns(0, L.attn.q_rows), proj.columns(L.attn.q_rows, L.attn.kv_rows),
                     proj.columns(L.attn.q_rows + L.attn.kv_rows, L.attn.kv_rows), cache, attn_out);
  be.linear(*L.attn.o_proj, attn_out, mixed);
  be.rms_norm_residual(mixed, residual, L.post_norm, eps, normed);
  be.linear(*L.gate_up, normed, gate_up);
  be.swiglu(gate_up.columns(0, I), gate_up.columns(I, I), mlp_act);
  be.linear(*L.down_proj, mlp_act, mixed);
  be.rms_norm_residual(mixed, residual, w_.norm, eps, normed);  // normed = h' in the activation dtype
  if (n_out > 0) {
    Tensor out_hidden = hidden_out_[next].first_rows(n_out);
    Tensor out_act = ws_.out_act.first_rows(n_out);
    Tensor logits = ws_.logits;
    be.rms_norm(residual, w_.norm, eps, hidden32);  // h' in fp32 for the next chain step
    be.gather_output_rows(hidden32, out_hidden);
    be.gather_output_rows(normed, out_act);
    be.lm_head_outputs(draft_head_ ? *draft_head_ : *lm_head_, out_act, logits);
  }
  return pass.defer ? be.end_step_deferred() : be.end_step(result);
}

}  // namespace voltserve
