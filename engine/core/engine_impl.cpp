// The engine thread: continuous batching over plan_step(), the runner's per-row outputs (sampled ids, logprobs,
// prompt logits), events, cancellation and fault handling.
#include "core/engine_impl.h"

#include <algorithm>
#include <exception>
#include <random>
#include <string>

#include <spdlog/spdlog.h>

#include "common/named_logger.h"
#include "core/loggers.h"

namespace voltserve {

namespace {

// splitmix64's finalizer over (base, id): the seed of a request that did not bring one.
uint64_t mix_seed(uint64_t base, uint64_t id) {
  uint64_t z = base ^ (id * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}

Status check_config(const ModelRunner* runner, const EngineConfig& c) {
  if (runner == nullptr) return invalid_argument("Engine::create: the model runner is null");
  if (c.max_running < 1) return invalid_argument("max_running must be >= 1, got " + std::to_string(c.max_running));
  if (c.max_waiting < 0) return invalid_argument("max_waiting must be >= 0, got " + std::to_string(c.max_waiting));
  if (c.prefill_chunk < 1) return invalid_argument("prefill_chunk must be >= 1, got " + std::to_string(c.prefill_chunk));
  if (c.max_speculative_k < 0 || c.max_speculative_k > kMaxSpeculativeK) {
    return invalid_argument("max_speculative_k must be in [0, " + std::to_string(kMaxSpeculativeK) + "], got " +
                            std::to_string(c.max_speculative_k));
  }
  if (c.speculative_k < kSpeculativeAuto || c.speculative_k > c.max_speculative_k) {
    return invalid_argument("speculative_k must be -1 (auto), 0 (off) or 1..max_speculative_k (" +
                            std::to_string(c.max_speculative_k) + "), got " + std::to_string(c.speculative_k));
  }
  if (c.prefix_snapshot_interval < 0) {
    return invalid_argument("prefix_snapshot_interval must be >= 0, got " + std::to_string(c.prefix_snapshot_interval));
  }
  // Every running stream must be able to decode in every step, or the newest ones would starve.
  if (c.max_tokens_per_step < c.max_running) {
    return invalid_argument("max_tokens_per_step (" + std::to_string(c.max_tokens_per_step) +
                            ") must be >= max_running (" + std::to_string(c.max_running) + ")");
  }
  const ModelInfo& info = runner->info();
  const CacheGeometry g = runner->geometry();
  if (info.vocab_size < 1) return invalid_argument("the runner reports vocab_size " + std::to_string(info.vocab_size));
  if (info.n_vocab_real < 0 || info.n_vocab_real > info.vocab_size) {
    return invalid_argument("the runner reports n_vocab_real " + std::to_string(info.n_vocab_real) +
                            " outside [0, vocab_size " + std::to_string(info.vocab_size) + "]");
  }
  if (info.context_length < 2) {
    return invalid_argument("the runner reports context_length " + std::to_string(info.context_length));
  }
  if (g.page_size < 1 || g.n_pages < 1 || g.n_slots < 1) {
    return invalid_argument("the runner reports an empty cache: page_size " + std::to_string(g.page_size) +
                            ", n_pages " + std::to_string(g.n_pages) + ", n_slots " + std::to_string(g.n_slots));
  }
  if (runner->capacity().max_tokens < c.max_tokens_per_step) {
    return invalid_argument("max_tokens_per_step (" + std::to_string(c.max_tokens_per_step) +
                            ") exceeds the runner's step capacity (" + std::to_string(runner->capacity().max_tokens) +
                            " tokens)");
  }
  return Status::ok();
}

}  // namespace

// The runner contract is Status, not exceptions; one that escapes anyway (bad_alloc in a model) is a fault.
template <class Fn>
Status EngineImpl::guarded(Fn&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    return internal_error(std::string("the model runner threw: ") + e.what());
  } catch (...) {
    return internal_error("the model runner threw a non-standard exception");
  }
}

void EngineImpl::deliver(Sequence& seq, Event event) {
  // A sink that throws must not take the engine thread (and every other request) down with it.
  try {
    seq.sink(std::move(event));
  } catch (const std::exception& e) {
    engine_log().error("req={} event sink threw: {}", seq.request.id, e.what());
  } catch (...) {
    engine_log().error("req={} event sink threw a non-standard exception", seq.request.id);
  }
}

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<ModelRunner> runner, const EngineConfig& config) {
  VS_RETURN_IF_ERROR(check_config(runner.get(), config));
  const CacheGeometry g = runner->geometry();
  // A sequence must fit in the KV pool on its own, or the oldest one could never finish.
  const int64_t pool_tokens = static_cast<int64_t>(g.n_pages) * g.page_size;
  const int32_t context = static_cast<int32_t>(std::min<int64_t>(runner->info().context_length, pool_tokens));
  engine_log().info("engine: model '{}' vocab {} (real {}) context {} (model {}), {} KV pages x {} tokens, {} state "
                    "slots, max_running {}, max_waiting {}, max_tokens_per_step {}, prefill_chunk {}",
                    runner->info().name, runner->info().vocab_size, runner->info().n_vocab_real, context,
                    runner->info().context_length, g.n_pages, g.page_size, g.n_slots, config.max_running,
                    config.max_waiting, config.max_tokens_per_step, config.prefill_chunk);
  return std::unique_ptr<Engine>(new EngineImpl(std::move(runner), config, context));
}

