// The Engine against the fake runner: greedy parity with a plain loop, continuous batching, chunked prefill
// interleaved with decodes, FCFS, admission by pages and slots (with preemption), validation, queue limits,
// cancellation within one step, drain, runner faults, NaN logits, stop tokens, logprobs, seeds.
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include "scheduler/event_collector.h"
#include "scheduler/engine_harness.h"

using namespace voltserve;
using namespace voltserve::testing;
using namespace std::chrono_literals;

namespace {

EngineConfig small_config(int32_t max_running = 4, int32_t budget = 32, int32_t chunk = 8, int32_t max_waiting = 64) {
  EngineConfig c;
  c.max_running = max_running;
  c.max_tokens_per_step = budget;
  c.prefill_chunk = chunk;
  c.max_waiting = max_waiting;
  return c;
}

// The slot a request ran in: the slot of the first recorded step whose first token is `first_prompt_token` at
// n_past 0 with this prompt length (prompts in these tests differ in their first tokens).
int32_t slot_of(const std::vector<std::vector<RecordedStep>>& calls, const std::vector<int32_t>& prompt) {
  for (const auto& call : calls) {
    for (const RecordedStep& s : call) {
      if (s.n_past == 0 && !s.tokens.empty() &&
          std::equal(s.tokens.begin(), s.tokens.end(), prompt.begin(), prompt.begin() + static_cast<long>(std::min(s.tokens.size(), prompt.size())))) {
        return s.slot;
      }
    }
  }
  return -1;
}

const RecordedStep* step_of(const std::vector<RecordedStep>& call, int32_t slot) {
  for (const RecordedStep& s : call) {
    if (s.slot == slot) return &s;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("engine greedy output equals a plain loop over the runner", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config(4, 32, 8));
  EventCollector events;
  const std::vector<int32_t> lengths = {1, 3, 17, 64, 130, 9};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i) {
    prompts.push_back(make_prompt(lengths[i], 100 + i));
    Result<RequestId> id = h.engine->submit(greedy_request(prompts.back(), 20), events.sink(static_cast<int>(i)));
    REQUIRE(id.is_ok());
  }
  h.engine->wait_idle();
  uint64_t n_prompt = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const Stream s = events.get(static_cast<int>(i));
    CHECK(s.tokens == plain_greedy(opt, prompts[i], 20));
    CHECK(s.n_final == 1);
    CHECK(s.n_after_final == 0);
    CHECK(s.final_event.finish_reason == FinishReason::kLength);
    CHECK(s.final_event.n_tokens_prompt == lengths[i]);
    CHECK(s.final_event.n_tokens_generated == 20);
    CHECK(s.final_event.ttft_us > 0);
    n_prompt += static_cast<uint64_t>(lengths[i]);
  }
  CHECK(h.fake->violations().empty());
  check_pools_full(*h.engine);
  const EngineStats st = h.engine->stats();
  CHECK(st.n_tokens_generated_total == 20 * lengths.size());
  CHECK(st.n_tokens_prompt_total == n_prompt);
  CHECK(st.n_steps == static_cast<uint64_t>(h.fake->n_forward()));
  CHECK(st.healthy);
  // Never more tokens in a step than the budget, never a chunk beyond prefill_chunk, never > max_running.
  for (const auto& call : h.fake->calls()) {
    size_t total = 0;
    for (const RecordedStep& s : call) {
      CHECK(s.tokens.size() <= 8);
      total += s.tokens.size();
    }
    CHECK(total <= 32);
    CHECK(call.size() <= 4);
  }
}

