// The scheduler: a pure decision function (vLLM v1 style). Given every live sequence's n_computed vs n_target and
// the free pages/slots, it returns which sequences compute how many tokens this step. No devices, no state.
// Tested in tests/scheduler/scheduler_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace voltserve {

// The scheduler's view of one live (unfinished) sequence.
struct SchedSeq {
  uint64_t arrival = 0;     // FCFS rank: smaller is older (the engine uses the request id)
  bool admitted = false;    // holds a state slot (and possibly pages); false = waiting
  int32_t n_computed = 0;   // tokens already in the cache (0 when waiting)
  int32_t n_target = 0;     // tokens known: prompt + generated (the last generated token is not computed yet)
                            // + the drafts of a pending verify item
  int32_t n_pages_held = 0;
  // Speculative decoding. n_draft: the last n_draft tokens of n_target are drafts: with the last generated token
  // they form one verify item, scheduled whole (never split by the prefill chunk or the budget; when the budget
  // left cannot hold it, its trailing drafts are dropped, never computed later). n_lookahead: positions past the
  // item that the step writes (the MTP draft chain's KV) when it reaches n_target: counted in its pages.
  int32_t n_draft = 0;
  int32_t n_lookahead = 0;
  // Prefix caching. A waiting sequence with a cache hit arrives with n_computed = the hit's length and
  // n_pages_held = the hit's full pages (it adopts them on admission). n_pages_freeable: pages a preemption would
  // give back to the pool (pages shared with the cache or other sequences are not; -1: all n_pages_held).
  // n_stop: a prefill chunk stops at this position (a snapshot is taken there; 0: none).
  int32_t n_pages_freeable = -1;
  int32_t n_stop = 0;
  // A waiting sequence that is not admitted this step: an admitted one with the same prompt is still prefilling and
  // will leave a snapshot this one resumes from (n > 1 siblings, identical requests). FCFS: nobody behind it is
  // admitted either.
  bool hold = false;
};

struct SchedulerLimits {
  int32_t max_running = 16;          // admitted sequences at most
  int32_t max_tokens_per_step = 256;  // tokens computed per step, all sequences together
  int32_t prefill_chunk = 128;       // tokens one sequence computes per step at most
  int32_t page_size = 16;
};

// One sequence's share of the step. Indices refer to the span passed to plan_step().
struct StepItem {
  int32_t seq = -1;
  int32_t n_tokens = 0;      // compute positions [n_computed, n_computed + n_tokens)
  int32_t n_new_pages = 0;   // pages to add to its table first (covering the lookahead when there is one)
  bool admit = false;        // a waiting sequence: take a state slot and reset it first
  bool need_logits = false;  // the step reaches n_target (or is a verify item): sample after this step
};

struct StepPlan {
  std::vector<StepItem> items;     // decodes first (oldest first), then prefill chunks (oldest first)
  std::vector<int32_t> preempted;  // admitted sequences that give back pages and slot and recompute later
  int32_t n_tokens = 0;
  int32_t n_new_pages = 0;
  int32_t n_admitted = 0;
};

// Policy, in order:
//  1. Decodes: every admitted sequence with exactly one token left gets it (oldest first), so a long prompt
//     never stalls running streams; a pending verify item (1 + n_draft tokens) is a decode of that many tokens,
//     whole, or with fewer drafts when the budget left is smaller (at least its one token).
//  2. Prefill: admitted sequences still prefilling (oldest first), then waiting ones in strict FCFS order,
//     each min(remaining, prefill_chunk, budget left) tokens. A waiting sequence is admitted only if a slot is
//     free, fewer than max_running are admitted, and the free pages cover its whole target (so a fresh
//     admission does not immediately force a preemption); if the oldest waiting one cannot be admitted, none
//     behind it is (no overtaking). No admission happens in a step that preempted.
//  3. Pages are allocated lazily, for the tokens computed this step. When an admitted sequence needs pages that
//     are not free, the newest admitted sequences (newer than it) are preempted — recompute: they drop pages
//     and slot, go back to waiting with n_computed = 0 and keep their generated tokens — until it fits. The
//     oldest sequence can therefore always make progress, provided one sequence's maximum length fits in the
//     pool (the engine checks that at submit).
StepPlan plan_step(std::span<const SchedSeq> seqs, const SchedulerLimits& limits, int32_t n_free_pages,
                   int32_t n_free_slots);

}  // namespace voltserve
