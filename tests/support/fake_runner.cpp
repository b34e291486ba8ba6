// The fake ModelRunner (see fake_runner.h).
#include "support/fake_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>

namespace voltserve::testing {

namespace {

constexpr uint64_t kHashSeed = 0xcbf29ce484222325ULL;

uint64_t mix(uint64_t h, int32_t token) {
  h ^= static_cast<uint64_t>(static_cast<uint32_t>(token)) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0x100000001b3ULL;
  return h ^ (h >> 29);
}

uint64_t hash_of(std::span<const int32_t> tokens) {
  uint64_t h = kHashSeed;
  for (int32_t t : tokens) h = mix(h, t);
  return h;
}

}  // namespace

FakeRunner::FakeRunner(FakeRunnerOptions options)
    : options_(options),
      kv_(static_cast<size_t>(options.n_pages) * static_cast<size_t>(options.page_size), -1),
      slots_(static_cast<size_t>(options.n_slots)),
      penalty_counts_(static_cast<size_t>(options.n_slots) * static_cast<size_t>(options.vocab_size), 0),
      penalty_bits_(static_cast<size_t>(options.n_slots) * static_cast<size_t>((options.vocab_size + 31) / 32), 0u) {
  info_.name = "fake";
  info_.vocab_size = options.vocab_size;
  info_.n_vocab_real = options.n_vocab_real;
  info_.context_length = options.context_length;
  info_.eos_token_ids = {1};
  info_.backend = "fake";
}

void FakeRunner::logits_after(std::span<const int32_t> tokens, const FakeRunnerOptions& options, float* row) {
  const uint64_t h = hash_of(tokens);
  const int32_t next = static_cast<int32_t>(h % static_cast<uint64_t>(options.n_vocab_real));
  for (int32_t i = 0; i < options.vocab_size; ++i) {
    if (i >= options.n_vocab_real) {
      row[i] = 50.0f;  // padding rows: the largest values, so an engine that samples them is caught
    } else {
      row[i] = 0.25f * static_cast<float>((static_cast<uint64_t>(i) * 31 + (h >> 7)) % 17);
    }
  }
  row[next] = 8.0f;
}

int32_t FakeRunner::next_token(std::span<const int32_t> tokens, const FakeRunnerOptions& options) {
  return static_cast<int32_t>(hash_of(tokens) % static_cast<uint64_t>(options.n_vocab_real));
}

CacheGeometry FakeRunner::geometry() const {
  CacheGeometry g;
  g.page_size = options_.page_size;
  g.n_pages = options_.n_pages;
  g.n_slots = options_.n_slots;
  g.max_verify_tokens = options_.max_verify_tokens;
  return g;
}

Status FakeRunner::reset_slot(int32_t slot) {
  std::lock_guard lk(mutex_);
  if (slot < 0 || slot >= options_.n_slots) return violation("reset_slot: slot " + std::to_string(slot) + " out of range");
  slots_[static_cast<size_t>(slot)] = SlotState{0, kHashSeed, {}};
  std::fill_n(penalty_counts_.begin() + static_cast<std::ptrdiff_t>(slot) * options_.vocab_size, options_.vocab_size, 0);
  const int32_t words = (options_.vocab_size + 31) / 32;
  std::fill_n(penalty_bits_.begin() + static_cast<std::ptrdiff_t>(slot) * words, words, 0u);
  return Status::ok();
}

Status FakeRunner::commit(int32_t slot, int32_t n_keep) {
  std::lock_guard lk(mutex_);
  if (slot < 0 || slot >= options_.n_slots) return violation("commit: slot " + std::to_string(slot) + " out of range");
  SlotState& st = slots_[static_cast<size_t>(slot)];
  const auto n = static_cast<int32_t>(st.checkpoints.size());
  if (n == 0) return violation("commit: slot " + std::to_string(slot) + " has no verify item");
  if (n_keep < 1 || n_keep > n) return violation("commit: n_keep " + std::to_string(n_keep) + " of " + std::to_string(n));
  SlotState kept = st.checkpoints[static_cast<size_t>(n_keep - 1)];
  st = SlotState{kept.n_tokens, kept.hash, {}};
  return Status::ok();
}

Status FakeRunner::violation(std::string what) {
  violations_.push_back(what);
  return internal_error("fake runner: " + what);
}

Status FakeRunner::step(const StepRequest& request, StepResult& result) {
  result.clear();
  // A call counts (n_forward) from its start; the delay stands for the time the model takes.
  std::chrono::microseconds delay;
  int64_t call = 0;
  {
    std::lock_guard lk(mutex_);
    delay = delay_;
    call = n_forward_++;
    std::vector<RecordedStep>& rec = calls_.emplace_back();
    for (size_t i = 0; i < request.seqs.size(); ++i) {
      const SeqStep& s = request.seqs[i];
      bool sampled = false;
      for (const RowRequest& o : request.outputs) sampled |= o.seq == static_cast<int32_t>(i) && (o.flags & kOutSample);
      rec.push_back({s.slot, {s.page_table.begin(), s.page_table.end()}, s.n_past, {s.tokens.begin(), s.tokens.end()},
                     sampled, s.verify});
    }
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  std::lock_guard lk(mutex_);
  if (call == fail_at_) return internal_error("injected runner fault at forward " + std::to_string(call));
  if (call == throw_at_) throw std::runtime_error("injected exception at forward " + std::to_string(call));

  const int32_t ps = options_.page_size;
  std::set<int32_t> slots_seen;
  std::set<int32_t> pages_seen;
  int64_t n_tokens = 0;
  std::vector<kernels::SeqDesc> descs;
  std::vector<int32_t> all_tokens;
  for (const SeqStep& s : request.seqs) {
    const std::string who = "forward " + std::to_string(call) + " slot " + std::to_string(s.slot) + ": ";
    if (s.slot < 0 || s.slot >= options_.n_slots) return violation(who + "slot out of range");
    if (!slots_seen.insert(s.slot).second) return violation(who + "slot used twice in one step");
    if (s.tokens.empty()) return violation(who + "no tokens");
    n_tokens += static_cast<int64_t>(s.tokens.size());
    const int32_t end = s.n_past + static_cast<int32_t>(s.tokens.size());
    if (end > options_.context_length) return violation(who + "beyond the context length");
    if (s.verify && static_cast<int32_t>(s.tokens.size()) > options_.max_verify_tokens) {
      return violation(who + "verify item longer than max_verify_tokens");
    }
    if (static_cast<int64_t>(s.page_table.size()) * ps < end) {
      return violation(who + "page table of " + std::to_string(s.page_table.size()) + " pages cannot hold " +
                       std::to_string(end) + " positions");
    }
    for (int32_t p : s.page_table) {
      if (p < 0 || p >= options_.n_pages) return violation(who + "page " + std::to_string(p) + " out of range");
      if (!pages_seen.insert(p).second) return violation(who + "page " + std::to_string(p) + " used twice in one step");
    }
    SlotState& st = slots_[static_cast<size_t>(s.slot)];
    if (st.n_tokens != s.n_past) {
      return violation(who + "n_past " + std::to_string(s.n_past) + " but the slot's state holds " +
                       std::to_string(st.n_tokens) + " tokens");
    }
    st.checkpoints.clear();
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int32_t t = s.tokens[i];
      if (t < 0 || t >= options_.vocab_size) return violation(who + "token " + std::to_string(t) + " out of range");
      const int32_t pos = s.n_past + static_cast<int32_t>(i);
      kv_[static_cast<size_t>(s.page_table[static_cast<size_t>(pos / ps)]) * ps + pos % ps] = t;
      st.hash = mix(st.hash, t);
      ++st.n_tokens;
      if (s.verify) st.checkpoints.push_back(SlotState{st.n_tokens, st.hash, {}});
    }
    kernels::SeqDesc d;
    d.row0 = static_cast<int32_t>(all_tokens.size());
    d.n_tokens = static_cast<int32_t>(s.tokens.size());
    d.n_past = s.n_past;
    d.slot = s.slot;
    d.n_prompt = s.n_prompt;
    descs.push_back(d);
    all_tokens.insert(all_tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  if (n_tokens > options_.max_step_tokens) return violation("a step of " + std::to_string(n_tokens) + " tokens");
  kernels::sampling::PenaltyState penalties;
  penalties.counts = penalty_counts_.data();
  penalties.prompt_bits = penalty_bits_.data();
  penalties.vocab = options_.vocab_size;
  penalties.n_slots = options_.n_slots;
  kernels::sampling::update_penalties_ref(penalties, all_tokens.data(), descs.data(),
                                          static_cast<int32_t>(descs.size()));

  // Read every sequence back from the cache after all writes of the step: a page shared with another live
  // sequence has been overwritten by now and no longer matches the slot's running hash.
  for (const SeqStep& s : request.seqs) {
    const int32_t end = s.n_past + static_cast<int32_t>(s.tokens.size());
    std::vector<int32_t> seq(static_cast<size_t>(end));
    for (int32_t pos = 0; pos < end; ++pos) {
      seq[static_cast<size_t>(pos)] = kv_[static_cast<size_t>(s.page_table[static_cast<size_t>(pos / ps)]) * ps + pos % ps];
    }
    if (hash_of(seq) != slots_[static_cast<size_t>(s.slot)].hash) {
      return violation("forward " + std::to_string(call) + " slot " + std::to_string(s.slot) +
                       ": the KV pages disagree with the recurrent state (a page shared or overwritten)");
    }
  }

  // Output rows: the fake model's logits after the row's prefix, sampled by the reference sampler.
  const int32_t vocab = options_.vocab_size;
  result.rows.resize(request.outputs.size());
  std::vector<float> row(static_cast<size_t>(vocab));
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const RowRequest& o = request.outputs[i];
    if (o.seq < 0 || o.seq >= static_cast<int32_t>(request.seqs.size())) return violation("output of a missing sequence");
    const SeqStep& s = request.seqs[static_cast<size_t>(o.seq)];
    if (o.token_index < 0 || o.token_index >= static_cast<int32_t>(s.tokens.size())) {
      return violation("output row outside its sequence's tokens");
    }
    const int32_t end = s.n_past + o.token_index + 1;
    std::vector<int32_t> prefix(static_cast<size_t>(end));
    for (int32_t pos = 0; pos < end; ++pos) {
      prefix[static_cast<size_t>(pos)] = kv_[static_cast<size_t>(s.page_table[static_cast<size_t>(pos / ps)]) * ps + pos % ps];
    }
    logits_after(prefix, options_, row.data());
    if (call == nan_at_) std::fill(row.begin(), row.end(), std::numeric_limits<float>::quiet_NaN());
    if (o.flags & kOutLogits) result.logits.insert(result.logits.end(), row.begin(), row.end());
    if (o.flags & kOutHidden) result.hidden.insert(result.hidden.end(), row.begin(), row.begin() + 4);
    if ((o.flags & kOutSample) == 0) continue;
    kernels::sampling::RowParams p = o.sampling;
    p.slot = s.slot;
    p.flags = kernels::sampling::kSample | ((o.flags & kOutLogprobs) ? kernels::sampling::kLogprobs : 0u);
    std::vector<int32_t> bias_ids;
    std::vector<float> bias_values;
    for (const auto& [id, b] : o.logit_bias) {
      bias_ids.push_back(id);
      bias_values.push_back(b);
    }
    p.bias_offset = 0;
    p.bias_count = static_cast<int32_t>(bias_ids.size());
    int32_t token = -1, status = 0, nan_index = -1;
    float logprob = 0.0f;
    std::vector<int32_t> top_ids(kernels::sampling::kMaxTopLogprobs);
    std::vector<float> top_lp(kernels::sampling::kMaxTopLogprobs);
    kernels::sampling::RefArgs a;
    a.logits = row.data();
    a.logits_stride = vocab;
    a.n_rows = 1;
    a.n_vocab_real = options_.n_vocab_real;
    a.rows = &p;
    a.bias_ids = bias_ids.data();
    a.bias_values = bias_values.data();
    a.penalties = penalties;
    // The engine's mask worker may still be filling the mask (StepRequest::await_masks).
    if (!o.token_mask.empty() && request.await_masks) request.await_masks();
    p.mask_row = o.token_mask.empty() ? -1 : 0;
    a.masks = o.token_mask.data();
    a.mask_words = static_cast<int32_t>(o.token_mask.size());
    a.out = {&token, &logprob, top_ids.data(), top_lp.data(), &status, &nan_index};
    kernels::sampling::sample_ref(a);
    RowResult& r = result.rows[i];
    r.token = token;
    r.status = status;
    r.nan_index = nan_index;
    r.logprob = logprob;
    if (o.flags & kOutLogprobs) {
      for (int32_t t = 0; t < std::min(o.sampling.n_top_logprobs, options_.n_vocab_real); ++t) {
        r.top.emplace_back(top_ids[static_cast<size_t>(t)], top_lp[static_cast<size_t>(t)]);
      }
    }
  }
  return Status::ok();
}

void FakeRunner::fail_forward_at(int64_t call_index) {
  std::lock_guard lk(mutex_);
  fail_at_ = call_index;
}

void FakeRunner::nan_at_forward(int64_t call_index) {
  std::lock_guard lk(mutex_);
  nan_at_ = call_index;
}

void FakeRunner::throw_at_forward(int64_t call_index) {
  std::lock_guard lk(mutex_);
  throw_at_ = call_index;
}

void FakeRunner::set_forward_delay(std::chrono::microseconds delay) {
  std::lock_guard lk(mutex_);
  delay_ = delay;
}

int64_t FakeRunner::n_forward() const {
  std::lock_guard lk(mutex_);
  return n_forward_;
}

std::vector<std::vector<RecordedStep>> FakeRunner::calls() const {
  std::lock_guard lk(mutex_);
  return calls_;
}

std::vector<std::string> FakeRunner::violations() const {
  std::lock_guard lk(mutex_);
  return violations_;
}

}  // namespace voltserve::testing