EngineImpl::EngineImpl(std::unique_ptr<ModelRunner> runner, const EngineConfig& config, int32_t context_length)
    : runner_(std::move(runner)),
      config_(config),
      geometry_(runner_->geometry()),
      model_info_(runner_->info()),
      pages_(geometry_.n_pages),
      slots_(geometry_.n_slots) {
  const ModelInfo& info = runner_->info();
  model_info_.context_length = context_length;
  limits_.vocab_size = info.vocab_size;
  limits_.n_vocab_real = info.n_vocab_real > 0 ? info.n_vocab_real : info.vocab_size;
  limits_.context_length = context_length;
  sched_limits_.max_running = std::min(config.max_running, geometry_.n_slots);
  sched_limits_.max_tokens_per_step = config.max_tokens_per_step;
  sched_limits_.prefill_chunk = config.prefill_chunk;
  sched_limits_.page_size = geometry_.page_size;
  spec_max_k_ = std::max(0, std::min({config.max_speculative_k, geometry_.max_draft_tokens,
                                      geometry_.max_verify_tokens - 1}));
  limits_.max_speculative_k = spec_max_k_;
  limits_.no_speculation_reason = config.max_speculative_k == 0
                                      ? "max_speculative_k is 0"
                                      : "the model has no MTP head, or its backend cannot verify drafts";
  spec_default_k_ = spec_max_k_ == 0 ? 0 : std::min(config.speculative_k, spec_max_k_);
  if (spec_max_k_ > 0) {
    named_logger("spec").info("speculative decoding: up to {} drafts per round, default {}", spec_max_k_,
                              spec_default_k_ == kSpeculativeAuto ? std::string("auto")
                                                                  : std::to_string(spec_default_k_));
  }
  if (config.prefix_cache && geometry_.n_snapshots > 0) {
    prefix_cache_ = std::make_unique<PrefixCache>(geometry_.n_snapshots, geometry_.page_size, pages_);
    engine_log().info("prefix cache: {} state snapshots, a snapshot every {} prefill tokens", geometry_.n_snapshots,
                      config.prefix_snapshot_interval);
  }
  seed_base_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  {
    std::lock_guard lk(mutex_);
    publish_stats_locked();
  }
  thread_ = std::thread([this] { run(); });
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard lk(mutex_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  thread_.join();
}

Result<RequestId> EngineImpl::submit(Request request, EventSink sink) {
  VS_RETURN_IF_ERROR(validate_request(request, limits_));
  if (!sink) return invalid_argument("submit: the event sink is empty");
  const std::string name = request.id;
  const size_t n_prompt = request.prompt_ids.size();
  std::unique_ptr<ConstraintMatcher> matcher;
  if (request.constraint) {
    if (request.constraint->vocab_size() != limits_.vocab_size) {
      return invalid_argument("submit: the constraint was compiled for a vocabulary of " +
                              std::to_string(request.constraint->vocab_size()) + " tokens, the model has " +
                              std::to_string(limits_.vocab_size));
    }
    matcher = make_matcher(request.constraint);
    if (!matcher) return invalid_argument("submit: the constraint is not one this engine's grammar module made");
  }
  const bool constraint_now = request.constraint_after_token < 0;
  auto seq = std::make_unique<Sequence>(0, std::move(request), std::move(sink), geometry_.page_size);
  seq->matcher = std::move(matcher);
  seq->constraint_active = seq->matcher != nullptr && constraint_now;
  RequestId id = 0;
  {
    std::lock_guard lk(mutex_);
    if (!healthy_) return unavailable("the engine is unhealthy after a model failure; not accepting requests");
    if (draining_ || stop_) return unavailable("the engine is draining; not accepting new requests");
    if (n_waiting_ >= config_.max_waiting) {
      return resource_exhausted("the waiting queue is full (" + std::to_string(n_waiting_) + " of " +
                                std::to_string(config_.max_waiting) + " requests waiting)");
    }
    id = next_id_++;
    seq->id = id;
    if (seq->request.id.empty()) seq->request.id = "#" + std::to_string(id);  // logs always name the request
    const SamplingParams& sp = seq->request.sampling;
    kernels::sampling::RowParams& rp = seq->sampling;
    rp.temperature = sp.temperature;
    rp.top_p = sp.top_p;
    rp.top_k = sp.top_k > 0 ? sp.top_k : 0;
    rp.min_p = sp.min_p;
    rp.presence_penalty = sp.presence_penalty;
    rp.frequency_penalty = sp.frequency_penalty;
    rp.repetition_penalty = sp.repetition_penalty;
    rp.n_top_logprobs = std::max(0, seq->request.n_top_logprobs);
    // A request without a seed gets one from the engine's random base, so two such requests differ.
    rp.seed = sp.seed ? *sp.seed : mix_seed(seed_base_, id);
    seq->logit_bias = sp.logit_bias;
    // "auto" on an engine that does not speculate is plain decoding (validation refuses only a k > 0 there).
    // A constrained sequence never speculates: its token masks are per sampled token, and the drafts of a round
    // would need one mask per verify row (a matcher advanced along the drafts and rolled back on rejection).
    // Its output is what it would be with k = 0 anyway, so this only costs speed.
    const int32_t k = seq->request.max_new_tokens == 0 || spec_max_k_ == 0 || seq->matcher != nullptr
                          ? 0
                          : seq->request.speculative_k.value_or(spec_default_k_);
    seq->spec = SpecState(k, spec_max_k_);
    live_ids_.insert(id);
    ++n_waiting_;
    incoming_.push_back(std::move(seq));
    stats_.n_waiting = n_waiting_;
  }
  wake_cv_.notify_one();
  sched_log().debug("req={} queued as #{} with {} prompt tokens", name, id, n_prompt);
  return id;
}

void EngineImpl::cancel(RequestId id) {
  {
    std::lock_guard lk(mutex_);
    if (!live_ids_.contains(id)) return;
    cancel_requests_.push_back(id);
  }
  wake_cv_.notify_one();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard lk(mutex_);
  return stats_;
}

void EngineImpl::drain() {
  {
    std::lock_guard lk(mutex_);
    draining_ = true;
    stats_.draining = true;
  }
  engine_log().info("engine: draining; new requests are refused, in-flight ones finish");
}

void EngineImpl::wait_idle() {
  std::unique_lock lk(mutex_);
  idle_cv_.wait(lk, [&] { return live_ids_.empty(); });
}

void EngineImpl::publish_stats_locked() {
  EngineStats& s = stats_;
  s.n_running = 0;
  for (const auto& seq : seqs_) s.n_running += (seq->admitted && !seq->finished) ? 1 : 0;
  s.n_waiting = n_waiting_;
  s.kv_pages_total = pages_.n_total();
  // Pages only the prefix cache holds are free for requests: it gives them back the moment they are needed.
  s.kv_pages_free = pages_.n_free() + (prefix_cache_ ? prefix_cache_->reclaimable_pages() : 0);
  s.state_slots_total = slots_.n_total();
  s.state_slots_free = slots_.n_free();
  s.context_length = limits_.context_length;
  s.n_tokens_prompt_total = counters_.n_tokens_prompt_total;
  s.n_tokens_generated_total = counters_.n_tokens_generated_total;
  s.n_steps = counters_.n_steps;
  s.n_preemptions = counters_.n_preemptions;
  s.n_graph_replays_total = runner_ ? static_cast<uint64_t>(runner_->graph_replays()) : 0;
  if (runner_) s.speculative_phases = runner_->speculative_phases();
  if (runner_) s.device_timeline = runner_->device_timeline();
  s.n_token_masks = counters_.n_token_masks;
  s.mask_us_total = counters_.mask_us_total;
  s.mask_wait_us_total = counters_.mask_wait_us_total;
  s.max_speculative_k = spec_max_k_;
  s.n_tokens_drafted_total = counters_.n_tokens_drafted_total;
  s.n_tokens_accepted_total = counters_.n_tokens_accepted_total;
  s.drafted_per_position_total = counters_.drafted_per_position_total;
  s.accepted_per_position_total = counters_.accepted_per_position_total;
  s.prefix_cache_enabled = prefix_cache_ != nullptr;
  s.n_prefix_cache_queries_total = counters_.n_prefix_cache_queries_total;
  s.n_prefix_cache_hits_total = counters_.n_prefix_cache_hits_total;
  s.n_tokens_prefix_cached_total = counters_.n_tokens_prefix_cached_total;
  if (prefix_cache_) {
    const PrefixCacheStats c = prefix_cache_->stats();
    s.n_prefix_cache_evictions_total = c.n_evictions;
    s.prefix_cache_entries = c.n_entries;
    s.prefix_snapshots_used = c.n_snapshots_used;
    s.prefix_snapshots_total = c.n_snapshots_total;
    s.prefix_cache_pages = c.n_pages_held;
    s.prefix_cache_pages_only = prefix_cache_->reclaimable_pages();
  }
  s.healthy = healthy_;
  s.draining = draining_;
}

void EngineImpl::run() {
  bool progressed = false;
  while (true) {
    std::vector<RequestId> cancels;
    bool healthy = true;
    {
      std::unique_lock lk(mutex_);
      wake_cv_.wait(lk, [&] {
        return stop_ || !incoming_.empty() || !cancel_requests_.empty() || (progressed && !seqs_.empty());
      });
      if (stop_) break;
      while (!incoming_.empty()) {
        seqs_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      cancels.swap(cancel_requests_);
      healthy = healthy_;
    }
    apply_cancels(cancels);
    if (!healthy) fail_all(unavailable("the engine is unhealthy after a model failure"));
    remove_finished();
    progressed = !seqs_.empty() && step();
    remove_finished();
    EngineStats snapshot;
    {
      std::lock_guard lk(mutex_);
      publish_stats_locked();
      snapshot = stats_;
    }
    log_stats_periodically(snapshot);
    idle_cv_.notify_all();
  }
  // Shutting down: nobody may be left waiting for a final event.
  {
    std::lock_guard lk(mutex_);
    while (!incoming_.empty()) {
      seqs_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
    cancel_requests_.clear();
  }
  for (auto& seq : seqs_) {
    if (!seq->finished) finish(*seq, FinishReason::kCancelled, Status::ok());
  }
  remove_finished();
}

void EngineImpl::apply_cancels(const std::vector<RequestId>& ids) {
  for (RequestId id : ids) {
    for (auto& seq : seqs_) {
      if (seq->id == id && !seq->finished) {
        finish(*seq, FinishReason::kCancelled, Status::ok());
        break;
      }
    }
  }
}

bool EngineImpl::step() {
  std::vector<SchedSeq> views;
  views.reserve(seqs_.size());
  int32_t n_running = 0;
  for (const auto& s : seqs_) n_running += s->admitted ? 1 : 0;
  if (prefix_cache_) {
    // The waiting sequences that could be admitted soon look for their longest cached prefix (seqs_ is in arrival
    // order); the hit is pinned until admission.
    int32_t n_candidates = sched_limits_.max_running - n_running;
    for (const auto& s : seqs_) {
      if (n_candidates <= 0) break;
      if (s->admitted || s->finished) continue;
      refresh_hit(*s);
      --n_candidates;
    }
  }
  for (const auto& s : seqs_) {
    plan_speculation(*s, n_running);
    const auto n_draft = static_cast<int32_t>(s->drafts.size());
    SchedSeq v{s->id, s->admitted, s->n_computed, static_cast<int32_t>(s->tokens.size()) + n_draft,
               s->pages.n_pages(), n_draft, std::max(0, s->n_draft_next - 1)};
    if (prefix_cache_) {
      if (!s->admitted && s->hit_tokens > 0) {
        v.n_computed = s->hit_tokens;
        v.n_pages_held = s->hit_tokens / geometry_.page_size;
      }
      // What a preemption would give back: pages nobody else holds, and pages only the cache holds besides it
      // (they become cache-only, evicted on demand; pinned ones are freed by planning without the pins).
      int32_t freeable = 0;
      for (int32_t page : s->pages.pages()) {
        freeable += pages_.refcount(page) - prefix_cache_->page_refs(page) == 1 ? 1 : 0;
      }
      v.n_pages_freeable = freeable;
      s->snapshot_at = next_snapshot(*s);
      v.n_stop = s->snapshot_at;
      v.hold = !s->admitted && waits_for_sibling(*s);
    }
    views.push_back(v);
  }
  int32_t n_free_pages = pages_.n_free() + (prefix_cache_ ? prefix_cache_->reclaimable_pages() : 0);
  StepPlan plan = plan_step(views, sched_limits_, n_free_pages, slots_.n_free());
  if (prefix_cache_ && pins_cost_running(views, plan)) {
    // The waiting sequences' pinned hits hold pages a running sequence needs (it got no tokens, or someone was to
    // be preempted): the cache must not slow anything running, so this step drops those hits, admits nobody and
    // plans the running sequences with every cached page evictable. The hits are looked up again next step.
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Sequence& s = *seqs_[i];
      if (s.admitted || s.finished) continue;
      drop_hit(s);
      SchedSeq& v = views[i];
      v.n_computed = s.n_computed;
      v.n_pages_held = s.pages.n_pages();
      v.n_stop = 0;
      v.hold = true;
    }
    n_free_pages = pages_.n_free() + prefix_cache_->reclaimable_pages();
    plan = plan_step(views, sched_limits_, n_free_pages, slots_.n_free());
  }

  for (int32_t i : plan.preempted) {
    Sequence& s = *seqs_[static_cast<size_t>(i)];
    sched_log().info("req={} preempted (recompute): gives back {} pages and slot {}, {} tokens to recompute",
                     s.request.id, s.pages.n_pages(), s.slot, s.tokens.size());
    release_resources(s);
    ++counters_.n_preemptions;
    std::lock_guard lk(mutex_);
    ++n_waiting_;
  }
  if (plan.items.empty()) return !plan.preempted.empty();

  // Admissions and pages first: a step's page tables must be final before the request points at them.
  for (const StepItem& item : plan.items) {
    Sequence& s = *seqs_[static_cast<size_t>(item.seq)];
    if (item.admit) {
      const std::optional<int32_t> slot = slots_.allocate();
      if (!slot) {
        fail_all(internal_error("scheduler admitted a sequence but no state slot is free"));
        return false;
      }
      s.slot = *slot;
      s.admitted = true;
      {
        std::lock_guard lk(mutex_);
        --n_waiting_;
      }
      if (Status st = guarded([&] { return runner_->reset_slot(s.slot); }); !st.is_ok()) {
        on_runner_failure(st);
        return false;
      }
      if (!s.counted_prompt) {
        counters_.n_tokens_prompt_total += static_cast<uint64_t>(s.n_prompt);
        s.counted_prompt = true;
      }
      if (prefix_cache_ && uses_prefix_cache(s)) {
        ++counters_.n_prefix_cache_queries_total;
        if (s.hit_tokens > 0) {
          ++counters_.n_prefix_cache_hits_total;
          counters_.n_tokens_prefix_cached_total += static_cast<uint64_t>(s.hit_tokens);
          if (Status st = adopt_hit(s); !st.is_ok()) {
            on_runner_failure(st);
            return false;
          }
        }
      }
      s.admitted_once = true;
      sched_log().debug("req={} admitted to slot {} at n_computed {}", s.request.id, s.slot, s.n_computed);
    }
    // A verify item the budget could not hold whole keeps fewer drafts (never computed later).
    if (!s.drafts.empty() && item.need_logits && item.n_tokens < 1 + static_cast<int32_t>(s.drafts.size())) {
      s.drafts.resize(static_cast<size_t>(item.n_tokens - 1));
    }
    const int32_t lookahead = item.need_logits ? std::max(0, s.n_draft_next - 1) : 0;
    if (!grow_pages(s, s.n_computed + item.n_tokens + lookahead)) {
      fail_all(internal_error("scheduler planned more KV pages than are free"));
      return false;
    }
  }
  build_request(plan);
  sched_log().debug("step {}: {} sequences, {} tokens, {} new pages, {} admitted, {} preempted", counters_.n_steps,
                    plan.items.size(), plan.n_tokens, plan.n_new_pages, plan.n_admitted, plan.preempted.size());

  StepRequest request{steps_, outputs_, {}};
  bool masks_pending = false;
  if (!mask_jobs_.empty()) {
    counters_.n_token_masks += mask_jobs_.size();
    mask_worker_.start(mask_jobs_);
    masks_pending = true;
    request.await_masks = [&] {
      if (!masks_pending) return;
      const auto t0 = std::chrono::steady_clock::now();
      counters_.mask_us_total += static_cast<uint64_t>(mask_worker_.wait());
      counters_.mask_wait_us_total += static_cast<uint64_t>(micros_since(t0));
      masks_pending = false;
    };
  }
  Status st = guarded([&] { return runner_->step(request, result_); });
  if (masks_pending) request.await_masks();  // a runner that failed early: the worker must not outlive the step
  ++counters_.n_steps;
  if (st.is_ok() && result_.rows.size() != outputs_.size()) {
    st = internal_error("the runner returned " + std::to_string(result_.rows.size()) + " output rows, expected " +
                        std::to_string(outputs_.size()));
  }
  const size_t vocab = static_cast<size_t>(limits_.vocab_size);
  size_t n_logit_rows = 0;
  for (const RowRequest& o : outputs_) n_logit_rows += (o.flags & kOutLogits) ? 1 : 0;
  if (st.is_ok() && result_.logits.size() != n_logit_rows * vocab) {
    st = internal_error("the runner returned " + std::to_string(result_.logits.size()) + " logits, expected " +
                        std::to_string(n_logit_rows) + " rows x " + std::to_string(vocab));
  }
  if (!st.is_ok()) {
    on_runner_failure(st);
    return false;
  }
  for (size_t idx = 0; idx < plan.items.size(); ++idx) {
    if (steps_[idx].verify) continue;
    Sequence& s = *seqs_[static_cast<size_t>(plan.items[idx].seq)];
    s.n_computed += plan.items[idx].n_tokens;
    // A prefill chunk that stopped at its snapshot position: the state is exactly that prefix's.
    if (prefix_cache_ && s.snapshot_at > 0 && s.n_computed == s.snapshot_at) {
      if (Status c = snapshot(s); !c.is_ok()) {
        on_runner_failure(c);
        return false;
      }
    }
  }

  // Verify items: the round is recorded first (the final event of a request that ends inside the run carries it);
  // the runner accepted the drafts before its last OK row (the correction or bonus token).
  std::vector<int32_t> n_emitted(plan.items.size(), 0), n_ok(plan.items.size(), 0);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const RowResult& r = result_.rows[i];
    if ((outputs_[i].flags & kOutAccept) && r.status == kernels::sampling::kRowOk && r.token >= 0) {
      ++n_ok[static_cast<size_t>(output_item_[i])];
    }
  }
  for (size_t idx = 0; idx < plan.items.size(); ++idx) {
    if (!steps_[idx].verify) continue;
    record_round(*seqs_[static_cast<size_t>(plan.items[idx].seq)], plan.items[idx].n_tokens - 1,
                 std::max(0, n_ok[idx] - 1));
  }
  size_t logits_row = 0;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const RowRequest& o = outputs_[i];
    const auto item = static_cast<size_t>(output_item_[i]);
    Sequence& s = *seqs_[static_cast<size_t>(plan.items[item].seq)];
    if ((o.flags & kOutAccept) && (s.finished || result_.rows[i].status == kernels::sampling::kRowNotReached)) {
      continue;  // past the accepted run, or the request ended inside it (a stop token, its length)
    }
    if (o.flags & kOutLogits) {
      const float* row = result_.logits.data() + logits_row * vocab;
      s.prompt_logits.insert(s.prompt_logits.end(), row, row + vocab);
      ++logits_row;
    }
    if (s.finished || (o.flags & kOutSample) == 0) continue;
    const RowResult& r = result_.rows[i];
    if (r.status == kernels::sampling::kNanLogits) {
      const Status nan = internal_error("logits contain NaN (first at row " + std::to_string(r.nan_index) + " of " +
                                        std::to_string(limits_.vocab_size) + ")");
      engine_log().error("req={} sampling failed: {}", s.request.id, nan.to_string());
      finish(s, FinishReason::kError, nan);
      continue;
    }
    if (r.status != kernels::sampling::kRowOk || r.token < 0) {
      const Status none = internal_error("no samplable token: every one of the " +
                                         std::to_string(limits_.n_vocab_real) +
                                         " real logits is -inf after logit_bias and penalties");
      engine_log().error("req={} sampling failed: {}", s.request.id, none.to_string());
      finish(s, FinishReason::kError, none);
      continue;
    }
    if (!r.drafts.empty()) s.drafts = r.drafts;
    emit_token(s, r);
    if (o.flags & kOutAccept) ++n_emitted[item];
  }
  for (size_t idx = 0; idx < plan.items.size(); ++idx) {
    if (!steps_[idx].verify) continue;
    if (Status c = commit_round(*seqs_[static_cast<size_t>(plan.items[idx].seq)], n_emitted[idx]); !c.is_ok()) {
      on_runner_failure(c);
      return false;
    }
  }
  // Score-only requests (n_prompt_logits, no generation) finish once their prompt is computed.
  for (const StepItem& item : plan.items) {
    Sequence& s = *seqs_[static_cast<size_t>(item.seq)];
    if (!s.finished && s.request.max_new_tokens == 0 && s.n_computed >= s.n_prompt) {
      finish(s, FinishReason::kLength, Status::ok());
    }
  }
  return true;
}

