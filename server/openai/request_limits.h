// What validation needs to know about the server: served model names, vocabulary, context, and the limits
// on counts that keep one request from costing unbounded work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace voltserve::openai {

struct RequestLimits {
  std::vector<std::string> model_names;  // first = the default when `model` is omitted; empty = accept any
  int32_t vocab_size = 0;                // 0 = unknown: token-id checks skipped
  int32_t context_length = 0;            // 0 = unknown: max_tokens only checked against kMaxTokensCap
  int32_t max_n = 8;                     // choices per request (n, or prompts x n for completions)
  int32_t max_stop = 4;                  // OpenAI's limit on `stop` entries
  size_t max_stop_bytes = 256;
  int32_t max_top_logprobs = 20;
  int32_t max_messages = 2048;
  int32_t max_tools = 128;
  int32_t max_logit_bias = 1024;
  int32_t max_prompts = 8;               // /v1/completions prompt arrays
  int32_t max_speculative_k = 0;         // speculative_k's limit (the engine's; 0: the server does not speculate)
};

inline constexpr int64_t kMaxTokensCap = 1 << 24;

}  // namespace voltserve::openai