TEST_CASE("continuous batching: requests join and leave between steps", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  h.fake->set_forward_delay(1ms);
  EventCollector events;
  const auto pa = make_prompt(5, 1), pb = make_prompt(6, 2);
  REQUIRE(h.engine->submit(greedy_request(pa, 40), events.sink(0)).is_ok());
  REQUIRE(events.wait_tokens(0, 5));
  REQUIRE(h.engine->submit(greedy_request(pb, 5), events.sink(1)).is_ok());
  h.engine->wait_idle();
  CHECK(events.get(0).tokens == plain_greedy(opt, pa, 40));
  CHECK(events.get(1).tokens == plain_greedy(opt, pb, 5));
  const auto calls = h.fake->calls();
  const int32_t sa = slot_of(calls, pa), sb = slot_of(calls, pb);
  REQUIRE(sa >= 0);
  REQUIRE(sb >= 0);
  REQUIRE(sa != sb);
  size_t first_b = calls.size(), last_b = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (step_of(calls[i], sb)) {
      first_b = std::min(first_b, i);
      last_b = i;
    }
  }
  REQUIRE(first_b < calls.size());
  CHECK(first_b >= 5);  // A ran alone first
  for (size_t i = first_b; i <= last_b; ++i) CHECK(step_of(calls[i], sa) != nullptr);  // together
  CHECK(last_b + 1 < calls.size());  // B left, A went on
  for (size_t i = last_b + 1; i < calls.size(); ++i) CHECK(step_of(calls[i], sa) != nullptr);
  check_pools_full(*h.engine);
}

TEST_CASE("chunked prefill: a long prompt never stalls a running stream", "[unit]") {
  FakeRunnerOptions opt;
  // The budget equals the chunk: were prefill scheduled before decodes, B's chunks would take whole steps.
  Harness h = make_engine(opt, small_config(4, 16, 16));
  h.fake->set_forward_delay(500us);
  EventCollector events;
  const auto pa = make_prompt(4, 3), pb = make_prompt(300, 4);
  REQUIRE(h.engine->submit(greedy_request(pa, 150), events.sink(0)).is_ok());
  REQUIRE(events.wait_tokens(0, 3));
  REQUIRE(h.engine->submit(greedy_request(pb, 3), events.sink(1)).is_ok());
  h.engine->wait_idle();
  const auto calls = h.fake->calls();
  const int32_t sa = slot_of(calls, pa), sb = slot_of(calls, pb);
  REQUIRE(sa >= 0);
  REQUIRE(sb >= 0);
  int n_chunks = 0;
  for (const auto& call : calls) {
    const RecordedStep* b = step_of(call, sb);
    if (b == nullptr || b->tokens.size() < 2) continue;
    ++n_chunks;
    CHECK(b->tokens.size() <= 15);
    // A decodes in the very same step as every prefill chunk of B.
    const RecordedStep* a = step_of(call, sa);
    REQUIRE(a != nullptr);
    CHECK(a->tokens.size() == 1);
    CHECK(a->need_logits);
  }
  CHECK(n_chunks >= 300 / 16);
  CHECK(events.get(0).tokens == plain_greedy(opt, pa, 150));
  CHECK(events.get(1).tokens == plain_greedy(opt, pb, 3));
  check_pools_full(*h.engine);
}

TEST_CASE("FCFS: with one running slot, requests run in submission order", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config(1, 16, 8));
  h.fake->set_forward_delay(200us);
  EventCollector events;
  for (int i = 0; i < 4; ++i) REQUIRE(h.engine->submit(greedy_request(make_prompt(7, 10 + i), 6), events.sink(i)).is_ok());
  h.engine->wait_idle();
  for (int i = 1; i < 4; ++i) CHECK(events.get(i - 1).final_event_seq < events.get(i).first_event_seq);
  for (const auto& call : h.fake->calls()) CHECK(call.size() == 1);
  check_pools_full(*h.engine);
}

TEST_CASE("admission by state slots: never more live sequences than slots", "[unit]") {
  FakeRunnerOptions opt;
  opt.n_slots = 2;
  Harness h = make_engine(opt, small_config(8, 32, 8));
  EventCollector events;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(make_prompt(5 + i, 20 + i));
    REQUIRE(h.engine->submit(greedy_request(prompts.back(), 8), events.sink(i)).is_ok());
  }
  h.engine->wait_idle();
  for (int i = 0; i < 6; ++i) CHECK(events.get(i).tokens == plain_greedy(opt, prompts[static_cast<size_t>(i)], 8));
  for (const auto& call : h.fake->calls()) CHECK(call.size() <= 2);
  CHECK(h.fake->violations().empty());
  check_pools_full(*h.engine);
}

