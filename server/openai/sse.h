// Server-sent-events framing: `data: <one-line JSON>\n\n`, `data: [DONE]\n\n`, `: comment\n\n` keep-alives, and
// named events `event: <name>\ndata: <JSON>\n\n` (the Responses and Anthropic streams).
// Tested by tests/server/responses_test.cpp.
#pragma once

#include <string>
#include <string_view>

#include "openai/json_body.h"

namespace voltserve::openai {

std::string sse_data(const Json& payload);  // compact dump, invalid UTF-8 replaced
inline std::string sse_event(std::string_view name, const Json& payload) {
  return "event: " + std::string(name) + "\n" + sse_data(payload);
}
inline std::string sse_done() { return "data: [DONE]\n\n"; }
inline std::string sse_comment(std::string_view text) { return ": " + std::string(text) + "\n\n"; }

}  // namespace voltserve::openai
