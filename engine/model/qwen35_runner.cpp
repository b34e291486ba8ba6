// Qwen35Runner: step validation and the StepRequest -> StepBatch layout; the math is in Qwen35Model.
#include "model/qwen35_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "backend/backend_factory.h"
#include "common/named_logger.h"
#include "model/checkpoint.h"
#include "model/weight_provider.h"
#include "model/draft_vocab.h"
#include "model/model_source.h"
#include "model/kv_cache_dtype.h"
#include "model/quantized_head.h"
#include "plan/memory_plan.h"

namespace voltserve {

Result<std::unique_ptr<Qwen35Runner>> Qwen35Runner::load(const RunnerOptions& options) {
  const ModelOptions& mo = options.model;
  if (mo.page_size <= 0 || mo.n_slots <= 0 || mo.max_context < 0 || mo.n_pages < 0) {
    return invalid_argument("runner options: page_size and n_slots must be > 0, max_context and n_pages >= 0");
  }
  if (options.max_step_tokens < 1 || options.max_verify_tokens < 0 || options.logits_rows < 0) {
    return invalid_argument("runner options: max_step_tokens must be >= 1, max_verify_tokens and logits_rows >= 0");
  }
  VS_ASSIGN_OR_RETURN(HeadQuant head, parse_head_quant(mo.lm_head));
  std::unique_ptr<Qwen35Runner> r(new Qwen35Runner());
  BackendOptions bo;
  bo.n_threads = mo.n_threads;
  bo.gdn_mode = options.gdn_mode;
  bo.kernel_family = mo.kernel_family;
  bo.op_timing = mo.op_timing;
  bo.cuda_graphs = mo.cuda_graphs;
  bo.pdl = mo.pdl;
  bo.accept_rule = options.accept_rule;
  VS_ASSIGN_OR_RETURN(r->backend_, make_backend(mo.backend, bo));
  VS_ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> source, open_model_source(mo));
  const ModelConfig& c = source->config;
  VS_ASSIGN_OR_RETURN(const DType kv_dtype,
                      resolve_kv_cache_dtype(mo.kv_cache_dtype, c, r->backend_->activation_dtype()));
  if (kv_dtype == DType::kBF16 && r->backend_->name() != "cpu") {
    return invalid_argument("--kv-cache-dtype bf16: the " + r->backend_->name() +
                            " backend's attention reads fp16 or fp8 KV pages (bf16 is the CPU backend's only)");
  }
  plan::PlanInputs in =
      plan::plan_inputs(mo, c, options.max_step_tokens, options.max_verify_tokens, options.logits_rows);

  // On a device: the memory plan from its free memory, before any weight is loaded; refuse what does not fit.
  std::optional<MemoryPlan> plan;
  int64_t allocated_before = 0;
  if (const std::optional<DeviceMemoryInfo> device = r->backend_->device_memory()) {
    in.family = device->weight_layout == "sm70" ? kernels::KernelFamily::kSm70 : kernels::KernelFamily::kSm80;
    in.device_bytes = device->free_bytes;
    allocated_before = device->allocated_bytes;
    in.device = device->device + ", " + format_bytes(device->free_bytes) + " free of " +
                format_bytes(device->total_bytes) + " (voltserve plan --free-memory " +
                std::to_string(device->free_bytes) + " prints this plan)";
    VS_ASSIGN_OR_RETURN(MemoryPlan p, plan::plan_with_advice(*source, in));
    for (const std::string& line : p.lines()) named_logger("engine").info("{}", line);
    if (!p.fits) return resource_exhausted(plan::does_not_fit_message(p));
    plan = std::move(p);
  }

  std::unique_ptr<QuantizedHeadWeights> quantized_head;
  WeightProvider* weights = source->weights.get();
  if (!head.keep) {
    quantized_head = std::make_unique<QuantizedHeadWeights>(*source->weights, c, head.format, /*shape_only=*/false);
    weights = quantized_head.get();
  }
  VS_ASSIGN_OR_RETURN(r->model_, Qwen35Model::load(c, *weights, *r->backend_));
  r->model_->set_kv_cache_dtype(kv_dtype);

