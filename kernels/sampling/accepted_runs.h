// Speculative rounds without a host wait after the verify step (DESIGN.md §4, §5): the accepted runs of a verify step
// stay on the device, and the steps after it that depend on them — the MTP head's passes, whose first draft comes
// from the row of the item's last emitted token and whose chain continues at the position after it — are planned
// on the host for the longest run and moved by the device.
//
// walk: per sequence i of the verify step, the accepted draft count a of its k = seqs[i].n_draft judged rows
// (accept_judged_rows over token / status rows [first, first + k], drafts = the step's tokens after the item's
// first, `first` the output row of the item's first token that judges a draft: RowParams::draft >= 0): runs[2 i] =
// a, runs[2 i + 1] = k - a, the drafts it rejected; (0, 0) for a sequence that is not a verify item (k = 0).
// shift: per sequence i of a later step with seqs[i].shift_rows >= 0, each output row inside the sequence's rows
// moves forward by runs[2 shift_rows] (the accepted drafts); with shift_past >= 0 its n_past moves back by
// runs[2 shift_past + 1] (the rejected drafts). Output rows are matched to sequences by their rows. The indices
// into runs are checked on the host.
// References in accepted_runs_ref.cpp (the CPU backend's); tested in tests/kernels/sampling_accepted_runs_test.cpp
// and, on the device, tests/kernels/sampling_gpu_test.cpp.
#pragma once

#include <cstdint>

#include "common/kernel_status.h"
#include "common/step_desc.h"
#include "sampling/sampling.h"

namespace voltserve::kernels::sampling {

struct WalkArgs {
  const SeqDesc* seqs = nullptr;  // the verify step's sequences
  int32_t n_seqs = 0;
  const int32_t* out_rows = nullptr;  // [n_out]: each output's token row
  const RowParams* rows = nullptr;    // [n_out]: each output's sampling parameters (RowParams::draft)
  int32_t n_out = 0;
  const int32_t* tokens = nullptr;     // the step's token rows (the drafts)
  const int32_t* token_out = nullptr;  // per output row: the sampler's token
  const int32_t* status = nullptr;     // per output row: the sampler's status
  int32_t* runs = nullptr;             // [2 n_seqs]
};

struct ShiftArgs {
  SeqDesc* seqs = nullptr;  // the later step's sequences (written: n_past)
  int32_t n_seqs = 0;
  int32_t* out_rows = nullptr;  // the later step's output rows (written)
  int32_t n_out = 0;
  const int32_t* runs = nullptr;  // the walk's result
};

void walk_ref(const WalkArgs& a);
void shift_ref(const ShiftArgs& a);

// Device forms (pointers to device memory), one small block each.
KernelStatus walk(const WalkArgs& a, void* stream);
KernelStatus shift(const ShiftArgs& a, void* stream);

}  // namespace voltserve::kernels::sampling
