// The fake ModelRunner (see fake_runner.h).
#include "support/fake_runner.h"

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
      slots_(static_cast<size_t>(options.n_slots)) {
  info_.name = "fake";
  info_.vocab_size = options.vocab_size;
  info_.n_vocab_real = options.n_vocab_real;
  info_.context_length = options.context_length;
  info_.eos_token_ids = {1};
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
  return g;
}

Status FakeRunner::reset_slot(int32_t slot) {
  std::lock_guard lk(mutex_);
  if (slot < 0 || slot >= options_.n_slots) return violation("reset_slot: slot " + std::to_string(slot) + " out of range");
  slots_[static_cast<size_t>(slot)] = SlotState{0, kHashSeed};
  return Status::ok();
}

Status FakeRunner::violation(std::string what) {
  violations_.push_back(what);
  return internal_error("fake runner: " + what);
}

Status FakeRunner::forward(std::span<const SeqStep> steps, std::vector<float>& logits) {
  // A call counts (n_forward) from its start; the delay stands for the time the model takes.
  std::chrono::microseconds delay;
  int64_t call = 0;
  {
    std::lock_guard lk(mutex_);
    delay = delay_;
    call = n_forward_++;
    std::vector<RecordedStep>& rec = calls_.emplace_back();
    for (const SeqStep& s : steps) {
      rec.push_back({s.slot, {s.page_table.begin(), s.page_table.end()}, s.n_past, {s.tokens.begin(), s.tokens.end()},
                     s.need_logits});
    }
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  std::lock_guard lk(mutex_);
  if (call == fail_at_) return internal_error("injected runner fault at forward " + std::to_string(call));
  if (call == throw_at_) throw std::runtime_error("injected exception at forward " + std::to_string(call));

  const int32_t ps = options_.page_size;
  std::set<int32_t> slots_seen;
  std::set<int32_t> pages_seen;
  for (const SeqStep& s : steps) {
    const std::string who = "forward " + std::to_string(call) + " slot " + std::to_string(s.slot) + ": ";
    if (s.slot < 0 || s.slot >= options_.n_slots) return violation(who + "slot out of range");
    if (!slots_seen.insert(s.slot).second) return violation(who + "slot used twice in one step");
    if (s.tokens.empty()) return violation(who + "no tokens");
    const int32_t end = s.n_past + static_cast<int32_t>(s.tokens.size());
    if (end > options_.context_length) return violation(who + "beyond the context length");
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
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int32_t t = s.tokens[i];
      if (t < 0 || t >= options_.vocab_size) return violation(who + "token " + std::to_string(t) + " out of range");
      const int32_t pos = s.n_past + static_cast<int32_t>(i);
      kv_[static_cast<size_t>(s.page_table[static_cast<size_t>(pos / ps)]) * ps + pos % ps] = t;
      st.hash = mix(st.hash, t);
      ++st.n_tokens;
    }
  }
  // Read every sequence back from the cache after all writes of the step: a page shared with another live
  // sequence has been overwritten by now and no longer matches the slot's running hash.
  int32_t n_rows = 0;
  for (const SeqStep& s : steps) n_rows += s.need_logits ? 1 : 0;
  logits.assign(static_cast<size_t>(n_rows) * static_cast<size_t>(options_.vocab_size), 0.0f);
  size_t row = 0;
  for (const SeqStep& s : steps) {
    const int32_t end = s.n_past + static_cast<int32_t>(s.tokens.size());
    std::vector<int32_t> seq(static_cast<size_t>(end));
    for (int32_t pos = 0; pos < end; ++pos) {
      seq[static_cast<size_t>(pos)] = kv_[static_cast<size_t>(s.page_table[static_cast<size_t>(pos / ps)]) * ps + pos % ps];
    }
    if (hash_of(seq) != slots_[static_cast<size_t>(s.slot)].hash) {
      return violation("forward " + std::to_string(call) + " slot " + std::to_string(s.slot) +
                       ": the KV pages disagree with the recurrent state (a page shared or overwritten)");
    }
    if (!s.need_logits) continue;
    float* out = logits.data() + row * static_cast<size_t>(options_.vocab_size);
    logits_after(seq, options_, out);
    if (call == nan_at_) {
      for (int32_t i = 0; i < options_.vocab_size; ++i) out[i] = std::numeric_limits<float>::quiet_NaN();
    }
    ++row;
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