void EngineImpl::build_request(const StepPlan& plan) {
  steps_.clear();
  outputs_.clear();
  mask_jobs_.clear();
  output_item_.clear();
  for (size_t idx = 0; idx < plan.items.size(); ++idx) {
    const StepItem& item = plan.items[idx];
    Sequence& s = *seqs_[static_cast<size_t>(item.seq)];
    SeqStep st;
    st.slot = s.slot;
    st.page_table = s.pages.pages();
    st.n_past = s.n_computed;
    const bool verify = item.need_logits && !s.drafts.empty() && item.n_tokens > 1;
    if (verify) {  // [last token, d1..dk]: its drafts are consumed here, the MTP head drafts anew
      s.verify_tokens.assign(1, s.tokens.back());
      s.verify_tokens.insert(s.verify_tokens.end(), s.drafts.begin(), s.drafts.end());
      s.drafts.clear();
      st.tokens = s.verify_tokens;
      st.verify = true;
      s.verify_pending = true;
    } else {
      st.tokens = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.n_computed),
                                                             static_cast<size_t>(item.n_tokens));
    }
    st.n_prompt = s.n_prompt;
    if (s.spec.enabled()) {
      st.mtp = true;
      st.next_token = item.need_logits ? -1 : s.tokens[static_cast<size_t>(s.n_computed + item.n_tokens)];
      st.n_draft = item.need_logits ? s.n_draft_next : 0;
    }
    const auto seq_index = static_cast<int32_t>(steps_.size());
    steps_.push_back(st);
    if (verify) {
      for (int32_t j = 0; j < item.n_tokens; ++j) {
        RowRequest o;
        o.seq = seq_index;
        o.token_index = j;
        o.flags = kOutSample | kOutAccept | (s.request.n_top_logprobs >= 0 ? kOutLogprobs : 0u);
        o.sampling = s.sampling;
        o.sampling.draw_index = static_cast<uint64_t>(s.n_generated() + j);
        o.logit_bias = s.logit_bias;
        outputs_.push_back(o);
        output_item_.push_back(static_cast<int32_t>(idx));
      }
      continue;
    }
    // Prompt positions whose logits the request asked for.
    const int32_t first_scored = s.n_prompt - s.request.n_prompt_logits;
    for (int32_t t = 0; t < item.n_tokens && s.request.n_prompt_logits > 0; ++t) {
      const int32_t pos = s.n_computed + t;
      if (pos < first_scored || pos >= s.n_prompt) continue;
      if (static_cast<int32_t>(s.prompt_logits.size() / static_cast<size_t>(limits_.vocab_size)) >
          pos - first_scored) {
        continue;  // recomputed after a preemption: already have it
      }
      RowRequest o;
      o.seq = seq_index;
      o.token_index = t;
      o.flags = kOutLogits;
      outputs_.push_back(o);
      output_item_.push_back(static_cast<int32_t>(idx));
    }
    if (item.need_logits && s.request.max_new_tokens > 0) {
      RowRequest o;
      o.seq = seq_index;
      o.token_index = item.n_tokens - 1;
      o.flags = kOutSample | (s.request.n_top_logprobs >= 0 ? kOutLogprobs : 0u);
      o.sampling = s.sampling;
      o.sampling.draw_index = static_cast<uint64_t>(s.n_generated());
      o.logit_bias = s.logit_bias;
      if (s.constraint_active) {
        // The mask for the token this row samples (the matcher has accepted every generated token so far),
        // computed by the mask worker while the forward runs.
        s.token_mask.resize(static_cast<size_t>((limits_.vocab_size + 31) / 32));
        mask_jobs_.push_back({s.matcher.get(), s.token_mask.data()});
        o.token_mask = s.token_mask;
      }
      outputs_.push_back(o);
      output_item_.push_back(static_cast<int32_t>(idx));
    }
  }
}