  const int64_t context = in.context;
  const int32_t pages_per_seq = static_cast<int32_t>((context + mo.page_size - 1) / mo.page_size);
  r->geometry_.page_size = mo.page_size;
  r->geometry_.n_slots = mo.n_slots;
  r->geometry_.n_pages = mo.n_pages > 0 ? mo.n_pages : plan ? plan->n_pages : pages_per_seq * mo.n_slots;
  r->geometry_.max_verify_tokens = options.max_verify_tokens;
  r->capacity_.max_tokens = options.max_step_tokens;
  VS_RETURN_IF_ERROR(r->load_drafter(options));
  r->geometry_.n_snapshots = std::max(0, mo.n_prefix_snapshots);
  VS_ASSIGN_OR_RETURN(r->cache_, r->model_->alloc_cache(r->geometry_.page_size, r->geometry_.n_pages,
                                                        r->geometry_.n_slots, r->geometry_.max_verify_tokens,
                                                        r->geometry_.n_snapshots));

  r->info_.name = source->name;
  r->info_.vocab_size = static_cast<int32_t>(c.vocab_size);
  r->info_.n_vocab_real = in.n_vocab_real;
  r->info_.context_length = static_cast<int32_t>(context);
  r->info_.hidden_size = static_cast<int32_t>(c.hidden_size);
  r->info_.eos_token_ids = c.eos_token_ids;
  r->info_.backend = r->backend_->name();
  // What a decode step streams: every weight but an untied embedding table, of which a step reads one row per token.
  const PreparedLinear& embedding = r->model_->embedding();
  r->info_.weight_bytes =
      r->backend_->weight_bytes() - (&embedding != &r->model_->output() ? embedding.bytes() : 0);
  r->info_.device_read_gbps = r->backend_->read_gbps();
  r->info_.kv_bytes_per_token = c.n_full_attention_layers() * 2 * c.n_kv_heads * c.head_dim *
                                static_cast<int64_t>(dtype_bytes(r->model_->kv_cache_dtype()));
  r->info_.state_bytes_per_seq =
      c.n_linear_attention_layers() * 4 *
      (c.linear_n_value_heads * c.linear_key_head_dim * c.linear_value_head_dim +
       c.linear_conv_dim() * (c.linear_conv_kernel_dim - 1));

  ModelStepLimits limits = plan::step_limits(c, in, r->geometry_.n_pages);
  if (plan) limits.scratch_bytes = plan->scratch_bytes;
  VS_RETURN_IF_ERROR(r->model_->configure(limits));
  r->verify_tokens_.assign(static_cast<size_t>(mo.n_slots), 0);
  r->plan_ = plan;
  if (plan) {
    // What the backend allocated against what the plan counted for it (equal unless backend/cuda_layout.cpp is out
    // of date); the estimates and the margin are held back on top.
    if (const std::optional<DeviceMemoryInfo> device = r->backend_->device_memory()) {
      const int64_t allocated = device->allocated_bytes - allocated_before;
      named_logger("engine").info("memory: the backend allocated {} ({} bytes), the plan counted {} ({} bytes){}; "
                                  "{} free on the device", format_bytes(allocated), allocated,
                                  format_bytes(plan->allocated_bytes), plan->allocated_bytes,
                                  allocated == plan->allocated_bytes ? ", exactly" : "",
                                  format_bytes(device->free_bytes));
    }
  }
  return r;
}

