// `voltserve bench linear [args]` runs the linear-kernel benchmark (bench/linear, a separate CUDA binary next to this
// one). `voltserve bench decode|prefill` measure the whole engine end to end on a model folder or on synthetic
// weights of a config's real shapes (--config config/models/NAME.json): batch-1 and batched decode ms/token and
// tokens/s at a context length, with the bytes a decode step streams and the fraction of the device's measured
// read ceiling; prefill tokens/s at a prompt length; --op-timing logs the per-op breakdown of the steps. decode
// --speculative-k K times speculative rounds (K MTP drafts + the verify step of K + 1 tokens) and the tokens/s
// they give at a per-position acceptance (random weights accept nothing, so each round emits one token).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "voltserve/engine.h"

namespace voltserve::cli {

namespace {

std::filesystem::path self_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

struct EngineBenchArgs {
  std::string model;
  std::string config;
  std::string backend = "auto";
  std::string kernel_family = "auto";
  std::string lm_head = "keep";
  int32_t draft_vocab = 0;
  std::string mtp_format = "nvfp4";
  std::string kv_cache_dtype = "auto";
  int32_t context = 1024;    // decode: tokens in the cache when decoding starts
  int32_t prompt = 2048;     // prefill: prompt length
  int32_t tokens = 64;       // decode: tokens generated per sequence
  int32_t batch = 1;         // sequences decoded together
  int32_t chunk = 2048;      // prefill chunk (tokens per step)
  int32_t threads = 0;
  uint64_t seed = 1;
  bool op_timing = false;
  bool no_cuda_graphs = false;
  bool no_device_rounds = false;
  bool no_pdl = false;
  bool json = false;
  int32_t speculative_k = 0;  // decode: MTP drafts per round (0: plain decoding)
  float temperature = 0.0f;   // decode: the requests' sampling (0: greedy)
  float top_p = 1.0f;
  int32_t top_k = 0;
  float presence_penalty = 0.0f;
};

[[noreturn]] void fail(const std::string& message, int code) { cli::fail("bench", message, code); }

// Prompt ids drawn from the real vocabulary, one stream per salt.
std::vector<int32_t> bench_prompt(int32_t n, int32_t vocab, uint64_t salt) {
  uint64_t z = 0x9e3779b97f4a7c15ULL * (salt + 1);
  return cli::noise_tokens(n, vocab, z);
}

std::unique_ptr<Engine> bench_engine(const EngineBenchArgs& a, int32_t max_running, int32_t max_context,
                                     int32_t step_tokens) {
  if (a.model.empty() == a.config.empty()) fail("give exactly one of --model DIR or --config FILE", 2);
  ModelOptions model;
  model.model_dir = a.model;
  model.synthetic_config = a.config;
  model.synthetic_seed = a.seed;
  model.backend = a.backend;
  model.kernel_family = a.kernel_family;
  model.lm_head = a.lm_head;
  model.draft_vocab = a.draft_vocab;
  model.mtp_format = a.mtp_format;
  model.kv_cache_dtype = a.kv_cache_dtype;
  model.n_threads = a.threads;
  model.n_slots = max_running;
  model.max_context = max_context;
  model.op_timing = a.op_timing;
  model.cuda_graphs = !a.no_cuda_graphs;
  model.device_rounds = !a.no_device_rounds;
  model.pdl = !a.no_pdl;
  EngineConfig config;
  config.max_running = max_running;
  config.max_waiting = max_running;
  config.max_tokens_per_step = std::max(step_tokens, max_running);
  config.prefill_chunk = step_tokens;
  config.max_speculative_k = a.speculative_k;
  config.speculative_k = a.speculative_k;
  auto engine = load_engine("bench", model, config);
  if (a.speculative_k > 0 && engine->stats().max_speculative_k < a.speculative_k) {
    fail("--speculative-k " + std::to_string(a.speculative_k) + ": this model or backend does not speculate that far "
         "(the engine allows " + std::to_string(engine->stats().max_speculative_k) + "; see the log for why)", 1);
  }
  return engine;
}

struct Timed {
  std::vector<std::chrono::steady_clock::time_point> token_times;
  Event final_event;
};

// Submits the requests and waits for all of them; per request the time of each token.
std::vector<Timed> run_all(Engine& engine, const std::vector<Request>& requests,
                           std::chrono::steady_clock::time_point* submitted) {
  std::vector<EventQueue> queues(requests.size());
  *submitted = std::chrono::steady_clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    Result<RequestId> id = engine.submit(requests[i], queues[i].sink());
    if (!id.is_ok()) fail(id.status().to_string(), 1);
  }
  std::vector<Timed> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    while (true) {
      auto [ev, at] = queues[i].pop();
      for (size_t t = 0; t < ev.token_ids.size(); ++t) out[i].token_times.push_back(at);
      if (ev.finished) {
        if (ev.finish_reason == FinishReason::kError) fail(ev.error.to_string(), 1);
        out[i].final_event = std::move(ev);
        break;
      }
    }
  }
  return out;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string fmt_acceptance(double a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f", a);
  return buf;
}

void run_decode(const EngineBenchArgs& a) {
  if (a.context < 1 || a.tokens < 2 || a.batch < 1) fail("--context >= 1, --tokens >= 2, --batch >= 1", 2);
  // Room for the last round's drafts and the draft chain's lookahead past the last token.
  const int32_t spec_room = 2 * a.speculative_k;
  auto engine = bench_engine(a, a.batch, a.context + a.tokens + 1 + spec_room,
                             std::max(std::min(a.chunk, std::max(a.context, 1)), a.batch * (a.speculative_k + 1)));
  const ModelInfo& info = engine->model_info();
  std::vector<Request> requests;
  for (int32_t b = 0; b < a.batch; ++b) {
    Request r;
    r.id = "bench-decode-" + std::to_string(b);
    r.prompt_ids = bench_prompt(a.context, info.n_vocab_real, static_cast<uint64_t>(b));
    r.max_new_tokens = a.tokens;
    r.ignore_eos = true;
    r.sampling.temperature = a.temperature;
    r.sampling.top_p = a.top_p;
    r.sampling.top_k = a.top_k;
    r.sampling.presence_penalty = a.presence_penalty;
    r.sampling.seed = static_cast<uint64_t>(b) + 1;
    requests.push_back(std::move(r));
  }
  std::chrono::steady_clock::time_point t0;
  const std::vector<Timed> runs = run_all(*engine, requests, &t0);
  // Decode time per token: from every sequence's first token to its last (prefill excluded), the median sequence.
  std::vector<double> per_token;
  auto first_all = runs[0].token_times.front(), last_all = runs[0].token_times.back();
  for (const Timed& r : runs) {
    per_token.push_back(seconds(r.token_times.back() - r.token_times.front()) /
                        static_cast<double>(r.token_times.size() - 1));
    first_all = std::max(first_all, r.token_times.front());
    last_all = std::min(last_all, r.token_times.back());
  }
  std::sort(per_token.begin(), per_token.end());
  const double ms_per_token = 1e3 * per_token[per_token.size() / 2];
  const double tps_per_seq = 1e3 / ms_per_token;
  // Bytes one decode step streams at this context, for the whole batch: every weight once, each sequence's GDN state
  // read and written, its KV read (the part of a 27B step that is not weights; DESIGN.md §4).
  const double kv_bytes_per_token = info.kv_bytes_per_token;
  const double step_bytes = static_cast<double>(info.weight_bytes) +
                            a.batch * (2.0 * static_cast<double>(info.state_bytes_per_seq) +
                                       kv_bytes_per_token * (a.context + a.tokens / 2.0));
  const double gbps = step_bytes / (ms_per_token * 1e-3) / 1e9;
  const double roofline_tps = info.device_read_gbps > 0 ? info.device_read_gbps * 1e9 / step_bytes : 0.0;
  nlohmann::ordered_json out;
  out["bench"] = "decode";
  out["model"] = info.name;
  out["backend"] = info.backend;
  out["context"] = a.context;
  out["batch"] = a.batch;
  out["tokens"] = a.tokens;
  out["sampling"] = {{"temperature", a.temperature}, {"top_p", a.top_p}, {"top_k", a.top_k},
                     {"presence_penalty", a.presence_penalty}};
  out["cuda_graphs"] = !a.no_cuda_graphs && !a.op_timing;
  out["pdl"] = !a.no_pdl;
  out["ms_per_token"] = ms_per_token;
  out["tokens_per_second_per_sequence"] = tps_per_seq;
  out["tokens_per_second"] = tps_per_seq * a.batch;
  out["bytes_per_step"] = step_bytes;
  out["weight_bytes"] = info.weight_bytes;
  out["achieved_gbps"] = gbps;
  out["read_ceiling_gbps"] = info.device_read_gbps;
  out["fraction_of_roofline"] = roofline_tps > 0 ? tps_per_seq / roofline_tps : 0.0;
  out["roofline_tokens_per_second_per_sequence"] = roofline_tps;
  // The device's timeline (CUDA; DeviceTimeline): per decode-sized step, its time from first launch to last kernel,
  // and the time before it since the previous step ended (downloads, uploads, the host planning and launching).
  const DeviceTimeline tl = engine->stats().device_timeline;
  if (tl.gaps > 0) {
    out["device_timeline"] = {{"steps", tl.steps},
                              {"busy_ms_per_step", 1e3 * tl.busy_seconds / static_cast<double>(tl.steps)},
                              {"gap_ms_per_step", 1e3 * tl.gap_seconds / static_cast<double>(tl.gaps)},
                              {"gap_ms_total", 1e3 * tl.gap_seconds},
                              {"queued_gaps", tl.queued_gaps},
                              {"queued_gap_ms_total", 1e3 * tl.queued_gap_seconds}};
  }
  if (a.speculative_k > 0) {
    // Each round drafts k and verifies k + 1; it emits its accepted drafts and one more token. round_ms: the decode
    // time over the rounds (median sequence). At a per-position acceptance a (each draft accepted with probability
    // a given the one before it was) a round emits (1 - a^(k+1)) / (1 - a) tokens on average.
    int64_t drafted = 0, accepted = 0;
    int64_t rounds = 0;
    std::vector<double> per_round;
    for (const Timed& r : runs) {
      drafted += r.final_event.n_tokens_drafted;
      accepted += r.final_event.n_tokens_accepted;
      // After the first token (the prefill's) each round emits its accepted drafts and one more token.
      const int64_t n_rounds =
          static_cast<int64_t>(r.token_times.size()) - 1 - static_cast<int64_t>(r.final_event.n_tokens_accepted);
      rounds += n_rounds;
      if (n_rounds > 0) per_round.push_back(seconds(r.token_times.back() - r.token_times.front()) / n_rounds);
    }
    std::sort(per_round.begin(), per_round.end());
    const double round_ms = per_round.empty() ? 0.0 : 1e3 * per_round[per_round.size() / 2];
    const int32_t k = a.speculative_k;
    nlohmann::ordered_json spec;
    spec["k"] = k;
    spec["rounds"] = rounds;
    spec["drafted"] = drafted;
    spec["accepted"] = accepted;
    spec["round_ms"] = round_ms;
    // Per verify step (one round of every sequence in the batch), from the runner's phase timers.
    const SpeculativePhaseTimes ph = engine->stats().speculative_phases;
    if (ph.verify_steps > 0) {
      const double n = static_cast<double>(ph.verify_steps);
      spec["verify_ms"] = 1e3 * ph.verify_seconds / n;
      spec["draft_ms"] = 1e3 * ph.draft_seconds / n;
      spec["commit_ms"] = 1e3 * ph.commit_seconds / n;
      spec["device_rounds"] = ph.device_rounds;  // of verify_steps: verify_ms is then the launch only
      // Every gap before a decode-sized step belongs to some round (a verify step, its MTP passes).
      if (tl.gaps > 0) {
        spec["device_gap_ms_per_round"] = 1e3 * tl.gap_seconds / n;
        // Of it, the gaps before steps queued while the device was busy (no host wait before them): inside a round.
        spec["device_queued_gap_ms_per_round"] = 1e3 * tl.queued_gap_seconds / n;
      }
    }
    nlohmann::ordered_json at = nlohmann::ordered_json::object();
    for (double acc : {0.5, 0.6, 0.7, 0.8, 0.9}) {
      const double tokens_per_round = (1.0 - std::pow(acc, k + 1)) / (1.0 - acc);
      at[fmt_acceptance(acc)] = round_ms > 0 ? tokens_per_round * 1e3 / round_ms * a.batch : 0.0;
    }
    spec["tokens_per_second_at_acceptance"] = at;
    out["speculative"] = spec;
  }
  if (a.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << out.dump(1) << "\n";
  }
  engine.reset();  // with --op-timing the backend logs its per-op breakdown here
}

void run_prefill(const EngineBenchArgs& a) {
  if (a.prompt < 1) fail("--prompt must be >= 1", 2);
  auto engine = bench_engine(a, 1, a.prompt + 2, std::min(a.chunk, a.prompt));
  const ModelInfo& info = engine->model_info();
  std::vector<double> tps;
  for (int rep = 0; rep < 4; ++rep) {  // the first run warms up (allocations, library handles)
    Request r;
    r.id = "bench-prefill";
    r.prompt_ids = bench_prompt(a.prompt, info.n_vocab_real, static_cast<uint64_t>(rep));
    r.max_new_tokens = 1;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    std::chrono::steady_clock::time_point t0;
    const std::vector<Timed> runs = run_all(*engine, {r}, &t0);
    if (rep > 0) tps.push_back(a.prompt / seconds(runs[0].token_times.front() - t0));
  }
  std::sort(tps.begin(), tps.end());
  nlohmann::ordered_json out;
  out["bench"] = "prefill";
  out["model"] = info.name;
  out["backend"] = info.backend;
  out["prompt"] = a.prompt;
  out["chunk"] = std::min(a.chunk, a.prompt);
  out["tokens_per_second"] = tps[tps.size() / 2];  // the median of three runs
  out["seconds_to_first_token"] = a.prompt / tps[tps.size() / 2];
  std::cout << (a.json ? out.dump() : out.dump(1)) << "\n";
  engine.reset();
}

void add_engine_bench_options(CLI::App* cmd, EngineBenchArgs& a) {
  cmd->add_option("--model", a.model, "Hugging Face model folder");
  cmd->add_option("--config", a.config, "A config.json of the real shapes (config/models/*.json): synthetic weights");
  cmd->add_option("--backend", a.backend, "cpu, cuda or auto (default auto)");
  cmd->add_option("--kernel-family", a.kernel_family, "CUDA weight kernels: sm70, sm80 or auto")
      ->check(CLI::IsMember({"auto", "sm70", "sm80"}));
  cmd->add_option("--chunk", a.chunk, "Prompt tokens per step (default 2048)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--threads", a.threads, "CPU backend threads (0: automatic)");
  cmd->add_option("--seed", a.seed, "Seed of the synthetic weights (default 1)");
  cmd->add_option("--draft-vocab", a.draft_vocab, "Speculative decoding: the MTP head drafts over the N most frequent tokens only (draft_vocab.json beside the model lists them, else the tokenizer's added tokens and the lowest ids); output is unchanged. 0 (default): the whole vocabulary")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--mtp-format", a.mtp_format, "Speculative decoding: the MTP layer's weights nvfp4 (default: quantized at load with the draft lm_head, cheaper drafts; output is unchanged) or keep (as stored)")
      ->check(CLI::IsMember({"keep", "nvfp4"}));
  cmd->add_option("--lm-head", a.lm_head, "keep, fp8 or nvfp4 (the lm_head quantized at load)")
      ->check(CLI::IsMember({"keep", "fp8", "nvfp4"}));
  cmd->add_option("--kv-cache-dtype", a.kv_cache_dtype, "KV pages: auto (fp8 when the checkpoint's "
                  "kv_cache_quant_algo is FP8, else fp16 on a GPU / fp32 on the CPU), fp16, bf16 (CPU "
                  "backend only) or fp8 (e4m3: half the bytes of fp16, twice the pages)")
      ->check(CLI::IsMember({"auto", "fp16", "bf16", "fp8"}));
  cmd->add_flag("--op-timing", a.op_timing,
                "CUDA: log the per-op device time of the steps at the end (launches eagerly: no CUDA graphs)");
  cmd->add_flag("--no-cuda-graphs", a.no_cuda_graphs, "CUDA: launch every step eagerly (decode steps replay as graphs)");
  cmd->add_flag("--no-device-rounds", a.no_device_rounds,
                "speculative: the host waits for each verify step before the MTP passes (they follow it on the device)");
  cmd->add_flag("--no-pdl", a.no_pdl,
                "CUDA, sm_90+: launch each kernel after the previous one has finished (by default each may be scheduled "
                "while the one before it finishes: programmatic dependent launch)");
  cmd->add_flag("--json", a.json, "One line of JSON");
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks: linear kernels, and the engine end to end (decode, prefill, "
                                          "prefix-cache)");
  auto* linear = cmd->add_subcommand("linear", "Weight-streaming linear kernels: us, GB/s, % of the read ceiling");
  linear->allow_extras();
  linear->callback([linear] {
    const auto bin = self_dir() / "bench_linear";
    if (!std::filesystem::exists(bin)) {
      std::cerr << "voltserve bench linear: " << bin.string()
                << " not found (it is built only with CUDA: configure with -DVOLTSERVE_CUDA=ON)\n";
      throw CLI::RuntimeError(2);
    }
    std::vector<std::string> args = {bin.string()};
    for (const auto& a : linear->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::cerr << "voltserve bench linear: cannot run " << bin.string() << "\n";
    throw CLI::RuntimeError(2);
  });

  auto decode_args = std::make_shared<EngineBenchArgs>();
  auto* decode = cmd->add_subcommand(
      "decode", "Greedy decode ms/token and tokens/s at a context length, against the bytes a step streams");
  add_engine_bench_options(decode, *decode_args);
  decode->add_option("--context", decode_args->context, "Tokens in the cache when decoding starts (default 1024)");
  decode->add_option("--tokens", decode_args->tokens, "Tokens generated per sequence (default 64)");
  decode->add_option("--batch", decode_args->batch, "Sequences decoded together (default 1)");
  decode->add_option("--temperature", decode_args->temperature, "Sampling temperature of the requests (default 0: greedy)")
      ->check(CLI::Range(0.0f, 2.0f));
  decode->add_option("--top-p", decode_args->top_p, "Sampling top_p (default 1)")->check(CLI::Range(0.0f, 1.0f));
  decode->add_option("--top-k", decode_args->top_k, "Sampling top_k (default 0: off)")->check(CLI::NonNegativeNumber);
  decode->add_option("--presence-penalty", decode_args->presence_penalty, "Sampling presence_penalty (default 0)")
      ->check(CLI::Range(-2.0f, 2.0f));
  decode->add_option("--speculative-k", decode_args->speculative_k,
                     "Time speculative rounds of K MTP drafts + the verify step (default 0: plain decoding); the "
                     "model needs an MTP head (the synthetic configs have one)")
      ->check(CLI::Range(0, 31));
  decode->callback([decode_args] { run_decode(*decode_args); });

  auto prefill_args = std::make_shared<EngineBenchArgs>();
  auto* prefill = cmd->add_subcommand("prefill", "Prefill tokens/s of one prompt (time to the first token)");
  add_engine_bench_options(prefill, *prefill_args);
  prefill->add_option("--prompt", prefill_args->prompt, "Prompt length (default 2048)");
  prefill->callback([prefill_args] { run_prefill(*prefill_args); });
  register_bench_prefix_cache(*cmd);
  cmd->require_subcommand(1);
}

}  // namespace voltserve::cli
