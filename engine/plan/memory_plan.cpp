// compute_plan / plan_with_advice (see memory_plan.h) and voltserve/memory_plan.h's plan_memory.
#include "plan/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "attention/attention.h"
#include "model/kv_cache_dtype.h"
#include "model/mtp_head.h"
#include "backend/cuda_layout.h"
#include "gdn/gdn.h"
#include "model/quantized_head.h"
#include "plan/sizing_backend.h"
#include "sampling/sampling.h"

namespace voltserve {
namespace plan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// CUDA graphs are not captured yet. When they are, the engine keeps one per batch size of the decode step (and of
// the verify step with speculation); what an instantiated graph holds on the device is undocumented, so count a
// pool base and a few KiB per kernel node (about ten kernels per layer: norms, the merged projections, the mixer,
// SwiGLU). Replace with the measured figure once graphs land.
constexpr int64_t kGraphBaseBytes = 32 * kMiB;
constexpr int64_t kGraphNodeBytes = 4 << 10;
constexpr int64_t kKernelsPerLayer = 10;
// The margin covers what the backend does not allocate itself: cuBLAS's workspace and lazily loaded kernels, the
// allocator's granularity and fragmentation, and the free figure moving between the measurement and the load.

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string head_format_name(WeightFormat f) {
  return f == WeightFormat::kNvfp4 ? "NVFP4" : f == WeightFormat::kFp8 ? "FP8" : "fp16";
}

std::map<Use, Tally> diff(const std::map<Use, Tally>& after, const std::map<Use, Tally>& before) {
  std::map<Use, Tally> d;
  for (const auto& [use, t] : after) {
    const auto it = before.find(use);
    const Tally b = it == before.end() ? Tally{} : it->second;
    if (t.bytes != b.bytes || t.count != b.count) d[use] = {t.bytes - b.bytes, t.count - b.count};
  }
  return d;
}

int64_t bytes_of(const std::map<Use, Tally>& m, Use use) {
  const auto it = m.find(use);
  return it == m.end() ? 0 : it->second.bytes;
}
int64_t count_of(const std::map<Use, Tally>& m, Use use) {
  const auto it = m.find(use);
  return it == m.end() ? 0 : it->second.count;
}

// The MTP head as the runner loads it when it speculates (Qwen35Runner::load_drafter: a verify size, and mtp.*
// tensors in the checkpoint): its weights and its workspace for max_step_tokens rows through the sizing backend,
// and its attention layer's KV per page. Taken back out of the sizing backend's tallies, so that the model's own
// lines stay the model's.
struct MtpSizes {
  int64_t bytes = 0;  // weights + workspace
  int64_t kv_per_page = 0;
};
Result<MtpSizes> size_mtp(ModelSource& source, const Qwen35Model& model, SizingBackend& sb, const PlanInputs& in,
                          DType kv_dtype) {
  MtpSizes m;
  const ModelConfig& c = source.config;
  if (in.max_verify_tokens <= 0 || c.mtp_num_hidden_layers < 1) return m;
  if (source.checkpoint != nullptr && !checkpoint_has_mtp(*source.checkpoint)) return m;
  auto take_back = [&](const std::map<Use, Tally>& before) {
    const std::map<Use, Tally> d = diff(sb.tallies(), before);
    for (const auto& [use, t] : d) sb.add(use, -t.bytes, -t.count);
    return d;
  };
  const std::map<Use, Tally> before = sb.tallies();
  MtpLoadOptions mo;
  VS_ASSIGN_OR_RETURN(mo.nvfp4, parse_mtp_nvfp4(in.mtp_format));
  mo.shape_only = true;
  mo.draft_vocab_rows = in.draft_vocab > 0 && in.draft_vocab < in.n_vocab_real ? in.draft_vocab : 0;
  VS_ASSIGN_OR_RETURN(std::unique_ptr<MtpHead> head, MtpHead::load(*source.weights, c, sb, model.embedding(),
                                                                   model.output(), model.final_norm(), mo));
  VS_RETURN_IF_ERROR(head->configure(in.max_step_tokens, in.n_slots));
  auto kv_at = [&](int32_t n_pages) -> Result<int64_t> {
    const std::map<Use, Tally> b = sb.tallies();
    VS_ASSIGN_OR_RETURN(KvCacheLayer layer, head->alloc_cache(in.page_size, n_pages, kv_dtype));
    (void)layer;
    return bytes_of(take_back(b), Use::kKvCache);
  };
  VS_ASSIGN_OR_RETURN(const int64_t kv1, kv_at(1));
  VS_ASSIGN_OR_RETURN(const int64_t kv2, kv_at(2));
  m.kv_per_page = kv2 - kv1;
  for (const auto& [use, t] : take_back(before)) m.bytes += t.bytes;
  return m;
}

int64_t kernel_scratch(const ModelConfig& c, const SizingBackend& sb, const ModelStepLimits& lim,
                       const PlanInputs& in) {
  const int32_t T = lim.max_tokens;
  int64_t most = sb.linear_scratch_bytes(T, lim.logits_rows);
  if (c.n_full_attention_layers() > 0) {
    kernels::attention::Params kp;
    kp.n_heads = static_cast<int32_t>(c.n_heads);
    kp.n_kv_heads = static_cast<int32_t>(c.n_kv_heads);
    kp.head_dim = static_cast<int32_t>(c.head_dim);
    kp.rotary_dim = static_cast<int32_t>(c.rotary_dim);
    kp.page_size = in.page_size;
    // The largest step: T rows, every slot a sequence, one sequence of T rows, the whole context.
    most = std::max<int64_t>(most, static_cast<int64_t>(
                                       kernels::attention::workspace_bytes(kp, T, lim.max_seqs, T, in.context)));
  }
  if (c.n_linear_attention_layers() > 0) {
    kernels::gdn::Params gp;
    gp.n_k_heads = static_cast<int32_t>(c.linear_n_key_heads);
    gp.n_v_heads = static_cast<int32_t>(c.linear_n_value_heads);
    gp.head_k_dim = static_cast<int32_t>(c.linear_key_head_dim);
    gp.head_v_dim = static_cast<int32_t>(c.linear_value_head_dim);
    gp.conv_kernel = static_cast<int32_t>(c.linear_conv_kernel_dim);
    most = std::max<int64_t>(most, static_cast<int64_t>(kernels::gdn::workspace_bytes(gp, T, lim.max_seqs, T)));
  }
  const int32_t n_real = lim.n_vocab_real > 0 ? lim.n_vocab_real : static_cast<int32_t>(c.vocab_size);
  most = std::max<int64_t>(most, static_cast<int64_t>(kernels::sampling::workspace_bytes(lim.logits_rows, n_real)));
  return most;
}

}  // namespace

