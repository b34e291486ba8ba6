// The accepted-runs references (kernels/sampling/accepted_runs.h): the walk gives accept_judged_rows' count per
// verify item, and the shift moves exactly the output rows inside a shifted sequence and the shifted positions.
#include <catch2/catch_test_macros.hpp>

#include <vector>

#include "sampling/accept.h"
#include "sampling/accepted_runs.h"
#include "sampling_runs_cases.h"

namespace voltserve::kernels::sampling {
namespace {

TEST_CASE("accepted runs: the walk counts what accept_judged_rows counts", "[unit]") {
  int64_t items = 0, partial = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const test::RunsCase c = test::random_runs_case(seed);
    std::vector<int32_t> runs(2 * c.seqs.size(), -7);
    WalkArgs a;
    a.seqs = c.seqs.data();
    a.n_seqs = static_cast<int32_t>(c.seqs.size());
    a.out_rows = c.out_rows.data();
    a.rows = c.rows.data();
    a.n_out = static_cast<int32_t>(c.out_rows.size());
    a.tokens = c.tokens.data();
    a.token_out = c.token_out.data();
    a.status = c.status.data();
    a.runs = runs.data();
    walk_ref(a);
    for (size_t i = 0; i < c.seqs.size(); ++i) {
      const SeqDesc& s = c.seqs[i];
      int32_t expect = 0;
      if (c.verify[i] && s.n_draft > 0) {
        std::vector<int32_t> token(c.token_out.begin() + s.row0, c.token_out.begin() + s.row0 + s.n_tokens);
        std::vector<int32_t> status(c.status.begin() + s.row0, c.status.begin() + s.row0 + s.n_tokens);
        expect = accept_judged_rows(s.n_draft, c.tokens.data() + s.row0 + 1, token.data(), status.data());
        ++items;
        partial += expect > 0 && expect < s.n_draft ? 1 : 0;
      }
      INFO("seed " << seed << " sequence " << i);
      CHECK(runs[2 * i] == expect);
      CHECK(runs[2 * i + 1] == (c.verify[i] ? s.n_draft : 0) - expect);
    }
  }
  CHECK(items > 500);
  CHECK(partial > 100);  // the cases reach runs that end inside the item, not only all or nothing
}

TEST_CASE("accepted runs: the shift moves the rows inside shifted sequences and the shifted positions", "[unit]") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const test::RunsCase c = test::random_runs_case(seed);
    std::vector<int32_t> runs(2 * c.seqs.size());
    for (size_t i = 0; i < runs.size(); ++i) runs[i] = static_cast<int32_t>(3 * i + 1);  // distinct counts
    std::vector<SeqDesc> seqs = c.later;
    std::vector<int32_t> rows = c.later_rows;
    ShiftArgs a;
    a.seqs = seqs.data();
    a.n_seqs = static_cast<int32_t>(seqs.size());
    a.out_rows = rows.data();
    a.n_out = static_cast<int32_t>(rows.size());
    a.runs = runs.data();
    shift_ref(a);
    INFO("seed " << seed);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int32_t f = c.later[i].shift_past;
      CHECK(seqs[i].n_past == c.later[i].n_past - (f >= 0 ? runs[2 * static_cast<size_t>(f) + 1] : 0));
      CHECK(seqs[i].row0 == c.later[i].row0);
    }
    for (size_t o = 0; o < rows.size(); ++o) {
      int32_t expect = c.later_rows[o];
      for (size_t i = 0; i < seqs.size(); ++i) {
        const SeqDesc& s = c.later[i];
        if (c.later_rows[o] >= s.row0 && c.later_rows[o] < s.row0 + s.n_tokens && s.shift_rows >= 0) {
          expect = c.later_rows[o] + runs[2 * static_cast<size_t>(s.shift_rows)];
        }
      }
      CHECK(rows[o] == expect);
    }
  }
}

}  // namespace
}  // namespace voltserve::kernels::sampling
