// Helpers shared by the CLI sub-commands (tested through tests/golden/cli_model_test.cpp).
#include "cli/cli_common.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <iostream>

namespace voltserve::cli {

void fail(std::string_view command, const std::string& message, int exit_code) {
  std::cerr << "voltserve " << command << ": " << message << "\n";
  throw CLI::RuntimeError(exit_code);
}

std::vector<int32_t> parse_token_ids(std::string_view command, const std::string& text) {
  std::vector<int32_t> ids;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    int32_t v = 0;
    const auto [ptr, ec] = std::from_chars(cur.data(), cur.data() + cur.size(), v);
    if (ec != std::errc() || ptr != cur.data() + cur.size() || v < 0) {
      fail(command, "bad --ids: '" + cur + "' is not a token id (a non-negative integer)", 2);
    }
    ids.push_back(v);
    cur.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']') {
      flush();
    } else {
      cur.push_back(c);
    }
  }
  flush();
  if (ids.empty()) fail(command, "--ids is empty: give at least one token id, e.g. --ids 1,2,3", 2);
  return ids;
}

std::unique_ptr<Qwen35Runner> load_single_sequence_runner(std::string_view command, const std::string& model_dir,
                                                          RunnerOptions opt, int32_t max_context,
                                                          const std::vector<int32_t>& prompt_ids) {
  opt.n_slots = 1;
  opt.max_context = max_context;
  auto loaded = Qwen35Runner::load(model_dir, opt);
  if (!loaded.is_ok()) fail(command, loaded.status().to_string(), 1);
  std::unique_ptr<Qwen35Runner> runner = std::move(*loaded);
  const int32_t vocab = runner->info().vocab_size;
  for (int32_t id : prompt_ids) {
    if (id >= vocab) {
      fail(command, "bad --ids: token id " + std::to_string(id) + " >= vocab_size " + std::to_string(vocab), 2);
    }
  }
  return runner;
}

}  // namespace voltserve::cli
