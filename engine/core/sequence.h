// One live request inside the engine thread: its tokens, progress, cache resources and sampling parameters.
// Owned and touched by the engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cache/page_table.h"
#include "core/speculation.h"
#include "sampling/sampling.h"
#include "voltserve/grammar.h"
#include "voltserve/request.h"

namespace voltserve {

struct Sequence {
  Sequence(RequestId id_in, Request request_in, EventSink sink_in, int32_t page_size)
      : id(id_in),
        request(std::move(request_in)),
        sink(std::move(sink_in)),
        tokens(request.prompt_ids),
        n_prompt(static_cast<int32_t>(request.prompt_ids.size())),
        pages(page_size),
        submitted_at(std::chrono::steady_clock::now()) {}

  int32_t n_generated() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens).first(static_cast<size_t>(n_prompt)); }
  std::span<const int32_t> generated() const { return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(n_prompt)); }

  RequestId id;
  Request request;
  EventSink sink;
  // The request's sampling parameters as the backend's sampler takes them (seed set; draw_index per token).
  kernels::sampling::RowParams sampling;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<int32_t> tokens;  // prompt + generated; the last generated one is computed in the next step
  int32_t n_prompt;
  int32_t n_computed = 0;       // positions already in the cache (reset to 0 by a preemption)
  bool admitted = false;        // holds a state slot
  bool counted_prompt = false;  // prompt tokens added to the stats (once, even if recomputed)
  bool finished = false;
  int32_t slot = -1;
  PageTable pages;
  std::vector<float> prompt_logits;
  // Structured output: the sequence's matcher (null: unconstrained), whether it applies yet (reasoning ends
  // first), and the token mask of this step's sample row.
  std::unique_ptr<ConstraintMatcher> matcher;
  bool constraint_active = false;
  std::vector<uint32_t> token_mask;  // Request::n_prompt_logits rows, filled as the prompt is computed
  std::chrono::steady_clock::time_point submitted_at;
  int64_t ttft_us = 0;
  // Speculative decoding (core/speculation.h): the MTP head's drafts for the next verify item (after tokens.back()),
  // that item's tokens while a step is built, and the drafts the step asks the MTP head for.
  SpecState spec{0, 0};
  std::vector<int32_t> drafts;
  std::vector<int32_t> verify_tokens;
  int32_t n_draft_next = 0;
  // Prefix caching (cache/prefix_cache.h): a waiting sequence's pending hit (its entry pinned until admission), the
  // snapshot position its current prefill chunk stops at (0: none), and the tokens its admission skipped.
  int32_t hit_entry = -1;
  int32_t hit_tokens = 0;
  int32_t hit_snapshot = -1;
  std::vector<int32_t> hit_pages;  // the entry's pages covering [0, hit_tokens)
  int32_t snapshot_at = 0;
  int32_t n_tokens_cached = 0;
  bool admitted_once = false;
  bool verify_pending = false;  // this step runs a verify item of it that is not committed yet
};

}  // namespace voltserve
