// POST /v1/completions (legacy): raw prompt text or token ids, no chat template; the response and the streamed
// chunks both use object "text_completion". Choices are prompts x n (index = prompt * n + j).
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "http/access_log.h"
#include "http/server_context.h"

namespace voltserve::http {

void handle_completions(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                        httplib::Response& res);

}  // namespace voltserve::http
