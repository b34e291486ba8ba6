// Test helpers over the runner contract: the logits of chosen rows of one step, or of each sequence's last token,
// through ModelRunner::step with kOutLogits output rows (what the golden tests compare against transformers).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runner/model_runner.h"

namespace voltserve::testing {

// rows index the steps' tokens laid end to end (step 0's tokens first); logits is [rows.size(), vocab].
inline Status forward_rows(ModelRunner& runner, std::span<const SeqStep> steps, std::span<const int32_t> rows,
                           std::vector<float>& logits) {
  std::vector<RowRequest> outputs;
  for (int32_t r : rows) {
    int32_t base = 0;
    bool found = false;
    for (size_t s = 0; s < steps.size() && !found; ++s) {
      const auto n = static_cast<int32_t>(steps[s].tokens.size());
      if (r >= base && r < base + n) {
        RowRequest o;
        o.seq = static_cast<int32_t>(s);
        o.token_index = r - base;
        o.flags = kOutLogits;
        outputs.push_back(o);
        found = true;
      }
      base += n;
    }
    if (!found) return out_of_range("logit row " + std::to_string(r) + " is outside the step's tokens");
  }
  StepResult result;
  VS_RETURN_IF_ERROR(runner.step({steps, outputs, {}}, result));
  logits = std::move(result.logits);
  return Status::ok();
}

// The logits of every step's last token, in step order (a step without tokens asks for none: the runner rejects it).
inline Status forward_last(ModelRunner& runner, std::span<const SeqStep> steps, std::vector<float>& logits) {
  std::vector<int32_t> rows;
  int32_t row = 0;
  for (const SeqStep& s : steps) {
    row += static_cast<int32_t>(s.tokens.size());
    if (!s.tokens.empty()) rows.push_back(row - 1);
  }
  return forward_rows(runner, steps, rows, logits);
}

}  // namespace voltserve::testing
