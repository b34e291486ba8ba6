// The small routes: GET /v1/models, GET /v1/models/{id}, GET /health, GET /metrics, POST /tokenize,
// POST /detokenize, POST /apply-template. Each fills `res` or throws openai::ApiError.
#pragma once

#include <string>

#include <httplib.h>

#include "http/server_context.h"

namespace voltserve::http {

void handle_models(ServerContext& ctx, httplib::Response& res);
void handle_model(ServerContext& ctx, const std::string& id, httplib::Response& res);
void handle_health(ServerContext& ctx, httplib::Response& res);
void handle_metrics(ServerContext& ctx, httplib::Response& res);
// {"prompt": "text"} or a chat body ({"messages": [...], ...}) -> {"count", "max_model_len", "tokens"}.
void handle_tokenize(ServerContext& ctx, const std::string& body, httplib::Response& res);
// {"tokens": [ids]} -> {"prompt": "text"}.
void handle_detokenize(ServerContext& ctx, const std::string& body, httplib::Response& res);
// A chat-completions body -> {"prompt": "rendered text"}.
void handle_apply_template(ServerContext& ctx, const std::string& body, httplib::Response& res);

}  // namespace voltserve::http
