// plan_memory (voltserve/memory_plan.h): the plan `voltserve plan` prints, for a GPU of a given size, without one.
#include <algorithm>

#include <fmt/format.h>

#include "plan/memory_plan.h"

namespace voltserve {

namespace plan {

PlanInputs plan_inputs(const ModelOptions& options, const ModelConfig& config, int32_t max_step_tokens,
                       int32_t max_verify_tokens, int32_t logits_rows) {
  PlanInputs in;
  in.context = options.max_context > 0 ? options.max_context : default_context(config);
  in.n_slots = options.n_slots;
  in.n_pages = options.n_pages;
  in.page_size = options.page_size;
  in.max_step_tokens = max_step_tokens;
  in.logits_rows = logits_rows;
  in.max_verify_tokens = max_verify_tokens;
  in.n_snapshots = std::max(0, options.n_prefix_snapshots);
  in.draft_vocab = std::max(0, options.draft_vocab);
  in.mtp_format = options.mtp_format;
  in.n_vocab_real = static_cast<int32_t>(config.vocab_size);
  if (options.n_vocab_real > 0 && options.n_vocab_real < in.n_vocab_real) in.n_vocab_real = options.n_vocab_real;
  in.lm_head = options.lm_head;
  in.kv_cache_dtype = options.kv_cache_dtype;
  return in;
}

}  // namespace plan

Result<MemoryPlan> plan_memory(const MemoryPlanRequest& request) {
  if (request.free_memory && request.gpu_memory_bytes <= 0) {
    return invalid_argument("--free-memory must be more than 0 bytes");
  }
  if (!request.free_memory && request.gpu_memory_bytes <= plan::kCudaContextBytes) {
    return invalid_argument("--gpu-memory " + format_bytes(request.gpu_memory_bytes) + " is smaller than the " +
                            format_bytes(plan::kCudaContextBytes) + " a CUDA context takes");
  }
  if (request.speculative_k < 0) return invalid_argument("--speculative-k must be >= 0");
  const std::string& family = request.model.kernel_family;
  if (family != "auto" && family != "sm70" && family != "sm80") {
    return invalid_argument("unknown kernel family '" + family + "' (sm70, sm80 or auto)");
  }
  VS_ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> source, open_model_source(request.model));
  ModelOptions mo = request.model;
  if (mo.n_slots <= 0) mo.n_slots = request.engine.max_running;
  const int32_t verify = request.speculative_k > 0 ? request.speculative_k + 1 : 0;
  plan::PlanInputs in = plan::plan_inputs(mo, source->config, request.engine.max_tokens_per_step, verify, 0);
  in.family = family == "sm70" ? kernels::KernelFamily::kSm70 : kernels::KernelFamily::kSm80;
  if (request.free_memory) {
    in.device_bytes = request.gpu_memory_bytes;
    in.device = fmt::format("{} free (--free-memory {})", format_bytes(in.device_bytes), in.device_bytes);
  } else {
    in.device_bytes = request.gpu_memory_bytes - plan::kCudaContextBytes;
    in.device = fmt::format("{} (--gpu-memory) less {} for the CUDA context (an estimate; at start-up the device's "
                            "free memory is measured) = {}", format_bytes(request.gpu_memory_bytes),
                            format_bytes(plan::kCudaContextBytes), format_bytes(in.device_bytes));
  }
  return request.advice ? plan::plan_with_advice(*source, in) : plan::compute_plan(*source, in);
}

}  // namespace voltserve
