// The memory plan (voltserve/memory_plan.h, engine/plan/) against arithmetic done here from the tensor shapes of
// the 27B configs (MODEL.md §1.1, §2.7, §5.1): prepacked NVFP4 and FP8 bytes, fp16 dense and embedding, norms,
// KV per token, GDN state per slot, verify checkpoints; the totals on 32 GB and 24 GB; what-would-fit advice that
// does fit; the lm_head option; cuda_layout's merge rules; memory sizes.
#include <catch2/catch_test_macros.hpp>

#include <map>
#include <string>

#include "backend/cuda_layout.h"
#include "linear/prepack.h"
#include "voltserve/memory_plan.h"

using namespace voltserve;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

std::string config(const std::string& name) {
  return std::string(VOLTSERVE_SOURCE_DIR) + "/config/models/" + name + ".json";
}

MemoryPlanRequest request(const std::string& cfg, int64_t gpu, int32_t context, int32_t max_running,
                          const std::string& family = "sm80") {
  MemoryPlanRequest r;
  r.model.synthetic_config = config(cfg);
  r.model.max_context = context;
  r.model.kernel_family = family;
  r.engine.max_running = max_running;
  r.gpu_memory_bytes = gpu;
  return r;
}

MemoryPlan plan(const MemoryPlanRequest& r) {
  Result<MemoryPlan> p = plan_memory(r);
  INFO(p.status().to_string());
  REQUIRE(p.is_ok());
  return std::move(p).value();
}

std::map<std::string, int64_t> items(const MemoryPlan& p) {
  std::map<std::string, int64_t> m;
  for (const MemoryPlanItem& it : p.items) m[it.name] += it.bytes;
  return m;
}

int64_t round_alloc(int64_t b) { return b < 256 ? 256 : b; }

// The 27B shapes (MODEL.md §1.1).
constexpr int64_t H = 5120, I = 17408, V = 248320, kLayers = 64, kAttn = 16, kGdn = 48;
constexpr int64_t kQ = 24 * 256 * 2, kKV = 4 * 256, kO = 24 * 256;      // q_proj rows (query | gate), k/v rows
constexpr int64_t kQkv = 2 * 16 * 128 + 48 * 128, kZ = 48 * 128;        // in_proj_qkv, in_proj_z rows
constexpr int64_t kConv = kQkv;                                         // conv channels

// NVFP4 codes + scales of one [n, k] weight: n*k/2 + n*k/16 bytes, as stored (the 27B shapes fill whole tiles).
int64_t nvfp4(int64_t n, int64_t k) { return n * k / 2 + n * k / 16; }

}  // namespace

TEST_CASE("27B NVFP4 weights: every decoder linear prepacked, dense in_proj_a/b, fp16 embedding and lm_head", "[unit]") {
  for (const std::string family : {"sm80", "sm70"}) {
    INFO(family);
    const MemoryPlan p = plan(request("qwen3.5-27b-nvfp4", 32 * kGiB, 8192, 4, family));
    const auto m = items(p);
    // Merged projections carry their parts' scales as per-row fp32 scales.
    const int64_t gdn = nvfp4(kQkv, H) + nvfp4(kZ, H) + (kQkv + kZ) * 4 + nvfp4(H, kZ);
    const int64_t attn = nvfp4(kQ, H) + 2 * nvfp4(kKV, H) + (kQ + 2 * kKV) * 4 + nvfp4(H, kO);
    const int64_t mlp = 2 * nvfp4(I, H) + 2 * I * 4 + nvfp4(H, I);
    CHECK(m.at("weights NVFP4") == kGdn * gdn + kAttn * attn + kLayers * mlp);
    CHECK(m.at("weights dense fp16") == kGdn * (2 * 48) * H * 2);  // in_proj_b | in_proj_a, one fp16 buffer
    CHECK(m.count("weights FP8") == 0);
    CHECK(m.at("embedding fp16") == V * H * 2);
    CHECK(m.at("lm_head fp16") == V * H * 2);  // BF16 in the pure export, fp16 on the device
    // Norms: input + post per layer, the final norm; q/k norms; conv taps, A_log, dt_bias, gated norm per GDN layer.
    const int64_t small = (2 * kLayers + 1) * round_alloc(H * 4) + kAttn * 2 * round_alloc(256 * 4) +
                          kGdn * (round_alloc(kConv * 4 * 4) + 2 * round_alloc(48 * 4) + round_alloc(128 * 4));
    CHECK(m.at("norms and small parameters fp32") == small);
    // The closed form agrees with the prepack layout's own arithmetic.
    size_t codes = 0, scales = 0;
    kernels::packed_bytes(WeightFormat::kNvfp4, family == "sm70" ? kernels::KernelFamily::kSm70 : kernels::KernelFamily::kSm80,
                          I, H, &codes, &scales);
    CHECK(static_cast<int64_t>(codes + scales) == nvfp4(I, H));
    // About 18 GiB of weights: 24.3 B decoder parameters at 4.5 bits, 2.5 B at 16 bits.
    CHECK(p.total_bytes > 18 * kGiB);
  }
}

