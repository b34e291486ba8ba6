// A generation request as the engine sees it (token ids, no JSON, no text), and the events it emits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "voltserve/sampling.h"
#include "voltserve/status.h"

namespace voltserve {

using RequestId = uint64_t;
class CompiledConstraint;  // voltserve/grammar.h

struct Request {
  std::string id;                       // for logs (`req=<id>`)
  std::vector<int32_t> prompt_ids;      // non-empty
  SamplingParams sampling;
  int32_t max_new_tokens = 16;          // >= 1 (0 only with n_prompt_logits > 0: score the prompt, generate nothing)
  std::vector<int32_t> stop_token_ids;  // generation ends (finish_reason "stop") after emitting one of these
  bool ignore_eos = false;              // when true, stop_token_ids are not honoured
  int32_t n_top_logprobs = -1;          // -1: no logprobs; 0..20: logprob of the chosen token + this many alternatives
  // > 0: return the fp32 logits (full vocabulary) of the last n_prompt_logits prompt positions in the final event.
  int32_t n_prompt_logits = 0;
  // Structured output (voltserve/grammar.h): every generated token is one the constraint allows, and the
  // generation stops (finish_reason "stop") once it is complete. Compiled for this engine's vocabulary.
  std::shared_ptr<const CompiledConstraint> constraint;
  // >= 0: the constraint starts after this token is generated (a reasoning model's </think>); before it, tokens
  // are free. -1: it applies from the first token.
  int32_t constraint_after_token = -1;
  // Speculative decoding with the model's MTP head: drafts per round. Unset: EngineConfig::speculative_k; 0: off;
  // kSpeculativeAuto: picked per round from the request's running acceptance; 1..EngineConfig::max_speculative_k.
  // Output is unchanged by it: greedy output is identical, sampled output has the same distribution.
  std::optional<int32_t> speculative_k;
  // Prefix caching (engine/cache/prefix_cache.h): false: this request neither looks up nor feeds the cache.
  bool prefix_cache = true;
  // Non-empty: cached prefixes are shared only with requests that carry the same salt (vLLM's cache_salt: tenants
  // cannot probe each other's prompts through time to first token). Mixed into the block hash chain's seed and
  // compared exactly.
  std::string cache_salt;
  // > 0: a prompt position a later request is expected to resume from, snapshotted too (the chat server passes
  // where the generation prompt starts: the next turn re-renders the history from there differently, e.g. without
  // this turn's opening <think>). At most the prompt length.
  int32_t n_prompt_resume = 0;
};

inline constexpr int32_t kSpeculativeAuto = -1;

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// One event on a request's stream. Tokens arrive in order; exactly one event has finished = true and it is
// the last. A token event may also be the finishing one (finish_reason kStop after a stop token, kLength).
struct Event {
  std::vector<int32_t> token_ids;                 // newly generated tokens (may be empty on the final event)
  std::vector<TokenLogprob> logprobs;             // per token in token_ids, when requested
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, n_top_logprobs alternatives
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  Status error;                                   // set when finish_reason == kError
  int32_t n_tokens_prompt = 0;                    // filled on the final event
  int32_t n_tokens_generated = 0;                 // filled on the final event
  int64_t ttft_us = 0;                            // submit -> first token, filled on the final event
  // Prompt tokens the prefix cache served at the request's first admission (OpenAI usage
  // prompt_tokens_details.cached_tokens), on the final event.
  int32_t n_tokens_cached = 0;
  // Speculative decoding, on the final event: drafts proposed and accepted, and per draft position j (0-based)
  // how many rounds drafted that position and how many accepted it (empty when the request did not speculate).
  int32_t n_tokens_drafted = 0;
  int32_t n_tokens_accepted = 0;
  std::vector<int32_t> drafted_per_position;
  std::vector<int32_t> accepted_per_position;
  uint64_t n_steps = 0;                           // engine steps completed when the final event was emitted
  // Request::n_prompt_logits > 0: [n_prompt_logits, vocab_size] logits of the last prompt positions, on the final
  // event.
  std::vector<float> prompt_logits;
};

// Called on the engine thread; must not block for long (push to a queue and return).
using EventSink = std::function<void(Event)>;

}  // namespace voltserve
