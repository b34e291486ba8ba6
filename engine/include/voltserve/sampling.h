// Sampling parameters of one request, already validated by the server (ranges checked there).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace voltserve {

struct SamplingParams {
  float temperature = 1.0f;   // 0 = greedy (argmax)
  float top_p = 1.0f;         // (0, 1]
  int32_t top_k = 0;          // 0 or -1 = off
  float min_p = 0.0f;         // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2], OpenAI semantics (over generated tokens)
  float frequency_penalty = 0.0f;   // [-2, 2], OpenAI semantics (over generated tokens)
  float repetition_penalty = 1.0f;  // > 0, HF semantics (over prompt + generated tokens)
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias added to the logit
  std::optional<uint64_t> seed;     // unset: a random seed is drawn

  bool is_greedy() const { return temperature <= 0.0f; }
};

}  // namespace voltserve
