// See responses.h.
#include "openai/responses.h"

namespace voltserve::openai {

namespace {

Json header(const ResponseMeta& meta, const char* object) {
  Json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  j["system_fingerprint"] = meta.system_fingerprint;
  return j;
}

Json nullable(const char* s) { return s ? Json(s) : Json(nullptr); }

Json bytes_of(const std::string& s) {
  Json out = Json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

Json usage_json(const Usage& usage) {
  Json u;
  u["prompt_tokens"] = usage.prompt_tokens;
  u["completion_tokens"] = usage.completion_tokens;
  u["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
  if (usage.reasoning_tokens >= 0) u["completion_tokens_details"] = {{"reasoning_tokens", usage.reasoning_tokens}};
  if (usage.drafted_tokens > 0) {  // an extension object, as vLLM-style clients ignore unknown usage keys
    u["speculative"] = {{"drafted_tokens", usage.drafted_tokens},
                        {"accepted_tokens", usage.accepted_tokens},
                        {"acceptance_rate", static_cast<double>(usage.accepted_tokens) /
                                                static_cast<double>(usage.drafted_tokens)},
                        {"drafted_per_position", usage.drafted_per_position},
                        {"accepted_per_position", usage.accepted_per_position}};
  }
  return u;
}

Json chat_chunk(const ResponseMeta& meta, int index, Json delta, const char* finish_reason, Json logprobs) {
  Json j = header(meta, "chat.completion.chunk");
  Json choice;
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = nullable(finish_reason);
  j["choices"] = Json::array({std::move(choice)});
  return j;
}

Json chat_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  Json j = header(meta, "chat.completion.chunk");
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

Json chat_choice(int index, Json message, const char* finish_reason, Json logprobs) {
  Json c;
  c["index"] = index;
  c["message"] = std::move(message);
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = nullable(finish_reason);
  return c;
}

Json chat_completion(const ResponseMeta& meta, Json choices, const Usage& usage) {
  Json j = header(meta, "chat.completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage_json(usage);
  return j;
}

Json completion_chunk(const ResponseMeta& meta, int index, const std::string& text, const char* finish_reason,
                      Json logprobs) {
  Json j = header(meta, "text_completion");
  j["choices"] = Json::array({completion_choice(index, text, finish_reason, std::move(logprobs))});
  return j;
}

Json completion_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  Json j = header(meta, "text_completion");
  j["choices"] = Json::array();
  j["usage"] = usage_json(usage);
  return j;
}

Json completion_choice(int index, const std::string& text, const char* finish_reason, Json logprobs) {
  Json c;
  c["index"] = index;
  c["text"] = text;
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = nullable(finish_reason);
  return c;
}

Json completion_response(const ResponseMeta& meta, Json choices, const Usage& usage) {
  Json j = header(meta, "text_completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage_json(usage);
  return j;
}

Json chat_logprob_entry(const std::string& token, float logprob,
                        const std::vector<std::pair<std::string, float>>& top) {
  Json e;
  e["token"] = token;
  e["logprob"] = logprob;
  e["bytes"] = bytes_of(token);
  Json alts = Json::array();
  for (const auto& [t, lp] : top) alts.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes_of(t)}});
  e["top_logprobs"] = std::move(alts);
  return e;
}

Json model_object(const std::string& id, int64_t created, int32_t max_model_len) {
  Json m;
  m["id"] = id;
  m["object"] = "model";
  m["created"] = created;
  m["owned_by"] = "voltserve";
  m["max_model_len"] = max_model_len;
  return m;
}

}  // namespace voltserve::openai
