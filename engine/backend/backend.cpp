// The backend-independent parts of backend.h.
#include "backend/backend.h"

namespace voltserve {

void StepBatch::clear() {
  tokens.clear();
  seqs.clear();
  page_table.clear();
  outputs.clear();
  bias_ids.clear();
  bias_values.clear();
}

void StepResult::clear() {
  rows.clear();
  logits.clear();
  hidden.clear();
}

}  // namespace voltserve
