// The MTP head (engine/model/mtp_head.cpp) on the CPU backend against tools/mtp.py's reference
// (tests/fixtures/models/tiny-mtp*, tools/make_mtp_fixtures.py): draft logits of the pass over a prompt (pair
// (h_i, x_{i+1}) at position i, the main model's final-normed h_i) at the recorded positions, and a greedy draft
// chain from the prompt's end whose later steps feed back the head's own h' at position + 1.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "model/mtp_head.h"
#include "model/qwen35_model.h"
#include "model/weight_provider.h"
#include "support/tolerances.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir(const std::string& name) {
  return fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / name;
}

float max_abs_diff(const float* a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < b.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

kernels::SeqDesc seq_desc(int32_t row0, int32_t n_tokens, int32_t n_past) {
  kernels::SeqDesc d;
  d.row0 = row0;
  d.n_tokens = n_tokens;
  d.n_past = n_past;
  d.slot = -1;
  return d;
}

}  // namespace

TEST_CASE("MTP head: draft logits and the greedy draft chain equal the PyTorch reference", "[golden]") {
  const std::string name = GENERATE("tiny-mtp", "tiny-mtp-copy");
  INFO("fixture " << name);
  std::ifstream in(fixture_dir(name) / "reference.json");
  REQUIRE(in.good());
  const auto ref = nlohmann::json::parse(in);

  auto backend = make_cpu_backend({2, GdnMode::kSequential});
  auto model = Qwen35Model::load(fixture_dir(name), *backend);
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
  auto ckpt = Checkpoint::open(fixture_dir(name));
  REQUIRE(ckpt.is_ok());
  REQUIRE(checkpoint_has_mtp(*ckpt));
  CheckpointWeights source(*ckpt, cfg);
  auto head = MtpHead::load(source, cfg, *backend, (*model)->embedding(), (*model)->output(),
                            (*model)->final_norm());
  INFO(head.status().to_string());
  REQUIRE(head.is_ok());
  REQUIRE((*head)->configure(128, 32).is_ok());
  auto kv = (*head)->alloc_cache(16, 16);
  REQUIRE(kv.is_ok());
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
    kernels::SeqDesc d = seq_desc(0, n, 0);
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
    pass.seqs = {seq_desc(0, n, 0)};
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
      worst = std::max(worst, max_abs_diff(r.logits.data() + i * vocab, m["logits"][i].get<std::vector<float>>()));
    }
    INFO("teacher-forced draft logits: max |engine - reference| " << worst);
    CHECK(worst <= tol::kCpuVsTransformersLogitsAbs);

    const auto drafts_ref = m["chain_drafts"].get<std::vector<int32_t>>();
    const auto& chain_logits = m["chain_logits"];
    std::vector<int32_t> drafts = {r.rows.back().token};
    float chain_worst = max_abs_diff(r.logits.data() + positions.size() * vocab,
                                     chain_logits[0].get<std::vector<float>>());
    Tensor h = (*head)->output_hidden(static_cast<int64_t>(pass.outputs.size())).row(
        static_cast<int64_t>(pass.outputs.size()) - 1);
    for (size_t s = 1; s < drafts_ref.size(); ++s) {
      StepBatch step;
      step.tokens = {drafts.back()};
      step.seqs = {seq_desc(0, 1, n - 1 + static_cast<int32_t>(s))};
      step.page_table = pages;
      OutputRow o{0, kOutSample | kOutLogits, {}};
      o.sampling.temperature = 0.0f;
      step.outputs = {o};
      StepResult sr;
      REQUIRE((*head)->forward(step, h, MtpHead::Input::kDraftHidden, *kv, 16, sr).is_ok());
      chain_worst = std::max(chain_worst, max_abs_diff(sr.logits.data(), chain_logits[s].get<std::vector<float>>()));
      drafts.push_back(sr.rows[0].token);
      h = (*head)->output_hidden(1);
    }
    INFO("draft chain logits: max |engine - reference| " << chain_worst);
    CHECK(chain_worst <= tol::kCpuVsTransformersLogitsAbs);
    CHECK(drafts == drafts_ref);
  }
}

TEST_CASE("MTP head: a model without mtp tensors or without mtp layers is refused with a message", "[golden]") {
  auto backend = make_cpu_backend({1, GdnMode::kAuto});
  auto model = Qwen35Model::load(fixture_dir("tiny-tied"), *backend);
  REQUIRE(model.is_ok());
  auto ckpt = Checkpoint::open(fixture_dir("tiny-tied"));
  REQUIRE(ckpt.is_ok());
  CHECK_FALSE(checkpoint_has_mtp(*ckpt));
  CheckpointWeights source(*ckpt, (*model)->config());
  auto head = MtpHead::load(source, (*model)->config(), *backend, (*model)->embedding(), (*model)->output(),
                            (*model)->final_norm());
  REQUIRE_FALSE(head.is_ok());
  CHECK(head.status().message().find("mtp_num_hidden_layers") != std::string::npos);
  ModelConfig with_layers = (*model)->config();
  with_layers.mtp_num_hidden_layers = 1;
  auto missing = MtpHead::load(source, with_layers, *backend, (*model)->embedding(), (*model)->output(),
                            (*model)->final_norm());
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("mtp.fc") != std::string::npos);
}

}  // namespace voltserve
