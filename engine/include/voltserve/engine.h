// The engine's public API: submit token-level requests, receive events, cancel, read stats.
// One engine thread owns the model; everything here is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "voltserve/model_info.h"
#include "voltserve/request.h"
#include "voltserve/status.h"

namespace voltserve {

class ModelRunner;

struct EngineConfig {
  int32_t max_running = 16;        // sequences decoded together
  int32_t max_waiting = 64;        // bounded FCFS queue; beyond it submit() fails with kResourceExhausted
  int32_t max_tokens_per_step = 256;  // token budget per step (chunked prefill + decodes)
  int32_t prefill_chunk = 128;     // largest prompt chunk a sequence computes in one step
  // Speculative decoding with the model's MTP head (Request::speculative_k). speculative_k: the default of requests
  // that do not say (0 off, kSpeculativeAuto, or 1..max_speculative_k). max_speculative_k: the most drafts per
  // round any request may use (0: no speculation at all; the MTP head is not loaded); Engine::load sizes the
  // verify checkpoints for it. Without an MTP head (or on a backend that cannot verify) speculation is off.
  int32_t speculative_k = 0;
  int32_t max_speculative_k = 8;
  // Prefix caching (engine/cache/prefix_cache.h): on when the runner keeps state snapshots
  // (ModelOptions::n_prefix_snapshots > 0). prefix_snapshot_interval: a long prefill also snapshots every this many
  // tokens (0: only at prompt ends and request ends).
  bool prefix_cache = true;
  int32_t prefix_snapshot_interval = 512;
};

inline constexpr int32_t kMaxSpeculativeK = 31;  // the largest max_speculative_k (verify items of 32 tokens)

struct EngineStats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  int32_t kv_pages_total = 0;
  int32_t kv_pages_free = 0;  // free pages plus those only the prefix cache holds (prefix_cache_pages_only)
  int32_t state_slots_total = 0;
  int32_t state_slots_free = 0;
  int32_t context_length = 0;
  uint64_t n_tokens_prompt_total = 0;
  uint64_t n_tokens_generated_total = 0;
  uint64_t n_steps = 0;
  uint64_t n_preemptions = 0;      // sequences that gave back their cache and recomputed later
  uint64_t n_graph_replays_total = 0;  // steps and MTP passes replayed from CUDA graphs (0 on the CPU backend)
  SpeculativePhaseTimes speculative_phases;  // where speculative rounds' time goes (bench decode --speculative-k)
  DeviceTimeline device_timeline;            // the device's time in steps and between them (bench decode)
  uint64_t n_token_masks = 0;      // structured-output masks computed (one per constrained sampled token)
  uint64_t mask_us_total = 0;      // wall time the mask threads took per step, summed, microseconds
  // Time the engine waited for masks once it needed them, microseconds: on the CPU backend after the layers (all of
  // it delays the step), on the CUDA backend after launching the step (the device runs the forward meanwhile; only
  // the part past the forward delays the step).
  uint64_t mask_wait_us_total = 0;
  // Speculative decoding: the engine's limit (0: off), drafts proposed and accepted, and per draft position j
  // (0-based) the drafts proposed and accepted there.
  int32_t max_speculative_k = 0;
  uint64_t n_tokens_drafted_total = 0;
  uint64_t n_tokens_accepted_total = 0;
  std::vector<uint64_t> drafted_per_position_total;
  std::vector<uint64_t> accepted_per_position_total;
  // Prefix caching: admissions that looked up the cache, those that hit, the prompt tokens the hits skipped, and the
  // cache's current size (entries, snapshot rows used of total, KV pages it holds).
  bool prefix_cache_enabled = false;
  uint64_t n_prefix_cache_queries_total = 0;
  uint64_t n_prefix_cache_hits_total = 0;
  uint64_t n_tokens_prefix_cached_total = 0;
  uint64_t n_prefix_cache_evictions_total = 0;
  int32_t prefix_cache_entries = 0;
  int32_t prefix_snapshots_used = 0;
  int32_t prefix_snapshots_total = 0;
  int32_t prefix_cache_pages = 0;
  // Of those, the pages only the cache holds (counted in kv_pages_free: evicted the moment a request needs them).
  int32_t prefix_cache_pages_only = 0;
  bool healthy = true;
  bool draining = false;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Loads the model folder (ModelOptions::n_slots 0: config.max_running sequences) and starts the engine thread.
  static Result<std::unique_ptr<Engine>> load(const ModelOptions& model, const EngineConfig& config);
  // Takes ownership of a runner (tests: a fake model) and starts the engine thread.
  static Result<std::unique_ptr<Engine>> create(std::unique_ptr<ModelRunner> runner, const EngineConfig& config);

  // Queues a request. Fails with kInvalidArgument (bad request), kOutOfRange (prompt + max_new_tokens
  // beyond the context), kResourceExhausted (queue full) or kUnavailable (draining / unhealthy).
  virtual Result<RequestId> submit(Request request, EventSink sink) = 0;
  // Cancels a queued or running request; its final event (kCancelled) is delivered and its cache pages and
  // state slot are back in the pool within one step. Unknown ids are ignored.
  virtual void cancel(RequestId id) = 0;
  virtual EngineStats stats() const = 0;
  // Stops admitting requests; in-flight ones finish. wait_idle() blocks until none are left.
  virtual void drain() = 0;
  virtual void wait_idle() = 0;
  virtual int32_t context_length() const = 0;
  virtual int32_t vocab_size() const = 0;
  // The model's facts; context_length is the engine's (the model's, bounded by the KV pool).
  virtual const ModelInfo& model_info() const = 0;
};

}  // namespace voltserve
