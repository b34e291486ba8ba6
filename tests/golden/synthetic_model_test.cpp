// Synthetic models (ModelOptions::synthetic_config): the 27B configs of config/models/ parse with the shapes of
// MODEL.md §1.1 and give each layer the format their quantization_config names; a small synthetic model of the same
// formats loads and generates finite, reproducible output on the CPU backend through the Engine.
#include <catch2/catch_test_macros.hpp>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/qwen35_runner.h"
#include "model/weight_provider.h"
#include "voltserve/engine.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

fs::path config_path(const std::string& name) { return fs::path(VOLTSERVE_SOURCE_DIR) / "config" / "models" / name; }

ModelConfig parse(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  auto c = parse_model_config(text.str(), "", "", {});
  INFO(p.string() << ": " << c.status().to_string());
  REQUIRE(c.is_ok());
  return std::move(c).value();
}

WeightFormat format_of(const ModelConfig& c, const std::string& module, int64_t n, int64_t k) {
  SyntheticWeights w(c, 1, "test");
  auto r = w.linear(module, n, k);
  REQUIRE(r.is_ok());
  CHECK(r->codes == nullptr);
  return r->format;
}

std::vector<int32_t> run(Engine& engine, const std::vector<int32_t>& prompt) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  bool done = false;
  Request r;
  r.prompt_ids = prompt;
  r.max_new_tokens = 12;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  REQUIRE(engine.submit(r, [&](Event ev) {
                  std::lock_guard lk(mu);
                  REQUIRE(ev.finish_reason != FinishReason::kError);
                  tokens.insert(tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
                  if (ev.finished) {
                    done = true;
                    cv.notify_all();
                  }
                }).is_ok());
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
  return tokens;
}

}  // namespace

TEST_CASE("The 27B model configs parse with the real shapes and per-layer formats", "[unit]") {
  const ModelConfig nv = parse(config_path("qwen3.5-27b-nvfp4.json"));
  CHECK(nv.hidden_size == 5120);
  CHECK(nv.n_layers == 64);
  CHECK(nv.n_full_attention_layers() == 16);
  CHECK(nv.linear_conv_dim() == 10240);
  CHECK(nv.intermediate_size == 17408);
  CHECK(nv.vocab_size == 248320);
  CHECK(nv.rotary_dim == 64);
  CHECK_FALSE(nv.tie_word_embeddings);
  const std::string p = nv.tensor_prefix;
  CHECK(format_of(nv, p + "layers.0.mlp.gate_proj", 17408, 5120) == WeightFormat::kNvfp4);
  CHECK(format_of(nv, p + "layers.0.linear_attn.in_proj_qkv", 10240, 5120) == WeightFormat::kNvfp4);
  CHECK(format_of(nv, p + "layers.0.linear_attn.in_proj_a", 48, 5120) == WeightFormat::kDense);
  CHECK(format_of(nv, p + "layers.3.self_attn.q_proj", 12288, 5120) == WeightFormat::kNvfp4);
  CHECK(format_of(nv, "lm_head", 248320, 5120) == WeightFormat::kDense);
  CHECK(format_of(nv, p + "embed_tokens", 248320, 5120) == WeightFormat::kDense);

  const ModelConfig head = parse(config_path("qwen3.5-27b-nvfp4-head.json"));
  CHECK(format_of(head, "lm_head", 248320, 5120) == WeightFormat::kNvfp4);

  const ModelConfig mixed = parse(config_path("qwen3.8-27b-mixed.json"));
  CHECK(format_of(mixed, p + "layers.0.linear_attn.in_proj_qkv", 10240, 5120) == WeightFormat::kFp8);
  CHECK(format_of(mixed, p + "layers.63.self_attn.o_proj", 5120, 6144) == WeightFormat::kFp8);
  CHECK(format_of(mixed, p + "layers.5.mlp.down_proj", 5120, 17408) == WeightFormat::kNvfp4);
  CHECK(format_of(mixed, p + "layers.0.linear_attn.in_proj_b", 48, 5120) == WeightFormat::kDense);
  CHECK(format_of(mixed, "lm_head", 248320, 5120) == WeightFormat::kNvfp4);

  const ModelConfig bf16 = parse(config_path("qwen3.5-27b-bf16.json"));
  CHECK(format_of(bf16, p + "layers.0.mlp.gate_proj", 17408, 5120) == WeightFormat::kDense);
}