Status Qwen35Runner::load_drafter(const RunnerOptions& options) {
  if (options.max_draft_tokens <= 0) return Status::ok();
  const ModelOptions& mo = options.model;
  const ModelConfig& c = model_->config();
  auto off = [&](const std::string& why) {
    named_logger("engine").info("speculative decoding off: {}", why);
    return Status::ok();
  };
  if (!backend_->accepts_drafts()) {
    return off("the " + backend_->name() + " backend does not verify drafts yet (the CPU backend does)");
  }
  if (c.mtp_num_hidden_layers < 1) return off("the model has no MTP head (config.json mtp_num_hidden_layers is 0)");
  MtpLoadOptions load;
  VS_ASSIGN_OR_RETURN(load.nvfp4, parse_mtp_nvfp4(mo.mtp_format));
  const int32_t n_real = mo.n_vocab_real > 0 ? std::min<int32_t>(mo.n_vocab_real, static_cast<int32_t>(c.vocab_size))
                                             : static_cast<int32_t>(c.vocab_size);
  const bool synthetic = !mo.synthetic_config.empty();
  VS_ASSIGN_OR_RETURN(load.draft_ids, load_draft_vocab(synthetic ? std::filesystem::path{} : std::filesystem::path{mo.model_dir},
                                                       mo.draft_vocab, n_real));
  std::unique_ptr<MtpHead> head;
  if (synthetic) {
    SyntheticWeights source(c, mo.synthetic_seed + 1, mo.synthetic_config);
    VS_ASSIGN_OR_RETURN(head, MtpHead::load(source, c, *backend_, model_->embedding(), model_->output(),
                                                model_->final_norm(), load));
  } else {
    VS_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(mo.model_dir));
    if (!checkpoint_has_mtp(checkpoint)) return off("the checkpoint has no mtp.* tensors");
    CheckpointWeights source(checkpoint, c);
    VS_ASSIGN_OR_RETURN(head, MtpHead::load(source, c, *backend_, model_->embedding(), model_->output(),
                                                model_->final_norm(), load));
  }
  named_logger("engine").info("speculative decoding: the MTP head drafts over {} (--draft-vocab), its weights {}",
                              load.draft_ids.empty() ? std::string("the whole vocabulary")
                                                     : std::to_string(load.draft_ids.size()) + " tokens",
                              load.nvfp4 ? "quantized to NVFP4 at load" : "as stored (--mtp-format)");
  VS_RETURN_IF_ERROR(head->configure(options.max_step_tokens, mo.n_slots));
  VS_ASSIGN_OR_RETURN(KvCacheLayer kv,
                      head->alloc_cache(geometry_.page_size, geometry_.n_pages, model_->kv_cache_dtype()));
  drafter_ = std::make_unique<MtpDrafter>(std::move(head), std::move(kv), geometry_.page_size);
  geometry_.max_draft_tokens = options.max_draft_tokens;
  geometry_.max_verify_tokens = std::max(geometry_.max_verify_tokens, options.max_draft_tokens + 1);
  device_rounds_ = mo.device_rounds;
  named_logger("engine").info("speculative decoding: MTP head loaded, up to {} drafts per round{}",
                              options.max_draft_tokens,
                              device_rounds_ ? "" : " (device rounds off: the host waits for each verify step)");
  return Status::ok();
}

Status Qwen35Runner::reset_slot(int32_t slot) {
  if (slot < 0 || slot >= geometry_.n_slots) {
    return out_of_range("slot " + std::to_string(slot) + " is outside [0, " + std::to_string(geometry_.n_slots) +
                        ")");
  }
  verify_tokens_[static_cast<size_t>(slot)] = 0;
  return model_->reset_slot(cache_, slot);
}

namespace {

Status check_index(int32_t i, int32_t n, const char* what) {
  if (i < 0 || i >= n) {
    return out_of_range(std::string(what) + " " + std::to_string(i) + " is outside [0, " + std::to_string(n) + ")");
  }
  return Status::ok();
}

}  // namespace

Status Qwen35Runner::save_state(int32_t slot, int32_t snapshot) {
  VS_RETURN_IF_ERROR(check_index(slot, geometry_.n_slots, "slot"));
  VS_RETURN_IF_ERROR(check_index(snapshot, geometry_.n_snapshots, "snapshot"));
  return model_->save_state(cache_, slot, snapshot);
}

Status Qwen35Runner::load_state(int32_t snapshot, int32_t slot) {
  VS_RETURN_IF_ERROR(check_index(slot, geometry_.n_slots, "slot"));
  VS_RETURN_IF_ERROR(check_index(snapshot, geometry_.n_snapshots, "snapshot"));
  verify_tokens_[static_cast<size_t>(slot)] = 0;
  return model_->load_state(cache_, snapshot, slot);
}

