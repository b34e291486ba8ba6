// `voltserve logits --model DIR --ids 1,2,3 [--last N] [--backend cpu]`: one forward pass over the ids, prints
// {"positions": [...], "logits": [[...], ...]} (fp32, full vocabulary) for the last N positions (DESIGN.md §2).
// Tested by tests/golden/cli_model_test.cpp against the transformers reference of the fixtures.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/qwen35_runner.h"

namespace voltserve::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string ids;
  int32_t last = 1;
  std::string backend = "cpu";
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
  RunnerOptions opt;
  opt.backend = a.backend;
  opt.n_threads = a.threads;
  const std::unique_ptr<Qwen35Runner> loaded = load_single_sequence_runner("logits", a.model, opt, n, ids);
  Qwen35Runner& runner = *loaded;
  const int32_t vocab = runner.info().vocab_size;

  std::vector<int32_t> pages(static_cast<size_t>(runner.geometry().n_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::vector<int32_t> rows(static_cast<size_t>(a.last));
  std::iota(rows.begin(), rows.end(), n - a.last);
  SeqStep step;
  step.slot = 0;
  step.page_table = pages;
  step.tokens = ids;
  std::vector<float> logits;
  if (Status s = runner.reset_slot(0); !s.is_ok()) fail(s.to_string(), 1);
  if (Status s = runner.forward_rows(std::span<const SeqStep>(&step, 1), rows, logits); !s.is_ok()) {
    fail(s.to_string(), 1);
  }

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
  cmd->add_option("--backend", args->backend, "Compute backend: cpu (default)");
  cmd->add_option("--threads", args->threads, "CPU threads (0: automatic)");
  cmd->callback([args] { run_logits(*args); });
}

}  // namespace voltserve::cli
