// POST /v1/chat/completions: validate, render the chat template, tokenize, submit one engine request per choice,
// then answer with one JSON body or an SSE stream of chat.completion.chunk events. Errors found before the
// first byte are thrown as openai::ApiError (the route wrapper answers them); later ones go into the stream.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "http/access_log.h"
#include "http/server_context.h"

namespace voltserve::http {

void handle_chat_completions(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                             httplib::Response& res);

}  // namespace voltserve::http