TEST_CASE("27B mixed layout: MLP and lm_head NVFP4, attention and GDN projections FP8", "[unit]") {
  const MemoryPlan p = plan(request("qwen3.8-27b-mixed", 32 * kGiB, 8192, 4));
  const auto m = items(p);
  const int64_t fp8_gdn = (kQkv + kZ) * H + (kQkv + kZ) * 4 + H * kZ;  // merged qkv|z with per-row scales; out_proj
  const int64_t fp8_attn = (kQ + 2 * kKV) * H + (kQ + 2 * kKV) * 4 + H * kO;
  CHECK(m.at("weights FP8") == kGdn * fp8_gdn + kAttn * fp8_attn);
  CHECK(m.at("weights NVFP4") == kLayers * (2 * nvfp4(I, H) + 2 * I * 4 + nvfp4(H, I)));
  CHECK(m.at("lm_head NVFP4") == nvfp4(V, H));
  CHECK(m.at("embedding fp16") == V * H * 2);
}

TEST_CASE("27B caches: 64 KiB of fp16 KV per token, 149.6 MiB of GDN state per slot, k + 1 checkpoints each", "[unit]") {
  MemoryPlanRequest r = request("qwen3.5-27b-nvfp4", 80 * kGiB, 32768, 4);
  r.speculative_k = 3;
  r.model.mtp_format = "keep";  // the MTP layer as stored (the default quantizes it: checked below)
  const MemoryPlan p = plan(r);
  const auto m = items(p);
  const int64_t kv_per_token = kAttn * 2 * kKV * 2;
  CHECK(kv_per_token == 64 * 1024);
  REQUIRE(p.fits);
  CHECK(p.n_pages == 4 * 32768 / 16);  // room for every sequence at full context on 80 GB
  // The MTP layer (one full-attention layer) keeps KV too while speculating.
  CHECK(p.kv_bytes_per_token == kv_per_token + 2 * kKV * 2);
  CHECK(m.at("KV cache fp16") == int64_t{p.n_pages} * 16 * p.kv_bytes_per_token);
  const int64_t state = kGdn * (kConv * 3 + 48 * 128 * 128) * 4;  // MODEL.md §2.7: conv 3 x 10240, 48 x 128 x 128
  CHECK(m.at("GDN state fp32") == 4 * state);
  CHECK(m.at("verify checkpoints fp32") == 4 * 4 * state);
  CHECK(p.slot_bytes == 5 * state);
  // The MTP head as the drafter loads it (424.7 M parameters, BF16 in the official checkpoint: fp16 on the device):
  // fc, q|k|v, o, gate|up, down and its norms, and its workspace (mtp_head.cpp configure) for the step's tokens and
  // one draft row per running sequence: fp32 embedded / hidden / residual / mixed, fp16 concat / normed / attention
  // out / MLP activation, fp32 q|k|v and gate|up, the draft logits, the output rows and two fp32 hidden states.
  const int64_t weights = H * 2 * H * 2 + (kQ + 2 * kKV) * H * 2 + H * kO * 2 + 2 * I * H * 2 + H * I * 2 +
                          3 * H * 4 + 2 * H * 4 + 2 * 256 * 4;
  const int64_t T = p.max_tokens_per_step, outs = 4;
  const int64_t workspace = T * (4 * H * 4 + 2 * H * 2 + H * 2 + kO * 2 + I * 2 + (kQ + 2 * kKV) * 4 + 2 * I * 4) +
                            outs * V * 4 + outs * H * 2 + 2 * outs * H * 4;
  CHECK(m.at("MTP head") == weights + workspace);
  // The default (--mtp-format nvfp4) quantizes the dense MTP linears at load (~0.28 of their fp16 bytes);
  // --draft-vocab N drafts through N rows of the head of its own.
  r.model.mtp_format = "";
  const int64_t nvfp4_head = items(plan(r)).at("MTP head");
  CHECK(nvfp4_head < workspace + weights / 3);
  CHECK(nvfp4_head > workspace + weights / 4);
  r.model.draft_vocab = 32768;
  const int64_t with_vocab = items(plan(r)).at("MTP head");
  // N NVFP4 head rows more (its own weight: the full head stays for the target), N-wide draft logits, and the N
  // token ids the device-fed draft chain maps its samples through (Backend::embed_samples).
  CHECK(with_vocab == nvfp4_head + nvfp4(32768, H) - outs * (V - 32768) * 4 + 32768 * 4);
}