TEST_CASE("admission by KV pages, with preemption by recompute, keeps greedy output exact", "[unit]") {
  FakeRunnerOptions opt;
  opt.n_pages = 12;  // 48 positions: two sequences of 20 + 20 cannot both finish without a preemption
  opt.context_length = 48;
  Harness h = make_engine(opt, small_config(4, 32, 8));
  REQUIRE(h.engine->context_length() == 48);
  EventCollector events;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(make_prompt(20, 40 + i));
    REQUIRE(h.engine->submit(greedy_request(prompts.back(), 20), events.sink(i)).is_ok());
  }
  h.engine->wait_idle();
  for (int i = 0; i < 4; ++i) {
    const Stream s = events.get(i);
    CHECK(s.tokens == plain_greedy(opt, prompts[static_cast<size_t>(i)], 20));
    CHECK(s.final_event.finish_reason == FinishReason::kLength);
  }
  CHECK(h.engine->stats().n_preemptions > 0);
  CHECK(h.fake->violations().empty());
  check_pools_full(*h.engine);
}

TEST_CASE("submit validates: context overflow names both numbers, bad ids and parameters name the field", "[unit]") {
  FakeRunnerOptions opt;  // context 512
  Harness h = make_engine(opt, small_config());
  EventCollector events;
  Result<RequestId> r = h.engine->submit(greedy_request(make_prompt(30, 1), 500), events.sink(0));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kOutOfRange);
  CHECK(r.status().message().find("30") != std::string::npos);
  CHECK(r.status().message().find("500") != std::string::npos);
  CHECK(r.status().message().find("512") != std::string::npos);
  CHECK(h.engine->submit(greedy_request(make_prompt(30, 1), 482), events.sink(1)).is_ok());  // exactly fits

  auto expect_invalid = [&](Request req, const std::string& needle) {
    Result<RequestId> res = h.engine->submit(std::move(req), events.sink(9));
    REQUIRE_FALSE(res.is_ok());
    CHECK(res.status().code() == StatusCode::kInvalidArgument);
    CHECK(res.status().message().find(needle) != std::string::npos);
  };
  expect_invalid(greedy_request({}, 4), "empty");
  expect_invalid(greedy_request({1, 64, 2}, 4), "prompt_ids[1] = 64");
  expect_invalid(greedy_request({1, -1}, 4), "prompt_ids[1] = -1");
  expect_invalid(greedy_request({1}, 0), "max_new_tokens");
  Request bias = greedy_request({1}, 4);
  bias.sampling.logit_bias = {{60, 1.0f}};  // a padding row
  expect_invalid(bias, "logit_bias");
  Request temp = greedy_request({1}, 4);
  temp.sampling.temperature = std::nanf("");
  expect_invalid(temp, "temperature");
  Request top_p = greedy_request({1}, 4);
  top_p.sampling.top_p = 0.0f;
  expect_invalid(top_p, "top_p");
  Request lp = greedy_request({1}, 4);
  lp.n_top_logprobs = 21;
  expect_invalid(lp, "n_top_logprobs");
  Request rep = greedy_request({1}, 4);
  rep.sampling.repetition_penalty = 0.0f;
  expect_invalid(rep, "repetition_penalty");
  h.engine->wait_idle();
  CHECK(events.get(9).events.empty());  // rejected requests get no events
  CHECK(events.get(1).n_final == 1);
}

TEST_CASE("a full waiting queue answers kResourceExhausted", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config(1, 16, 8, 2));
  h.fake->set_forward_delay(2ms);
  EventCollector events;
  REQUIRE(h.engine->submit(greedy_request(make_prompt(4, 1), 400), events.sink(0)).is_ok());
  REQUIRE(events.wait_tokens(0, 1));  // running, so not waiting any more
  REQUIRE(h.engine->submit(greedy_request(make_prompt(4, 2), 4), events.sink(1)).is_ok());
  REQUIRE(h.engine->submit(greedy_request(make_prompt(4, 3), 4), events.sink(2)).is_ok());
  CHECK(h.engine->stats().n_waiting == 2);
  Result<RequestId> r = h.engine->submit(greedy_request(make_prompt(4, 4), 4), events.sink(3));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
  CHECK(r.status().message().find("queue is full") != std::string::npos);
  h.fake->set_forward_delay(0us);
  h.engine->wait_idle();
  CHECK(events.get(1).n_final == 1);
  CHECK(events.get(2).n_final == 1);
  check_pools_full(*h.engine);
}

