// The ONE error table of the HTTP API: ErrorCode -> HTTP status -> OpenAI error `type` and `code` (and the
// Anthropic error `type` of the /v1/messages routes), and the exception that carries a client-facing error out of
// validation. Tested by tests/server/api_error_test.cpp.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "voltserve/status.h"

namespace voltserve::openai {

enum class ErrorCode {
  kInvalidJson,            // 400: body is not parseable JSON (or too deep, or not UTF-8)
  kInvalidRequest,         // 400: a field has the wrong type or value
  kUnsupported,            // 400: a known feature this server does not implement (image parts, n > limit, ...)
  kContextLengthExceeded,  // 400: prompt (+ max_tokens) beyond the context window
  kInvalidApiKey,          // 401
  kModelNotFound,          // 404: `model` names no served model
  kNotFound,               // 404: unknown route
  kMethodNotAllowed,       // 405
  kPayloadTooLarge,        // 413
  kQueueFull,              // 429: the engine's waiting queue is full (SDKs retry it)
  kInternal,               // 500: a bug or engine fault
  kUnavailable,            // 503: loading, draining or faulted
  kTimeout,                // 504: the request ran past --request-timeout
  // Decided by the connection front end, before routing:
  kRequestTimeout,         // 408: header or body did not arrive within --header-timeout / --body-timeout
  kUriTooLong,             // 414: request line beyond 8 KiB
  kHeadersTooLarge,        // 431: a header line beyond 8 KiB, or the whole header beyond 64 KiB
  kTooManyConnections,     // 429: --max-connections-per-address reached
  kServerBusy,             // 503: connection cap, buffered-bytes budget or every HTTP worker taken
};

struct ErrorKind {
  int http_status;
  const char* type;  // OpenAI error vocabulary: invalid_request_error, authentication_error, ...
  const char* code;  // machine-readable code string
  const char* anthropic_type;  // Anthropic's vocabulary: invalid_request_error, not_found_error, api_error, ...
};

// The table. Every error the server sends goes through it.
const ErrorKind& error_kind(ErrorCode code);

// A client-facing error. `param` is the dotted JSON path of the offending field ("" = null).
class ApiError : public std::runtime_error {
 public:
  ApiError(ErrorCode code, std::string message, std::string param = "")
      : std::runtime_error(std::move(message)), code_(code), param_(std::move(param)) {}
  ErrorCode code() const { return code_; }
  const std::string& param() const { return param_; }
  int http_status() const { return error_kind(code_).http_status; }

 private:
  ErrorCode code_;
  std::string param_;
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::ordered_json error_body(const ApiError& error);
// {"type": "error", "error": {"type", "message"}}: the Anthropic shape (/v1/messages). Anthropic errors carry no
// `param`; the message names the field.
nlohmann::ordered_json anthropic_error_body(const ApiError& error);
// Maps an engine Status (submit failures, mid-stream errors) into the table.
ApiError api_error_from_status(const Status& status, std::string param = "");

// Convenience for validation code: throws kInvalidRequest naming `param`.
[[noreturn]] void fail_invalid(const std::string& param, const std::string& message);
[[noreturn]] void fail_unsupported(const std::string& param, const std::string& message);

}  // namespace voltserve::openai
