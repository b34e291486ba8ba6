// The Engine: one thread owns the ModelRunner and loops plan -> step (the runner computes and samples) -> emit
// events. Other threads only submit, cancel and read stats through a mutex. Tested against a fake runner in
// tests/scheduler/ and on the fixture models in tests/golden.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "cache/id_pool.h"
#include "cache/prefix_cache.h"
#include "core/mask_worker.h"
#include "runner/model_runner.h"
#include "core/request_validation.h"
#include "core/sequence.h"
#include "scheduler/scheduler.h"
#include "voltserve/engine.h"

namespace voltserve {

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::unique_ptr<ModelRunner> runner, const EngineConfig& config, int32_t context_length);
  // Stops the engine thread; requests still in flight get a final kCancelled event.
  ~EngineImpl() override;

  Result<RequestId> submit(Request request, EventSink sink) override;
  void cancel(RequestId id) override;
  EngineStats stats() const override;
  void drain() override;
  void wait_idle() override;
  int32_t context_length() const override { return limits_.context_length; }
  int32_t vocab_size() const override { return limits_.vocab_size; }
  const ModelInfo& model_info() const override { return model_info_; }

 private:
  void run();
  // One scheduling step; false when nothing could be scheduled (the thread then sleeps until news arrive).
  bool step();
  void apply_cancels(const std::vector<RequestId>& ids);
  // Emits the sampled token (and logprobs) of `row` for seq, and finishes it on a stop token or at its length limit.
  void emit_token(Sequence& seq, const RowResult& row);
  // The drafts the next step asks the MTP head for (0: none), and the current drafts trimmed to what the context
  // and max_new_tokens leave room for.
  void plan_speculation(Sequence& seq, int32_t n_running);
  // A verify round that drafted k tokens and accepted `accepted` of them: the request's and the engine's counters.
  void record_round(Sequence& seq, int32_t k, int32_t accepted);
  // After a verify item that emitted n_emitted tokens: keeps that much of the recurrent state (runner commit) and
  // advances n_computed (nothing for a request that ended inside the run).
  Status commit_round(Sequence& seq, int32_t n_emitted);
  // Builds the runner's request for the planned items (steps_, outputs_).
  void build_request(const StepPlan& plan);
  // Frees the sequence's pages and slot, sends its final event (token_ids may carry a last token).
  void finish(Sequence& seq, FinishReason reason, Status error, Event event = {});
  void fail_all(const Status& error);
  // Marks the engine unhealthy, logs once, fails every live request with `error`.
  void on_runner_failure(const Status& error);
  void release_resources(Sequence& seq);
  // Prefix caching (cache/prefix_cache.h). Whether the sequence may use / feed the cache; its pending hit refreshed
  // (waiting sequences near the head of the queue, before planning); the snapshot position of its next prefill
  // chunk; the hit adopted on admission (pages shared or copied, snapshot loaded); a snapshot of its committed state
  // as an entry over tokens [0, n_computed).
  bool uses_prefix_cache(const Sequence& seq) const;
  // Whether the waiting sequences' pinned hits cost a running sequence this step (it gets no tokens, or someone is
  // preempted): then the step is planned again without them.
  bool pins_cost_running(const std::vector<SchedSeq>& views, const StepPlan& plan) const;
  // A waiting sequence held back while an admitted one with the same prompt prefills towards its snapshot.
  bool waits_for_sibling(const Sequence& seq) const;
  void refresh_hit(Sequence& seq);
  void drop_hit(Sequence& seq);
  int32_t next_snapshot(const Sequence& seq) const;
  Status adopt_hit(Sequence& seq);
  Status snapshot(Sequence& seq);
  // Pages for the sequence's table up to n_tokens, evicting cached prefixes first when the pool is short.
  bool grow_pages(Sequence& seq, int32_t n_tokens);
  void remove_finished();
  void deliver(Sequence& seq, Event event);
  template <class Fn>
  static Status guarded(Fn&& call);
  // An info line (queue, cache use, tokens/s) at most every 10 s while there is work.
  void log_stats_periodically(const EngineStats& snapshot);
  // Engine thread only (it reads engine-thread state), with mutex_ held.
  void publish_stats_locked();

  // Immutable after construction.
  std::unique_ptr<ModelRunner> runner_;
  EngineConfig config_;
  CacheGeometry geometry_;
  ModelInfo model_info_;
  RequestLimits limits_;
  SchedulerLimits sched_limits_;
  int32_t spec_max_k_ = 0;       // drafts per round at most (0: no speculation)
  int32_t spec_default_k_ = 0;   // Request::speculative_k when unset

  // Shared with submitting threads, guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  std::unordered_set<RequestId> live_ids_;  // submitted and not yet finished
  std::vector<RequestId> cancel_requests_;
  RequestId next_id_ = 1;
  int32_t n_waiting_ = 0;  // not admitted: incoming + waiting in the engine thread
  bool draining_ = false;
  bool stop_ = false;
  bool healthy_ = true;
  EngineStats stats_;

  // Engine thread only.
  std::vector<std::unique_ptr<Sequence>> seqs_;  // live sequences in arrival order
  PageAllocator pages_;
  SlotAllocator slots_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null: off
  std::vector<SeqStep> steps_;        // the step being built, reused
  std::vector<RowRequest> outputs_;
  std::vector<MaskWorker::Job> mask_jobs_;  // this step's structured-output masks
  MaskWorker mask_worker_;
  std::vector<int32_t> output_item_;  // per output: its plan item
  StepResult result_;
  bool logged_fault_ = false;
  EngineStats counters_;  // token, step and preemption counters, published into stats_
  uint64_t seed_base_ = 0;
  std::chrono::steady_clock::time_point last_stats_log_ = std::chrono::steady_clock::now();
  uint64_t last_stats_generated_ = 0;  // mixed with the request id for requests without a seed

  std::thread thread_;  // last: starts after every member above is constructed
};

}  // namespace voltserve