TEST_CASE("cancel: final kCancelled within one step, pages and slot back in the pool", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config(2, 16, 8));
  h.fake->set_forward_delay(1ms);
  EventCollector events;
  Engine* engine = h.engine.get();
  EngineStats at_final;
  EventSink inner = events.sink(0);
  Result<RequestId> id = engine->submit(greedy_request(make_prompt(40, 1), 400), [&, inner](Event ev) {
    if (ev.finished) at_final = engine->stats();
    inner(std::move(ev));
  });
  REQUIRE(id.is_ok());
  REQUIRE(events.wait_tokens(0, 3));
  engine->cancel(*id);
  const uint64_t steps_after_cancel = engine->stats().n_steps;
  REQUIRE(events.wait_final(0));
  const Stream s = events.get(0);
  CHECK(s.n_final == 1);
  CHECK(s.n_after_final == 0);
  CHECK(s.final_event.finish_reason == FinishReason::kCancelled);
  CHECK(s.final_event.n_tokens_generated == static_cast<int32_t>(s.tokens.size()));
  CHECK(at_final.n_steps <= steps_after_cancel + 1);
  // The final event says how many steps the engine had run: at most the one in flight when cancel() came.
  CHECK(s.final_event.n_steps == at_final.n_steps);
  CHECK(s.final_event.n_steps <= steps_after_cancel + 1);
  CHECK(at_final.kv_pages_free == at_final.kv_pages_total);
  CHECK(at_final.state_slots_free == at_final.state_slots_total);
  engine->cancel(*id);   // twice: ignored
  engine->cancel(12345);  // unknown: ignored
  engine->wait_idle();
  CHECK(events.get(0).n_final == 1);
  check_pools_full(*engine);
}

TEST_CASE("cancel a waiting request: no tokens, one final event, the running one unaffected", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config(1, 16, 8));
  h.fake->set_forward_delay(1ms);
  EventCollector events;
  const auto pa = make_prompt(6, 1);
  REQUIRE(h.engine->submit(greedy_request(pa, 30), events.sink(0)).is_ok());
  REQUIRE(events.wait_tokens(0, 1));
  Result<RequestId> b = h.engine->submit(greedy_request(make_prompt(6, 2), 30), events.sink(1));
  REQUIRE(b.is_ok());
  h.engine->cancel(*b);
  REQUIRE(events.wait_final(1));
  h.engine->wait_idle();
  CHECK(events.get(1).tokens.empty());
  CHECK(events.get(1).final_event.finish_reason == FinishReason::kCancelled);
  CHECK(events.get(1).n_final == 1);
  CHECK(events.get(0).tokens == plain_greedy(opt, pa, 30));
  check_pools_full(*h.engine);
}

TEST_CASE("drain: new requests get kUnavailable, in-flight ones finish", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  h.fake->set_forward_delay(500us);
  EventCollector events;
  REQUIRE(h.engine->submit(greedy_request(make_prompt(5, 1), 30), events.sink(0)).is_ok());
  REQUIRE(h.engine->submit(greedy_request(make_prompt(5, 2), 30), events.sink(1)).is_ok());
  h.engine->drain();
  CHECK(h.engine->stats().draining);
  Result<RequestId> r = h.engine->submit(greedy_request(make_prompt(5, 3), 3), events.sink(2));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK(r.status().message().find("draining") != std::string::npos);
  h.engine->wait_idle();
  for (int i = 0; i < 2; ++i) {
    CHECK(events.get(i).tokens.size() == 30);
    CHECK(events.get(i).final_event.finish_reason == FinishReason::kLength);
  }
  check_pools_full(*h.engine);
}

