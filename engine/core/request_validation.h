// What submit() checks before a request may queue: non-empty prompt, ids in the vocabulary, the context limit,
// prompt logits within the prompt, and sampling parameters in range. Every failure names the field. Tested in tests/scheduler/engine_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "voltserve/request.h"
#include "voltserve/status.h"

namespace voltserve {

struct RequestLimits {
  int32_t vocab_size = 0;      // prompt ids must be below it
  int32_t n_vocab_real = 0;    // logit_bias ids must be below it
  int32_t context_length = 0;  // prompt + max_new_tokens must not exceed it
  int32_t max_speculative_k = 0;  // Request::speculative_k must be within it (0: the engine does not speculate)
  std::string no_speculation_reason;  // why max_speculative_k is 0, for the message
};

// kInvalidArgument for malformed requests, kOutOfRange (with both numbers) when prompt + max_new_tokens
// exceeds the context.
Status validate_request(const Request& request, const RequestLimits& limits);

}  // namespace voltserve
