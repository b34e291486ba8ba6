// MtpHead: the Qwen3.5 multi-token-prediction head (MODEL.md §4) on the Backend ops: e = norm(embed(x_{i+1})),
// hh = norm(h_i), u = fc([e ; hh]) (embedding first), one gated full-attention decoder layer with its own paged KV
// cache (the sequence's page table, the main model's positions), h' = norm(u; mtp.norm), draft logits = lm_head(h').
// h_i is the main model's final-normed hidden state, formed here in fp32 from its pre-norm residual stream (the
// activation dtype is fp16 on a GPU; the norms read fp32); the pair (h_i, x_{i+1}) runs at position i; depth k > 1
// feeds h' (fp32) back with the token just drafted at position + 1. A pass is a step of its own on the backend (begin_step /
// end_step) whose StepBatch lists the pairs' tokens and positions (SeqDesc slot -1: no recurrent or penalty state)
// and whose output rows are the drafts' greedy samples. The embedding is the main model's; the draft lm_head is
// the main model's, or its rows of a draft vocabulary (MtpLoadOptions), whose greedy samples are mapped back to token
// ids (kOutLogits rows of a pass then cover the draft vocabulary only). A pass may take its tokens from the
// device (the drafts the pass before it sampled: Backend::embed_samples) and leave its results there until
// take_drafts(), so that a whole draft chain runs without a host round trip between its passes.
// Tested against tools/mtp.py's reference logits in tests/golden/mtp_golden_test.cpp.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/qwen35_weights.h"
#include "model/weight_provider.h"
#include "model/weight_quantize.h"
#include "voltserve/status.h"

namespace voltserve {

struct MtpWeights {
  std::unique_ptr<PreparedLinear> fc;  // [hidden, 2 hidden]
  Tensor pre_fc_norm_embedding;        // [1, hidden], (1 + w)
  Tensor pre_fc_norm_hidden;           // [1, hidden], (1 + w)
  Tensor norm;                         // [1, hidden], (1 + w): mtp.norm
  Qwen35Layer layer;                   // mtp.layers.0, a full-attention decoder layer
};

// How the head is loaded beyond the checkpoint's own formats (ModelOptions::draft_vocab, ::mtp_format).
struct MtpLoadOptions {
  // The draft vocabulary (model/draft_vocab.h): the ids the head drafts over, ascending; empty: the whole
  // vocabulary. The draft lm_head is those rows of the main head, in its stored format.
  std::vector<int32_t> draft_ids;
  // Dense (BF16) mtp.* linears, and a dense draft lm_head, quantized to NVFP4 at load (model/weight_quantize.h):
  // a draft step reads ~0.3 of the bytes. The drafts may change; output never does (the target verifies). The
  // default of ModelOptions::mtp_format: on the trained demo model it cost 0.7% of the tokens per round at k = 3
  // (2.78 -> 2.76) and on the 27B shape it saves 1.3 ms of a k = 7 round (bench/RESULTS.md).
  bool nvfp4 = false;
  // Sizing only (the memory plan): formats and shapes, nothing computed; the draft vocabulary is then
  // draft_vocab_rows rows (0: the whole vocabulary) instead of draft_ids.
  bool shape_only = false;
  int32_t draft_vocab_rows = 0;
};
// ModelOptions::mtp_format: "" or "nvfp4" (the default: dense mtp.* quantized at load), "keep" (as stored).
Result<bool> parse_mtp_nvfp4(std::string_view option);

// Whether the checkpoint carries an MTP head (mtp.fc.weight and the rest are then required).
bool checkpoint_has_mtp(const Checkpoint& checkpoint);

// How one MTP pass gets its tokens and returns its drafts. tokens: where the pass's x_{i+1} of row i comes from —
// batch.tokens (kBatch), or what the step before it sampled at its output row i, on the device (batch.tokens are
// then placeholders; Backend::embed_samples): the previous pass's drafts, rows of the draft vocabulary
// (kPassSamples), or the tokens a verify step emitted, ids (kStepSamples). defer: the forward's `result` stays empty
// and MtpHead::take_drafts() returns the pass's drafts later (its output rows may then only sample;
// Backend::end_step_deferred).
enum class MtpTokens { kBatch, kPassSamples, kStepSamples };
struct MtpPass {
  MtpTokens tokens = MtpTokens::kBatch;
  bool defer = false;
};

class MtpHead {
 public:
  // The mtp.* tensors of `source` (BF16 in published checkpoints; load_linear decides each one's format, so a BF16
  // mtp.fc under an NVFP4 config that forgot to exclude it loads as dense). Needs config.mtp_num_hidden_layers >= 1.
  // final_norm: the main model's (1 + w) final norm weight.
  static Result<std::unique_ptr<MtpHead>> load(WeightProvider& source, const ModelConfig& config, Backend& backend,
                                               const PreparedLinear& embed, const PreparedLinear& lm_head,
                                               const Tensor& final_norm, const MtpLoadOptions& options = {});
  // Rows of the draft lm_head (the draft vocabulary's size, or the whole vocabulary).
  int64_t draft_rows() const;

