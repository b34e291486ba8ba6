// Builders for every JSON object the server sends: chat completions and chunks, legacy completions and chunks,
// usage, logprobs entries, model objects. Field sets follow the OpenAPI spec (OPENAI.md §1.3, §1.4, §2).
// Tested by tests/server/responses_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "openai/json_body.h"

namespace voltserve::openai {

// Shared by all chunks of one response (same id, same created).
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t reasoning_tokens = -1;  // < 0: completion_tokens_details omitted
  int64_t cached_tokens = 0;      // prompt tokens the prefix cache served (prompt_tokens_details.cached_tokens)
  // Speculative decoding (all choices): drafts proposed and accepted, per draft position; omitted when none.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  std::vector<int64_t> drafted_per_position = {};
  std::vector<int64_t> accepted_per_position = {};
};

Json usage_json(const Usage& usage);

// One chat choice inside a chunk; `finish_reason` nullptr -> JSON null.
Json chat_chunk(const ResponseMeta& meta, int index, Json delta, const char* finish_reason, Json logprobs = nullptr);
// The final usage chunk (`choices: []`), sent only when stream_options.include_usage.
Json chat_usage_chunk(const ResponseMeta& meta, const Usage& usage);
Json chat_choice(int index, Json message, const char* finish_reason, Json logprobs);
Json chat_completion(const ResponseMeta& meta, Json choices, const Usage& usage);

Json completion_chunk(const ResponseMeta& meta, int index, const std::string& text, const char* finish_reason,
                      Json logprobs = nullptr);
Json completion_usage_chunk(const ResponseMeta& meta, const Usage& usage);
Json completion_choice(int index, const std::string& text, const char* finish_reason, Json logprobs);
Json completion_response(const ResponseMeta& meta, Json choices, const Usage& usage);

// {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]} (chat logprobs.content[] entry).
Json chat_logprob_entry(const std::string& token, float logprob,
                        const std::vector<std::pair<std::string, float>>& top);

Json model_object(const std::string& id, int64_t created, int32_t max_model_len);

}  // namespace voltserve::openai
