// A validated /v1/chat/completions request: generation options in engine types, plus the normalised body the
// chat template renders (messages flattened, developer -> system, tool-call arguments parsed into objects).
// Tested by tests/server/chat_request_test.cpp and fuzzed by fuzz/request_fuzz.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "openai/generation_options.h"

namespace voltserve::openai {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolDefinition {
  std::string name;
  Json parameters;  // the JSON schema (object) or null
  bool strict = false;  // function.strict: calls follow `parameters` even under tool_choice "auto"
};

struct ChatRequest {
  GenerationOptions options;
  Json template_body;                 // {messages, tools?, tool_choice?, chat_template_kwargs?, reasoning_effort?}
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_name;       // kNamed
  bool parallel_tool_calls = true;
  bool include_reasoning = true;      // extension: false drops reasoning from the response
  std::optional<bool> enable_thinking;  // from chat_template_kwargs or reasoning_effort "none"
  // Extension `thinking_token_budget` (vLLM's name; also set by the Responses and Anthropic routes): after this many
  // reasoning tokens the server closes </think> for the model, which then answers.
  std::optional<int32_t> reasoning_budget;
};

// Throws ApiError (400 naming `param`, 404 for an unknown model) on any problem.
ChatRequest parse_chat_request(const Json& body, const RequestLimits& limits);

}  // namespace voltserve::openai