TEST_CASE("27B fp8 KV (--kv-cache-dtype fp8): 32 KiB per token, twice the pages at the same budget", "[unit]") {
  MemoryPlanRequest r = request("qwen3.5-27b-nvfp4", 32 * kGiB, 32768, 16);
  const MemoryPlan f16 = plan(r);
  r.model.kv_cache_dtype = "fp8";
  const MemoryPlan f8 = plan(r);
  CHECK(f16.kv_cache_dtype == "fp16");
  CHECK(f8.kv_cache_dtype == "fp8");
  CHECK(f8.kv_bytes_per_token == kAttn * 2 * kKV * 1);
  CHECK(f8.kv_bytes_per_token * 2 == f16.kv_bytes_per_token);
  const auto m16 = items(f16), m8 = items(f8);
  CHECK(m8.count("KV cache fp16") == 0);
  CHECK(m8.at("KV cache fp8") == int64_t{f8.n_pages} * 16 * f8.kv_bytes_per_token);
  // The pool is what is left after the fixed items, which do not depend on the KV dtype: the same bytes, twice the
  // pages (to within one page of rounding), unless the pool already holds every running sequence's full context.
  REQUIRE(f16.n_pages < 16 * 32768 / 16);
  CHECK(std::abs(int64_t{f8.n_pages} - 2 * int64_t{f16.n_pages}) <= 1);
  bool says = false;
  for (const std::string& l : f8.lines()) says |= l.find("(fp8)") != std::string::npos;
  CHECK(says);
  // Anything else is a 4xx-style error naming the option; bf16 is the CPU backend's only.
  r.model.kv_cache_dtype = "int4";
  CHECK(plan_memory(r).status().to_string().find("--kv-cache-dtype") != std::string::npos);
  r.model.kv_cache_dtype = "bf16";
  CHECK(!plan_memory(r).is_ok());
}

TEST_CASE("27B prefix snapshots: one GDN state (149.6 MiB) per snapshot row, counted before the KV pool", "[unit]") {
  MemoryPlanRequest r = request("qwen3.5-27b-nvfp4", 80 * kGiB, 32768, 4);
  const MemoryPlan without = plan(r);
  CHECK(items(without).count("prefix snapshots fp32") == 0);
  r.model.n_prefix_snapshots = 8;
  const MemoryPlan p = plan(r);
  const int64_t state = kGdn * (kConv * 3 + 48 * 128 * 128) * 4;
  CHECK(items(p).at("prefix snapshots fp32") == 8 * state);
  // The KV pool takes what is left: on 80 GB every sequence still fits at full context, so the pool is unchanged
  // and the total grows by the snapshots.
  CHECK(p.total_bytes - without.total_bytes == 8 * state);
}

TEST_CASE("the plan adds up, and a fitting plan stays within the GPU's memory less the CUDA context", "[unit]") {
  for (const std::string cfg : {"qwen3.5-27b-nvfp4", "qwen3.8-27b-mixed"}) {
    for (const int64_t gpu : {32 * kGiB, 24 * kGiB}) {
      const MemoryPlan p = plan(request(cfg, gpu, 16384, 4, "sm70"));
      INFO(cfg << " on " << gpu / kGiB << " GiB");
      int64_t sum = 0, allocated = 0;
      for (const MemoryPlanItem& it : p.items) {
        CHECK(it.bytes > 0);
        sum += it.bytes;
        allocated += it.allocated ? it.bytes : 0;
      }
      CHECK(sum == p.total_bytes);
      CHECK(allocated == p.allocated_bytes);
      CHECK(p.device_bytes == gpu - (int64_t{512} << 20));
      if (p.fits) {
        CHECK(p.total_bytes <= p.device_bytes);
        CHECK(p.n_pages >= 16384 / 16);  // at least one full context
      }
      CHECK(p.lines().size() >= p.items.size() + 3);
    }
  }
  // 32 GB: the NVFP4 27B at 32k with four sequences, each at full context.
  const MemoryPlan v100 = plan(request("qwen3.5-27b-nvfp4", 32 * kGiB, 32768, 4, "sm70"));
  CHECK(v100.fits);
  CHECK(v100.n_pages == 4 * 32768 / 16);
}

