// See accepted_runs.h. The device code (accepted_runs.cu) runs the same loops, one thread per sequence or row.
#include "sampling/accepted_runs.h"

#include "sampling/accept.h"

namespace voltserve::kernels::sampling {

namespace {

// The output row of a verify item's first token (the first that judges a draft), -1 when s is no verify item.
int32_t first_judging_row(const WalkArgs& a, const SeqDesc& s) {
  if (s.n_draft <= 0) return -1;
  for (int32_t o = 0; o < a.n_out; ++o) {
    if (a.out_rows[o] == s.row0 && a.rows[o].draft >= 0) return o;
  }
  return -1;
}

}  // namespace

void walk_ref(const WalkArgs& a) {
  for (int32_t i = 0; i < a.n_seqs; ++i) {
    const SeqDesc& s = a.seqs[i];
    const int32_t f = first_judging_row(a, s);
    const int32_t k = f >= 0 ? s.n_draft : 0;
    int32_t n = 0;
    while (n < k && a.status[f + n] == kRowOk && a.token_out[f + n] == a.tokens[s.row0 + 1 + n]) ++n;
    a.runs[2 * i] = n;
    a.runs[2 * i + 1] = k - n;
  }
}

void shift_ref(const ShiftArgs& a) {
  for (int32_t o = 0; o < a.n_out; ++o) {
    const int32_t row = a.out_rows[o];
    for (int32_t i = 0; i < a.n_seqs; ++i) {
      const SeqDesc& s = a.seqs[i];
      if (s.shift_rows >= 0 && row >= s.row0 && row < s.row0 + s.n_tokens) a.out_rows[o] = row + a.runs[2 * s.shift_rows];
    }
  }
  for (int32_t i = 0; i < a.n_seqs; ++i) {
    if (a.seqs[i].shift_past >= 0) a.seqs[i].n_past -= a.runs[2 * a.seqs[i].shift_past + 1];
  }
}

}  // namespace voltserve::kernels::sampling
