// plan_step(): decodes before prefill, chunking within the token budget, FCFS admission by slots and pages,
// preempt-by-recompute of the newest sequences, need_logits, and the prefix cache's snapshot stops, hits and
// shared pages.
#include <algorithm>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "cache/page_table.h"
#include "support/test_rng.h"
#include "scheduler/scheduler.h"

using namespace voltserve;

namespace {

SchedSeq decoding(uint64_t arrival, int32_t n_computed, int32_t page_size = 4) {
  return {arrival, true, n_computed, n_computed + 1, (n_computed + page_size - 1) / page_size};
}
SchedSeq waiting(uint64_t arrival, int32_t n_prompt) { return {arrival, false, 0, n_prompt, 0}; }

SchedulerLimits limits(int32_t budget, int32_t chunk, int32_t max_running = 8) {
  SchedulerLimits l;
  l.max_running = max_running;
  l.max_tokens_per_step = budget;
  l.prefill_chunk = chunk;
  l.page_size = 4;
  return l;
}

const StepItem* find(const StepPlan& plan, int32_t seq) {
  for (const StepItem& it : plan.items) {
    if (it.seq == seq) return &it;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("decodes come first, a long prompt gets the rest of the budget in chunks", "[unit]") {
  // 0 and 2 are decoding, 1 is a long waiting prompt that arrived between them.
  std::vector<SchedSeq> seqs = {decoding(1, 10), waiting(2, 1000), decoding(3, 7)};
  const StepPlan plan = plan_step(seqs, limits(16, 8), 300, 4);  // the prompt needs 250 pages in all
  REQUIRE(plan.items.size() == 3);
  CHECK(plan.items[0].seq == 0);
  CHECK(plan.items[1].seq == 2);
  CHECK(plan.items[0].n_tokens == 1);
  CHECK(plan.items[0].need_logits);
  const StepItem* p = find(plan, 1);
  REQUIRE(p != nullptr);
  CHECK(p->admit);
  CHECK(p->n_tokens == 8);  // the chunk, not the whole prompt
  CHECK_FALSE(p->need_logits);
  CHECK(p->n_new_pages == 2);
  CHECK(plan.n_tokens == 10);
  // Decode 0 crosses a page boundary at position 12? n_computed 10 -> 11 tokens: 3 pages held, none new.
  CHECK(plan.items[0].n_new_pages == 0);
}

TEST_CASE("an older prefilling sequence cannot take the budget from a decode", "[unit]") {
  // The prefill arrived first and could use the whole budget; the decode still gets its token.
  std::vector<SchedSeq> seqs = {{1, true, 16, 1000, 4}, decoding(2, 10)};
  const StepPlan plan = plan_step(seqs, limits(8, 8), 300, 0);
  REQUIRE(plan.items.size() == 2);
  CHECK(plan.items[0].seq == 1);
  CHECK(plan.items[0].n_tokens == 1);
  CHECK(plan.items[1].seq == 0);
  CHECK(plan.items[1].n_tokens == 7);
  CHECK(plan.n_tokens == 8);
}

TEST_CASE("the token budget bounds the step and the last chunk asks for logits", "[unit]") {
  std::vector<SchedSeq> seqs = {{1, true, 0, 20, 0}, {2, true, 16, 21, 4}, waiting(3, 5)};
  const StepPlan plan = plan_step(seqs, limits(12, 16), 100, 4);
  const StepItem* a = find(plan, 0);
  const StepItem* b = find(plan, 1);
  REQUIRE(a != nullptr);
  CHECK(a->n_tokens == 12);  // min(remaining 20, chunk 16, budget 12)
  CHECK(a->n_new_pages == 3);
  CHECK(b == nullptr);  // no budget left
  CHECK(find(plan, 2) == nullptr);
  CHECK(plan.n_tokens == 12);

  const StepPlan more = plan_step(seqs, limits(40, 16), 100, 4);
  REQUIRE(find(more, 1) != nullptr);
  CHECK(find(more, 1)->n_tokens == 5);
  CHECK(find(more, 1)->need_logits);  // 16 + 5 == 21: the prompt is complete
  REQUIRE(find(more, 2) != nullptr);
  CHECK(find(more, 2)->n_tokens == 5);
  CHECK(find(more, 2)->need_logits);
}

TEST_CASE("FCFS admission: no slot, max_running or pages for the oldest means nobody behind it", "[unit]") {
  std::vector<SchedSeq> seqs = {waiting(5, 40), waiting(6, 4), waiting(7, 4)};
  // Pages: the oldest needs 10 for its whole prompt, only 8 free -> neither it nor the small ones behind it.
  StepPlan plan = plan_step(seqs, limits(64, 16), 8, 4);
  CHECK(plan.items.empty());
  // 11 free: the oldest takes 4 for its first chunk and has 6 more reserved; 1 is left for the next one.
  plan = plan_step(seqs, limits(64, 16), 11, 4);
  REQUIRE(plan.items.size() == 2);
  CHECK(plan.items[0].seq == 0);
  CHECK(plan.items[1].seq == 1);
  // Slots.
  plan = plan_step(seqs, limits(64, 16), 100, 1);
  REQUIRE(plan.items.size() == 1);
  CHECK(plan.items[0].seq == 0);
  // max_running counts the admitted ones.
  std::vector<SchedSeq> busy = {decoding(1, 3), waiting(2, 3), waiting(3, 3)};
  plan = plan_step(busy, limits(64, 16, 2), 100, 8);
  REQUIRE(plan.items.size() == 2);
  CHECK(find(plan, 1) != nullptr);
  CHECK(find(plan, 2) == nullptr);
}

TEST_CASE("a prefill chunk shrinks to the free pages instead of preempting", "[unit]") {
  std::vector<SchedSeq> seqs = {{1, true, 0, 64, 0}, decoding(2, 8)};
  const StepPlan plan = plan_step(seqs, limits(64, 32), 3, 4);  // decode of 1 takes 1 page, 2 left = 8 tokens
  CHECK(plan.preempted.empty());
  REQUIRE(find(plan, 0) != nullptr);
  CHECK(find(plan, 0)->n_tokens == 8);
  CHECK(find(plan, 0)->n_new_pages == 2);
  REQUIRE(find(plan, 1) != nullptr);
}

TEST_CASE("out of pages: the newest sequences are preempted for older ones, never the reverse", "[unit]") {
  // Both decode across a page boundary (n_computed 8 -> 9 needs a third page); no page is free.
  std::vector<SchedSeq> seqs = {decoding(1, 8), decoding(2, 8), waiting(3, 2)};
  StepPlan plan = plan_step(seqs, limits(64, 16), 0, 0);
  REQUIRE(plan.preempted == std::vector<int32_t>{1});
  REQUIRE(plan.items.size() == 1);
  CHECK(plan.items[0].seq == 0);
  CHECK(plan.items[0].n_new_pages == 1);
  CHECK(plan.n_admitted == 0);  // no admission in a step that preempted

  // The newest alone cannot preempt the older one: it waits.
  std::vector<SchedSeq> two = {decoding(1, 7), decoding(2, 8)};
  plan = plan_step(two, limits(64, 16), 0, 0);
  CHECK(plan.preempted.empty());
  REQUIRE(plan.items.size() == 1);
  CHECK(plan.items[0].seq == 0);

  // A prefill that cannot make any progress preempts a newer decode and takes back its budget and pages.
  std::vector<SchedSeq> stuck = {{1, true, 8, 20, 2}, decoding(2, 12)};
  plan = plan_step(stuck, limits(64, 16), 0, 0);
  CHECK(plan.preempted == std::vector<int32_t>{1});
  REQUIRE(plan.items.size() == 1);
  CHECK(plan.items[0].seq == 0);
  CHECK(plan.items[0].n_tokens == 12);
  CHECK(plan.items[0].n_new_pages == 3);
  CHECK(plan.n_tokens == 12);

  // Preempting would not free enough pages: nobody is preempted for nothing.
  std::vector<SchedSeq> hopeless = {{1, true, 8, 20, 2}, decoding(2, 8)};
  plan = plan_step(hopeless, limits(64, 16), 0, 0);
  CHECK(plan.preempted.empty());
  CHECK(plan.items.empty());
}

TEST_CASE("random states: every plan respects budget, chunk, pages, slots, FCFS and preemption rules", "[unit]") {
  voltserve::testing::TestRng rng(2024);
  auto below = [&](int n) { return static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(n)); };
  for (int trial = 0; trial < 3000; ++trial) {
    const SchedulerLimits lim = limits(1 + below(40), 1 + below(20), 1 + below(6));
    const int n_seqs = below(9);
    std::vector<SchedSeq> seqs;
    int32_t admitted = 0;
    for (int i = 0; i < n_seqs; ++i) {
      SchedSeq s;
      s.arrival = static_cast<uint64_t>(10 + below(1000)) * 16 + static_cast<uint64_t>(i);  // distinct
      s.admitted = admitted < lim.max_running && below(2) == 0;
      s.n_target = 1 + below(60);
      s.n_computed = s.admitted ? below(s.n_target) : 0;
      s.n_pages_held = s.admitted ? pages_for_tokens(s.n_computed, 4) : 0;
      admitted += s.admitted ? 1 : 0;
      seqs.push_back(s);
    }
    const int32_t free_pages = below(30), free_slots = below(5);
    const StepPlan plan = plan_step(seqs, lim, free_pages, free_slots);

    int32_t tokens = 0, new_pages = 0, admits = 0, freed_pages = 0;
    std::vector<int> seen(seqs.size(), 0);
    for (int32_t v : plan.preempted) {
      REQUIRE(seqs[static_cast<size_t>(v)].admitted);
      freed_pages += seqs[static_cast<size_t>(v)].n_pages_held;
      seen[static_cast<size_t>(v)] += 10;
    }
    for (const StepItem& it : plan.items) {
      const SchedSeq& s = seqs[static_cast<size_t>(it.seq)];
      REQUIRE(++seen[static_cast<size_t>(it.seq)] == 1);  // once, and never both preempted and scheduled
      REQUIRE(it.n_tokens >= 1);
      REQUIRE(it.n_tokens <= s.n_target - s.n_computed);
      if (it.n_tokens > 1) REQUIRE(it.n_tokens <= lim.prefill_chunk);
      REQUIRE(it.admit == !s.admitted);
      REQUIRE(it.n_new_pages == pages_for_tokens(s.n_computed + it.n_tokens, 4) - s.n_pages_held);
      REQUIRE(it.need_logits == (s.n_computed + it.n_tokens == s.n_target));
      tokens += it.n_tokens;
      new_pages += it.n_new_pages;
      admits += it.admit ? 1 : 0;
    }
    REQUIRE(tokens == plan.n_tokens);
    REQUIRE(tokens <= lim.max_tokens_per_step);
    REQUIRE(new_pages <= free_pages + freed_pages);
    REQUIRE(admits <= free_slots);
    REQUIRE(admitted - static_cast<int32_t>(plan.preempted.size()) + admits <= lim.max_running);
    if (!plan.preempted.empty()) REQUIRE(admits == 0);
    // Every preempted sequence is newer than some scheduled sequence (it was preempted for an older one).
    for (int32_t v : plan.preempted) {
      bool older_scheduled = false;
      for (const StepItem& it : plan.items) {
        older_scheduled |= seqs[static_cast<size_t>(it.seq)].arrival < seqs[static_cast<size_t>(v)].arrival;
      }
      REQUIRE(older_scheduled);
    }
    // FCFS: an admitted waiting sequence means every older waiting one was admitted too.
    for (const StepItem& it : plan.items) {
      if (!it.admit) continue;
      for (size_t j = 0; j < seqs.size(); ++j) {
        if (!seqs[j].admitted && seqs[j].arrival < seqs[static_cast<size_t>(it.seq)].arrival) REQUIRE(seen[j] == 1);
      }
    }
    // Decodes first: if any admitted decode is left out, the budget or the pages ran out, never a prefill's fault.
    const bool any_prefill = std::any_of(plan.items.begin(), plan.items.end(), [](const StepItem& it) { return it.n_tokens > 1; });
    for (size_t j = 0; j < seqs.size(); ++j) {
      const bool is_decode = seqs[j].admitted && seqs[j].n_target - seqs[j].n_computed == 1;
      if (is_decode && seen[j] == 0 && any_prefill) {
        // Left out although a prefill ran: only possible when it needed a page nobody newer could give.
        REQUIRE(pages_for_tokens(seqs[j].n_computed + 1, 4) > seqs[j].n_pages_held);
      }
    }
  }
}

namespace {

// A decoding sequence with a pending verify item: its last generated token and k drafts, the draft chain writing
// `lookahead` positions past them.
SchedSeq verifying(uint64_t arrival, int32_t n_computed, int32_t k, int32_t lookahead) {
  SchedSeq s = decoding(arrival, n_computed);
  s.n_target = n_computed + 1 + k;
  s.n_draft = k;
  s.n_lookahead = lookahead;
  return s;
}

}  // namespace

TEST_CASE("a verify item is one decode of k + 1 tokens, never cut by the prefill chunk", "[unit]") {
  std::vector<SchedSeq> seqs = {verifying(1, 10, 4, 4), waiting(2, 100)};
  const StepPlan plan = plan_step(seqs, limits(16, 2), 300, 4);
  const StepItem* v = find(plan, 0);
  REQUIRE(v != nullptr);
  CHECK(v->n_tokens == 5);  // whole, though the prefill chunk is 2
  CHECK(v->need_logits);
  // Pages cover the item and the draft chain's lookahead: positions up to 10 + 5 + 4 = 19 -> 5 pages, 3 held.
  CHECK(v->n_new_pages == 2);
  const StepItem* p = find(plan, 1);
  REQUIRE(p != nullptr);
  CHECK(p->n_tokens == 2);  // the prefill gets its chunk from what the item left
  CHECK(plan.n_tokens == 7);
}

TEST_CASE("a verify item the budget cannot hold drops its trailing drafts, it is never split", "[unit]") {
  std::vector<SchedSeq> seqs = {decoding(1, 20), verifying(2, 10, 6, 6), waiting(3, 50)};
  const StepPlan plan = plan_step(seqs, limits(4, 8), 300, 4);
  const StepItem* v = find(plan, 1);
  REQUIRE(v != nullptr);
  CHECK(v->n_tokens == 3);  // the budget left after the plain decode: its token and two drafts
  CHECK(v->need_logits);    // verified now; the dropped drafts are never scheduled as a later chunk
  CHECK(find(plan, 2) == nullptr);
  CHECK(plan.n_tokens == 4);
}

TEST_CASE("admission reserves the lookahead of a speculating sequence", "[unit]") {
  // 7 tokens reach 2 pages; with a lookahead of 4 the whole target needs 3, and only 2 are free.
  std::vector<SchedSeq> seqs = {waiting(1, 7)};
  seqs[0].n_lookahead = 4;
  CHECK(plan_step(seqs, limits(16, 16), 2, 4).items.empty());
  const StepPlan fits = plan_step(seqs, limits(16, 16), 3, 4);
  REQUIRE(fits.items.size() == 1);
  CHECK(fits.items[0].n_new_pages == 3);
}

TEST_CASE("prefix caching: chunks stop at the snapshot position, a waiting hit prefills only the rest", "[unit]") {
  // Admitted and prefilling at 8 of 40 with a snapshot at 13: this step computes 5 tokens, not the chunk of 16.
  SchedSeq pre{1, true, 8, 40, 2};
  pre.n_stop = 13;
  // Waiting with a cache hit of 22 tokens (5 full pages of 4 adopted on admission), 30 in all, a snapshot at 29.
  SchedSeq hit{2, false, 22, 30, 5};
  hit.n_stop = 29;
  std::vector<SchedSeq> seqs = {pre, hit};
  const StepPlan plan = plan_step(seqs, limits(64, 16), 100, 4);
  const StepItem* a = find(plan, 0);
  const StepItem* b = find(plan, 1);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->n_tokens == 5);
  CHECK_FALSE(a->need_logits);
  CHECK(b->admit);
  CHECK(b->n_tokens == 7);  // 22 -> 29, not the 8 that reach the target
  CHECK(b->n_new_pages == pages_for_tokens(29, 4) - 5);  // the partial page of the hit and the new ones
  // Without a stop the hit reaches its target in one chunk and samples.
  seqs[1].n_stop = 0;
  const StepPlan whole = plan_step(seqs, limits(64, 16), 100, 4);
  REQUIRE(find(whole, 1) != nullptr);
  CHECK(find(whole, 1)->n_tokens == 8);
  CHECK(find(whole, 1)->need_logits);
}

TEST_CASE("prefix caching: preemption counts only the pages it would free", "[unit]") {
  // 0 (oldest) needs a new page; 1 holds 6 pages, but 5 of them are shared with the cache or another sequence:
  // preempting it frees 1, so 0 can be served only when that is enough.
  SchedSeq old_seq = decoding(1, 8);  // 8 tokens in 2 pages: position 8 needs a third
  SchedSeq shared{2, true, 23, 24, 6};
  shared.n_pages_freeable = 1;
  std::vector<SchedSeq> seqs = {old_seq, shared};
  StepPlan plan = plan_step(seqs, limits(64, 16), 0, 4);
  CHECK(plan.preempted == std::vector<int32_t>{1});
  REQUIRE(find(plan, 0) != nullptr);
  // With nothing it could free, nobody is preempted and the old sequence waits.
  seqs[1].n_pages_freeable = 0;
  plan = plan_step(seqs, limits(64, 16), 0, 4);
  CHECK(plan.preempted.empty());
  CHECK(find(plan, 0) == nullptr);
}

TEST_CASE("prefix caching: a held waiting sequence is not admitted, and nobody behind it is", "[unit]") {
  // 1 prefills; 2 (its sibling) is held until 1's prompt snapshot exists; 3 arrived later and waits behind it.
  SchedSeq first{1, true, 0, 40, 0};
  SchedSeq sibling = waiting(2, 40);
  sibling.hold = true;
  std::vector<SchedSeq> seqs = {first, sibling, waiting(3, 10)};
  StepPlan plan = plan_step(seqs, limits(64, 16), 100, 4);
  REQUIRE(find(plan, 0) != nullptr);
  CHECK(find(plan, 1) == nullptr);
  CHECK(find(plan, 2) == nullptr);
  // Released: both are admitted in arrival order.
  seqs[1].hold = false;
  plan = plan_step(seqs, limits(64, 16), 100, 4);
  REQUIRE(find(plan, 1) != nullptr);
  CHECK(find(plan, 1)->admit);
  REQUIRE(find(plan, 2) != nullptr);
}
