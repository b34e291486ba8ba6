// A forced tool call (tool_choice "required" or a named function) as a structured-output constraint on what the model
// writes after the primed opening of the call, in the model's own tool-call format (the one chat/tool_calls.h
// parses): Qwen3.5+ XML (<parameter=P>\nvalue\n</parameter>, strings raw, other types as JSON) or Qwen3 JSON
// ({"name": ..., "arguments": {...}}). The arguments follow each tool's parameters schema, then the call closes and
// the generation ends. Under tool_choice "auto" with a strict tool, the answer is free text in which each call,
// once its <tool_call> opening is written, names an offered tool and (strict tools) follows its schema until the
// call closes. Tested by tests/e2e/test_structured_output.py (forced calls always valid) and
// tests/e2e/test_strict_tools_auto.py (auto).
#pragma once

#include <string>
#include <vector>

#include "openai/chat_request.h"
#include "voltserve/grammar.h"

namespace voltserve::http {

// `named`: the forced function ("" for "required": any of `tools`, its name written by the model). `xml`: the
// Qwen3.5+ format. Matches the primed text of chat_generation.cpp's prepare_chat.
ConstraintSpec tool_call_constraint(const std::vector<openai::ToolDefinition>& tools, const std::string& named,
                                    bool xml);

// Whether any of `tools` asked for strict: true.
bool has_strict_tool(const std::vector<openai::ToolDefinition>& tools);

// tool_choice "auto": free text or calls of `tools` in the model's format, each call constrained from its opening
// tag to its closing one (a kTriggered constraint on "<tool_call>"). `parallel` false (parallel_tool_calls): at most
// one call, and the answer ends after it.
ConstraintSpec auto_tool_call_constraint(const std::vector<openai::ToolDefinition>& tools, bool xml, bool parallel);

}  // namespace voltserve::http