void EngineImpl::plan_speculation(Sequence& s, int32_t n_running) {
  s.n_draft_next = 0;
  if (!s.spec.enabled() || s.finished) {
    s.drafts.clear();
    return;
  }
  const auto n_tokens = static_cast<int32_t>(s.tokens.size());
  const int32_t left = s.request.max_new_tokens - s.n_generated();  // tokens still to generate, >= 1
  // Pending drafts: a verify item emits up to 1 + drafts tokens and writes positions up to n_tokens + drafts - 1.
  int32_t keep = static_cast<int32_t>(s.drafts.size());
  keep = std::min({keep, left - 1, limits_.context_length - n_tokens, spec_max_k_});
  if (!s.admitted || s.n_computed != n_tokens - 1) keep = 0;  // preempted (recomputes) or still prefilling
  s.drafts.resize(static_cast<size_t>(std::max(0, keep)));
  // The next round: it follows at least one emitted token, and its chain's KV reaches position n_target + k - 2.
  const int32_t n_target = n_tokens + static_cast<int32_t>(s.drafts.size());
  const int32_t k = s.spec.next_k(n_running);
  s.n_draft_next = std::max(0, std::min({k, left - 2, limits_.context_length - n_target + 1}));
}

void EngineImpl::record_round(Sequence& s, int32_t k, int32_t accepted) {
  s.spec.record(k, accepted);
  counters_.n_tokens_drafted_total += static_cast<uint64_t>(k);
  counters_.n_tokens_accepted_total += static_cast<uint64_t>(accepted);
  auto& drafted = counters_.drafted_per_position_total;
  auto& acc = counters_.accepted_per_position_total;
  if (static_cast<int32_t>(drafted.size()) < k) {
    drafted.resize(static_cast<size_t>(k), 0);
    acc.resize(static_cast<size_t>(k), 0);
  }
  for (int32_t j = 0; j < k; ++j) {
    ++drafted[static_cast<size_t>(j)];
    if (j < accepted) ++acc[static_cast<size_t>(j)];
  }
  sched_log().trace("req={} round: {} drafts, {} accepted", s.request.id, k, accepted);
}

