// The contract between the engine (scheduler, request loop) and a model implementation: compute the tokens the
// scheduler planned against paged KV memory and recurrent-state slots, and return, for any set of rows, what each
// asks for — a sampled id (sampled by the runner's backend, on the device where there is one), logprobs, the full
// logits, the final-normed hidden state. A verify item (speculative decoding) keeps the recurrent state after each
// of its tokens so that commit() can keep fewer of them than were computed; with kOutAccept rows the runner also
// decides which of its drafts are accepted, and a speculating sequence's MTP head drafts the next round's tokens
// (SeqStep::mtp, n_draft; RowResult::drafts). Implemented by the Qwen3.5 runner over a Backend
// (model/qwen35_runner.h) and by a fake in the scheduler tests (tests/support/fake_runner.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "voltserve/model_info.h"
#include "voltserve/status.h"

namespace voltserve {

// Cache memory the runner allocated; the engine's allocator hands out page and slot numbers in these ranges.
struct CacheGeometry {
  int32_t page_size = 16;  // tokens per KV page
  int32_t n_pages = 0;     // KV pages for the full-attention layers (shared by all sequences)
  int32_t n_slots = 0;     // recurrent-state slots (conv + delta-rule state), one per live sequence
  int32_t max_verify_tokens = 0;  // tokens a verify item may hold (0: no speculative verification)
  int32_t max_draft_tokens = 0;   // drafts the MTP head may propose per round (0: no MTP head, no speculation)
  int32_t n_snapshots = 0;        // prefix-cache state snapshot rows (0: no prefix cache; engine/cache/prefix_cache.h)
};

// The runner's limits on one step (StepRequest); the engine plans within them.
struct StepCapacity {
  int32_t max_tokens = 0;  // tokens per step, all sequences together
};

// One sequence's share of a step: compute `tokens` at positions n_past .. n_past + tokens.size() - 1.
struct SeqStep {
  int32_t slot = -1;                    // recurrent-state slot of this sequence
  std::span<const int32_t> page_table;  // KV page numbers; covers positions [0, n_past + tokens.size())
  int32_t n_past = 0;                   // tokens already in the cache for this sequence
  std::span<const int32_t> tokens;
  int32_t n_prompt = 0;                 // the sequence's prompt length (later positions are generated tokens)
  bool verify = false;                  // keep the state after each token for commit(); <= max_verify_tokens
  // Speculative decoding (CacheGeometry::max_draft_tokens > 0). mtp: run the MTP head over this step's tokens too
  // (its KV cache must cover every position of a speculating sequence); the pair of the step's last token needs
  // the token after it: next_token when the step is a prompt chunk that is not the last (-1: the token this step
  // emits). n_draft: after the emitted token(s), draft this many with the MTP head (<= max_draft_tokens; the
  // drafts' KV positions, up to n_past + tokens.size() + n_draft - 2, must be in the page table and the context).
  bool mtp = false;
  int32_t next_token = -1;
  int32_t n_draft = 0;
};

// One output row: token `token_index` of step `seq`.
struct RowRequest {
  int32_t seq = 0;
  int32_t token_index = 0;
  uint32_t flags = 0;  // OutputFlags (backend/backend.h)
  // With kOutSample: the request's parameters, seed and draw index (slot, flags and bias_* are filled in by the
  // runner), and its logit_bias entries.
  kernels::sampling::RowParams sampling;
  std::span<const std::pair<int32_t, float>> logit_bias;
  // With kOutSample, structured output: (vocab_size + 31) / 32 words, bit id set where id may be sampled; empty:
  // unconstrained. One mask per row, so each row of a verify item can carry its own.
  std::span<const uint32_t> token_mask;
};

struct StepRequest {
  std::span<const SeqStep> seqs;
  std::span<const RowRequest> outputs;
  // Set when some row has a token_mask whose contents are still being computed (structured output, on the engine's
  // mask worker while the forward runs): the runner calls it before it reads any token_mask, after the forward.
  std::function<void()> await_masks;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelInfo& info() const = 0;
  virtual CacheGeometry geometry() const = 0;
  virtual StepCapacity capacity() const = 0;
  // Zeroes a slot's recurrent state and sampling penalty state (a new sequence).
  virtual Status reset_slot(int32_t slot) = 0;
  // Runs one step. result.rows[i] answers request.outputs[i]; result.logits and result.hidden hold the rows that
  // asked for them, in output order. A verify item whose rows all ask kOutAccept gets, per row, the token emitted
  // there (its drafts while accepted, then the correction or bonus token; later rows kRowNotReached); the last
  // emitted row of a sequence with n_draft > 0 carries the next round's drafts.
  virtual Status step(const StepRequest& request, StepResult& result) = 0;
  // After a step with a verify item in `slot`: keep the state after its first n_keep tokens (1 <= n_keep <= its
  // token count). The attention KV of the dropped positions is simply overwritten later; the caller sets the
  // sequence's n_past to the kept length.
  virtual Status commit(int32_t slot, int32_t n_keep) = 0;
  // Prefix caching (CacheGeometry::n_snapshots > 0), between steps: the recurrent state of `slot` into snapshot row
  // `snapshot` and back, and one KV page's contents into another. Runners without snapshots say so.
  virtual Status save_state(int32_t /*slot*/, int32_t /*snapshot*/) {
    return unimplemented("this model runner keeps no prefix-cache snapshots");
  }
  virtual Status load_state(int32_t /*snapshot*/, int32_t /*slot*/) {
    return unimplemented("this model runner keeps no prefix-cache snapshots");
  }
  virtual Status copy_page(int32_t /*src_page*/, int32_t /*dst_page*/) {
    return unimplemented("this model runner keeps no prefix-cache snapshots");
  }
  // Steps (forward passes and MTP passes) the device replayed from captured CUDA graphs so far (0 without graphs).
  virtual int64_t graph_replays() const { return 0; }
  // Where speculative rounds' time went (zero for a runner that does not speculate).
  virtual SpeculativePhaseTimes speculative_phases() const { return {}; }
  // The device's time in steps and between them (zero without a device).
  virtual DeviceTimeline device_timeline() const { return {}; }
};

}  // namespace voltserve
