// plan_step(): decodes before prefill, chunking within the token budget, FCFS admission by slots and pages,
// preempt-by-recompute of the newest sequences, need_logits.
#include <vector>

#include <catch2/catch_test_macros.hpp>

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
