// MtpDrafter: the MTP head's part of a runner step (speculative decoding, MODEL.md §4.2-4.3). After the main
// forward it runs one MTP pass over every row of the speculating sequences — the pair (h_t, x_{t+1}) at position
// n_past + t, x_{t+1} the step's next token, or the token the step emitted (a verify item's correction or bonus
// token at its last emitted row) — so the MTP KV cache covers the whole context and is rewritten over rejected
// drafts; the last emitted row's output is the first draft. Each further draft step feeds the head's own h' and
// the token just drafted at position + 1 (one row per drafting sequence). Drafting is greedy over the full
// vocabulary (or a draft vocabulary). The passes are steps of their own on the backend, deferred and chained on the
// device (MtpPass): the host plans them all up front and waits once, for the whole chain. Tested in
// tests/golden/speculative_test.cpp (and the chain against tools/mtp.py's in tests/support/mtp_reference.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/mtp_head.h"
#include "model/qwen35_model.h"
#include "runner/model_runner.h"
#include "voltserve/status.h"

namespace voltserve {

class MtpDrafter {
 public:
  MtpDrafter(std::unique_ptr<MtpHead> head, KvCacheLayer cache, int32_t page_size)
      : head_(std::move(head)), cache_(std::move(cache)), page_size_(page_size) {}

  // `batch` is the step as the main forward ran it (its rows and page table), `result` its results; the drafts go
  // into result.rows[i].drafts of each drafting sequence's last emitted row.
  Status run(const StepRequest& request, const StepBatch& batch, const Qwen35Model& model, StepResult& result);
  // The head's KV of one page copied to another (a prefix-cache hit's partial last page, beside the main model's).
  Status copy_page(Backend& backend, int32_t src_page, int32_t dst_page) {
    return backend.copy_kv_page(cache_, page_size_, src_page, dst_page);
  }

 private:
  struct Drafting {
    int32_t seq = 0;         // index in the step
    int32_t result_row = 0;  // the output row that gets the drafts
    int32_t position = 0;    // position of the last emitted row (the first draft's pair)
    int32_t n_draft = 0;
  };

  std::unique_ptr<MtpHead> head_;
  KvCacheLayer cache_;
  int32_t page_size_;
  StepBatch pass_;       // reused from pass to pass
  StepResult pass_result_;        // stays empty: every pass is deferred
  std::vector<StepResult> passes_;  // the deferred passes' drafts
  std::vector<Drafting> drafting_;
};

}  // namespace voltserve