ModelStepLimits step_limits(const ModelConfig& config, const PlanInputs& in, int32_t n_pages) {
  (void)config;
  const int32_t pages_per_seq = static_cast<int32_t>(ceil_div(in.context, in.page_size));
  ModelStepLimits limits;
  limits.max_tokens = in.max_step_tokens;
  limits.max_seqs = in.n_slots;
  limits.max_page_refs = std::min<int32_t>(pages_per_seq, n_pages) * in.n_slots;
  limits.max_bias = kMaxBiasPerRow * in.n_slots;
  limits.logits_rows = in.logits_rows;
  limits.n_slots = in.n_slots;
  limits.n_vocab_real = in.n_vocab_real;
  return limits;
}

Result<MemoryPlan> compute_plan(ModelSource& source, const PlanInputs& in) {
  const ModelConfig& c = source.config;
  if (in.context < 1 || in.n_slots < 1 || in.page_size < 1 || in.max_step_tokens < 1 || in.n_pages < 0 ||
      in.max_verify_tokens < 0) {
    return invalid_argument("memory plan: context, max-running, page size and tokens per step must be >= 1");
  }
  VS_ASSIGN_OR_RETURN(HeadQuant head, parse_head_quant(in.lm_head));
  SizingBackend sb(in.family);
  std::unique_ptr<QuantizedHeadWeights> quantized_head;
  WeightProvider* weights = source.weights.get();
  if (!head.keep) {
    quantized_head = std::make_unique<QuantizedHeadWeights>(*source.weights, c, head.format, /*shape_only=*/true);
    weights = quantized_head.get();
  }
  // The plan is the CUDA backend's: auto means fp16 unless the checkpoint asks for fp8; bf16 is CPU-only.
  VS_ASSIGN_OR_RETURN(const DType kv_dtype, resolve_kv_cache_dtype(in.kv_cache_dtype, c, DType::kF16));
  if (kv_dtype == DType::kBF16) {
    return invalid_argument("--kv-cache-dtype bf16: the CUDA backend's attention reads fp16 or fp8 KV pages");
  }
  VS_ASSIGN_OR_RETURN(std::unique_ptr<Qwen35Model> model, Qwen35Model::load(c, *weights, sb));
  model->set_kv_cache_dtype(kv_dtype);
  const std::map<Use, Tally> loaded = sb.tallies();

  const int64_t pages_per_seq = ceil_div(in.context, in.page_size);
  const int64_t full_pages = pages_per_seq * in.n_slots;
  // The caches from the model's own allocations: KV grows by a page, state by a slot.
  auto cache_at = [&](int32_t n_pages) -> Result<std::map<Use, Tally>> {
    const std::map<Use, Tally> before = sb.tallies();
    VS_ASSIGN_OR_RETURN(Qwen35Cache cache, model->alloc_cache(in.page_size, n_pages, in.n_slots, in.max_verify_tokens,
                                                                   in.n_snapshots));
    (void)cache;
    std::map<Use, Tally> d = diff(sb.tallies(), before);
    for (const auto& [use, t] : d) sb.add(use, -t.bytes, -t.count);
    return d;
  };
  VS_ASSIGN_OR_RETURN(auto cache1, cache_at(1));
  VS_ASSIGN_OR_RETURN(auto cache2, cache_at(2));
  const int64_t kv_per_page = bytes_of(cache2, Use::kKvCache) - bytes_of(cache1, Use::kKvCache);

  // The step: workspaces, step buffers and penalty state as the runner configures them.
  const int32_t pages_for_limits = in.n_pages > 0 ? in.n_pages : static_cast<int32_t>(pages_per_seq);
  ModelStepLimits limits = step_limits(c, in, pages_for_limits);
  const std::map<Use, Tally> before_step = sb.tallies();
  VS_RETURN_IF_ERROR(model->configure(limits));
  limits = model->limits();  // with the model's default logits rows filled in
  const std::map<Use, Tally> step = diff(sb.tallies(), before_step);
  const int64_t scratch = kernel_scratch(c, sb, limits, in);

  VS_ASSIGN_OR_RETURN(const MtpSizes mtp, size_mtp(source, *model, sb, in, kv_dtype));
  const int64_t graph_nodes = kKernelsPerLayer * c.n_layers + 8;
  const int64_t n_graphs = static_cast<int64_t>(in.n_slots) * (in.max_verify_tokens > 0 ? 2 : 1);
  const int64_t graphs = kGraphBaseBytes + n_graphs * graph_nodes * kGraphNodeBytes;
  const int64_t margin = kMarginBytes + static_cast<int64_t>(kMarginFraction * static_cast<double>(in.device_bytes));

  int64_t fixed = scratch > 0 ? cuda_layout::alloc_bytes(scratch) : 0;
  for (const auto& [use, t] : loaded) fixed += t.bytes;
  for (const auto& [use, t] : step) fixed += t.bytes;
  for (Use u : {Use::kGdnState, Use::kVerifyCheckpoints, Use::kPrefixSnapshots, Use::kOther}) {
    fixed += bytes_of(cache1, u);
  }
  fixed += mtp.bytes + graphs + margin;
  const int64_t per_page = kv_per_page + mtp.kv_per_page;

  // KV pages: as asked, or what is left, up to every running sequence at full context.
  // With too little left for one full context, the plan shows that minimum (and does not fit).
  int64_t n_pages = in.n_pages;
  if (n_pages == 0) {
    const int64_t left = in.device_bytes - fixed;
    n_pages = per_page > 0 ? std::min<int64_t>(full_pages, std::max<int64_t>(0, left) / per_page) : full_pages;
    n_pages = std::max(n_pages, pages_per_seq);
  }
  n_pages = std::min<int64_t>(n_pages, std::numeric_limits<int32_t>::max() / std::max(1, in.page_size));
  std::map<Use, Tally> cache;
  if (n_pages > 0) {
    VS_ASSIGN_OR_RETURN(cache, cache_at(static_cast<int32_t>(n_pages)));
  }

  MemoryPlan p;
  p.model = source.label;
  p.device = in.device;
  p.device_bytes = in.device_bytes;
  p.kernel_family = kernels::family_name(in.family);
  p.context = in.context;
  p.max_running = in.n_slots;
  p.speculative_k = std::max(0, in.max_verify_tokens - 1);
  p.max_tokens_per_step = in.max_step_tokens;
  p.page_size = in.page_size;
  p.n_pages = static_cast<int32_t>(n_pages);
  p.kv_bytes_per_token = per_page / in.page_size;
  p.slot_bytes = (bytes_of(cache1, Use::kGdnState) + bytes_of(cache1, Use::kVerifyCheckpoints)) / in.n_slots;
  p.scratch_bytes = scratch;
  p.kv_cache_dtype = kv_cache_dtype_name(kv_dtype);

  auto item = [&](std::string name, int64_t bytes, std::string detail, bool allocated = true) {
    if (bytes == 0) return;
    p.items.push_back({std::move(name), bytes, std::move(detail), allocated});
  };
  const std::string family = p.kernel_family;
  item("weights NVFP4", bytes_of(loaded, Use::kWeightsNvfp4),
       fmt::format("{} tensors: e2m1 codes and e4m3 group scales prepacked for {}, per-row scales of merged "
                   "projections", count_of(loaded, Use::kWeightsNvfp4), family));
  item("weights FP8", bytes_of(loaded, Use::kWeightsFp8),
       fmt::format("{} tensors: e4m3 codes prepacked for {}", count_of(loaded, Use::kWeightsFp8), family));
  item("weights dense fp16", bytes_of(loaded, Use::kWeightsDense),
       fmt::format("{} tensors converted from BF16 (Volta has no bf16)", count_of(loaded, Use::kWeightsDense)));
  item("embedding fp16", bytes_of(loaded, Use::kEmbedding),
       fmt::format("[{}, {}]{}", c.vocab_size, c.hidden_size,
                   c.tie_word_embeddings && head.keep ? ", also the tied lm_head" : ""));
  item(std::string("lm_head ") + head_format_name(sb.head_format()), bytes_of(loaded, Use::kLmHead),
       head.keep || sb.head_format() != head.format
           ? fmt::format("[{}, {}] as the checkpoint stores it", c.vocab_size, c.hidden_size)
           : fmt::format("[{}, {}] quantized at load (--lm-head)", c.vocab_size, c.hidden_size));
  item("norms and small parameters fp32", bytes_of(loaded, Use::kSmallParams),
       fmt::format("{} tensors", count_of(loaded, Use::kSmallParams)));
  item("other weights", bytes_of(loaded, Use::kOther), "");
  item("MTP head", mtp.bytes, "mtp.* weights and workspace, for speculative decoding");
  item("KV cache " + p.kv_cache_dtype, bytes_of(cache, Use::kKvCache) + n_pages * mtp.kv_per_page,
       fmt::format("{} pages x {} tokens = {} tokens, {} per token ({} attention layers{}, K and V{})", n_pages,
                   in.page_size, n_pages * in.page_size, format_bytes(p.kv_bytes_per_token),
                   c.n_full_attention_layers(), mtp.kv_per_page > 0 ? " and the MTP layer" : "",
                   kv_dtype == DType::kF8E4M3 ? ", e4m3 with per-layer scales" : ""));
  item("GDN state fp32", bytes_of(cache1, Use::kGdnState),
       fmt::format("{} slots x {} ({} layers: conv and recurrent state)", in.n_slots,
                   format_bytes(bytes_of(cache1, Use::kGdnState) / in.n_slots), c.n_linear_attention_layers()));
  item("verify checkpoints fp32", bytes_of(cache1, Use::kVerifyCheckpoints),
       fmt::format("{} slots x {} positions (speculative k + 1): the GDN state after each verified token", in.n_slots,
                   in.max_verify_tokens));
  item("prefix snapshots fp32", bytes_of(cache1, Use::kPrefixSnapshots),
       fmt::format("{} rows x {}: the GDN state at cached prefix ends (prefix cache)", in.n_snapshots,
                   format_bytes(in.n_snapshots > 0 ? bytes_of(cache1, Use::kPrefixSnapshots) / in.n_snapshots : 0)));
  item("other cache", bytes_of(cache1, Use::kOther), "");
  item("activations", bytes_of(step, Use::kActivations),
       fmt::format("the model's workspace for {} token rows per step", limits.max_tokens));
  item("logits chunk fp32", bytes_of(step, Use::kLogits),
       fmt::format("[{}, {}]: output rows go through the lm_head in chunks", limits.logits_rows, c.vocab_size));
  item("step buffers", bytes_of(step, Use::kStepBuffers),
       fmt::format("step metadata, per-row results, sampling penalty state of {} slots", in.n_slots));
  item("other workspace", bytes_of(step, Use::kOther), "");
  item("kernel scratch", scratch > 0 ? cuda_layout::alloc_bytes(scratch) : 0,
       "the largest of attention, GDN, sampling and M >= 65 dequantization scratch for the largest step");
  item("CUDA graphs (estimate)", graphs,
       fmt::format("{} graphs x {} kernels (graphs are not captured yet)", n_graphs, graph_nodes), false);
  item("safety margin", margin,
       fmt::format("{} + {:.0f}% for cuBLAS, lazily loaded kernels and allocator granularity", format_bytes(kMarginBytes),
                   kMarginFraction * 100), false);
  for (const MemoryPlanItem& it : p.items) {
    p.total_bytes += it.bytes;
    if (it.allocated) p.allocated_bytes += it.bytes;
  }
  p.fits = p.total_bytes <= in.device_bytes && n_pages >= 1;
  if (p.fits && n_pages < full_pages) {
    p.notes.push_back(fmt::format(
        "the KV pool holds {} tokens, {:.2f} full contexts of {}: with {} running sequences the newest are preempted "
        "(recomputed later) when it runs out", n_pages * in.page_size,
        static_cast<double>(n_pages) / static_cast<double>(pages_per_seq), in.context, in.n_slots));
  }
  if (in.n_pages > 0 && n_pages < pages_per_seq) {
    p.notes.push_back(fmt::format("the KV pool ({} tokens) is shorter than the context: the engine serves {} positions "
                                  "per sequence", n_pages * in.page_size, n_pages * in.page_size));
  }
  if (!c.quantization.kv_cache_quant_algo.empty() && kv_dtype != DType::kF8E4M3) {
    p.notes.push_back("the checkpoint asks for an " + c.quantization.kv_cache_quant_algo +
                      " KV cache (kv_cache_quant_algo); --kv-cache-dtype " + p.kv_cache_dtype +
                      " keeps it in " + p.kv_cache_dtype + " (auto or fp8: half the bytes)");
  }
  return p;
}

