// See generation_options.h. Ranges follow the OpenAI spec and vLLM's validation (OPENAI.md §1.1).
#include "openai/generation_options.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "openai/api_error.h"
#include "openai/fields.h"

namespace voltserve::openai {

constexpr size_t kMaxCacheSaltBytes = 1024;

namespace {

void resolve_model(const Json& body, const RequestLimits& limits, GenerationOptions& out) {
  std::optional<std::string> model = read_string(body, "model", "model");
  if (!model) {
    out.model = limits.model_names.empty() ? std::string("default") : limits.model_names.front();
    return;
  }
  if (limits.model_names.empty()) {
    out.model = *model;
    return;
  }
  for (const std::string& name : limits.model_names) {
    if (name == *model) {
      out.model = name;
      return;
    }
  }
  throw ApiError(ErrorCode::kModelNotFound, fmt::format("The model '{}' does not exist; this server serves '{}'",
                                                        *model, limits.model_names.front()),
                 "model");
}

void read_stop(const Json& body, const RequestLimits& limits, GenerationOptions& out) {
  const Json* stop = find_field(body, "stop");
  if (!stop) return;
  auto add = [&](const Json& v, const std::string& param) {
    if (!v.is_string()) fail_invalid(param, fmt::format("'{}' must be a string, got {}", param, json_type_name(v)));
    const std::string& s = v.get_ref<const std::string&>();
    if (s.empty()) fail_invalid(param, "stop strings must not be empty");
    if (s.size() > limits.max_stop_bytes) {
      fail_invalid(param, fmt::format("stop strings must be at most {} bytes, got {}", limits.max_stop_bytes, s.size()));
    }
    out.stop.push_back(s);
  };
  if (stop->is_string()) {
    add(*stop, "stop");
  } else if (stop->is_array()) {
    if (static_cast<int64_t>(stop->size()) > limits.max_stop) {
      fail_invalid("stop", fmt::format("'stop' may hold at most {} strings, got {}", limits.max_stop, stop->size()));
    }
    for (size_t i = 0; i < stop->size(); ++i) add((*stop)[i], index_path("stop", i));
  } else {
    fail_invalid("stop", fmt::format("'stop' must be a string or an array of strings, got {}", json_type_name(*stop)));
  }
}

void read_logit_bias(const Json& body, const RequestLimits& limits, GenerationOptions& out) {
  const Json* bias = find_field(body, "logit_bias");
  if (!bias) return;
  if (!bias->is_object()) {
    fail_invalid("logit_bias", fmt::format("'logit_bias' must be an object mapping token ids to biases, got {}",
                                           json_type_name(*bias)));
  }
  if (static_cast<int64_t>(bias->size()) > limits.max_logit_bias) {
    fail_invalid("logit_bias", fmt::format("'logit_bias' may hold at most {} entries", limits.max_logit_bias));
  }
  for (auto it = bias->begin(); it != bias->end(); ++it) {
    const std::string& key = it.key();
    std::string param = "logit_bias." + key;
    int64_t id = -1;
    auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || ptr != key.data() + key.size() || id < 0) {
      fail_invalid("logit_bias", fmt::format("'logit_bias' keys must be token ids (non-negative integers), got '{}'", key));
    }
    if (limits.vocab_size > 0 && id >= limits.vocab_size) {
      fail_invalid("logit_bias",
                   fmt::format("'logit_bias' token id {} is outside the vocabulary (size {})", id, limits.vocab_size));
    }
    const Json& v = it.value();
    if (!v.is_number()) fail_invalid("logit_bias", fmt::format("'{}' must be a number, got {}", param, json_type_name(v)));
    double b = v.get<double>();
    if (!std::isfinite(b) || b < -100.0 || b > 100.0) {
      fail_invalid("logit_bias", fmt::format("'{}' must be in [-100, 100], got {}", param, b));
    }
    out.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
}

}  // namespace

void read_generation_options(const Json& body, const RequestLimits& limits, bool chat, GenerationOptions& out) {
  resolve_model(body, limits, out);
  out.structured = read_structured_output(body, chat);

  SamplingParams& s = out.sampling;
  if (auto v = read_number(body, "temperature", "temperature", 0.0, 2.0)) s.temperature = static_cast<float>(*v);
  if (auto v = read_number(body, "top_p", "top_p", 0.0, 1.0, /*lo_open=*/true)) s.top_p = static_cast<float>(*v);
  if (auto v = read_integer(body, "top_k", "top_k", -1, INT32_MAX)) s.top_k = static_cast<int32_t>(*v);
  if (auto v = read_number(body, "min_p", "min_p", 0.0, 1.0)) s.min_p = static_cast<float>(*v);
  if (auto v = read_number(body, "presence_penalty", "presence_penalty", -2.0, 2.0)) {
    s.presence_penalty = static_cast<float>(*v);
  }
  if (auto v = read_number(body, "frequency_penalty", "frequency_penalty", -2.0, 2.0)) {
    s.frequency_penalty = static_cast<float>(*v);
  }
  if (auto v = read_number(body, "repetition_penalty", "repetition_penalty", 0.0, 2.0, true)) {
    s.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = read_number(body, "repeat_penalty", "repeat_penalty", 0.0, 2.0, true)) {
    s.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = read_integer(body, "seed", "seed", INT64_MIN, INT64_MAX)) s.seed = static_cast<uint64_t>(*v);
  read_logit_bias(body, limits, out);

  // max_completion_tokens (what newer clients send) wins over the deprecated max_tokens.
  int64_t cap = limits.context_length > 0 ? limits.context_length : kMaxTokensCap;
  if (auto v = read_integer(body, "max_tokens", "max_tokens", 1, cap)) {
    out.max_tokens = static_cast<int32_t>(*v);
    out.max_tokens_param = "max_tokens";
  }
  if (chat) {
    if (auto v = read_integer(body, "max_completion_tokens", "max_completion_tokens", 1, cap)) {
      out.max_tokens = static_cast<int32_t>(*v);
      out.max_tokens_param = "max_completion_tokens";
    }
  }

  if (const Json* n = find_field(body, "n")) {
    int64_t value = integer_value(*n, "n", 1, 128);
    if (value > limits.max_n) {
      fail_unsupported("n", fmt::format("'n' must be at most {} on this server, got {}", limits.max_n, value));
    }
    out.n = static_cast<int32_t>(value);
  }

  out.stream = read_bool(body, "stream", "stream").value_or(false);
  if (const Json* so = find_field(body, "stream_options")) {
    if (!out.stream) fail_invalid("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (!so->is_object()) {
      fail_invalid("stream_options", fmt::format("'stream_options' must be an object, got {}", json_type_name(*so)));
    }
    out.include_usage = read_bool(*so, "include_usage", "stream_options.include_usage").value_or(false);
    // include_obfuscation and continuous_usage_stats have no meaning here: accepted and ignored.
    (void)read_bool(*so, "include_obfuscation", "stream_options.include_obfuscation");
  }

  read_stop(body, limits, out);
  out.include_stop_str_in_output =
      read_bool(body, "include_stop_str_in_output", "include_stop_str_in_output").value_or(false);
  if (const Json* ids = find_field(body, "stop_token_ids")) {
    if (!ids->is_array()) fail_invalid("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    if (ids->size() > 64) fail_invalid("stop_token_ids", "'stop_token_ids' may hold at most 64 ids");
    int64_t hi = limits.vocab_size > 0 ? limits.vocab_size - 1 : INT32_MAX;
    for (size_t i = 0; i < ids->size(); ++i) {
      out.stop_token_ids.push_back(static_cast<int32_t>(integer_value((*ids)[i], index_path("stop_token_ids", i), 0, hi)));
    }
  }
  out.ignore_eos = read_bool(body, "ignore_eos", "ignore_eos").value_or(false);
  out.skip_special_tokens = read_bool(body, "skip_special_tokens", "skip_special_tokens").value_or(true);

  if (chat) {
    out.logprobs = read_bool(body, "logprobs", "logprobs").value_or(false);
    if (const Json* top = find_field(body, "top_logprobs")) {
      int64_t value = integer_value(*top, "top_logprobs", 0, 20);
      if (value > limits.max_top_logprobs) {
        fail_unsupported("top_logprobs", fmt::format("'top_logprobs' must be at most {}", limits.max_top_logprobs));
      }
      if (!out.logprobs) fail_invalid("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
      out.top_logprobs = static_cast<int32_t>(value);
    }
  } else if (const Json* lp = find_field(body, "logprobs")) {
    // Legacy completions: an integer 0..5 = number of alternatives (OpenAI's limit).
    if (lp->is_boolean()) fail_invalid("logprobs", "'logprobs' must be an integer in [0, 5] for /v1/completions");
    out.logprobs = true;
    out.top_logprobs = static_cast<int32_t>(integer_value(*lp, "logprobs", 0, 5));
  }

  if (const Json* k = find_field(body, "speculative_k")) {
    // An integer 0..max, or "auto" (picked per round from the request's acceptance); output is unchanged by it.
    if (k->is_string() && k->get_ref<const std::string&>() == "auto") {
      out.speculative_k = -1;
    } else if (k->is_string()) {
      fail_invalid("speculative_k", "'speculative_k' must be an integer or \"auto\"");
    } else {
      out.speculative_k = static_cast<int32_t>(integer_value(*k, "speculative_k", 0, 1024));
    }
    // "auto" is the server's choice, so a server that does not speculate takes it (and 0) as plain decoding.
    if (*out.speculative_k > 0 && limits.max_speculative_k == 0) {
      fail_unsupported("speculative_k", "'speculative_k': this server does not speculate (the model has no MTP head, "
                                        "its backend cannot verify drafts, or --max-speculative-k is 0)");
    }
    if (*out.speculative_k > limits.max_speculative_k) {
      fail_invalid("speculative_k", fmt::format("'speculative_k' must be at most {} on this server, got {}",
                                                limits.max_speculative_k, *out.speculative_k));
    }
  }
  out.prefix_cache = read_bool(body, "prefix_cache", "prefix_cache").value_or(true);
  if (auto salt = read_string(body, "cache_salt", "cache_salt")) {
    // vLLM's rule: a salt, when given, is a non-empty string. Bounded: every cached entry keeps a copy.
    if (salt->empty()) fail_invalid("cache_salt", "'cache_salt' must be a non-empty string if provided");
    if (salt->size() > kMaxCacheSaltBytes) {
      fail_invalid("cache_salt", fmt::format("'cache_salt' may be at most {} bytes, got {}", kMaxCacheSaltBytes,
                                             salt->size()));
    }
    out.cache_salt = std::move(*salt);
  }
  if (auto min_tokens = read_integer(body, "min_tokens", "min_tokens", 0, kMaxTokensCap); min_tokens && *min_tokens > 0) {
    fail_unsupported("min_tokens", "'min_tokens' is not supported by this server");
  }
  (void)read_string(body, "user", "user");
}

void check_context(GenerationOptions& options, int64_t n_prompt_tokens, int32_t context_length,
                   const std::string& prompt_param) {
  if (n_prompt_tokens <= 0) fail_invalid(prompt_param, "the prompt is empty");
  if (context_length <= 0) {
    if (!options.max_tokens) options.max_tokens = 16;
    return;
  }
  if (n_prompt_tokens >= context_length) {
    throw ApiError(ErrorCode::kContextLengthExceeded,
                   fmt::format("This model's maximum context length is {} tokens. However, your request has {} input "
                               "tokens. Please reduce the length of the input.",
                               context_length, n_prompt_tokens),
                   prompt_param);
  }
  int64_t room = context_length - n_prompt_tokens;
  if (!options.max_tokens) {
    options.max_tokens = static_cast<int32_t>(room);
    return;
  }
  if (*options.max_tokens > room) {
    throw ApiError(ErrorCode::kContextLengthExceeded,
                   fmt::format("'{}' is too large: {}. This model's maximum context length is {} tokens and your "
                               "request has {} input tokens ({} > {} - {}).",
                               options.max_tokens_param, *options.max_tokens, context_length, n_prompt_tokens,
                               *options.max_tokens, context_length, n_prompt_tokens),
                   options.max_tokens_param);
  }
}

}  // namespace voltserve::openai