Status EngineImpl::commit_round(Sequence& s, int32_t n_emitted) {
  s.verify_pending = false;
  if (s.finished) return Status::ok();
  if (n_emitted < 1) return internal_error("a verify item emitted no token for an unfinished request");
  VS_RETURN_IF_ERROR(guarded([&] { return runner_->commit(s.slot, n_emitted); }));
  s.n_computed += n_emitted;
  return Status::ok();
}

void EngineImpl::emit_token(Sequence& seq, const RowResult& row) {
  const int32_t token = row.token;
  if (seq.n_generated() == 0) seq.ttft_us = micros_since(seq.submitted_at);
  seq.tokens.push_back(token);
  ++counters_.n_tokens_generated_total;
  Event ev;
  ev.token_ids.push_back(token);
  if (seq.request.n_top_logprobs >= 0) {
    ev.logprobs.push_back({token, row.logprob});
    std::vector<TokenLogprob> top;
    for (const auto& [id, lp] : row.top) top.push_back({id, lp});
    ev.top_logprobs.push_back(std::move(top));
  }
  const std::vector<int32_t>& stops = seq.request.stop_token_ids;
  FinishReason reason = FinishReason::kNone;
  bool constraint_done = false;
  if (seq.constraint_active) {
    if (!seq.matcher->accept(token)) {
      finish(seq, FinishReason::kError,
             internal_error("the sampled token " + std::to_string(token) + " is not one the " +
                            seq.request.constraint->describe() + " constraint allows"),
             std::move(ev));
      return;
    }
    constraint_done = seq.matcher->terminated();
  } else if (seq.matcher && token == seq.request.constraint_after_token) {
    seq.constraint_active = true;  // the reasoning block ended: the constraint applies from the next token
  }
  if (constraint_done ||
      (!seq.request.ignore_eos && std::find(stops.begin(), stops.end(), token) != stops.end())) {
    reason = FinishReason::kStop;
  } else if (seq.n_generated() >= seq.request.max_new_tokens ||
             static_cast<int32_t>(seq.tokens.size()) >= limits_.context_length) {
    reason = FinishReason::kLength;
  }
  if (reason != FinishReason::kNone) {
    finish(seq, reason, Status::ok(), std::move(ev));
    return;
  }
  deliver(seq, std::move(ev));
}