Result<MemoryPlan> plan_with_advice(ModelSource& source, const PlanInputs& in) {
  VS_ASSIGN_OR_RETURN(MemoryPlan plan, compute_plan(source, in));
  if (plan.fits) return plan;
  auto fits = [&](const PlanInputs& variant) -> Result<bool> {
    VS_ASSIGN_OR_RETURN(MemoryPlan v, compute_plan(source, variant));
    return v.fits;
  };
  const std::string at = fmt::format("at --context {}", in.context);
  if (in.n_pages > 0) {
    // An explicit KV pool: the largest one that fits.
    int64_t lo = 0, hi = in.n_pages - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      PlanInputs v = in;
      v.n_pages = static_cast<int32_t>(mid);
      VS_ASSIGN_OR_RETURN(bool ok, fits(v));
      if (ok) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo > 0) {
      plan.advice.push_back(fmt::format("a smaller KV pool: --kv-pages {} ({} tokens) fits", lo, lo * in.page_size));
    }
  }
  // Fewer running sequences at this context.
  if (in.n_pages == 0 && in.n_slots > 1) {
    int32_t lo = 0, hi = in.n_slots - 1;  // largest m in [1, hi] that fits; 0: none
    while (lo < hi) {
      const int32_t mid = (lo + hi + 1) / 2;
      PlanInputs v = in;
      v.n_slots = mid;
      VS_ASSIGN_OR_RETURN(bool ok, fits(v));
      if (ok) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo > 0) plan.advice.push_back(fmt::format("fewer running sequences: --max-running {} fits {}", lo, at));
  }
  // A shorter context with these running sequences (whole pages; above 1024 rounded down to a multiple of 1024).
  if (in.n_pages == 0) {
    int64_t lo = 0, hi = ceil_div(in.context, in.page_size) - 1;  // pages per sequence
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      PlanInputs v = in;
      v.context = static_cast<int32_t>(mid * in.page_size);
      VS_ASSIGN_OR_RETURN(bool ok, fits(v));
      if (ok) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    int64_t context = lo * in.page_size;
    if (context >= 1024) context = context / 1024 * 1024;
    if (context > 0) {
      plan.advice.push_back(fmt::format("a shorter context: --context {} fits with --max-running {}", context,
                                        in.n_slots));
    }
  }
  if (in.max_verify_tokens > 0) {
    PlanInputs v = in;
    v.max_verify_tokens = 0;
    VS_ASSIGN_OR_RETURN(MemoryPlan np, compute_plan(source, v));
    plan.advice.push_back(fmt::format("without speculative decoding (--speculative-k 0): {} {}",
                                      format_bytes(np.total_bytes), np.fits ? "fits" : "still does not fit"));
  }
  // Another format: a quantized lm_head, or an NVFP4 checkpoint of the same model.
  auto weights_of = [](const MemoryPlan& p) {
    int64_t w = 0;
    for (const MemoryPlanItem& it : p.items) {
      if (it.name.starts_with("weights") || it.name.starts_with("embedding") || it.name.starts_with("lm_head") ||
          it.name.starts_with("norms")) {
        w += it.bytes;
      }
    }
    return w;
  };
  const int64_t all = weights_of(plan);
  bool dense_head = false;
  for (const MemoryPlanItem& it : plan.items) dense_head |= it.name == "lm_head fp16";
  if (dense_head) {
    for (const char* f : {"nvfp4", "fp8"}) {
      PlanInputs v = in;
      v.lm_head = f;
      VS_ASSIGN_OR_RETURN(MemoryPlan q, compute_plan(source, v));
      plan.advice.push_back(fmt::format("another format: --lm-head {} (weights {} less): {}", f,
                                        format_bytes(all - weights_of(q)), q.fits ? "fits " + at : "still does not fit"));
    }
  }
  int64_t fp8 = 0, dense = 0;
  for (const MemoryPlanItem& it : plan.items) {
    if (it.name == "weights FP8") fp8 = it.bytes;
    if (it.name == "weights dense fp16") dense = it.bytes;
  }
  if (fp8 > 0 || dense > all / 20) {
    // ModelOpt's pure NVFP4 export of the same shapes: every decoder Linear NVFP4 but in_proj_a/b, lm_head BF16.
    VS_ASSIGN_OR_RETURN(QuantConfig nvfp4,
                        parse_quant_config("", R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": [
                          "lm_head", "*linear_attn.conv1d*", "*linear_attn.in_proj_a*", "*linear_attn.in_proj_b*",
                          "mtp.*", "*visual*"]})"));
    ModelSource alt;
    alt.config = source.config;
    alt.config.quantization = nvfp4;
    alt.weights = std::make_unique<SyntheticWeights>(alt.config, 1, "an NVFP4 export");
    alt.label = source.label;
    alt.synthetic = true;
    VS_ASSIGN_OR_RETURN(MemoryPlan q, compute_plan(alt, in));
    plan.advice.push_back(fmt::format("another format: an NVFP4 checkpoint of this model (ModelOpt's pure export, "
                                      "lm_head BF16) has {} of weights instead of {}: {}", format_bytes(weights_of(q)),
                                      format_bytes(all), q.fits ? "fits " + at : "still does not fit"));
  }
  if (plan.advice.empty()) {
    plan.advice.push_back(fmt::format("nothing smaller fits: the weights alone take {} of the {} available",
                                      format_bytes(all), format_bytes(in.device_bytes)));
  }
  return plan;
}

