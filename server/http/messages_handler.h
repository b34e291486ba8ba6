// The Anthropic Messages API: POST /v1/messages (through the shared chat pipeline, answered as one Message or as
// Anthropic's SSE events) and POST /v1/messages/count_tokens. Errors on these routes are Anthropic-shaped
// ({"type": "error", "error": {"type", "message"}}; the route wrapper picks the shape by path). Tested by
// tests/e2e/test_anthropic_sdk.py (the anthropic SDK) and tests/e2e/test_robustness.py.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "http/access_log.h"
#include "http/server_context.h"

namespace voltserve::http {

void handle_messages(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                     httplib::Response& res);
void handle_messages_count_tokens(ServerContext& ctx, const std::string& body, httplib::Response& res);

// Whether `path` is an Anthropic route (its errors use the Anthropic shape).
bool anthropic_route(const std::string& path);

}  // namespace voltserve::http
