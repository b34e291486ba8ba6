// The request fields shared by /v1/chat/completions and /v1/completions, validated into plain engine types
// (SamplingParams, stop strings, counts). Tested by tests/server/chat_request_test.cpp and
// tests/server/completion_request_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "openai/json_body.h"
#include "openai/request_limits.h"
#include "openai/structured_output.h"
#include "voltserve/sampling.h"

namespace voltserve::openai {

struct GenerationOptions {
  std::string model;                     // the served name the request resolved to
  SamplingParams sampling;
  std::optional<int32_t> max_tokens;     // unset: the rest of the context (chat) or 16 (completions)
  std::string max_tokens_param = "max_tokens";  // which field set it, for error messages
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
  std::vector<std::string> stop;         // never emitted; matched across token boundaries
  bool include_stop_str_in_output = false;
  std::vector<int32_t> stop_token_ids;   // extension: extra ids that end generation
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::optional<StructuredOutput> structured;  // a constraint on the output (structured_output.h)
  // `structured` compiled for the model (http/constraint_compile.h); make_engine_request hands it to the engine.
  std::shared_ptr<const CompiledConstraint> constraint;
  std::optional<int32_t> speculative_k;  // extension: drafts per round, 0 off, -1 "auto"; unset: the server's
  // Prefix caching: `prefix_cache: false` (extension) neither looks up nor feeds the cache; `cache_salt` (vLLM)
  // shares cached prefixes only with requests of the same salt.
  bool prefix_cache = true;
  std::string cache_salt;
};

// Reads every shared field of `body` into `out`; throws ApiError naming the field on any problem.
// `chat` selects the chat flavour (logprobs is a bool + top_logprobs) vs legacy completions (logprobs int 0..5).
void read_generation_options(const Json& body, const RequestLimits& limits, bool chat, GenerationOptions& out);

// Checks prompt + max_tokens against the context and fills max_tokens when unset. Throws 400
// context_length_exceeded (param "messages"/"prompt" or the max_tokens field) with both numbers.
void check_context(GenerationOptions& options, int64_t n_prompt_tokens, int32_t context_length,
                   const std::string& prompt_param);

}  // namespace voltserve::openai
