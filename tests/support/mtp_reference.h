// The MTP head (engine/model/mtp_head.cpp) on a backend against tools/mtp.py's reference
// (tests/fixtures/models/tiny-mtp*, tools/make_mtp_fixtures.py): draft logits of the pass over each prompt (pair
// (h_i, x_{i+1}) at position i) at the recorded positions, and a greedy draft chain from the prompt's end whose
// later steps feed back the head's own h' at position + 1. Used by tests/golden/mtp_golden_test.cpp (CPU, 1e-3) and
// tests/golden/cuda_model_test.cpp (GPU, fp16 tolerances).
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "model/mtp_head.h"
#include "model/qwen35_model.h"
#include "model/weight_provider.h"

namespace voltserve::testing {

struct MtpReferenceDiff {
  float teacher_forced_worst = 0.0f;  // max |engine - reference| over the recorded positions' draft logits
  float chain_worst = 0.0f;           // ... over the greedy chain's logits
  float max_abs_logit = 0.0f;         // the reference's largest |logit| (for relative tolerances)
  bool drafts_equal = true;           // the chain's greedy drafts equal the reference's
  // The same chain as the engine drafts it (MtpDrafter): deferred passes, each embedding the draft the pass before
  // it sampled on the backend (MtpHead::Pass), equal to the host-fed chain above draft for draft.
  bool device_chain_equal = true;
};

inline float mtp_max_abs_diff(const float* a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < b.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

inline kernels::SeqDesc mtp_seq_desc(int32_t row0, int32_t n_tokens, int32_t n_past) {
  kernels::SeqDesc d;
  d.row0 = row0;
  d.n_tokens = n_tokens;
  d.n_past = n_past;
  d.slot = -1;
  return d;
}

inline MtpReferenceDiff check_mtp_against_reference(const std::filesystem::path& fixture, Backend& backend) {
  MtpReferenceDiff out;
  std::ifstream in(fixture / "reference.json");
  REQUIRE(in.good());
  const auto ref = nlohmann::json::parse(in);

  auto model = Qwen35Model::load(fixture, backend);
  REQUIRE(model.is_ok());
  const ModelConfig& cfg = (*model)->config();
  REQUIRE(cfg.mtp_num_hidden_layers == 1);
  ModelStepLimits limits;
  limits.max_tokens = 128;
  limits.max_seqs = 1;
  limits.max_page_refs = 16;
  limits.n_slots = 1;
  REQUIRE((*model)->configure(limits).is_ok());
  auto cache = (*model)->alloc_cache(16, 16, 1, 0);
  REQUIRE(cache.is_ok());
  auto ckpt = Checkpoint::open(fixture);
  REQUIRE(ckpt.is_ok());
  REQUIRE(checkpoint_has_mtp(*ckpt));
  CheckpointWeights source(*ckpt, cfg);
  auto head = MtpHead::load(source, cfg, backend, (*model)->embedding(), (*model)->output(),
                            (*model)->final_norm());
  INFO(head.status().to_string());
  REQUIRE(head.is_ok());
  REQUIRE((*head)->configure(128, 32).is_ok());
  auto kv = (*head)->alloc_cache(16, 16, (*model)->kv_cache_dtype());  // the main cache's dtype, as the runner does
  REQUIRE(kv.is_ok());
  // A head over a draft vocabulary that leaves out a few ids no reference chain drafts (so its greedy drafts are the
  // whole vocabulary's) and shifts every other id's row: its device-fed chain must map the rows back to ids.
  std::set<int32_t> drafted;
  for (const auto& p : ref["prompts"]) {
    for (int32_t t : p["mtp"]["chain_drafts"].get<std::vector<int32_t>>()) drafted.insert(t);
  }
  MtpLoadOptions shifted;
  for (int32_t id = 0, left_out = 0; id < cfg.vocab_size; ++id) {
    if (left_out < 5 && drafted.count(id) == 0) {
      ++left_out;
      continue;
    }
    shifted.draft_ids.push_back(id);
  }
  auto head_dv = MtpHead::load(source, cfg, backend, (*model)->embedding(), (*model)->output(),
                               (*model)->final_norm(), shifted);
  REQUIRE(head_dv.is_ok());
  REQUIRE((*head_dv)->configure(128, 32).is_ok());
  auto kv_dv = (*head_dv)->alloc_cache(16, 16, (*model)->kv_cache_dtype());
  REQUIRE(kv_dv.is_ok());
  const auto vocab = static_cast<size_t>(cfg.vocab_size);
  std::vector<int32_t> pages(16);
  std::iota(pages.begin(), pages.end(), 0);

  for (const auto& p : ref["prompts"]) {
    const auto ids = p["ids"].get<std::vector<int32_t>>();
    const auto n = static_cast<int32_t>(ids.size());
    const auto& m = p["mtp"];
    INFO("prompt of " << n);
    REQUIRE((*model)->reset_slot(*cache, 0).is_ok());
    // The main model over the prompt (its final-normed rows stay in the workspace).
    StepBatch main;
    main.tokens = ids;
    kernels::SeqDesc d = mtp_seq_desc(0, n, 0);
    d.slot = 0;
    d.n_prompt = n;
    main.seqs = {d};
    main.page_table = pages;
    StepResult main_result;
    REQUIRE((*model)->forward(main, *cache, main_result).is_ok());

    // One pass over (h_i, x_{i+1}), i = 0..n-1, with x_n the main model's greedy token: the recorded
    // teacher-forced positions, then the chain's first step at n - 1 (output last).
    StepBatch pass;
    pass.tokens.assign(ids.begin() + 1, ids.end());
    pass.tokens.push_back(m["chain_next_token"].get<int32_t>());
    pass.seqs = {mtp_seq_desc(0, n, 0)};
    pass.page_table = pages;
    const auto positions = m["positions"].get<std::vector<int32_t>>();
    for (int32_t pos : positions) pass.outputs.push_back({pos, kOutLogits, {}});
    OutputRow chain_row{n - 1, kOutSample | kOutLogits, {}};
    chain_row.sampling.temperature = 0.0f;
    pass.outputs.push_back(chain_row);
    StepResult r;
    REQUIRE((*head)->forward(pass, (*model)->final_residual(n), MtpHead::Input::kMainResidual, *kv, 16, r).is_ok());
    REQUIRE(r.logits.size() == pass.outputs.size() * vocab);
    float worst = 0.0f;
    for (size_t i = 0; i < positions.size(); ++i) {
      worst = std::max(worst, mtp_max_abs_diff(r.logits.data() + i * vocab, m["logits"][i].get<std::vector<float>>()));
    }
    out.teacher_forced_worst = std::max(out.teacher_forced_worst, worst);

    const auto drafts_ref = m["chain_drafts"].get<std::vector<int32_t>>();
    const auto& chain_logits = m["chain_logits"];
    std::vector<int32_t> drafts = {r.rows.back().token};
    float chain_worst = mtp_max_abs_diff(r.logits.data() + positions.size() * vocab,
                                     chain_logits[0].get<std::vector<float>>());
    Tensor h = (*head)->output_hidden(static_cast<int64_t>(pass.outputs.size())).row(
        static_cast<int64_t>(pass.outputs.size()) - 1);
    for (size_t s = 1; s < drafts_ref.size(); ++s) {
      StepBatch step;
      step.tokens = {drafts.back()};
      step.seqs = {mtp_seq_desc(0, 1, n - 1 + static_cast<int32_t>(s))};
      step.page_table = pages;
      OutputRow o{0, kOutSample | kOutLogits, {}};
      o.sampling.temperature = 0.0f;
      step.outputs = {o};
      StepResult sr;
      REQUIRE((*head)->forward(step, h, MtpHead::Input::kDraftHidden, *kv, 16, sr).is_ok());
      chain_worst = std::max(chain_worst, mtp_max_abs_diff(sr.logits.data(), chain_logits[s].get<std::vector<float>>()));
      drafts.push_back(sr.rows[0].token);
      h = (*head)->output_hidden(1);
    }
    out.chain_worst = std::max(out.chain_worst, chain_worst);
    out.drafts_equal = out.drafts_equal && drafts == drafts_ref;

    // The chain again, fed on the backend, by the whole-vocabulary head and the shifted draft vocabulary's: the
    // first pass with the chain row as its only output, then one pass per draft taking its token from the pass
    // before; the drafts come back once, at the end.
    auto device_chain = [&](MtpHead& mtp, KvCacheLayer& mtp_kv) {
      StepBatch first = pass;
      first.outputs = {OutputRow{n - 1, kOutSample, {}}};
      first.outputs[0].sampling.temperature = 0.0f;
      StepResult none;
      REQUIRE(mtp.forward(first, (*model)->final_residual(n), MtpHead::Input::kMainResidual, mtp_kv, 16, none,
                        {.tokens = MtpTokens::kBatch, .defer = true}).is_ok());
      for (size_t s = 1; s < drafts_ref.size(); ++s) {
        StepBatch step;
        step.tokens = {0};  // a placeholder
        step.seqs = {mtp_seq_desc(0, 1, n - 1 + static_cast<int32_t>(s))};
        step.page_table = pages;
        OutputRow o{0, kOutSample, {}};
        o.sampling.temperature = 0.0f;
        step.outputs = {o};
        REQUIRE(mtp.forward(step, mtp.output_hidden(1), MtpHead::Input::kDraftHidden, mtp_kv, 16, none,
                          {.tokens = MtpTokens::kPassSamples, .defer = true}).is_ok());
        REQUIRE(none.rows.empty());
      }
      std::vector<StepResult> passes;
      REQUIRE(mtp.take_drafts(passes).is_ok());
      REQUIRE(passes.size() == drafts_ref.size());
      std::vector<int32_t> chained;
      for (const StepResult& chain_pass : passes) {
        REQUIRE(chain_pass.rows.size() == 1);
        chained.push_back(chain_pass.rows[0].token);
      }
      return chained;
    };
    out.device_chain_equal = out.device_chain_equal && device_chain(**head, *kv) == drafts &&
                             device_chain(**head_dv, *kv_dv) == drafts;
  }
  for (const auto& p : ref["prompts"]) {
    for (const auto& l : p["mtp"]["logits"]) {
      for (float v : l.get<std::vector<float>>()) out.max_abs_logit = std::max(out.max_abs_logit, std::fabs(v));
    }
  }
  return out;
}

}  // namespace voltserve::testing