Status Qwen35Runner::copy_page(int32_t src_page, int32_t dst_page) {
  VS_RETURN_IF_ERROR(check_index(src_page, geometry_.n_pages, "page"));
  VS_RETURN_IF_ERROR(check_index(dst_page, geometry_.n_pages, "page"));
  VS_RETURN_IF_ERROR(model_->copy_page(cache_, src_page, dst_page));
  // The MTP head's KV is paged over the same page ids: a speculating hit drafts from it.
  return drafter_ ? drafter_->copy_page(*backend_, src_page, dst_page) : Status::ok();
}

Status Qwen35Runner::build_batch(const StepRequest& request) {
  StepBatch& b = batch_;
  b.clear();
  pending_masks_.clear();
  std::set<int32_t> slots;
  int64_t n_tokens = 0;
  for (const SeqStep& s : request.seqs) n_tokens += static_cast<int64_t>(s.tokens.size());
  if (n_tokens > capacity_.max_tokens) {
    return out_of_range("the step has " + std::to_string(n_tokens) + " tokens, more than the runner's " +
                        std::to_string(capacity_.max_tokens) + " per step");
  }
  for (size_t i = 0; i < request.seqs.size(); ++i) {
    const SeqStep& s = request.seqs[i];
    const std::string where = "step " + std::to_string(i) + ": ";
    if (s.tokens.empty()) return invalid_argument(where + "has no tokens");
    if (s.slot < 0 || s.slot >= geometry_.n_slots) {
      return out_of_range(where + "slot " + std::to_string(s.slot) + " is outside [0, " +
                          std::to_string(geometry_.n_slots) + ")");
    }
    if (!slots.insert(s.slot).second) {
      return invalid_argument(where + "slot " + std::to_string(s.slot) + " appears in two steps");
    }
    if (s.n_past < 0 || s.n_prompt < 0) return invalid_argument(where + "n_past and n_prompt must be >= 0");
    const int64_t end = static_cast<int64_t>(s.n_past) + static_cast<int64_t>(s.tokens.size());
    if (end > info_.context_length) {
      return out_of_range(where + "positions up to " + std::to_string(end) + " exceed the context length " +
                          std::to_string(info_.context_length));
    }
    if ((s.mtp || s.n_draft != 0) && !drafter_) {
      return invalid_argument(where + "asks for the MTP head, but the runner has none (max_draft_tokens 0)");
    }
    if (s.n_draft < 0 || s.n_draft > geometry_.max_draft_tokens || (s.n_draft > 0 && !s.mtp)) {
      return invalid_argument(where + "n_draft " + std::to_string(s.n_draft) + " outside [0, " +
                              std::to_string(geometry_.max_draft_tokens) + "] (or without mtp)");
    }
    if (s.next_token >= info_.vocab_size) {
      return invalid_argument(where + "next_token " + std::to_string(s.next_token) + " is outside the vocabulary");
    }
    if (s.verify && static_cast<int32_t>(s.tokens.size()) > geometry_.max_verify_tokens) {
      return invalid_argument(where + "a verify item of " + std::to_string(s.tokens.size()) +
                              " tokens; the runner keeps checkpoints for " +
                              std::to_string(geometry_.max_verify_tokens));
    }
    // The draft chain writes MTP KV past the computed tokens: positions up to end + n_draft - 2.
    const int64_t written = end + std::max(0, s.n_draft - 1);
    if (written > info_.context_length) {
      return out_of_range(where + "drafts up to position " + std::to_string(written - 1) +
                          " exceed the context length " + std::to_string(info_.context_length));
    }
    const int64_t pages_needed = (written + geometry_.page_size - 1) / geometry_.page_size;
    if (static_cast<int64_t>(s.page_table.size()) < pages_needed) {
      return invalid_argument(where + "page_table has " + std::to_string(s.page_table.size()) +
                              " pages, positions [0, " + std::to_string(written) + ") need " +
                              std::to_string(pages_needed));
    }
    kernels::SeqDesc d;
    d.row0 = b.n_tokens();
    d.n_tokens = static_cast<int32_t>(s.tokens.size());
    d.n_past = s.n_past;
    d.slot = s.slot;
    d.page_offset = static_cast<int32_t>(b.page_table.size());
    d.n_prompt = s.n_prompt;
    d.ckpt = s.verify ? s.slot : -1;  // checkpoint set = slot (Qwen35Model::alloc_cache)
    for (int64_t p = 0; p < pages_needed; ++p) {
      const int32_t page = s.page_table[static_cast<size_t>(p)];
      if (page < 0 || page >= geometry_.n_pages) {
        return out_of_range(where + "page " + std::to_string(page) + " is outside [0, " +
                            std::to_string(geometry_.n_pages) + ")");
      }
      b.page_table.push_back(page);
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= info_.vocab_size) {
        return invalid_argument(where + "token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                std::to_string(info_.vocab_size) + ")");
      }
    }
    b.seqs.push_back(d);
    b.tokens.insert(b.tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  // Verify items whose rows ask for acceptance: every token a kOutAccept sample row, in order, consecutive.
  for (size_t i = 0; i < request.outputs.size();) {
    const RowRequest& o = request.outputs[i];
    if (!(o.flags & kOutAccept)) {
      ++i;
      continue;
    }
    const std::string where = "output " + std::to_string(i) + ": ";
    if (!backend_->accepts_drafts()) return invalid_argument(where + "the backend does not verify drafts");
    if (o.seq < 0 || o.seq >= static_cast<int32_t>(b.seqs.size()) || !request.seqs[static_cast<size_t>(o.seq)].verify) {
      return invalid_argument(where + "kOutAccept on a sequence that is not a verify item");
    }
    kernels::SeqDesc& d = b.seqs[static_cast<size_t>(o.seq)];
    for (int32_t t = 0; t < d.n_tokens; ++t) {
      const size_t at = i + static_cast<size_t>(t);
      if (at >= request.outputs.size() || request.outputs[at].seq != o.seq ||
          request.outputs[at].token_index != t ||
          (request.outputs[at].flags & (kOutAccept | kOutSample)) != (kOutAccept | kOutSample)) {
        return invalid_argument(where + "a verify item's accept rows must be kOutSample | kOutAccept rows for its " +
                                std::to_string(d.n_tokens) + " tokens, in order");
      }
    }
    d.n_draft = d.n_tokens - 1;
    i += static_cast<size_t>(d.n_tokens);
  }
  const std::pair<int32_t, float>* last_bias = nullptr;
  int32_t last_offset = 0, last_count = 0;
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const RowRequest& o = request.outputs[i];
    const std::string where = "output " + std::to_string(i) + ": ";
    if (o.seq < 0 || o.seq >= static_cast<int32_t>(b.seqs.size())) {
      return out_of_range(where + "sequence " + std::to_string(o.seq) + " is not in the step");
    }
    const kernels::SeqDesc& d = b.seqs[static_cast<size_t>(o.seq)];
    if (o.token_index < 0 || o.token_index >= d.n_tokens) {
      return out_of_range(where + "token " + std::to_string(o.token_index) + " outside the sequence's " +
                          std::to_string(d.n_tokens) + " tokens");
    }
    if ((o.flags & ~uint32_t{kOutSample | kOutLogprobs | kOutLogits | kOutHidden | kOutAccept}) != 0 || o.flags == 0) {
      return invalid_argument(where + "bad output flags " + std::to_string(o.flags));
    }
    if (o.sampling.n_top_logprobs < 0 || o.sampling.n_top_logprobs > kernels::sampling::kMaxTopLogprobs) {
      return invalid_argument(where + "n_top_logprobs must be in [0, 20]");
    }
    if (static_cast<int32_t>(o.logit_bias.size()) > plan::kMaxBiasPerRow) {
      return invalid_argument(where + "more than " + std::to_string(plan::kMaxBiasPerRow) + " logit_bias entries");
    }
    OutputRow row;
    row.row = d.row0 + o.token_index;
    row.flags = o.flags;
    row.sampling = o.sampling;
    row.sampling.mask_row = -1;
    if (!o.token_mask.empty()) {
      const int32_t words = (info_.vocab_size + 31) / 32;
      if (static_cast<int32_t>(o.token_mask.size()) != words) {
        return invalid_argument(where + "a token mask of " + std::to_string(o.token_mask.size()) + " words, not " +
                                std::to_string(words));
      }
      b.mask_words = words;
      row.sampling.mask_row = static_cast<int32_t>(b.masks.size() / static_cast<size_t>(words));
      // The contents may still be in the making (StepRequest::await_masks): StepBatch::complete_masks copies them in.
      b.masks.resize(b.masks.size() + static_cast<size_t>(words));
      pending_masks_.push_back(o.token_mask);
    }
    if (!o.logit_bias.empty() && o.logit_bias.data() == last_bias) {  // rows of one request share its entries
      row.sampling.bias_offset = last_offset;
      row.sampling.bias_count = last_count;
    } else {
      row.sampling.bias_offset = static_cast<int32_t>(b.bias_ids.size());
      row.sampling.bias_count = static_cast<int32_t>(o.logit_bias.size());
      for (const auto& [id, bias] : o.logit_bias) {
        b.bias_ids.push_back(id);
        b.bias_values.push_back(bias);
      }
      last_bias = o.logit_bias.data();
      last_offset = row.sampling.bias_offset;
      last_count = row.sampling.bias_count;
    }
    b.outputs.push_back(row);
  }
  return Status::ok();
}

