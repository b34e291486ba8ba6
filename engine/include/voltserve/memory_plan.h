// The memory plan: what a model takes on a GPU with given serving settings — weights per format as the CUDA
// backend prepacks them, the KV pages, the GDN state slots and the verify checkpoints speculation keeps, the
// workspaces and kernel scratch, CUDA graphs (an estimate) and a safety margin — and, when it does not fit, what
// would. `voltserve plan` prints it without a GPU; on a GPU the engine computes the same plan from the device's free
// memory at start-up, logs it and refuses to start when it does not fit (engine/plan/memory_plan.cpp, one module for
// both). Tested in tests/plan/memory_plan_test.cpp against the 27B tensor shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "voltserve/engine.h"
#include "voltserve/model_info.h"
#include "voltserve/status.h"

namespace voltserve {

struct MemoryPlanItem {
  std::string name;    // "weights NVFP4", "KV cache fp16", "safety margin", ...
  int64_t bytes = 0;
  std::string detail;  // how it was counted
  bool allocated = true;  // the backend allocates it (false: an estimate or the margin, held back)
};

struct MemoryPlan {
  std::string model;         // the folder, or the config with synthetic weights
  std::string device;        // where device_bytes came from
  int64_t device_bytes = 0;  // memory the plan may use: free memory at start-up, or --gpu-memory less the CUDA context
  std::vector<MemoryPlanItem> items;
  int64_t total_bytes = 0;      // sum of the items
  int64_t allocated_bytes = 0;  // sum of the items the backend allocates (what a GPU start-up compares with)
  bool fits = false;
  // The settings planned for (resolved: the context and the KV pages actually chosen).
  std::string kernel_family;  // sm70 | sm80: the layout the weights are prepacked in
  int32_t context = 0;
  int32_t max_running = 0;
  int32_t speculative_k = 0;
  int32_t max_tokens_per_step = 0;
  int32_t page_size = 0;
  int32_t n_pages = 0;            // KV pages: as many as fit, up to max_running full contexts (or as asked)
  int64_t kv_bytes_per_token = 0;  // every full-attention layer's K and V, in kv_cache_dtype
  std::string kv_cache_dtype;      // fp16 | fp8 (--kv-cache-dtype resolved)
  int64_t slot_bytes = 0;          // GDN state (+ verify checkpoints) of one sequence
  int64_t scratch_bytes = 0;       // the kernel scratch the backend reserves at start-up
  std::vector<std::string> notes;   // e.g. the KV pool is smaller than max_running full contexts
  std::vector<std::string> advice;  // when it does not fit: settings that would
  // The plan as `voltserve plan` prints it and the start-up log shows it, one line per entry.
  std::vector<std::string> lines() const;
};

struct MemoryPlanRequest {
  // model_dir or synthetic_config; max_context (0: the model's, at most 8192), n_slots (0: engine.max_running),
  // n_pages (0: as many as fit), page_size, lm_head, kernel_family ("sm70" or "sm80"; "auto" plans sm80).
  ModelOptions model;
  EngineConfig engine;             // max_running, max_tokens_per_step
  int32_t speculative_k = 0;       // draft tokens per round: verify items of k + 1 tokens keep GDN checkpoints
  int64_t gpu_memory_bytes = 0;    // the GPU's memory; the plan takes the CUDA context (an estimate) off it
  bool free_memory = false;        // gpu_memory_bytes is free memory as a start-up measured it: nothing taken off
  bool advice = true;              // when it does not fit, also work out what would (more plans)
};

Result<MemoryPlan> plan_memory(const MemoryPlanRequest& request);

// "32GB", "32GiB", "24576MiB", "24576MB", "34359738368": binary units, as GPU memory is quoted (a "32 GB" V100
// has 32 GiB). InvalidArgument naming the text otherwise.
Result<int64_t> parse_memory_size(const std::string& text);
// 1.50 GiB / 512.0 MiB / 12.0 KiB / 100 B.
std::string format_bytes(int64_t bytes);

}  // namespace voltserve
