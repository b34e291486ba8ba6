// Pieces shared by the chat and completion routes: building engine requests, logprob conversion, finish-reason
// names, and the SSE response plumbing (headers, chunked provider, disconnect -> cancel).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "http/server_context.h"
#include "openai/generation_options.h"
#include "openai/json_body.h"
#include "voltserve/request.h"

namespace voltserve::http {

// One engine request for choice `choice` of a request (seed + choice so n > 1 choices differ).
Request make_engine_request(const ServerContext& ctx, const std::string& request_id, int choice,
                            std::vector<int32_t> prompt_ids, const openai::GenerationOptions& options);

// Token text as its raw bytes (may be part of a UTF-8 sequence; dump_json replaces what is invalid).
std::string token_text(const ServerContext& ctx, int32_t id);

// A streaming session: `step` is called repeatedly on the HTTP thread; it returns SSE text to write (possibly a
// keep-alive comment) and sets `done` at the end. `disconnected` is called when a write fails.
struct StreamSession {
  virtual ~StreamSession() = default;
  virtual std::string step(bool& done) = 0;
  virtual void disconnected() = 0;
  // True once the session learned that the client hung up (and cancelled): the stream ends without another write.
  virtual bool client_gone() const { return false; }
};

// Sets the SSE headers and a chunked provider driving `session`.
void start_sse(httplib::Response& res, std::shared_ptr<StreamSession> session);

// Milliseconds to wait for the next event: up to the keep-alive interval, never past the deadline.
std::chrono::milliseconds next_wait(const ServerContext& ctx, std::chrono::steady_clock::time_point deadline);
std::chrono::steady_clock::time_point request_deadline(const ServerContext& ctx,
                                                       std::chrono::steady_clock::time_point start);

}  // namespace voltserve::http
