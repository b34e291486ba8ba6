// A validated POST /v1/messages request (the Anthropic Messages API), translated into the same openai::ChatRequest
// that /v1/chat/completions runs: `system` -> a system message, content blocks -> chat messages (tool_use blocks ->
// assistant tool calls, tool_result blocks -> tool messages, thinking blocks -> reasoning_content), tools with
// `input_schema` -> function tools, tool_choice auto/any/tool/none -> auto/required/named/none, `thinking` ->
// enable_thinking and a reasoning budget. Errors name the Anthropic field. Tested by
// tests/server/messages_request_test.cpp.
#pragma once

#include "openai/chat_request.h"

namespace voltserve::openai {

struct MessagesRequest {
  ChatRequest chat;
};

// `count_tokens`: the /v1/messages/count_tokens body (no max_tokens, no sampling fields). Throws ApiError.
MessagesRequest parse_messages_request(const Json& body, const RequestLimits& limits, bool count_tokens = false);

// Anthropic-style tool_use id for a parser call id ("call_<hex>" -> "toolu_<hex>").
std::string tool_use_id(const std::string& call_id);

}  // namespace voltserve::openai
