// Request validation at submit().
#include "core/request_validation.h"

#include <cmath>
#include <string>

namespace voltserve {

namespace {

std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

Status validate_request(const Request& r, const RequestLimits& limits) {
  const int64_t n_prompt = static_cast<int64_t>(r.prompt_ids.size());
  if (n_prompt == 0) return invalid_argument("prompt_ids: the prompt is empty");
  for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
    const int32_t id = r.prompt_ids[i];
    if (id < 0 || id >= limits.vocab_size) {
      return invalid_argument("prompt_ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                              " is outside the vocabulary [0, " + std::to_string(limits.vocab_size) + ")");
    }
  }
  if (r.n_prompt_resume < 0 || r.n_prompt_resume > n_prompt) {
    return invalid_argument("n_prompt_resume must be in [0, " + std::to_string(n_prompt) + "] (the prompt's length), got " +
                            std::to_string(r.n_prompt_resume));
  }
  if (r.n_prompt_logits < 0 || r.n_prompt_logits > n_prompt) {
    return invalid_argument("n_prompt_logits must be in [0, " + std::to_string(n_prompt) + "] (the prompt's length), got " +
                            std::to_string(r.n_prompt_logits));
  }
  if (r.max_new_tokens < (r.n_prompt_logits > 0 ? 0 : 1)) {
    return invalid_argument("max_new_tokens must be at least " + std::string(r.n_prompt_logits > 0 ? "0" : "1") +
                            ", got " + std::to_string(r.max_new_tokens));
  }
  if (n_prompt + r.max_new_tokens > limits.context_length) {
    return out_of_range("the prompt has " + std::to_string(n_prompt) + " tokens and max_new_tokens is " +
                        std::to_string(r.max_new_tokens) + ": " + std::to_string(n_prompt + r.max_new_tokens) +
                        " tokens exceed the context length of " + std::to_string(limits.context_length));
  }
  const SamplingParams& s = r.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
    return invalid_argument("temperature must be a finite number >= 0, got " + num(s.temperature));
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1], got " + num(s.top_p));
  if (s.top_k < -1) return invalid_argument("top_k must be -1, 0 (off) or positive, got " + std::to_string(s.top_k));
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return invalid_argument("min_p must be in [0, 1], got " + num(s.min_p));
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f)) {
    return invalid_argument("presence_penalty must be in [-2, 2], got " + num(s.presence_penalty));
  }
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f)) {
    return invalid_argument("frequency_penalty must be in [-2, 2], got " + num(s.frequency_penalty));
  }
  if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty)) {
    return invalid_argument("repetition_penalty must be a finite number > 0, got " + num(s.repetition_penalty));
  }
  const int32_t n_real = limits.n_vocab_real > 0 ? limits.n_vocab_real : limits.vocab_size;
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= n_real) {
      return invalid_argument("logit_bias: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(n_real) + ")");
    }
    if (std::isnan(bias)) return invalid_argument("logit_bias: the bias of token " + std::to_string(id) + " is NaN");
  }
  if (r.speculative_k) {
    const int32_t k = *r.speculative_k;
    if (k < kSpeculativeAuto) {
      return invalid_argument("speculative_k must be 0 (off), -1 (auto) or 1.." +
                              std::to_string(limits.max_speculative_k) + ", got " + std::to_string(k));
    }
    if (k > 0 && limits.max_speculative_k == 0) {  // auto there is plain decoding
      return invalid_argument("speculative_k: this engine does not speculate (" + limits.no_speculation_reason + ")");
    }
    if (k > limits.max_speculative_k) {
      return invalid_argument("speculative_k must be at most " + std::to_string(limits.max_speculative_k) +
                              " (the engine's max_speculative_k), got " + std::to_string(k));
    }
  }
  if (r.n_top_logprobs < -1 || r.n_top_logprobs > 20) {
    return invalid_argument("n_top_logprobs must be -1 (off) or in [0, 20], got " + std::to_string(r.n_top_logprobs));
  }
  return Status::ok();
}

}  // namespace voltserve