std::string does_not_fit_message(const MemoryPlan& plan) {
  std::string m = fmt::format("the model does not fit: the memory plan needs {} and {} is available", 
                              format_bytes(plan.total_bytes), format_bytes(plan.device_bytes));
  if (!plan.advice.empty()) {
    m += "; what would fit:";
    for (const std::string& a : plan.advice) m += "\n  " + a;
  }
  return m;
}

}  // namespace plan

std::vector<std::string> MemoryPlan::lines() const {
  std::vector<std::string> out;
  out.push_back(fmt::format("memory plan: {} on {}", model, device));
  out.push_back(fmt::format("  settings: context {}, max-running {}, speculative-k {}, {} tokens per step, KV pages "
                            "of {} tokens ({}), weights prepacked for {}", context, max_running, speculative_k,
                            max_tokens_per_step, page_size, kv_cache_dtype, kernel_family));
  for (const MemoryPlanItem& it : items) {
    out.push_back(fmt::format("  {:<32} {:>11}  {}", it.name, format_bytes(it.bytes), it.detail));
  }
  out.push_back(fmt::format("  {:<32} {:>11}  of {} ({} allocated by the backend){}", "total",
                            format_bytes(total_bytes), format_bytes(device_bytes), format_bytes(allocated_bytes),
                            fits ? fmt::format(": fits, {} to spare", format_bytes(device_bytes - total_bytes))
                                 : ": does not fit"));
  for (const std::string& n : notes) out.push_back("  note: " + n);
  for (const std::string& a : advice) out.push_back("  would fit: " + a);
  return out;
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const int64_t a = bytes < 0 ? -bytes : bytes;
  if (a >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / static_cast<double>(int64_t{1} << 30));
  if (a >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / static_cast<double>(int64_t{1} << 20));
  if (a >= (int64_t{1} << 10)) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

Result<int64_t> parse_memory_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string unit = text.substr(i);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (number.empty() || number.find('.') != number.rfind('.')) {
    return invalid_argument("memory size '" + text + "': expected a number with an optional unit (32GB, 24576MiB)");
  }
  static const std::array<std::pair<const char*, int>, 9> kUnits = {{{"", 0}, {"b", 0}, {"k", 10}, {"kb", 10},
                                                                    {"kib", 10}, {"m", 20}, {"mb", 20}, {"mib", 20},
                                                                    {"g", 30}}};
  int shift = -1;
  for (const auto& [u, s] : kUnits) {
    if (unit == u) shift = s;
  }
  if (unit == "gb" || unit == "gib") shift = 30;
  if (unit == "t" || unit == "tb" || unit == "tib") shift = 40;
  if (shift < 0) {
    return invalid_argument("memory size '" + text + "': unknown unit '" + text.substr(i) +
                            "' (B, KB, MB, GB, TB; binary: 1 GB = 1 GiB = 2^30 bytes)");
  }
  const double value = std::stod(number) * std::ldexp(1.0, shift);
  if (!(value >= 1.0) || value > 9.0e18) return invalid_argument("memory size '" + text + "' is out of range");
  return static_cast<int64_t>(value);
}

}  // namespace voltserve
