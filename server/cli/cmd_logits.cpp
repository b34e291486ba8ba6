// `voltserve logits --model DIR --ids 1,2,3 [--last N] [--backend cpu]`: one forward pass over the ids, prints
// {"positions": [...], "logits": [[...], ...]} (fp32, full vocabulary) for the last N positions (DESIGN.md §2),
// through the Engine as a score request (Request::n_prompt_logits).
// Tested by tests/golden/cli_model_test.cpp against the transformers reference of the fixtures.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "voltserve/engine.h"

namespace voltserve::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string ids;
  int32_t last = 1;
  std::string backend = "auto";
  std::string kernel_family = "auto";
  int32_t threads = 0;
};

[[noreturn]] void fail(const std::string& message, int code) { cli::fail("logits", message, code); }

std::vector<int32_t> parse_ids(const std::string& text) { return cli::parse_token_ids("logits", text); }

void run_logits(const LogitsArgs& a) {
  const std::vector<int32_t> ids = parse_ids(a.ids);
  const auto n = static_cast<int32_t>(ids.size());
  if (a.last < 1 || a.last > n) {
    fail("--last " + std::to_string(a.last) + " must be between 1 and the number of ids (" + std::to_string(n) + ")",
         2);
  }
  ModelOptions model;
  model.model_dir = a.model;
  model.backend = a.backend;
  model.kernel_family = a.kernel_family;
  model.n_threads = a.threads;
  model.n_slots = 1;
  model.max_context = n;
  EngineConfig config;
  config.max_running = 1;
  config.max_waiting = 1;
  config.prefill_chunk = std::min(n, 512);
  config.max_tokens_per_step = config.prefill_chunk;
  std::unique_ptr<Engine> engine = load_engine("logits", model, config);
  const int32_t vocab = engine->vocab_size();

  // A score request: the logits of the last N prompt positions, nothing generated.
  Request request;
  request.id = "logits";
  request.prompt_ids = ids;
  request.max_new_tokens = 0;
  request.n_prompt_logits = a.last;
  EventQueue events;
  Result<RequestId> id = engine->submit(request, events.sink());
  if (!id.is_ok()) fail(id.status().message(), id.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  Event final_event;
  do {
    final_event = events.pop().first;
  } while (!final_event.finished);
  if (final_event.finish_reason == FinishReason::kError) fail(final_event.error.to_string(), 1);
  const std::vector<float>& logits = final_event.prompt_logits;
  if (logits.size() != static_cast<size_t>(a.last) * static_cast<size_t>(vocab)) {
    fail("the engine returned " + std::to_string(logits.size()) + " logits, expected " + std::to_string(a.last) +
             " rows of " + std::to_string(vocab),
         1);
  }
  std::vector<int32_t> rows(static_cast<size_t>(a.last));
  std::iota(rows.begin(), rows.end(), n - a.last);

  nlohmann::ordered_json out;
  out["positions"] = rows;
  nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
  for (size_t r = 0; r < rows.size(); ++r) {
    rows_json.push_back(std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                                           logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab)));
  }
  out["logits"] = std::move(rows_json);
  std::cout << out.dump() << "\n";
}

}  // namespace

void register_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand(
      "logits", "Run one forward pass over token ids and print the fp32 logits of the last N positions as JSON");
  cmd->add_option("--model", args->model, "Hugging Face model folder (config.json + safetensors)")->required();
  cmd->add_option("--ids", args->ids, "Token ids, e.g. 1,2,3")->required();
  cmd->add_option("--last", args->last, "How many final positions to print (default 1)");
  cmd->add_option("--backend", args->backend, "Compute backend: cpu, cuda or auto (default: cuda when a GPU is visible)");
  cmd->add_option("--kernel-family", args->kernel_family, "CUDA weight kernels: sm70, sm80 or auto (default: by the GPU)")
      ->check(CLI::IsMember({"auto", "sm70", "sm80"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0: automatic)");
  cmd->callback([args] { run_logits(*args); });
}

}  // namespace voltserve::cli