TEST_CASE("a runner fault marks the engine unhealthy and fails every in-flight request", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config(2, 16, 8));
  h.fake->fail_forward_at(4);
  h.fake->set_forward_delay(300us);
  EventCollector events;
  for (int i = 0; i < 4; ++i) REQUIRE(h.engine->submit(greedy_request(make_prompt(9, i), 50), events.sink(i)).is_ok());
  h.engine->wait_idle();
  for (int i = 0; i < 4; ++i) {
    const Stream s = events.get(i);
    CHECK(s.n_final == 1);
    CHECK(s.n_after_final == 0);
    CHECK(s.final_event.finish_reason == FinishReason::kError);
    CHECK(s.final_event.error.message().find("injected runner fault") != std::string::npos);
  }
  const EngineStats st = h.engine->stats();
  CHECK_FALSE(st.healthy);
  Result<RequestId> r = h.engine->submit(greedy_request(make_prompt(5, 3), 3), events.sink(7));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK(h.fake->n_forward() == 5);  // nothing ran after the fault
  check_pools_full(*h.engine);
}

TEST_CASE("a runner that throws is a fault like an error status", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  h.fake->throw_at_forward(1);
  EventCollector events;
  REQUIRE(h.engine->submit(greedy_request(make_prompt(3, 1), 10), events.sink(0)).is_ok());
  h.engine->wait_idle();
  const Stream s = events.get(0);
  CHECK(s.n_final == 1);
  CHECK(s.final_event.finish_reason == FinishReason::kError);
  CHECK(s.final_event.error.message().find("threw: injected exception") != std::string::npos);
  CHECK_FALSE(h.engine->stats().healthy);
  check_pools_full(*h.engine);
}

TEST_CASE("NaN logits fail the requests sampled from them and the engine stays healthy", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  h.fake->nan_at_forward(2);
  EventCollector events;
  REQUIRE(h.engine->submit(greedy_request(make_prompt(3, 1), 10), events.sink(0)).is_ok());
  h.engine->wait_idle();
  const Stream s = events.get(0);
  CHECK(s.final_event.finish_reason == FinishReason::kError);
  CHECK(s.final_event.error.message().find("NaN") != std::string::npos);
  CHECK(s.tokens.size() == 2);
  CHECK(h.engine->stats().healthy);
  const auto p = make_prompt(4, 2);
  REQUIRE(h.engine->submit(greedy_request(p, 5), events.sink(1)).is_ok());
  h.engine->wait_idle();
  CHECK(events.get(1).tokens == plain_greedy(opt, p, 5));
  check_pools_full(*h.engine);
}

TEST_CASE("stop tokens end generation (finish stop) unless ignore_eos", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  const auto p = make_prompt(8, 5);
  const auto ref = plain_greedy(opt, p, 30);
  // The first token (after the first one) that did not occur before it: generation stops right after it.
  size_t stop_at = 1;
  while (std::find(ref.begin(), ref.begin() + static_cast<long>(stop_at), ref[stop_at]) != ref.begin() + static_cast<long>(stop_at)) ++stop_at;
  REQUIRE(stop_at < ref.size());
  EventCollector events;
  Request r = greedy_request(p, 30);
  r.stop_token_ids = {ref[stop_at], 59};
  Request ignoring = r;
  ignoring.ignore_eos = true;
  REQUIRE(h.engine->submit(r, events.sink(0)).is_ok());
  REQUIRE(h.engine->submit(ignoring, events.sink(1)).is_ok());
  h.engine->wait_idle();
  const Stream s = events.get(0);
  CHECK(s.tokens == std::vector<int32_t>(ref.begin(), ref.begin() + static_cast<long>(stop_at) + 1));
  CHECK(s.final_event.finish_reason == FinishReason::kStop);
  CHECK(s.final_event.token_ids == std::vector<int32_t>{ref[stop_at]});  // the stop token rides on the final event
  CHECK(events.get(1).tokens == ref);
  CHECK(events.get(1).final_event.finish_reason == FinishReason::kLength);
}