TEST_CASE("A small synthetic model of mixed formats generates finite, reproducible tokens on the CPU", "[golden]") {
  // The mixed 27B config, shrunk to a few small layers of the same formats.
  std::ifstream in(config_path("qwen3.8-27b-mixed.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  nlohmann::json& t = j["text_config"];
  t["hidden_size"] = 64;
  t["num_hidden_layers"] = 4;
  t["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  t["num_attention_heads"] = 4;
  t["num_key_value_heads"] = 2;
  t["head_dim"] = 32;
  t["linear_num_key_heads"] = 2;
  t["linear_num_value_heads"] = 4;
  t["linear_key_head_dim"] = 16;
  t["linear_value_head_dim"] = 16;
  t["intermediate_size"] = 96;
  t["vocab_size"] = 512;
  t["max_position_embeddings"] = 256;
  const fs::path file = fs::temp_directory_path() / ("voltserve-synthetic-" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << j.dump();
  ModelOptions mo;
  mo.synthetic_config = file.string();
  mo.synthetic_seed = 7;
  mo.backend = "cpu";
  mo.n_threads = 2;
  mo.max_context = 128;
  EngineConfig ec;
  ec.max_running = 2;
  ec.max_tokens_per_step = 64;
  ec.prefill_chunk = 32;
  auto a = Engine::load(mo, ec);
  INFO(a.status().to_string());
  REQUIRE(a.is_ok());
  CHECK((*a)->model_info().weight_bytes > 0);
  CHECK((*a)->model_info().state_bytes_per_seq == 3 * 4 * (4 * 16 * 16 + (2 * 2 * 16 + 4 * 16) * 3));
  const std::vector<int32_t> prompt = {5, 17, 300, 2, 99, 41};
  const auto first = run(**a, prompt);
  CHECK(first.size() == 12);
  CHECK(run(**a, prompt) == first);  // deterministic
  auto b = Engine::load(mo, ec);     // the same seed: the same weights
  REQUIRE(b.is_ok());
  CHECK(run(**b, prompt) == first);
  mo.synthetic_seed = 8;
  auto c = Engine::load(mo, ec);
  REQUIRE(c.is_ok());
  CHECK(run(**c, prompt) != first);  // another seed: other weights
  fs::remove(file);
}

// ModelInfo::weight_bytes is what a decode step streams: an untied embedding table is held but not streamed (a step
// reads one row of it per token); a tied one is also the output head and streams. CPU backend: fp32 weights.
TEST_CASE("model info: weight_bytes leaves out an untied embedding table, not a tied one", "[unit]") {
  auto held_minus_streamed = [](const std::string& fixture) {
    RunnerOptions opt;
    opt.model.model_dir = (fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / fixture).string();
    opt.model.backend = "cpu";
    opt.model.n_threads = 1;
    opt.model.max_context = 64;
    opt.model.n_slots = 1;
    auto r = Qwen35Runner::load(opt);
    INFO(fixture << ": " << r.status().to_string());
    REQUIRE(r.is_ok());
    CHECK((*r)->info().weight_bytes > 0);
    return (*r)->backend().weight_bytes() - (*r)->info().weight_bytes;
  };
  CHECK(held_minus_streamed("tiny-untied-sharded") == int64_t{384} * 64 * 4);  // config.json: vocab 384, hidden 64
  CHECK(held_minus_streamed("tiny-tied") == 0);
}

}  // namespace voltserve
