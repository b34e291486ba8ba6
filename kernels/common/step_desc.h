// SeqDesc: one sequence's share of a batched step, as the kernels read it (device memory, or host memory for the
// references). The backend uploads the step's SeqDesc array and its flattened page table once per step; every
// op of the step (attention, Gated DeltaNet, sampling state) reads the same arrays.
#pragma once

#include <cstdint>

namespace voltserve::kernels {

struct SeqDesc {
  int32_t row0 = 0;         // first row of this sequence's tokens in the step's activations
  int32_t n_tokens = 0;     // rows this step (0: a padding entry that every kernel skips)
  int32_t n_past = 0;       // positions already cached; token t of the step sits at position n_past + t
  int32_t slot = -1;        // recurrent-state slot (GDN conv + delta-rule state, sampling penalty state)
  int32_t page_offset = 0;  // index of this sequence's first page in the step's flattened page table
  int32_t n_prompt = 0;     // prompt length: positions >= n_prompt hold generated tokens (penalty counts)
  // >= 0: a verify item. The GDN kernels also write the state after each of this step's tokens into checkpoint
  // set `ckpt` (gdn.h); the main state still advances over all n_tokens. -1: no checkpoints.
  int32_t ckpt = -1;
  // Speculative decoding: the last n_draft tokens are drafts under verification. They are not counted into the
  // sampling penalty state when the step begins; the acceptance (sampling/accept.h) counts the accepted ones.
  int32_t n_draft = 0;
  // Speculative rounds without a host wait (sampling/accepted_runs.h): >= 0, a sequence of the last step with verify
  // items whose accepted run, kept on the device, moves this sequence's output rows forward by its accepted drafts
  // (shift_rows) or its n_past back by its rejected drafts (shift_past); -1: none.
  int32_t shift_rows = -1;
  int32_t shift_past = -1;
};
static_assert(sizeof(SeqDesc) == 40, "SeqDesc is uploaded as raw bytes");

// Page of position `pos` of a sequence: page_table[seq.page_offset + pos / page_size]; row in a paged cache
// [n_pages * page_size, width]: page * page_size + pos % page_size.

}  // namespace voltserve::kernels
