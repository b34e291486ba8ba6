// `voltserve plan --model DIR | --config FILE --gpu-memory 32GB [--context N --max-running N --speculative-k K]`:
// the memory plan (voltserve/memory_plan.h) for a GPU of that size, without one: weights per format as the CUDA
// backend prepacks them, KV pages, GDN state and verify checkpoints, workspaces, scratch, CUDA graphs (an estimate)
// and the margin; when it does not fit, what would. `--fit` prints, per context, how many sequences fit at once at
// that full context. The same plan the engine logs at start-up on a GPU (--free-memory with the bytes that log names
// reproduces it line for line). Exit status 0: fits, 3: does not fit,
// 2: bad arguments, 1: the model could not be read. Tested by tests/plan/cli_plan_test.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "voltserve/memory_plan.h"

namespace voltserve::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::string config;
  std::string gpu_memory;
  std::string free_memory;
  int32_t context = 0;
  int32_t max_running = 16;
  int32_t speculative_k = 0;
  int32_t max_tokens_per_step = 256;
  int32_t kv_pages = 0;
  int32_t prefix_snapshots = kDefaultPrefixSnapshots;  // serve's default, so the plan is the one serve loads
  std::string kernel_family = "sm80";
  std::string lm_head = "keep";
  std::string kv_cache_dtype = "auto";
  bool fit = false;
  bool json = false;
};

[[noreturn]] void fail(const std::string& message, int code) { cli::fail("plan", message, code); }

MemoryPlanRequest make_request(const PlanArgs& a, int64_t gpu_bytes) {
  MemoryPlanRequest r;
  r.model.model_dir = a.model;
  r.model.synthetic_config = a.config;
  r.model.max_context = a.context;
  r.model.n_pages = a.kv_pages;
  r.model.n_prefix_snapshots = a.prefix_snapshots;
  r.model.kernel_family = a.kernel_family;
  r.model.lm_head = a.lm_head;
  r.model.kv_cache_dtype = a.kv_cache_dtype;
  r.engine.max_running = a.max_running;
  r.engine.max_tokens_per_step = a.max_tokens_per_step;
  r.speculative_k = a.speculative_k;
  r.gpu_memory_bytes = gpu_bytes;
  r.free_memory = !a.free_memory.empty();
  return r;
}

MemoryPlan plan_or_fail(const MemoryPlanRequest& r) {
  Result<MemoryPlan> plan = plan_memory(r);
  if (!plan.is_ok()) fail(plan.status().message(), plan.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  return std::move(plan).value();
}

nlohmann::ordered_json plan_json(const MemoryPlan& p) {
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["device"] = p.device;
  j["device_bytes"] = p.device_bytes;
  j["fits"] = p.fits;
  j["total_bytes"] = p.total_bytes;
  j["allocated_bytes"] = p.allocated_bytes;
  j["kernel_family"] = p.kernel_family;
  j["context"] = p.context;
  j["max_running"] = p.max_running;
  j["speculative_k"] = p.speculative_k;
  j["max_tokens_per_step"] = p.max_tokens_per_step;
  j["page_size"] = p.page_size;
  j["n_pages"] = p.n_pages;
  j["kv_bytes_per_token"] = p.kv_bytes_per_token;
  j["kv_cache_dtype"] = p.kv_cache_dtype;
  j["slot_bytes"] = p.slot_bytes;
  j["scratch_bytes"] = p.scratch_bytes;
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  for (const MemoryPlanItem& it : p.items) {
    items.push_back({{"name", it.name}, {"bytes", it.bytes}, {"detail", it.detail}, {"allocated", it.allocated}});
  }
  j["items"] = std::move(items);
  j["notes"] = p.notes;
  j["advice"] = p.advice;
  return j;
}

// Per context: the most sequences that fit at once, every one at that full context (the KV pool holds them all).
void run_fit(const PlanArgs& a, int64_t gpu_bytes) {
  std::vector<int32_t> contexts;
  if (a.context > 0) {
    contexts.push_back(a.context);
  } else {
    for (int32_t c = 4096; c <= 262144; c *= 2) contexts.push_back(c);
  }
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string head, kv_dtype;  // kv_dtype: --kv-cache-dtype resolved (auto names what the checkpoint asks for)
  for (int32_t context : contexts) {
    PlanArgs b = a;
    b.context = context;
    const int32_t pages_per_seq = (context + 15) / 16;
    auto plan_for = [&](int32_t m) {
      PlanArgs c = b;
      c.max_running = m;
      c.kv_pages = m * pages_per_seq;
      MemoryPlanRequest r = make_request(c, gpu_bytes);
      r.advice = false;
      return plan_or_fail(r);
    };
    int32_t lo = 0, hi = 1024;
    MemoryPlan best;
    while (lo < hi) {
      const int32_t mid = (lo + hi + 1) / 2;
      MemoryPlan p = plan_for(mid);
      if (p.fits) {
        lo = mid;
        best = std::move(p);
      } else {
        hi = mid - 1;
      }
    }
    if (head.empty()) {
      const MemoryPlan one = plan_for(1);
      head = one.model;
      kv_dtype = one.kv_cache_dtype;
    }
    rows.push_back({{"context", context}, {"max_running", lo}, {"total_bytes", lo > 0 ? best.total_bytes : 0},
                    {"kv_bytes", lo > 0 ? static_cast<int64_t>(context) * lo * best.kv_bytes_per_token : 0}});
  }
  if (a.json) {
    std::cout << nlohmann::ordered_json{{"model", head}, {"gpu_memory_bytes", gpu_bytes}, {"kv_cache_dtype", kv_dtype},
                                        {"fit", rows}}.dump(1)
              << "\n";
    return;
  }
  std::cout << "what fits: " << head << " on " << format_bytes(gpu_bytes) << ", speculative-k " << a.speculative_k
            << ", lm_head " << a.lm_head << ", KV " << kv_dtype << ", weights for " << a.kernel_family
            << " (sequences at once, each at the full context)\n";
  std::printf("  %10s  %12s  %12s  %12s\n", "context", "max-running", "KV cache", "total");
  for (const auto& r : rows) {
    const int32_t m = r["max_running"].get<int32_t>();
    std::printf("  %10d  %12d  %12s  %12s\n", r["context"].get<int32_t>(), m,
                m > 0 ? format_bytes(r["kv_bytes"].get<int64_t>()).c_str() : "-",
                m > 0 ? format_bytes(r["total_bytes"].get<int64_t>()).c_str() : "does not fit");
  }
}

void run_plan(const PlanArgs& a) {
  if (a.model.empty() == a.config.empty()) fail("give exactly one of --model DIR or --config FILE", 2);
  if (a.gpu_memory.empty() == a.free_memory.empty()) fail("give exactly one of --gpu-memory or --free-memory", 2);
  Result<int64_t> gpu = parse_memory_size(a.free_memory.empty() ? a.gpu_memory : a.free_memory);
  if (!gpu.is_ok()) fail(gpu.status().message(), 2);
  if (a.max_running < 1 || a.max_tokens_per_step < 1 || a.context < 0 || a.speculative_k < 0 || a.kv_pages < 0) {
    fail("--max-running and --max-tokens-per-step must be >= 1; --context, --speculative-k and --kv-pages >= 0", 2);
  }
  if (a.fit) {
    run_fit(a, gpu.value());
    return;
  }
  const MemoryPlan plan = plan_or_fail(make_request(a, gpu.value()));
  if (a.json) {
    std::cout << plan_json(plan).dump(1) << "\n";
  } else {
    for (const std::string& line : plan.lines()) std::cout << line << "\n";
  }
  if (!plan.fits) throw CLI::RuntimeError(3);
}

}  // namespace