bool EngineImpl::uses_prefix_cache(const Sequence& seq) const {
  // A hit skips computing the prefix, so what the prefix would have fed besides the state must not be needed:
  // prompt logits, and the penalty state (prompt and recomputed tokens are counted as they are computed). A
  // request may opt out (Request::prefix_cache).
  const kernels::sampling::RowParams& p = seq.sampling;
  return prefix_cache_ != nullptr && seq.request.prefix_cache && seq.request.n_prompt_logits == 0 &&
         p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
}

bool EngineImpl::pins_cost_running(const std::vector<SchedSeq>& views, const StepPlan& plan) const {
  bool pinned = false;
  for (const auto& s : seqs_) pinned = pinned || (!s->admitted && !s->finished && s->hit_entry >= 0);
  if (!pinned) return false;
  if (!plan.preempted.empty()) return true;
  std::vector<bool> served(views.size(), false);
  for (const StepItem& item : plan.items) served[static_cast<size_t>(item.seq)] = true;
  // An admitted sequence without tokens this step: no pages for it (the budget always covers every decode, and a
  // prefill left out for budget means nothing could be admitted anyway, so holding the waiting ones costs nothing).
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].admitted && !served[i] && !seqs_[i]->finished) return true;
  }
  return false;
}

bool EngineImpl::waits_for_sibling(const Sequence& seq) const {
  // n > 1 siblings (and identical requests) arrive together with the same prompt. Prefilling them side by side
  // computes the prompt n times; holding the later ones until the first has reached its prompt-end snapshot
  // computes it once, and they then prefill one token each. Only while this sequence's own hit is shorter.
  if (!uses_prefix_cache(seq)) return false;
  const int32_t resume = seq.n_prompt - 1;
  if (resume < 1 || seq.hit_tokens >= resume) return false;
  // An earlier sequence (seqs_ is in arrival order), admitted or about to be: the first of a group is never held.
  for (const auto& other : seqs_) {
    const Sequence& a = *other;
    if (&a == &seq) break;
    if (a.finished || !uses_prefix_cache(a)) continue;
    const int32_t reached = a.admitted ? a.n_computed : a.hit_tokens;
    if (a.n_prompt != seq.n_prompt || reached >= resume || a.request.cache_salt != seq.request.cache_salt) continue;
    if (std::equal(seq.tokens.begin(), seq.tokens.begin() + resume, a.tokens.begin())) return true;
  }
  return false;
}

