// Golden test of the CPU engine on quantized checkpoints (tools/make_quantized_fixtures.py): the ModelOpt
// MIXED_PRECISION and compressed-tensors NVFP4 fixtures against transformers logits computed on the dequantized
// weights, at every recorded position, plus the greedy continuation with incremental decode.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/linear_weight.h"
#include "model/qwen35_runner.h"
#include "support/runner_steps.h"
#include "support/tolerances.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) {
  return fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / name;
}

struct Prompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> positions;
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

std::vector<Prompt> reference(const std::string& name) {
  std::ifstream in(fixture(name) / "reference.json");
  REQUIRE(in.good());
  const auto j = nlohmann::json::parse(in);
  std::vector<Prompt> out;
  for (const auto& p : j.at("prompts")) {
    out.push_back({p.at("ids").get<std::vector<int32_t>>(), p.at("positions").get<std::vector<int32_t>>(),
                   p.at("logits").get<std::vector<std::vector<float>>>(), p.at("greedy").get<std::vector<int32_t>>()});
  }
  REQUIRE_FALSE(out.empty());
  return out;
}

std::unique_ptr<Qwen35Runner> runner_for(const std::string& name) {
  RunnerOptions opt;
  opt.model.model_dir = fixture(name).string();
  opt.model.max_context = 256;
  opt.model.n_slots = 2;
  opt.model.n_threads = 2;
  opt.max_step_tokens = 512;
  auto r = Qwen35Runner::load(opt);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("quantized fixtures hold the formats they claim", "[golden]") {
  // Guards the golden test below against silently running a dense model.
  const std::string name = GENERATE("tiny-modelopt-nvfp4-mixed", "tiny-ct-nvfp4");
  INFO("fixture " << name);
  auto config = load_model_config(fixture(name));
  REQUIRE(config.is_ok());
  auto ckpt = Checkpoint::open(fixture(name));
  REQUIRE(ckpt.is_ok());
  const auto& c = *config;
  auto gate = load_linear(*ckpt, c, "model.layers.0.mlp.gate_proj", c.intermediate_size, c.hidden_size);
  REQUIRE(gate.is_ok());
  CHECK(gate->format == WeightFormat::kNvfp4);
  auto qkv = load_linear(*ckpt, c, "model.layers.0.linear_attn.in_proj_qkv", c.linear_conv_dim(), c.hidden_size);
  REQUIRE(qkv.is_ok());
  auto a = load_linear(*ckpt, c, "model.layers.0.linear_attn.in_proj_a", c.linear_n_value_heads, c.hidden_size);
  REQUIRE(a.is_ok());
  auto head = load_linear(*ckpt, c, "lm_head", c.vocab_size, c.hidden_size);
  REQUIRE(head.is_ok());
  if (name == "tiny-modelopt-nvfp4-mixed") {
    CHECK(gate->source == WeightSource::kModelOpt);
    CHECK(qkv->format == WeightFormat::kFp8);
    CHECK(a->format == WeightFormat::kDense);
    CHECK(head->format == WeightFormat::kNvfp4);
  } else {
    CHECK(gate->source == WeightSource::kCompressedTensors);
    CHECK(qkv->format == WeightFormat::kNvfp4);
    CHECK(a->format == WeightFormat::kNvfp4);
    CHECK(head->format == WeightFormat::kDense);
  }
}

TEST_CASE("CPU logits on quantized checkpoints match transformers on the dequantized weights", "[golden]") {
  const std::string name = GENERATE("tiny-modelopt-nvfp4-mixed", "tiny-ct-nvfp4");
  INFO("fixture " << name);
  auto runner = runner_for(name);
  const int32_t vocab = runner->info().vocab_size;
  std::vector<int32_t> pages(16);
  for (int32_t i = 0; i < 16; ++i) pages[static_cast<size_t>(i)] = i;
  for (const Prompt& p : reference(name)) {
    REQUIRE(runner->reset_slot(0).is_ok());
    SeqStep step;
    step.slot = 0;
    step.page_table = pages;
    step.tokens = p.ids;
    std::vector<float> logits;
    const Status s = testing::forward_rows(*runner, std::span<const SeqStep>(&step, 1), p.positions, logits);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
    REQUIRE(logits.size() == p.positions.size() * static_cast<size_t>(vocab));
    for (size_t i = 0; i < p.positions.size(); ++i) {
      float err = 0.0f;
      for (int32_t v = 0; v < vocab; ++v) {
        const float got = logits[i * static_cast<size_t>(vocab) + static_cast<size_t>(v)];
        REQUIRE(std::isfinite(got));
        err = std::max(err, std::fabs(got - p.logits[i][static_cast<size_t>(v)]));
      }
      INFO("prompt of " << p.ids.size() << " tokens, position " << p.positions[i] << ": max |diff| " << err);
      CHECK(err <= tol::kCpuVsTransformersLogitsAbs);
    }
  }
}

TEST_CASE("Greedy decode on quantized checkpoints matches transformers", "[golden]") {
  const std::string name = GENERATE("tiny-modelopt-nvfp4-mixed", "tiny-ct-nvfp4");
  INFO("fixture " << name);
  auto runner = runner_for(name);
  std::vector<int32_t> pages(16);
  for (int32_t i = 0; i < 16; ++i) pages[static_cast<size_t>(i)] = 31 - i;  // descending: a non-trivial table
  for (const Prompt& p : reference(name)) {
    REQUIRE(runner->reset_slot(1).is_ok());
    SeqStep step;
    step.slot = 1;
    step.page_table = pages;
    step.tokens = p.ids;
    std::vector<int32_t> generated;
    std::vector<int32_t> one(1);
    std::vector<float> logits;
    for (size_t t = 0; t < p.greedy.size(); ++t) {
      const Status s = testing::forward_last(*runner, std::span<const SeqStep>(&step, 1), logits);
      INFO(s.to_string());
      REQUIRE(s.is_ok());
      generated.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      step.n_past += static_cast<int32_t>(step.tokens.size());
      one[0] = generated.back();
      step.tokens = one;
    }
    CHECK(generated == p.greedy);
  }
}

}  // namespace voltserve