void register_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Print the memory plan of a model on a GPU of a given size (no GPU needed): weights per format, KV "
              "cache, GDN state, workspaces, margin; what would fit when it does not. Exit 0: fits, 3: does not fit");
  cmd->add_option("--model", a->model, "Hugging Face model folder (its tensors decide each layer's format)");
  cmd->add_option("--config", a->config, "a config.json of the real shapes instead, e.g. config/models/qwen3.5-27b-nvfp4.json");
  cmd->add_option("--gpu-memory", a->gpu_memory, "the GPU's memory: 32GB, 24GiB, 24576MiB (binary units: 1 GB = 2^30)");
  cmd->add_option("--free-memory", a->free_memory, "instead: the free memory a start-up measured (its log names the "
                                                   "bytes); reproduces that start-up's plan");
  cmd->add_option("--context", a->context, "positions per sequence (default: the model's, at most 8192)");
  cmd->add_option("--max-running", a->max_running, "sequences decoded together, each with a GDN state slot (default 16)");
  cmd->add_option("--speculative-k", a->speculative_k,
                  "draft tokens per round: k + 1 GDN checkpoints per slot and the MTP head (default 0)");
  cmd->add_option("--max-tokens-per-step", a->max_tokens_per_step, "the engine's token budget per step (default 256)");
  cmd->add_option("--kv-pages", a->kv_pages, "KV pages of 16 tokens (default: as many as fit, up to every running "
                                             "sequence at full context)");
  cmd->add_option("--prefix-cache-snapshots", a->prefix_snapshots,
                  "prefix-cache GDN state snapshots (default 8, serve's; 0 = --no-prefix-cache)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--kernel-family", a->kernel_family, "weight layout: sm70 (V100) or sm80 (Ampere and newer; default)")
      ->check(CLI::IsMember({"sm70", "sm80"}));
  cmd->add_option("--lm-head", a->lm_head, "keep (as the checkpoint stores it), fp8 or nvfp4 (quantized at load)")
      ->check(CLI::IsMember({"keep", "fp8", "nvfp4"}));
  cmd->add_option("--kv-cache-dtype", a->kv_cache_dtype, "KV pages: auto (fp8 when the checkpoint's "
                  "kv_cache_quant_algo is FP8, else fp16), fp16 or fp8 (e4m3: half the bytes, twice the pages)")
      ->check(CLI::IsMember({"auto", "fp16", "fp8"}));
  cmd->add_flag("--fit", a->fit, "per context (4k .. 256k, or --context), the most sequences that fit at once at that "
                                 "full context");
  cmd->add_flag("--json", a->json, "print JSON");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace voltserve::cli