TEST_CASE("logprobs: the chosen token and the top alternatives of the raw distribution", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  EventCollector events;
  const auto p = make_prompt(6, 9);
  Request r = greedy_request(p, 5);
  r.n_top_logprobs = 3;
  REQUIRE(h.engine->submit(r, events.sink(0)).is_ok());
  h.engine->wait_idle();
  const Stream s = events.get(0);
  std::vector<int32_t> seq = p;
  std::vector<float> row(static_cast<size_t>(opt.vocab_size));
  for (const Event& ev : s.events) {
    REQUIRE(ev.token_ids.size() == 1);
    REQUIRE(ev.logprobs.size() == 1);
    REQUIRE(ev.top_logprobs.size() == 1);
    FakeRunner::logits_after(seq, opt, row.data());
    double sum = 0.0;
    for (int32_t i = 0; i < opt.n_vocab_real; ++i) sum += std::exp(static_cast<double>(row[static_cast<size_t>(i)]));
    const int32_t t = ev.token_ids[0];
    CHECK(ev.logprobs[0].token_id == t);
    CHECK(ev.logprobs[0].logprob == Catch::Approx(std::log(std::exp(row[static_cast<size_t>(t)]) / sum)).margin(1e-5));
    REQUIRE(ev.top_logprobs[0].size() == 3);
    CHECK(ev.top_logprobs[0][0].token_id == t);  // greedy: the chosen one is the most likely
    CHECK(ev.top_logprobs[0][0].logprob >= ev.top_logprobs[0][1].logprob);
    CHECK(ev.top_logprobs[0][1].logprob >= ev.top_logprobs[0][2].logprob);
    for (const TokenLogprob& lp : ev.top_logprobs[0]) CHECK(lp.token_id < opt.n_vocab_real);
    seq.push_back(t);
  }
}

TEST_CASE("sampled requests: a seed reproduces the tokens, padding rows never appear", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  EventCollector events;
  const auto p = make_prompt(6, 11);
  for (int i = 0; i < 3; ++i) {
    Request r = greedy_request(p, 40);
    r.sampling.temperature = 3.0f;  // flat enough that the seed matters
    r.sampling.seed = i < 2 ? 7 : 8;
    REQUIRE(h.engine->submit(r, events.sink(i)).is_ok());
  }
  h.engine->wait_idle();
  CHECK(events.get(0).tokens == events.get(1).tokens);
  CHECK(events.get(0).tokens != events.get(2).tokens);
  for (int i = 0; i < 3; ++i) {
    for (int32_t t : events.get(i).tokens) CHECK(t < opt.n_vocab_real);
  }
}

TEST_CASE("destroying the engine ends in-flight requests with kCancelled", "[unit]") {
  FakeRunnerOptions opt;
  EventCollector events;
  {
    Harness h = make_engine(opt, small_config(1, 16, 8));
    h.fake->set_forward_delay(1ms);
    REQUIRE(h.engine->submit(greedy_request(make_prompt(5, 1), 400), events.sink(0)).is_ok());
    REQUIRE(h.engine->submit(greedy_request(make_prompt(5, 2), 400), events.sink(1)).is_ok());
    REQUIRE(events.wait_tokens(0, 2));
  }
  for (int i = 0; i < 2; ++i) {
    CHECK(events.get(i).n_final == 1);
    CHECK(events.get(i).final_event.finish_reason == FinishReason::kCancelled);
  }
}

TEST_CASE("a sink that throws does not take the engine down", "[unit]") {
  FakeRunnerOptions opt;
  Harness h = make_engine(opt, small_config());
  EventCollector events;
  REQUIRE(h.engine->submit(greedy_request(make_prompt(4, 1), 5), [](Event) { throw std::runtime_error("client bug"); }).is_ok());
  const auto p = make_prompt(4, 2);
  REQUIRE(h.engine->submit(greedy_request(p, 5), events.sink(0)).is_ok());
  h.engine->wait_idle();
  CHECK(events.get(0).tokens == plain_greedy(opt, p, 5));
  CHECK(h.engine->stats().healthy);
  check_pools_full(*h.engine);
}

TEST_CASE("Engine::create rejects a bad configuration", "[unit]") {
  EngineConfig c = small_config(8, 4, 8);  // budget below max_running
  Result<std::unique_ptr<Engine>> e = Engine::create(std::make_unique<FakeRunner>(), c);
  REQUIRE_FALSE(e.is_ok());
  CHECK(e.status().code() == StatusCode::kInvalidArgument);
  CHECK(e.status().message().find("max_tokens_per_step") != std::string::npos);
  CHECK_FALSE(Engine::create(nullptr, small_config()).is_ok());
}