void EngineImpl::drop_hit(Sequence& seq) {
  if (seq.hit_entry >= 0 && prefix_cache_) prefix_cache_->unpin(seq.hit_entry);
  seq.hit_entry = -1;
  seq.hit_tokens = 0;
  seq.hit_snapshot = -1;
  seq.hit_pages.clear();
}

void EngineImpl::refresh_hit(Sequence& seq) {
  drop_hit(seq);
  if (!uses_prefix_cache(seq)) return;
  // At least one token is computed after the hit: its logits sample the next token.
  const auto limit = static_cast<int32_t>(seq.tokens.size()) - 1;
  const std::optional<PrefixHit> hit = prefix_cache_->lookup(seq.tokens, limit, seq.request.cache_salt);
  if (!hit) return;
  prefix_cache_->pin(hit->entry);
  seq.hit_entry = hit->entry;
  seq.hit_tokens = hit->n_tokens;
  seq.hit_snapshot = hit->snapshot;
  seq.hit_pages.assign(hit->pages.begin(), hit->pages.end());
}

int32_t EngineImpl::next_snapshot(const Sequence& seq) const {
  // Snapshots are taken from the prefill of a sequence that feeds the cache: prefill chunks are committed state
  // (verify items never stop at a snapshot).
  if (!uses_prefix_cache(seq)) return 0;
  const int32_t at = seq.admitted ? seq.n_computed : seq.hit_tokens;
  const auto n_target = static_cast<int32_t>(seq.tokens.size());
  int32_t stop = 0;
  // The prompt end minus one: the resume point of an identical prompt (siblings, retries, a preempted recompute).
  // Not the prompt end itself: the last prompt token must be computed anyway for the logits of the first token,
  // so a hit at n_prompt could not skip it, while one at n_prompt - 1 skips everything else.
  if (seq.n_prompt - 1 > at && seq.n_prompt - 1 >= 1) stop = seq.n_prompt - 1;
  // The caller's resume point (where a chat's next turn re-renders the history differently).
  const int32_t hint = seq.request.n_prompt_resume;
  if (hint > at && hint < seq.n_prompt - 1 && (stop == 0 || hint < stop)) stop = hint;
  const int32_t n = config_.prefix_snapshot_interval;
  if (n > 0) {
    const int32_t next = (at / n + 1) * n;
    if (next < n_target - 1 && (stop == 0 || next < stop)) stop = next;
  }
  return stop;
}

Status EngineImpl::adopt_hit(Sequence& seq) {
  const int32_t page_size = geometry_.page_size;
  const int32_t n_full = seq.hit_tokens / page_size;
  if (seq.pages.n_pages() != 0 || static_cast<int32_t>(seq.hit_pages.size()) < pages_for_tokens(seq.hit_tokens, page_size)) {
    return internal_error("prefix cache: a hit of " + std::to_string(seq.hit_tokens) + " tokens with " +
                          std::to_string(seq.hit_pages.size()) + " pages for a table of " +
                          std::to_string(seq.pages.n_pages()));
  }
  // Full pages are shared: nobody writes below its own n_computed, so they stay as the cache holds them.
  for (int32_t i = 0; i < n_full; ++i) {
    const int32_t page = seq.hit_pages[static_cast<size_t>(i)];
    VS_RETURN_IF_ERROR(pages_.retain(page));
    seq.pages.adopt(page);
  }
  // The partial last page is copied: this sequence writes its positions from hit_tokens on.
  if (seq.hit_tokens % page_size != 0) {
    std::optional<int32_t> page = pages_.allocate();
    if (!page && prefix_cache_->evict_for_pages(1)) page = pages_.allocate();
    if (!page) return internal_error("prefix cache: no KV page for a hit's partial last page");
    seq.pages.adopt(*page);
    const int32_t src = seq.hit_pages[static_cast<size_t>(n_full)];
    VS_RETURN_IF_ERROR(guarded([&] { return runner_->copy_page(src, *page); }));
  }
  VS_RETURN_IF_ERROR(guarded([&] { return runner_->load_state(seq.hit_snapshot, seq.slot); }));
  seq.n_computed = seq.hit_tokens;
  // What the client is told was cached: its first admission's hit (a preempted recompute's is the engine's business).
  if (!seq.admitted_once) seq.n_tokens_cached = std::min(seq.hit_tokens, seq.n_prompt);
  sched_log().debug("req={} prefix cache hit: {} of {} tokens cached (snapshot {})", seq.request.id, seq.hit_tokens,
                    seq.tokens.size(), seq.hit_snapshot);
  drop_hit(seq);
  return Status::ok();
}

