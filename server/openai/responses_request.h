// A validated POST /v1/responses request (the OpenAI Responses API), translated into the same openai::ChatRequest
// that /v1/chat/completions runs: `instructions` -> a system message, `input` items -> chat messages (function_call
// and reasoning items join the assistant turn, function_call_output items become tool messages), function and
// custom (free-form) tools -> chat function tools, `reasoning.effort` -> the template's thinking controls and a
// reasoning budget. Errors name the Responses field. Tested by tests/server/responses_request_test.cpp.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "openai/chat_request.h"

namespace voltserve::openai {

struct ResponsesRequest {
  ChatRequest chat;                  // what the shared chat pipeline runs
  Json input_messages;               // this request's input as chat messages (no instructions): stored for continuations
  std::string previous_response_id;  // "" when none
  bool store = true;
  Json echo;                         // the request fields the Response object repeats (tools, tool_choice, text, ...)
  std::set<std::string> custom_tools;  // names of tools declared as custom (free-form input) tools
};

// The reasoning budget `reasoning.effort` maps to (tokens; nullopt = none).
std::optional<int32_t> responses_effort_budget(const std::string& effort);

// previous_response_id of a body (validated: a string), or "" when absent.
std::string responses_previous_id(const Json& body);

// Validates `body` and translates it. `previous_messages` is the stored conversation (chat messages) of the
// response named by previous_response_id, or null. Throws ApiError naming the Responses field.
ResponsesRequest parse_responses_request(const Json& body, const RequestLimits& limits, const Json* previous_messages);

}  // namespace voltserve::openai
