// plan_step(): decodes first, then chunked prefill, FCFS admission, preempt-by-recompute (see scheduler.h).
#include "scheduler/scheduler.h"

#include <algorithm>
#include <numeric>

#include "cache/page_table.h"

namespace voltserve {

namespace {

class Planner {
 public:
  Planner(std::span<const SchedSeq> seqs, const SchedulerLimits& limits, int32_t n_free_pages,
          int32_t n_free_slots)
      : seqs_(seqs),
        limits_(limits),
        free_pages_(n_free_pages),
        free_slots_(n_free_slots),
        budget_(limits.max_tokens_per_step),
        item_of_(seqs.size(), -1),
        preempted_(seqs.size(), false),
        new_pages_(seqs.size(), 0) {
    order_.resize(seqs.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int32_t a, int32_t b) { return seqs_[a].arrival < seqs_[b].arrival; });
    for (const SchedSeq& s : seqs_) n_admitted_ += s.admitted ? 1 : 0;
  }

  StepPlan run() {
    schedule_decodes();
    schedule_admitted_prefills();
    if (plan_.preempted.empty()) admit_waiting();
    StepPlan out;
    out.preempted = plan_.preempted;
    for (const StepItem& it : plan_.items) {
      if (it.seq < 0) continue;  // undone by a later preemption
      out.items.push_back(it);
      out.n_tokens += it.n_tokens;
      out.n_new_pages += it.n_new_pages;
      out.n_admitted += it.admit ? 1 : 0;
    }
    return out;
  }

 private:
  int32_t remaining(int32_t i) const { return seqs_[i].n_target - seqs_[i].n_computed; }
  bool live_admitted(int32_t i) const { return seqs_[i].admitted && !preempted_[i]; }
  bool is_decode(int32_t i) const { return remaining(i) == 1 + std::max(0, seqs_[i].n_draft); }
  // Positions a step of n_tokens writes: its tokens, and the draft chain's lookahead when it samples.
  int32_t written(int32_t i, int32_t n_tokens) const {
    const bool samples = seqs_[i].n_computed + n_tokens == seqs_[i].n_target || is_decode(i);
    return seqs_[i].n_computed + n_tokens + (samples ? std::max(0, seqs_[i].n_lookahead) : 0);
  }
  int32_t pages_needed(int32_t i, int32_t n_tokens) const {
    return std::max(0, pages_for_tokens(written(i, n_tokens), limits_.page_size) - seqs_[i].n_pages_held);
  }
  int32_t freeable(int32_t i) const {
    return seqs_[i].n_pages_freeable >= 0 ? seqs_[i].n_pages_freeable : seqs_[i].n_pages_held;
  }
  // A prefill chunk ends at the sequence's snapshot position when it would pass it.
  int32_t stop_at(int32_t i, int32_t chunk) const {
    const int32_t to_stop = seqs_[i].n_stop - seqs_[i].n_computed;
    return to_stop > 0 ? std::min(chunk, to_stop) : chunk;
  }
  // Pages a sequence needs in all to reach its target (and its lookahead).
  int32_t pages_to_target(int32_t i) const {
    return pages_for_tokens(seqs_[i].n_target + std::max(0, seqs_[i].n_lookahead), limits_.page_size);
  }

  void add_item(int32_t i, int32_t n_tokens, int32_t n_new_pages, bool admit) {
    free_pages_ -= n_new_pages;
    budget_ -= n_tokens;
    new_pages_[i] = n_new_pages;
    item_of_[i] = static_cast<int32_t>(plan_.items.size());
    const bool logits = seqs_[i].n_computed + n_tokens == seqs_[i].n_target || (seqs_[i].admitted && is_decode(i));
    plan_.items.push_back({i, n_tokens, n_new_pages, admit, logits});
  }

