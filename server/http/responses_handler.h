// The OpenAI Responses API: POST /v1/responses (through the shared chat pipeline, answered as one Response object
// or as the typed SSE events), GET and DELETE /v1/responses/{id} (the bounded store), and
// POST /v1/responses/input_tokens (the prompt's token count). Errors are OpenAI-shaped. Tested by
// tests/e2e/test_responses_sdk.py (the openai SDK) and tests/e2e/test_robustness.py.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "http/access_log.h"
#include "http/server_context.h"

namespace voltserve::http {

void handle_responses_create(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                             httplib::Response& res);
void handle_responses_input_tokens(ServerContext& ctx, const std::string& body, httplib::Response& res);
void handle_responses_get(ServerContext& ctx, const std::string& id, const httplib::Request& req,
                          httplib::Response& res);
void handle_responses_delete(ServerContext& ctx, const std::string& id, httplib::Response& res);

}  // namespace voltserve::http
