// The memory plan on a GPU (label gpu; scripts/gpu-check.sh runs it): the runner plans from the device's free
// memory before it loads, and the CUDA backend then allocates exactly what the plan counted — on the fixture
// checkpoints (BF16, ModelOpt mixed NVFP4/FP8, compressed-tensors NVFP4; a quantized lm_head; verify checkpoints)
// and on the 27B configs with synthetic weights — and steps up to the planned size allocate nothing more (the kernel
// scratch was reserved at load) — and the start-up plan is, line for line past the device line, the one
// `voltserve plan --free-memory <the bytes it measured>` computes for the same settings (plan_memory).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "model/qwen35_runner.h"
#include "voltserve/memory_plan.h"

using namespace voltserve;

namespace {

bool have_gpu() {
  std::string why;
  return cuda_backend_available(&why);
}

std::unique_ptr<Qwen35Runner> load(RunnerOptions opt) {
  auto r = Qwen35Runner::load(opt);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

// A prefill of the whole step and a decode, in slot 0.
void run_steps(Qwen35Runner& r, int32_t n_prompt) {
  REQUIRE(r.reset_slot(0).is_ok());
  std::vector<int32_t> pages(static_cast<size_t>((n_prompt + 16) / 16 + 1));
  std::iota(pages.begin(), pages.end(), 0);
  std::vector<int32_t> ids(static_cast<size_t>(n_prompt));
  const auto vocab = static_cast<int32_t>(std::min<int64_t>(r.config().vocab_size, 300));  // tiny-mtp has 96
  for (int32_t i = 0; i < n_prompt; ++i) ids[static_cast<size_t>(i)] = (i * 37) % vocab;
  for (int pass = 0; pass < 2; ++pass) {
    SeqStep st;
    st.slot = 0;
    st.page_table = pages;
    st.n_past = pass == 0 ? 0 : n_prompt;
    st.tokens = pass == 0 ? std::span<const int32_t>(ids) : std::span<const int32_t>(ids).first(1);
    st.n_prompt = n_prompt;
    RowRequest row;
    row.token_index = static_cast<int32_t>(st.tokens.size()) - 1;
    row.flags = kOutSample;
    StepResult result;
    const Status s = r.step({std::span<const SeqStep>(&st, 1), std::span<const RowRequest>(&row, 1), {}}, result);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
  }
}

// What `voltserve plan --free-memory` prints for the settings the runner was loaded with equals the start-up plan
// (the device line names the device at start-up and the flag in the CLI: it is left out).
void check_same_as_cli(const RunnerOptions& opt, const MemoryPlan& startup) {
  MemoryPlanRequest req;
  req.model = opt.model;
  req.engine.max_running = opt.model.n_slots;
  req.engine.max_tokens_per_step = opt.max_step_tokens;
  req.speculative_k = opt.max_verify_tokens > 0 ? opt.max_verify_tokens - 1 : 0;
  req.gpu_memory_bytes = startup.device_bytes;
  req.free_memory = true;
  req.model.kernel_family = startup.kernel_family;
  auto cli = plan_memory(req);
  INFO(cli.status().to_string());
  REQUIRE(cli.is_ok());
  std::vector<std::string> a = startup.lines();
  std::vector<std::string> b = cli.value().lines();
  REQUIRE(a.size() == b.size());
  for (size_t i = 1; i < a.size(); ++i) {
    INFO("line " << i);
    CHECK(a[i] == b[i]);
  }
}

void check_exact(Qwen35Runner& r, const RunnerOptions& opt, int32_t step_tokens) {
  REQUIRE(r.memory_plan().has_value());
  const MemoryPlan& plan = *r.memory_plan();
  for (const std::string& line : plan.lines()) UNSCOPED_INFO(line);
  check_same_as_cli(opt, plan);
  const auto before = r.backend().device_memory();
  REQUIRE(before.has_value());
  CHECK(before->allocated_bytes == plan.allocated_bytes);
  CHECK(plan.fits);
  run_steps(r, step_tokens);
  CHECK(r.backend().device_memory()->allocated_bytes == before->allocated_bytes);
}

}  // namespace

TEST_CASE("GPU: the CUDA backend allocates exactly what the memory plan counted, fixture checkpoints", "[gpu]") {
  if (!have_gpu()) SKIP("no CUDA device");
  struct Case {
    const char* model;
    const char* lm_head;
    int32_t verify;
    const char* kv = "auto";
  };
  for (const Case c : {Case{"tiny-untied-sharded", "keep", 0}, Case{"tiny-untied-sharded", "nvfp4", 0},
                       Case{"tiny-untied-sharded", "fp8", 4}, Case{"tiny-tied", "fp8", 0},
                       Case{"tiny-modelopt-nvfp4-mixed", "keep", 4}, Case{"tiny-ct-nvfp4", "keep", 0},
                       Case{"tiny-untied-sharded", "keep", 0, "fp8"}, Case{"tiny-mtp", "keep", 4, "fp8"},
                       Case{"tiny-modelopt-nvfp4-mixed", "keep", 4, "fp8"}}) {
    for (const char* family : {"sm70", "sm80"}) {
      INFO(c.model << " lm_head " << c.lm_head << " verify " << c.verify << " kv " << c.kv << " " << family);
      RunnerOptions opt;
      opt.model.model_dir = std::string(VOLTSERVE_SOURCE_DIR) + "/tests/fixtures/models/" + c.model;
      opt.model.backend = "cuda";
      opt.model.kernel_family = family;
      opt.model.lm_head = c.lm_head;
      opt.model.kv_cache_dtype = c.kv;
      opt.model.max_context = 256;
      opt.model.n_slots = 3;
      opt.max_step_tokens = 128;
      opt.max_verify_tokens = c.verify;
      opt.max_draft_tokens = c.verify > 0 ? c.verify - 1 : 0;  // as the engine sets them (tiny-mtp loads its head)
      auto r = load(opt);
      check_exact(*r, opt, 128);
    }
  }
}

TEST_CASE("GPU: the 27B configs (synthetic weights) allocate exactly the plan", "[gpu][slow]") {
  if (!have_gpu()) SKIP("no CUDA device");
  for (const char* kv : {"auto", "fp8"}) for (const char* cfg : {"qwen3.5-27b-nvfp4", "qwen3.8-27b-mixed"}) {
    INFO(cfg << " kv " << kv);
    RunnerOptions opt;
    opt.model.synthetic_config = std::string(VOLTSERVE_SOURCE_DIR) + "/config/models/" + cfg + ".json";
    opt.model.backend = "cuda";
    opt.model.kv_cache_dtype = kv;
    opt.model.max_context = 4096;
    opt.model.n_slots = 2;
    opt.max_step_tokens = 256;
    auto r = load(opt);
    check_exact(*r, opt, 256);
  }
}
