// The memory plan's engine side: the model loaded into a SizingBackend (every tensor the real loader asks for,
// counted as the CUDA backend lays it out), its caches and step configured the way Qwen35Runner configures them,
// plus the kernels' scratch, CUDA graphs (an estimate), the MTP head while speculation has no loader (an estimate)
// and a safety margin; the KV pool gets what is left, up to max_running full contexts. Qwen35Runner calls it at
// load on a GPU (the device's free memory), voltserve/memory_plan.h's plan_memory for `voltserve plan`.
// Tested in tests/plan/memory_plan_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "linear/linear.h"
#include "model/model_source.h"
#include "model/qwen35_model.h"
#include "voltserve/memory_plan.h"
#include "voltserve/status.h"

namespace voltserve::plan {

// logit_bias entries one request may carry (OpenAI documents up to 300); the step buffers hold this many per slot.
inline constexpr int32_t kMaxBiasPerRow = 1024;

// Estimates for what has no allocation to count yet, and the margin (the reasons are in memory_plan.cpp).
inline constexpr int64_t kCudaContextBytes = int64_t{512} << 20;
inline constexpr int64_t kMarginBytes = int64_t{256} << 20;
inline constexpr double kMarginFraction = 0.01;

// Everything the plan depends on, resolved (no zeros meaning "default" except n_pages and logits_rows).
struct PlanInputs {
  int32_t context = 0;             // positions per sequence
  int32_t n_slots = 1;             // sequences live at once (state slots; the engine's max_running)
  int32_t n_pages = 0;             // KV pages; 0: as many as fit, up to n_slots full contexts
  int32_t page_size = 16;
  int32_t max_step_tokens = 256;   // the engine's max_tokens_per_step
  int32_t logits_rows = 0;         // lm_head rows per chunk; 0: the model's default
  int32_t max_verify_tokens = 0;   // speculative k + 1; 0: no speculation
  int32_t n_snapshots = 0;         // prefix-cache GDN state snapshot rows (ModelOptions::n_prefix_snapshots)
  int32_t n_vocab_real = 0;        // 0: the whole vocabulary
  std::string lm_head;             // ModelOptions::lm_head
  int32_t draft_vocab = 0;         // ModelOptions::draft_vocab (the MTP head's draft lm_head rows; 0: all)
  std::string mtp_format;          // ModelOptions::mtp_format
  std::string kv_cache_dtype;      // ModelOptions::kv_cache_dtype ("" or auto: fp8 when the checkpoint asks, else fp16)
  kernels::KernelFamily family = kernels::KernelFamily::kSm80;
  int64_t device_bytes = 0;        // memory the plan may use
  std::string device;              // where that figure came from (for the text)
};

// The inputs for a model of `config` loaded with `options` (context, slots, pages, page size, lm_head, real
// vocabulary) and the runner's step settings; family, device_bytes and device are the caller's.
PlanInputs plan_inputs(const ModelOptions& options, const ModelConfig& config, int32_t max_step_tokens,
                       int32_t max_verify_tokens, int32_t logits_rows);

// The step the runner configures for these inputs and KV pages (the plan sizes exactly this).
ModelStepLimits step_limits(const ModelConfig& config, const PlanInputs& in, int32_t n_pages);

// The plan for `in` (no advice).
Result<MemoryPlan> compute_plan(ModelSource& source, const PlanInputs& in);
// The plan and, when it does not fit, what would: fewer running sequences, a shorter context, no speculation, a
// quantized lm_head, an NVFP4 checkpoint of the same model.
Result<MemoryPlan> plan_with_advice(ModelSource& source, const PlanInputs& in);

// The message a start-up that does not fit fails with (the plan's lines, then the advice).
std::string does_not_fit_message(const MemoryPlan& plan);

}  // namespace voltserve::plan