Status Qwen35Runner::step(const StepRequest& request, StepResult& result) {
  result.clear();
  VS_RETURN_IF_ERROR(build_batch(request));
  if (batch_.tokens.empty()) return Status::ok();
  if (!pending_masks_.empty()) {
    batch_.complete_masks = [&] {
      if (request.await_masks) request.await_masks();
      const auto words = static_cast<size_t>(batch_.mask_words);
      for (size_t i = 0; i < pending_masks_.size(); ++i) {
        std::copy(pending_masks_[i].begin(), pending_masks_[i].end(),
                  batch_.masks.begin() + static_cast<ptrdiff_t>(i * words));
      }
    };
  }
  const bool verify = std::any_of(request.seqs.begin(), request.seqs.end(), [](const SeqStep& s) { return s.verify; });
  // A round whose MTP passes follow the verify step on the device: the step is deferred, the host waits once.
  const bool on_device = drafter_ && device_rounds_ && MtpDrafter::follows_on_device(request, batch_);
  if (on_device) VS_RETURN_IF_ERROR(drafter_->drop_deferred());
  const auto t0 = std::chrono::steady_clock::now();
  const Status forward = model_->forward(batch_, cache_, result, /*defer=*/on_device);
  batch_.complete_masks = nullptr;  // it refers to this step's request
  VS_RETURN_IF_ERROR(forward);
  const auto t1 = std::chrono::steady_clock::now();
  if (on_device) {
    VS_RETURN_IF_ERROR(drafter_->run_after_deferred(request, batch_, *model_, result));
  } else if (drafter_) {
    for (const SeqStep& s : request.seqs) {
      if (s.mtp) {
        VS_RETURN_IF_ERROR(drafter_->run(request, batch_, *model_, result));
        break;
      }
    }
  }
  if (verify) {
    ++phases_.verify_steps;
    phases_.device_rounds += on_device ? 1 : 0;
    phases_.verify_seconds += std::chrono::duration<double>(t1 - t0).count();
    phases_.draft_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  }
  for (const kernels::SeqDesc& d : batch_.seqs) verify_tokens_[static_cast<size_t>(d.slot)] = d.ckpt >= 0 ? d.n_tokens : 0;
  return Status::ok();
}

Status Qwen35Runner::commit(int32_t slot, int32_t n_keep) {
  if (slot < 0 || slot >= geometry_.n_slots) return out_of_range("commit: slot " + std::to_string(slot));
  const int32_t n = verify_tokens_[static_cast<size_t>(slot)];
  if (n == 0) return invalid_argument("commit: slot " + std::to_string(slot) + " has no verify item to commit");
  if (n_keep < 1 || n_keep > n) {
    return invalid_argument("commit: n_keep " + std::to_string(n_keep) + " outside [1, " + std::to_string(n) + "]");
  }
  verify_tokens_[static_cast<size_t>(slot)] = 0;
  ++phases_.commits;
  if (n_keep == n) return Status::ok();  // the state already advanced over every token
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = model_->commit(cache_, slot, n_keep - 1);
  phases_.commit_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

Result<std::unique_ptr<ModelRunner>> load_model_runner(const RunnerOptions& options) {
  VS_ASSIGN_OR_RETURN(auto runner, Qwen35Runner::load(options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace voltserve