TEST_CASE("when it does not fit, the plan says what would, and each suggestion fits", "[unit]") {
  // 24 GB, the NVFP4 27B (17.5 GiB of weights), 24 sequences at 32k: their GDN state and one context do not fit.
  MemoryPlanRequest r = request("qwen3.5-27b-nvfp4", 24 * kGiB, 32768, 24, "sm80");
  const MemoryPlan p = plan(r);
  REQUIRE_FALSE(p.fits);
  CHECK(p.total_bytes > p.device_bytes);
  bool running = false, context = false, head = false;
  for (const std::string& a : p.advice) {
    INFO(a);
    if (auto at = a.find("--max-running "); at != std::string::npos && a.find("fewer") != std::string::npos) {
      running = true;
      MemoryPlanRequest v = r;
      v.engine.max_running = std::stoi(a.substr(at + 14));
      CHECK(v.engine.max_running < 24);
      CHECK(plan(v).fits);
      v.engine.max_running += 1;
      CHECK_FALSE(plan(v).fits);  // the largest that fits
    }
    if (auto at = a.find("--context "); at != std::string::npos && a.find("shorter") != std::string::npos) {
      context = true;
      MemoryPlanRequest v = r;
      v.model.max_context = std::stoi(a.substr(at + 10));
      CHECK(v.model.max_context < 32768);
      CHECK(plan(v).fits);
    }
    if (a.find("--lm-head nvfp4") != std::string::npos) head = true;
  }
  CHECK(running);
  CHECK(context);
  CHECK(head);
  // An explicit pool of 16 full contexts: the advice is the largest pool that fits.
  r.engine.max_running = 4;
  r.model.n_pages = 4 * 32768 / 16;
  const MemoryPlan q = plan(r);
  REQUIRE_FALSE(q.fits);
  bool pool = false;
  for (const std::string& a : q.advice) {
    INFO(a);
    if (auto at = a.find("--kv-pages "); at != std::string::npos) {
      pool = true;
      MemoryPlanRequest v = r;
      v.model.n_pages = std::stoi(a.substr(at + 11));
      CHECK(plan(v).fits);
      v.model.n_pages += 1;
      CHECK_FALSE(plan(v).fits);
    }
  }
  CHECK(pool);
}

TEST_CASE("a tight 24 GB card: the KV pool shrinks to what is left and says so", "[unit]") {
  const MemoryPlan p = plan(request("qwen3.5-27b-nvfp4", 24 * kGiB, 32768, 8, "sm80"));
  REQUIRE(p.fits);
  CHECK(p.n_pages < 8 * 32768 / 16);
  CHECK(p.n_pages >= 32768 / 16);
  CHECK(p.device_bytes - p.total_bytes < int64_t{p.page_size} * p.kv_bytes_per_token + (int64_t{1} << 20));
  REQUIRE(!p.notes.empty());
  CHECK(p.notes[0].find("preempted") != std::string::npos);
}

TEST_CASE("lm_head fp8 / nvfp4 (--lm-head) stores the 27B head quantized: 1.2 GiB or 1.7 GiB less", "[unit]") {
  MemoryPlanRequest r = request("qwen3.5-27b-nvfp4", 32 * kGiB, 8192, 4);
  const auto keep = items(plan(r));
  r.model.lm_head = "fp8";
  const auto fp8 = items(plan(r));
  r.model.lm_head = "nvfp4";
  const auto nv = items(plan(r));
  CHECK(keep.at("lm_head fp16") == V * H * 2);
  CHECK(fp8.at("lm_head FP8") == V * H);  // synthetic weights: no per-row scales (a checkpoint's head has them)
  CHECK(nv.at("lm_head NVFP4") == nvfp4(V, H));
  CHECK(nv.at("embedding fp16") == V * H * 2);
  r.model.lm_head = "int4";
  CHECK_FALSE(plan_memory(r).is_ok());
}

