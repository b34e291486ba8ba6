// A validated legacy /v1/completions request: the prompt(s) as text or token ids, plus generation options.
// Tested by tests/server/completion_request_test.cpp and fuzzed by fuzz/request_fuzz.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "openai/generation_options.h"

namespace voltserve::openai {

struct CompletionPrompt {
  std::optional<std::string> text;  // set for text prompts (tokenized by the server)
  std::vector<int32_t> ids;         // set for token-id prompts
};

struct CompletionRequest {
  GenerationOptions options;
  std::vector<CompletionPrompt> prompts;  // choices are prompts x n, index = prompt * n + j
};

CompletionRequest parse_completion_request(const Json& body, const RequestLimits& limits);

}  // namespace voltserve::openai
