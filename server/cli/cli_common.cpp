// Helpers shared by the CLI sub-commands (tested through tests/golden/cli_model_test.cpp).
#include "cli/cli_common.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <iostream>

namespace voltserve::cli {

void fail(std::string_view command, const std::string& message, int exit_code) {
  std::cerr << "voltserve " << command << ": " << message << "\n";
  throw CLI::RuntimeError(exit_code);
}

std::vector<int32_t> noise_tokens(int32_t n, int32_t vocab, uint64_t& z) {
  std::vector<int32_t> ids(static_cast<size_t>(std::max(n, 0)));
  for (auto& id : ids) {
    z ^= z >> 12;
    z ^= z << 25;
    z ^= z >> 27;
    id = static_cast<int32_t>((z * 0x2545F4914F6CDD1DULL >> 33) % static_cast<uint64_t>(std::max(vocab, 1)));
  }
  return ids;
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

std::unique_ptr<Engine> load_engine(std::string_view command, const ModelOptions& model, const EngineConfig& config) {
  auto loaded = Engine::load(model, config);
  if (!loaded.is_ok()) {
    const std::string what = model.model_dir.empty() ? "a synthetic model of " + model.synthetic_config : model.model_dir;
    fail(command, "cannot load " + what + ": " + loaded.status().to_string(), 1);
  }
  return std::move(loaded).value();
}

EventSink EventQueue::sink() {
  return [this](Event ev) {
    {
      std::lock_guard lk(mu_);
      events_.emplace_back(std::move(ev), std::chrono::steady_clock::now());
    }
    cv_.notify_one();
  };
}

std::pair<Event, std::chrono::steady_clock::time_point> EventQueue::pop() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !events_.empty(); });
  auto e = std::move(events_.front());
  events_.pop_front();
  return e;
}

}  // namespace voltserve::cli
