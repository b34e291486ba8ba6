// The output side of /v1/messages: the Anthropic Message object, and a writer that turns the chat pipeline's deltas
// into content blocks (thinking, text, tool_use) and the stream events content_block_start / content_block_delta
// (thinking_delta, text_delta, input_json_delta) / content_block_stop. The same writer builds the blocks of a
// non-streaming answer, so both agree. Tested by tests/server/messages_output_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "openai/json_body.h"

namespace voltserve::openai {

class MessagesWriter {
 public:
  // Each appends (event name, payload) pairs to `events` as {"event": name, "data": payload} objects.
  void thinking(const std::string& text, Json& events);
  void text(const std::string& text, Json& events);
  void tool_use(int index, const std::string& call_id, const std::string& name, const std::string& partial_json,
                Json& events);
  void finish(Json& events);

  const Json& content() const { return content_; }
  bool has_tool_use() const { return n_tool_uses_ > 0; }

 private:
  enum class Open { kNone, kThinking, kText, kToolUse };
  void open(Open kind, Json block, Json& events);
  void close(Json& events);
  void delta(Json delta, Json& events);

  Json content_ = Json::array();  // finished blocks
  Open open_ = Open::kNone;
  Json block_;
  std::string text_;  // the open block's text / input JSON so far
  int call_index_ = -1;
  int n_tool_uses_ = 0;
};

// {"event": name, "data": payload}, the unit MessagesWriter emits.
Json anthropic_event(const char* name, Json payload);

// Anthropic's split: input_tokens are the prompt tokens not read from the cache, cache_read_input_tokens those
// that were (their sum is the prompt); voltserve writes no cache entries a client pays for, so creation is 0.
Json anthropic_usage(int64_t prompt_tokens, int64_t output_tokens, int64_t cached_tokens = 0);
Json anthropic_message(const std::string& id, const std::string& model, const Json& content, const Json& stop_reason,
                       const Json& stop_sequence, const Json& usage);

}  // namespace voltserve::openai