  // Preempts the newest admitted sequences that are newer than `requester` until `need` pages are free.
  bool make_room(int32_t requester, int32_t need) {
    int32_t reachable = free_pages_;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      if (live_admitted(static_cast<int32_t>(i)) && seqs_[i].arrival > seqs_[requester].arrival) {
        reachable += freeable(static_cast<int32_t>(i)) + new_pages_[i];
      }
    }
    if (reachable < need) return false;  // preempting everyone newer would not be enough: preempt no one
    while (free_pages_ < need) {
      int32_t victim = -1;
      for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
        if (live_admitted(*it) && seqs_[*it].arrival > seqs_[requester].arrival) {
          victim = *it;
          break;
        }
      }
      if (victim < 0) return false;
      preempted_[victim] = true;
      plan_.preempted.push_back(victim);
      free_pages_ += freeable(victim);
      free_slots_ += 1;
      n_admitted_ -= 1;
      if (item_of_[victim] >= 0) {
        StepItem& undone = plan_.items[static_cast<size_t>(item_of_[victim])];
        free_pages_ += undone.n_new_pages;
        budget_ += undone.n_tokens;
        new_pages_[victim] = 0;
        undone.seq = -1;
        item_of_[victim] = -1;
      }
    }
    return true;
  }

  void schedule_decodes() {
    for (int32_t i : order_) {
      if (!live_admitted(i) || !is_decode(i)) continue;
      if (budget_ < 1) break;
      // A verify item whole, or with its trailing drafts dropped to fit what is left of the budget.
      const int32_t n = std::min(remaining(i), budget_);
      const int32_t need = pages_needed(i, n);
      if (need > free_pages_ && !make_room(i, need)) continue;
      add_item(i, n, need, false);
    }
  }

  void schedule_admitted_prefills() {
    for (int32_t i : order_) {
      if (!live_admitted(i) || is_decode(i) || item_of_[i] >= 0) continue;
      int32_t chunk = stop_at(i, std::min({remaining(i), limits_.prefill_chunk, budget_}));
      if (chunk <= 0) break;
      int32_t need = pages_needed(i, chunk);
      if (need > free_pages_) {
        // Prefer a smaller chunk that fits over preempting anyone; preempt only when no progress is possible. A
        // smaller chunk that still reaches the target but not its draft lookahead stops one token short.
        const int32_t fit = (seqs_[i].n_pages_held + free_pages_) * limits_.page_size - seqs_[i].n_computed;
        int32_t smaller = std::min(chunk, fit);
        if (smaller > 0 && pages_needed(i, smaller) > free_pages_) smaller = std::min(smaller, remaining(i) - 1);
        if (smaller > 0 && pages_needed(i, smaller) <= free_pages_) {
          chunk = smaller;
          need = pages_needed(i, chunk);
        } else if (!make_room(i, need)) {
          continue;
        }
      }
      add_item(i, chunk, need, false);
    }
  }

  void admit_waiting() {
    // Pages the admitted sequences will still need to reach their targets are spoken for.
    int32_t reserved = 0;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      if (!live_admitted(static_cast<int32_t>(i))) continue;
      reserved += std::max(0, pages_to_target(static_cast<int32_t>(i)) - seqs_[i].n_pages_held - new_pages_[i]);
    }
    for (int32_t i : order_) {
      if (seqs_[i].admitted) continue;
      if (n_admitted_ >= limits_.max_running || free_slots_ <= 0 || seqs_[i].hold) break;
      const int32_t chunk = stop_at(i, std::min({remaining(i), limits_.prefill_chunk, budget_}));
      if (chunk <= 0) break;
      const int32_t whole = pages_to_target(i) - seqs_[i].n_pages_held;
      if (whole > free_pages_ - reserved) break;  // FCFS: nobody overtakes the oldest waiting sequence
      const int32_t need = pages_needed(i, chunk);
      reserved += whole - need;
      free_slots_ -= 1;
      n_admitted_ += 1;
      add_item(i, chunk, need, true);
    }
  }

  std::span<const SchedSeq> seqs_;
  SchedulerLimits limits_;
  int32_t free_pages_;
  int32_t free_slots_;
  int32_t budget_;
  int32_t n_admitted_ = 0;
  std::vector<int32_t> order_;
  std::vector<int32_t> item_of_;
  std::vector<bool> preempted_;
  std::vector<int32_t> new_pages_;
  StepPlan plan_;
};

}  // namespace

StepPlan plan_step(std::span<const SchedSeq> seqs, const SchedulerLimits& limits, int32_t n_free_pages,
                   int32_t n_free_slots) {
  return Planner(seqs, limits, n_free_pages, n_free_slots).run();
}

}  // namespace voltserve
