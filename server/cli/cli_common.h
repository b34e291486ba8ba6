// Helpers shared by the CLI sub-commands: failing with a clear message and an exit code, parsing --ids, loading an
// engine, and receiving its events on the calling thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "voltserve/engine.h"

namespace voltserve::cli {

// Prints "voltserve <command>: <message>" to stderr and ends the command with exit_code.
[[noreturn]] void fail(std::string_view command, const std::string& message, int exit_code);

// "1,2,3" (commas and/or whitespace, optional [ ]) -> ids; every entry must be a non-negative integer and
// at least one must be given (otherwise fail() with exit code 2).
std::vector<int32_t> parse_token_ids(std::string_view command, const std::string& text);

// n token ids in [0, vocab) from a xorshift stream whose state is `z` (advanced): prompts for the benchmarks, whose
// synthetic models' text is noise either way.
std::vector<int32_t> noise_tokens(int32_t n, int32_t vocab, uint64_t& z);

// Engine::load, or fail() with exit code 1 naming the model folder and the reason.
std::unique_ptr<Engine> load_engine(std::string_view command, const ModelOptions& model, const EngineConfig& config);

// An engine event sink whose events the calling thread takes with pop(), each stamped when the engine delivered it.
class EventQueue {
 public:
  EventSink sink();
  std::pair<Event, std::chrono::steady_clock::time_point> pop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Event, std::chrono::steady_clock::time_point>> events_;
};

}  // namespace voltserve::cli
