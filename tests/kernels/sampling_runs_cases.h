// Random steps for the accepted-runs kernels (kernels/sampling/accepted_runs.h): a verify step of sequences that
// are verify items (k = 0..15 drafts, rows whose tokens accept a random prefix of the drafts, sometimes a failed
// row) or not, and a later step over the same sequences (the MTP head's passes: output rows inside some sequences,
// shifts from random verify sequences). Shared by the CPU test and the GPU test.
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/accept.h"
#include "sampling/accepted_runs.h"
#include "support/test_rng.h"

namespace voltserve::test {

struct RunsCase {
  // The verify step: every token row is an output row, in order; a verify item's rows but its last judge drafts.
  std::vector<kernels::SeqDesc> seqs;
  std::vector<int32_t> out_rows, tokens, token_out, status;
  std::vector<kernels::sampling::RowParams> rows;
  std::vector<bool> verify;  // per sequence
  // The later step: its sequences (n_past to be moved, their shifts), output rows.
  std::vector<kernels::SeqDesc> later;
  std::vector<int32_t> later_rows;
};

inline RunsCase random_runs_case(uint64_t seed) {
  testing::TestRng rng(seed);
  auto below = [&](int32_t n) { return static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(n)); };
  RunsCase c;
  const int32_t n_seqs = 1 + below(9);
  int32_t row = 0;
  for (int32_t i = 0; i < n_seqs; ++i) {
    kernels::SeqDesc s;
    const bool verify = below(4) != 0;
    s.n_draft = verify ? below(16) : 0;
    s.n_tokens = verify ? s.n_draft + 1 : 1 + below(3);
    s.row0 = row;
    s.n_past = below(1000);
    c.seqs.push_back(s);
    c.verify.push_back(verify);
    const int32_t accept = below(s.n_draft + 1);
    for (int32_t t = 0; t < s.n_tokens; ++t) {
      c.tokens.push_back(below(50));
      c.status.push_back(below(12) == 0 ? kernels::sampling::kNanLogits : kernels::sampling::kRowOk);
    }
    // Row t judges token t + 1: equal for the first `accept` rows, then anything (often equal again).
    for (int32_t t = 0; t < s.n_tokens; ++t) {
      const int32_t next = t + 1 < s.n_tokens ? c.tokens[static_cast<size_t>(row + t + 1)] : below(50);
      c.token_out.push_back(t < accept || below(3) == 0 ? next : below(50));
      c.out_rows.push_back(row + t);
      kernels::sampling::RowParams p;
      p.draft = verify && t < s.n_draft ? next : -1;
      c.rows.push_back(p);
    }
    row += s.n_tokens;
  }
  // The later step: per sequence, one output row at its first row (the first pass) or none, shifts from any verify
  // sequence or none.
  c.later = c.seqs;
  int32_t later_row = 0;
  for (int32_t i = 0; i < n_seqs; ++i) {
    kernels::SeqDesc& s = c.later[static_cast<size_t>(i)];
    s.row0 = later_row;
    s.n_tokens = 1 + below(4);
    s.n_past = 100 + below(1000);
    if (below(2) == 0) c.later_rows.push_back(s.row0 + below(s.n_tokens));
    later_row += s.n_tokens;
    s.shift_rows = below(3) == 0 ? -1 : below(n_seqs);
    s.shift_past = below(3) == 0 ? -1 : below(n_seqs);
  }
  return c;
}

}  // namespace voltserve::test