TEST_CASE("a checkpoint folder: its tensors decide the formats (the mixed fixture: NVFP4, FP8 and BF16)", "[unit]") {
  MemoryPlanRequest r;
  r.model.model_dir = std::string(VOLTSERVE_SOURCE_DIR) + "/tests/fixtures/models/tiny-modelopt-nvfp4-mixed";
  r.engine.max_running = 2;
  r.gpu_memory_bytes = 2 * kGiB;
  const MemoryPlan p = plan(r);
  const auto m = items(p);
  CHECK(m.count("weights NVFP4") == 1);
  CHECK(m.count("weights FP8") == 1);
  CHECK(m.count("weights dense fp16") == 1);
  CHECK(p.fits);
  r.model.model_dir += "-missing";
  const Result<MemoryPlan> missing = plan_memory(r);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("-missing") != std::string::npos);
}

TEST_CASE("cuda_layout merges quantized parts only when every part but the last fills whole tiles", "[unit]") {
  kernels::HostWeightRef a, b;
  static const uint8_t data = 0;
  a.format = b.format = WeightFormat::kNvfp4;
  a.codes = b.codes = &data;
  a.k = b.k = 64;
  a.n = 48;  // 3 sm80 tiles of 16, 1.5 sm70 tiles of 32
  b.n = 20;
  const std::vector<kernels::HostWeightRef> parts = {a, b};
  CHECK(cuda_layout::linear_segments(parts, kernels::KernelFamily::kSm80).size() == 1);
  CHECK(cuda_layout::linear_segments(parts, kernels::KernelFamily::kSm70).size() == 2);
  size_t c1 = 0, s1 = 0, c2 = 0, s2 = 0;
  kernels::packed_bytes(WeightFormat::kNvfp4, kernels::KernelFamily::kSm80, 48, 64, &c1, &s1);
  kernels::packed_bytes(WeightFormat::kNvfp4, kernels::KernelFamily::kSm80, 20, 64, &c2, &s2);
  CHECK(cuda_layout::linear_bytes(parts, kernels::KernelFamily::kSm80) ==
        static_cast<int64_t>(c1 + c2 + s1 + s2) + round_alloc(68 * 4));
  // A dense part after them is its own fp16 buffer; the scratch is that of the widest quantized segment.
  kernels::HostWeightRef d = a;
  d.format = WeightFormat::kDense;
  d.n = 8;
  const std::vector<kernels::HostWeightRef> mixed = {a, b, d};
  CHECK(cuda_layout::linear_segments(mixed, kernels::KernelFamily::kSm80).size() == 2);
  // Only the GEMM path (more rows than kernels::kMaxStreamRows) dequantizes into scratch.
  CHECK(cuda_layout::linear_scratch_bytes(mixed, kernels::KernelFamily::kSm80, kernels::kMaxStreamRows + 1) ==
        68 * 64 * 2);
  CHECK(cuda_layout::linear_scratch_bytes(mixed, kernels::KernelFamily::kSm80, kernels::kMaxStreamRows) == 0);
  CHECK(cuda_layout::linear_scratch_bytes(mixed, kernels::KernelFamily::kSm80, 16) == 0);
}

TEST_CASE("memory sizes: binary units as GPUs are quoted, and errors that name the text", "[unit]") {
  CHECK(parse_memory_size("32GB").value() == 32 * kGiB);
  CHECK(parse_memory_size("32GiB").value() == 32 * kGiB);
  CHECK(parse_memory_size("24576MiB").value() == 24 * kGiB);
  CHECK(parse_memory_size("24576mb").value() == 24 * kGiB);
  CHECK(parse_memory_size("1.5G").value() == 3 * (kGiB / 2));
  CHECK(parse_memory_size("1024").value() == 1024);
  for (const std::string bad : {"", "GB", "32 XB", "-1GB", "1.2.3G", "0"}) {
    const Result<int64_t> r = parse_memory_size(bad);
    INFO(bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().message().find("'" + bad + "'") != std::string::npos);
  }
  CHECK(format_bytes(3 * (kGiB / 2)) == "1.50 GiB");
  CHECK(format_bytes(512) == "512 B");
}
