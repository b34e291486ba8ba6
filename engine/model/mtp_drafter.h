// MtpDrafter: the MTP head's part of a runner step (speculative decoding, MODEL.md §4.2-4.3). After the main
// forward it runs one MTP pass over every row of the speculating sequences — the pair (h_t, x_{t+1}) at position
// n_past + t, x_{t+1} the step's next token, or the token the step emitted (a verify item's correction or bonus
// token at its last emitted row) — so the MTP KV cache covers the whole context and is rewritten over rejected
// drafts; the last emitted row's output is the first draft. Each further draft step feeds the head's own h' and
// the token just drafted at position + 1 (one row per drafting sequence). Drafting is greedy over the full
// vocabulary (or a draft vocabulary). The passes are steps of their own on the backend, deferred and chained on the
// device (MtpPass): the host plans them all up front and waits once, for the whole chain. After a verify step that
// was deferred too (run_after_deferred), the passes are planned for each item's longest accepted run and moved by
// the actual one on the device (SeqDesc::shift_rows / shift_past): the first pass embeds the tokens the verify step emitted and
// drafts from the row its accepted run ends at, the chain continues at the position after it — one host wait a
// round. Tested in tests/golden/speculative_test.cpp (and the chain against tools/mtp.py's in
// tests/support/mtp_reference.h).
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
  // Whether the step's passes can follow its verify step on the device: it has verify items; every row of the step
  // is an output row, in order, that only samples (and judges drafts) without penalties or a token mask; no prompt
  // chunk that continues. The runner then runs the step deferred (Qwen35Model::forward with defer) and calls
  // run_after_deferred, which fills `result` with the step's rows (walked) and the drafts.
  static bool follows_on_device(const StepRequest& request, const StepBatch& batch);
  Status run_after_deferred(const StepRequest& request, const StepBatch& batch, const Qwen35Model& model,
                            StepResult& result);
  // Drops what an earlier step that failed midway left deferred (no wait when nothing is).
  Status drop_deferred() { return head_->take_drafts(passes_); }
  // The head's KV of one page copied to another (a prefix-cache hit's partial last page, beside the main model's).
  Status copy_page(Backend& backend, int32_t src_page, int32_t dst_page) {
    return backend.copy_kv_page(cache_, page_size_, src_page, dst_page);
  }

 private:
  struct Drafting {
    int32_t seq = 0;         // index in the step
    int32_t result_row = 0;  // the output row that gets the drafts
    int32_t position = 0;    // position of the last emitted row (the first draft's pair); after a deferred verify
                             // step, of the item's last row (the device moves it back by the rejected drafts)
    int32_t n_draft = 0;
  };
  // pass_ emptied for a first pass over `batch`'s rows (placeholder tokens, its page table), drafting_ cleared.
  void start_first_pass(const StepBatch& batch);
  // The chain passes 2..depth of drafting_ after the first pass (one row per drafting sequence); shift: their
  // positions follow the accepted runs (run_after_deferred).
  Status run_chain(const StepBatch& batch, bool shift);

  std::unique_ptr<MtpHead> head_;
  KvCacheLayer cache_;
  int32_t page_size_;
  StepBatch pass_;       // reused from pass to pass
  StepResult pass_result_;        // stays empty: every pass is deferred
  std::vector<StepResult> passes_;  // the deferred passes' drafts
  std::vector<Drafting> drafting_;
};

}  // namespace voltserve
