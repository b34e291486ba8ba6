// The contract between the engine (scheduler, sampler) and a model implementation: run the tokens the
// scheduler planned against paged KV memory and recurrent-state slots, return logits.
// Implemented by the model over a Backend (CPU now, CUDA later) and by a fake in the scheduler tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

struct ModelInfo {
  std::string name;
  int32_t vocab_size = 0;          // rows of the logits (may include padding rows)
  int32_t n_vocab_real = 0;        // ids >= this are padding and are never sampled
  int32_t context_length = 0;      // max positions per sequence
  std::vector<int32_t> eos_token_ids;
};

// Cache memory the runner allocated; the engine's allocator hands out page and slot numbers in these ranges.
struct CacheGeometry {
  int32_t page_size = 16;  // tokens per KV page
  int32_t n_pages = 0;     // KV pages for the full-attention layers (shared by all sequences)
  int32_t n_slots = 0;     // recurrent-state slots (conv + delta-rule state), one per live sequence
};

// One sequence's share of a step: compute `tokens` at positions n_past .. n_past + tokens.size() - 1.
struct SeqStep {
  int32_t slot = -1;                     // recurrent-state slot of this sequence
  std::span<const int32_t> page_table;   // KV page numbers; covers positions [0, n_past + tokens.size())
  int32_t n_past = 0;                    // tokens already in the cache for this sequence
  std::span<const int32_t> tokens;
  bool need_logits = false;              // return the logits of the last token
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelInfo& info() const = 0;
  virtual CacheGeometry geometry() const = 0;
  // Zeroes the recurrent state of a slot (a new sequence starts with zero conv and delta-rule state).
  virtual Status reset_slot(int32_t slot) = 0;
  // Runs one step. `logits` is resized to [n_steps_with_need_logits × vocab_size], in the order of `steps`.
  virtual Status forward(std::span<const SeqStep> steps, std::vector<float>& logits) = 0;
};

}  // namespace voltserve