Status EngineImpl::snapshot(Sequence& seq) {
  // Only committed state: a sequence inside an uncommitted verify item (it finished at a stop token or its length
  // within the accepted run) holds drafts' state beyond n_computed.
  if (!uses_prefix_cache(seq) || seq.verify_pending || !seq.admitted || seq.n_computed < 1) return Status::ok();
  const std::span<const int32_t> prefix = std::span<const int32_t>(seq.tokens).first(static_cast<size_t>(seq.n_computed));
  const std::optional<int32_t> row = prefix_cache_->begin_insert(prefix, seq.request.cache_salt);
  if (!row) return Status::ok();  // already cached, or every snapshot is pinned
  if (Status st = guarded([&] { return runner_->save_state(seq.slot, *row); }); !st.is_ok()) {
    prefix_cache_->abort_insert(*row);
    return st;
  }
  return prefix_cache_->commit_insert(prefix, seq.request.cache_salt, *row, seq.pages.pages());
}

bool EngineImpl::grow_pages(Sequence& seq, int32_t n_tokens) {
  if (seq.pages.grow_to(n_tokens, pages_)) return true;
  if (!prefix_cache_) return false;
  const int32_t need = pages_for_tokens(n_tokens, geometry_.page_size) - seq.pages.n_pages();
  return prefix_cache_->evict_for_pages(need) && seq.pages.grow_to(n_tokens, pages_);
}

void EngineImpl::release_resources(Sequence& seq) {
  if (Status st = seq.pages.release_all(pages_); !st.is_ok()) {
    engine_log().error("req={} releasing pages: {}", seq.request.id, st.to_string());
  }
  if (seq.slot >= 0) {
    if (Status st = slots_.release(seq.slot); !st.is_ok()) {
      engine_log().error("req={} releasing slot: {}", seq.request.id, st.to_string());
    }
  }
  seq.slot = -1;
  seq.admitted = false;
  seq.n_computed = 0;
  seq.drafts.clear();  // the MTP head drafts anew after the recompute
}

void EngineImpl::finish(Sequence& seq, FinishReason reason, Status error, Event event) {
  const bool was_waiting = !seq.admitted;
  // The end of the committed text is where the next turn of a conversation resumes.
  if (reason != FinishReason::kError && seq.admitted && !seq.finished) {
    if (Status st = snapshot(seq); !st.is_ok()) {
      engine_log().warn("req={} prefix cache snapshot failed: {}", seq.request.id, st.to_string());
    }
  }
  drop_hit(seq);
  release_resources(seq);
  seq.finished = true;
  event.finished = true;
  event.finish_reason = reason;
  event.n_tokens_prompt = seq.n_prompt;
  event.n_tokens_generated = seq.n_generated();
  event.ttft_us = seq.ttft_us;
  event.n_tokens_cached = seq.n_tokens_cached;
  event.n_tokens_drafted = seq.spec.n_drafted();
  event.n_tokens_accepted = seq.spec.n_accepted();
  event.drafted_per_position = seq.spec.drafted_per_position();
  event.accepted_per_position = seq.spec.accepted_per_position();
  event.n_steps = counters_.n_steps;
  if (reason != FinishReason::kError && reason != FinishReason::kCancelled) event.prompt_logits = std::move(seq.prompt_logits);
  if (reason == FinishReason::kError) {
    event.error = error.is_ok() ? internal_error("request failed") : std::move(error);
  }
  std::string spec;
  if (seq.spec.n_rounds() > 0) {
    spec = " drafted=" + std::to_string(seq.spec.n_drafted()) + " accepted=" + std::to_string(seq.spec.n_accepted());
    if (seq.spec.flat_near_full()) {
      named_logger("spec").warn("req={} draft acceptance is flat and near 100% over {} rounds ({} of {}): more likely "
                                "a corruption (NaN logits, a drafter reading the target) than a real model",
                                seq.request.id, seq.spec.n_rounds(), seq.spec.n_accepted(), seq.spec.n_drafted());
    }
  }
  engine_log().info("req={} finished: {} prompt={} generated={} ttft_us={}{}{}", seq.request.id,
                    finish_reason_name(reason), seq.n_prompt, seq.n_generated(), seq.ttft_us, spec,
                    event.error.is_ok() ? "" : " error=" + event.error.to_string());
  {
    // Pools are back in the stats before the client sees its final event.
    std::lock_guard lk(mutex_);
    if (was_waiting) --n_waiting_;
    publish_stats_locked();
  }
  deliver(seq, std::move(event));
  {
    std::lock_guard lk(mutex_);
    live_ids_.erase(seq.id);
  }
  idle_cv_.notify_all();
}

void EngineImpl::fail_all(const Status& error) {
  for (auto& seq : seqs_) {
    if (!seq->finished) finish(*seq, FinishReason::kError, error);
  }
}

void EngineImpl::on_runner_failure(const Status& error) {
  {
    std::lock_guard lk(mutex_);
    healthy_ = false;
    publish_stats_locked();
  }
  if (!logged_fault_) {
    logged_fault_ = true;
    engine_log().error("engine: the model runner failed, the engine is now unhealthy and refuses requests: {}",
                       error.to_string());
  }
  fail_all(error);
}

void EngineImpl::log_stats_periodically(const EngineStats& s) {
  constexpr auto kPeriod = std::chrono::seconds(10);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_stats_log_ < kPeriod) return;
  const double seconds = std::chrono::duration<double>(now - last_stats_log_).count();
  const uint64_t generated = s.n_tokens_generated_total - last_stats_generated_;
  last_stats_log_ = now;
  last_stats_generated_ = s.n_tokens_generated_total;
  if (generated == 0 && s.n_running == 0 && s.n_waiting == 0) return;  // idle: say nothing
  engine_log().info("stats: running {} waiting {} kv pages {}/{} used, slots {}/{} used, {:.1f} generated tokens/s, "
                    "{} steps, {} preemptions", s.n_running, s.n_waiting, s.kv_pages_total - s.kv_pages_free,
                    s.kv_pages_total, s.state_slots_total - s.state_slots_free, s.state_slots_total,
                    static_cast<double>(generated) / seconds, s.n_steps, s.n_preemptions);
}

void EngineImpl::remove_finished() {
  std::erase_if(seqs_, [](const std::unique_ptr<Sequence>& s) { return s->finished; });
}

}  // namespace voltserve