  // Workspace for passes of up to max_rows pairs and up to max_outputs draft rows (once).
  Status configure(int32_t max_rows, int32_t max_outputs);
  // The MTP layer's KV cache over the main model's pages.
  // Its own layer's KV pages in `dtype` (the main cache's: --kv-cache-dtype), with its own fp8 scales.
  Result<KvCacheLayer> alloc_cache(int32_t page_size, int32_t n_pages, DType dtype) const;

  // What row r of a pass's hidden input is ([T, hidden] fp32): the main model's residual stream before its final
  // norm (Qwen35Model::final_residual), or the h' of a previous pass (output_hidden()).
  enum class Input { kMainResidual, kDraftHidden };
  // One pass over batch's pairs: batch.tokens are the x_{i+1}, row r of hidden_in gives h_i of row r, batch.seqs
  // place them (slot -1), batch.outputs are the rows to draft from (kOutSample greedy; kOutLogits for tests).
  // After it, output_hidden() holds h' (fp32) of the output rows, in output order: the hidden input of the next
  // chain step when that step has one row per output of this one.
  // With pass.tokens / pass.defer: MtpPass.
  Status forward(const StepBatch& batch, const Tensor& hidden_in, Input input, KvCacheLayer& cache,
                 int32_t page_size, StepResult& result, MtpPass pass = {});
  // The results of the deferred passes since the last call, one per pass in order, sampled rows mapped to ids. The
  // first n_steps results are of steps deferred before the passes (a verify step), returned as they are.
  Status take_drafts(std::vector<StepResult>& passes, size_t n_steps = 0);
  Tensor output_hidden(int64_t n_outputs) const { return hidden_out_[current_].first_rows(n_outputs); }

 private:
  MtpHead() = default;
  // One attempt at the pass, writing h' into hidden_out_[next].
  Status forward_once(const StepBatch& batch, const Tensor& hidden_in, Input input, KvCacheLayer& cache,
                      int32_t page_size, int next, MtpPass pass, StepResult& result);
  // Draft-vocabulary rows of a pass's samples back to token ids.
  void map_drafts(StepResult& result) const;
  struct Workspace {
    Tensor embedded;   // [T, hidden] fp32
    Tensor hidden32;   // [T, hidden] fp32: h_i = norm(main residual), then h' before the output gather
    Tensor concat;     // [T, 2 hidden] act: [norm(e) | norm(h)]
    Tensor residual;   // [T, hidden] fp32
    Tensor normed;     // [T, hidden] act
    Tensor attn_proj;  // [T, q_rows + 2 kv_rows] fp32
    Tensor attn_out;   // [T, n_heads * head_dim] act
    Tensor mixed;      // [T, hidden] fp32
    Tensor gate_up;    // [T, 2 intermediate] fp32
    Tensor mlp_act;    // [T, intermediate] act
    Tensor logits;     // [max_outputs rows (<= 64), vocab] fp32
    Tensor out_act;    // [max_outputs, hidden] act: h' of the output rows, the lm_head's input
  };

  ModelConfig config_;
  Backend* backend_ = nullptr;
  const PreparedLinear* embed_ = nullptr;
  const PreparedLinear* lm_head_ = nullptr;
  std::unique_ptr<PreparedLinear> draft_head_;  // the draft vocabulary's rows of the head; null: lm_head_
  std::vector<int32_t> draft_ids_;              // draft_head_ row -> token id
  Tensor draft_map_;                            // draft_ids_ in backend memory (embed_samples); empty: none
  std::deque<std::unique_ptr<QuantizedWeight>> kept_;  // host weights made at load (quantized, gathered rows)
  Tensor final_norm_;
  MtpWeights w_;
  AttentionParams attn_params_;
  Workspace ws_;
  Tensor hidden_out_[2];  // [max_outputs, hidden] fp32: h' of the output rows, alternating between passes
  int current_ = 0;
  int32_t max_rows_ = 0;
  int32_t max_outputs_ = 0;
};

}  // namespace voltserve
