// `voltserve bench prefix-cache`: replays a synthetic multi-turn agent transcript whose context grows turn by turn
// (a system prompt, then per turn new user / tool tokens and a generated reply) and prints, per turn, the time to
// the first token with the prefix cache and without it (the same prompt with the per-request opt-out), the tokens
// the cache served, a fresh request of the uncached tokens alone (the 1.2x acceptance figure), and the
// memory the cache holds (snapshot rows, cached KV pages). The ctest bench_prefix_cache_smoke runs it on a fixture.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "voltserve/engine.h"

namespace voltserve::cli {

namespace {

struct PrefixBenchArgs {
  std::string model;
  std::string config;
  std::string backend = "auto";
  std::string kernel_family = "auto";
  int32_t threads = 0;
  uint64_t seed = 1;
  int32_t context = 32768;  // the transcript grows to this many tokens (prompt + reply of the last turn)
  int32_t turns = 8;
  int32_t system = 2048;    // tokens of the first turn's prompt (system prompt, tool definitions)
  int32_t reply = 64;       // tokens generated per turn
  int32_t chunk = 2048;     // prefill tokens per step
  int32_t snapshots = kDefaultPrefixSnapshots;
  int32_t interval = 2048;  // a multiple of the chunk, so the interval stops cost no extra steps
  bool no_cuda_graphs = false;
  bool json = false;
};

[[noreturn]] void fail(const std::string& message, int code) { cli::fail("bench prefix-cache", message, code); }

struct TurnResult {
  double ttft_s = 0;
  int32_t n_cached = 0;
  std::vector<int32_t> tokens;
};

// One greedy request to completion: its time to the first token (submit -> first token event) and its tokens.
TurnResult run_request(Engine& engine, std::vector<int32_t> prompt, int32_t n_new, bool prefix_cache) {
  Request r;
  r.id = "bench-prefix";
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = n_new;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.prefix_cache = prefix_cache;
  EventQueue queue;
  const auto t0 = std::chrono::steady_clock::now();
  Result<RequestId> id = engine.submit(std::move(r), queue.sink());
  if (!id.is_ok()) fail(id.status().to_string(), 1);
  TurnResult out;
  bool first = true;
  while (true) {
    auto [ev, at] = queue.pop();
    if (first && !ev.token_ids.empty()) {
      out.ttft_s = std::chrono::duration<double>(at - t0).count();
      first = false;
    }
    out.tokens.insert(out.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (ev.finished) {
      if (ev.finish_reason == FinishReason::kError) fail(ev.error.to_string(), 1);
      out.n_cached = ev.n_tokens_cached;
      return out;
    }
  }
}

void run_prefix_bench(const PrefixBenchArgs& a) {
  if (a.model.empty() == a.config.empty()) fail("give exactly one of --model DIR or --config FILE", 2);
  if (a.turns < 2) fail("--turns must be >= 2", 2);
  if (a.system < 1 || a.reply < 1) fail("--system and --reply must be >= 1", 2);
  const int32_t per_turn = (a.context - a.system - a.turns * a.reply) / (a.turns - 1);
  if (per_turn < 1) {
    fail("--context " + std::to_string(a.context) + " leaves no new tokens per turn after --system " +
             std::to_string(a.system) + " and " + std::to_string(a.turns) + " replies of " + std::to_string(a.reply),
         2);
  }
  ModelOptions model;
  model.model_dir = a.model;
  model.synthetic_config = a.config;
  model.synthetic_seed = a.seed;
  model.backend = a.backend;
  model.kernel_family = a.kernel_family;
  model.n_threads = a.threads;
  model.n_slots = 1;
  model.max_context = a.context + 16;
  // Room for the cached transcript and an uncached run of the same prompt at once: the "without" run must not
  // evict what the next "with" run resumes from.
  constexpr int32_t kPageSize = 16;
  model.page_size = kPageSize;
  model.n_pages = 2 * ((model.max_context + kPageSize - 1) / kPageSize) + 8;
  model.n_prefix_snapshots = a.snapshots;
  model.cuda_graphs = !a.no_cuda_graphs;
  EngineConfig config;
  config.max_running = 1;
  config.max_waiting = 4;
  config.max_tokens_per_step = a.chunk;
  config.prefill_chunk = a.chunk;
  config.prefix_snapshot_interval = a.interval;
  auto engine = load_engine("bench", model, config);
  if (!engine->stats().prefix_cache_enabled) fail("the prefix cache is off (--snapshots 0?)", 2);
  const ModelInfo& info = engine->model_info();

  uint64_t z = 0x9e3779b97f4a7c15ULL * (a.seed + 1);
  (void)run_request(*engine, cli::noise_tokens(std::min(a.chunk, 256), info.n_vocab_real, z), 2, false);  // warm-up

  nlohmann::ordered_json out;
  out["bench"] = "prefix-cache";
  out["model"] = info.name;
  out["backend"] = info.backend;
  out["context"] = a.context;
  out["turns"] = a.turns;
  out["system_tokens"] = a.system;
  out["new_tokens_per_turn"] = per_turn;
  out["reply_tokens"] = a.reply;
  out["chunk"] = a.chunk;
  out["snapshots"] = a.snapshots;
  out["snapshot_interval"] = a.interval;
  out["snapshot_bytes"] = info.state_bytes_per_seq;
  out["per_turn"] = nlohmann::ordered_json::array();
  if (!a.json) {
    std::printf("%-5s %8s %8s %10s %10s %10s %8s %8s %12s %12s\n", "turn", "prompt", "cached", "ttft_on_ms",
                "ttft_off_ms", "fresh_ms", "on/off", "on/fresh", "snap_MiB", "pages_MiB");
  }
  std::vector<int32_t> history = cli::noise_tokens(a.system, info.n_vocab_real, z);
  double worst_ratio_fresh = 0;
  for (int32_t t = 0; t < a.turns; ++t) {
    std::vector<int32_t> prompt = history;
    if (t > 0) {
      const std::vector<int32_t> fresh = cli::noise_tokens(per_turn, info.n_vocab_real, z);
      prompt.insert(prompt.end(), fresh.begin(), fresh.end());
    }
    // Without the cache first (it neither looks up nor inserts), then with it, then a fresh request of the tokens
    // the cache did not serve.
    const TurnResult off = run_request(*engine, prompt, a.reply, false);
    const TurnResult on = run_request(*engine, prompt, a.reply, true);
    const auto n_uncached = static_cast<int32_t>(prompt.size()) - on.n_cached;
    const TurnResult fresh = run_request(*engine, cli::noise_tokens(n_uncached, info.n_vocab_real, z), 1, false);
    const EngineStats s = engine->stats();
    const double snap_mib = static_cast<double>(s.prefix_snapshots_used) * static_cast<double>(info.state_bytes_per_seq) /
                            (1024.0 * 1024.0);
    const double pages_mib = static_cast<double>(s.prefix_cache_pages) * kPageSize *
                             static_cast<double>(info.kv_bytes_per_token) / (1024.0 * 1024.0);
    const double ratio_off = on.ttft_s / off.ttft_s;
    const double ratio_fresh = on.ttft_s / fresh.ttft_s;
    if (t > 0) worst_ratio_fresh = std::max(worst_ratio_fresh, ratio_fresh);
    nlohmann::ordered_json row;
    row["turn"] = t;
    row["prompt_tokens"] = prompt.size();
    row["cached_tokens"] = on.n_cached;
    row["ttft_with_cache_ms"] = on.ttft_s * 1e3;
    row["ttft_without_cache_ms"] = off.ttft_s * 1e3;
    row["ttft_fresh_uncached_ms"] = fresh.ttft_s * 1e3;
    row["with_over_without"] = ratio_off;
    row["with_over_fresh"] = ratio_fresh;
    row["snapshots_used"] = s.prefix_snapshots_used;
    row["snapshot_mib"] = snap_mib;
    row["cached_pages"] = s.prefix_cache_pages;
    row["cached_pages_mib"] = pages_mib;
    row["same_tokens"] = on.tokens == off.tokens;
    out["per_turn"].push_back(row);
    if (!a.json) {
      std::printf("%-5d %8zu %8d %10.1f %10.1f %10.1f %8.3f %8.3f %12.1f %12.1f%s\n", t, prompt.size(), on.n_cached,
                  on.ttft_s * 1e3, off.ttft_s * 1e3, fresh.ttft_s * 1e3, ratio_off, ratio_fresh, snap_mib, pages_mib,
                  on.tokens == off.tokens ? "" : "  (greedy tokens differ)");
    }
    history = std::move(prompt);
    history.insert(history.end(), on.tokens.begin(), on.tokens.end());
  }
  const EngineStats s = engine->stats();
  out["hit_tokens_total"] = s.n_tokens_prefix_cached_total;
  out["hits"] = s.n_prefix_cache_hits_total;
  out["queries"] = s.n_prefix_cache_queries_total;
  out["evictions"] = s.n_prefix_cache_evictions_total;
  out["worst_with_over_fresh"] = worst_ratio_fresh;  // turns 1..: the 1.2x acceptance figure
  if (a.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::printf("hits %llu of %llu queries, %llu tokens served by the cache, %llu evictions; worst turn: %.3f x a "
                "fresh request of its uncached tokens\n",
                static_cast<unsigned long long>(s.n_prefix_cache_hits_total),
                static_cast<unsigned long long>(s.n_prefix_cache_queries_total),
                static_cast<unsigned long long>(s.n_tokens_prefix_cached_total),
                static_cast<unsigned long long>(s.n_prefix_cache_evictions_total), worst_ratio_fresh);
  }
  engine.reset();
}

}  // namespace

void register_bench_prefix_cache(CLI::App& bench) {
  auto a = std::make_shared<PrefixBenchArgs>();
  auto* cmd = bench.add_subcommand(
      "prefix-cache", "Replay a growing multi-turn transcript: time to first token per turn with and without the "
                      "prefix cache, hit tokens, memory");
  cmd->add_option("--model", a->model, "Hugging Face model folder");
  cmd->add_option("--config", a->config, "A config.json of the real shapes (config/models/*.json): synthetic weights");
  cmd->add_option("--backend", a->backend, "cpu, cuda or auto (default auto)");
  cmd->add_option("--kernel-family", a->kernel_family, "CUDA weight kernels: sm70, sm80 or auto")
      ->check(CLI::IsMember({"auto", "sm70", "sm80"}));
  cmd->add_option("--threads", a->threads, "CPU backend threads (0: automatic)");
  cmd->add_option("--seed", a->seed, "Seed of the synthetic weights and the transcript (default 1)");
  cmd->add_option("--context", a->context, "Tokens the transcript grows to (default 32768)")->check(CLI::Range(8, 1 << 22));
  cmd->add_option("--turns", a->turns, "Turns (default 8)")->check(CLI::Range(2, 4096));
  cmd->add_option("--system", a->system, "Tokens of the first turn's prompt (default 2048)")->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--reply", a->reply, "Tokens generated per turn (default 64)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--chunk", a->chunk, "Prefill tokens per step (default 2048)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--snapshots", a->snapshots, "Prefix-cache snapshot rows (default 8, serve's)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--interval", a->interval,
                  "Snapshot a long prefill every N tokens (default 2048, the chunk's; 0: only at ends)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("--no-cuda-graphs", a->no_cuda_graphs, "CUDA: launch every step eagerly");
  cmd->add_flag("--json", a->json, "One line of JSON");
  cmd->callback([a] { run_prefix_bench(*a); });
}

}  // namespace voltserve::cli
