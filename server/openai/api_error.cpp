// The error table (see api_error.h). 5xx only for the server's own faults: the SDKs retry 5xx and 429.
#include "openai/api_error.h"

namespace voltserve::openai {

const ErrorKind& error_kind(ErrorCode code) {
  static const ErrorKind kInvalidJson{400, "invalid_request_error", "invalid_json", "invalid_request_error"};
  static const ErrorKind kInvalidRequest{400, "invalid_request_error", "invalid_value", "invalid_request_error"};
  static const ErrorKind kUnsupported{400, "invalid_request_error", "unsupported_value", "invalid_request_error"};
  static const ErrorKind kContext{400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"};
  static const ErrorKind kApiKey{401, "authentication_error", "invalid_api_key", "authentication_error"};
  static const ErrorKind kModel{404, "not_found_error", "model_not_found", "not_found_error"};
  static const ErrorKind kNotFound{404, "not_found_error", "not_found", "not_found_error"};
  static const ErrorKind kMethod{405, "invalid_request_error", "method_not_allowed", "invalid_request_error"};
  static const ErrorKind kTooLarge{413, "invalid_request_error", "payload_too_large", "request_too_large"};
  static const ErrorKind kQueueFull{429, "rate_limit_error", "queue_full", "rate_limit_error"};
  static const ErrorKind kInternal{500, "server_error", "internal_error", "api_error"};
  static const ErrorKind kUnavailable{503, "server_error", "unavailable", "overloaded_error"};
  static const ErrorKind kTimeout{504, "server_error", "timeout", "timeout_error"};
  static const ErrorKind kRequestTimeout{408, "invalid_request_error", "request_timeout", "timeout_error"};
  static const ErrorKind kUriTooLong{414, "invalid_request_error", "uri_too_long", "request_too_large"};
  static const ErrorKind kHeadersTooLarge{431, "invalid_request_error", "headers_too_large", "request_too_large"};
  static const ErrorKind kTooManyConnections{429, "rate_limit_error", "too_many_connections", "rate_limit_error"};
  static const ErrorKind kServerBusy{503, "server_error", "server_busy", "overloaded_error"};
  switch (code) {
    case ErrorCode::kInvalidJson: return kInvalidJson;
    case ErrorCode::kInvalidRequest: return kInvalidRequest;
    case ErrorCode::kUnsupported: return kUnsupported;
    case ErrorCode::kContextLengthExceeded: return kContext;
    case ErrorCode::kInvalidApiKey: return kApiKey;
    case ErrorCode::kModelNotFound: return kModel;
    case ErrorCode::kNotFound: return kNotFound;
    case ErrorCode::kMethodNotAllowed: return kMethod;
    case ErrorCode::kPayloadTooLarge: return kTooLarge;
    case ErrorCode::kQueueFull: return kQueueFull;
    case ErrorCode::kInternal: return kInternal;
    case ErrorCode::kUnavailable: return kUnavailable;
    case ErrorCode::kTimeout: return kTimeout;
    case ErrorCode::kRequestTimeout: return kRequestTimeout;
    case ErrorCode::kUriTooLong: return kUriTooLong;
    case ErrorCode::kHeadersTooLarge: return kHeadersTooLarge;
    case ErrorCode::kTooManyConnections: return kTooManyConnections;
    case ErrorCode::kServerBusy: return kServerBusy;
  }
  return kInternal;
}

nlohmann::ordered_json error_body(const ApiError& error) {
  const ErrorKind& kind = error_kind(error.code());
  nlohmann::ordered_json e;
  e["message"] = error.what();
  e["type"] = kind.type;
  e["param"] = error.param().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(error.param());
  e["code"] = kind.code;
  nlohmann::ordered_json body;
  body["error"] = std::move(e);
  return body;
}

nlohmann::ordered_json anthropic_error_body(const ApiError& error) {
  nlohmann::ordered_json e;
  e["type"] = error_kind(error.code()).anthropic_type;
  e["message"] = error.what();
  nlohmann::ordered_json body;
  body["type"] = "error";
  body["error"] = std::move(e);
  return body;
}

ApiError api_error_from_status(const Status& status, std::string param) {
  ErrorCode code = ErrorCode::kInternal;
  switch (status.code()) {
    case StatusCode::kInvalidArgument: code = ErrorCode::kInvalidRequest; break;
    case StatusCode::kOutOfRange: code = ErrorCode::kContextLengthExceeded; break;
    case StatusCode::kResourceExhausted: code = ErrorCode::kQueueFull; break;
    case StatusCode::kUnavailable: code = ErrorCode::kUnavailable; break;
    case StatusCode::kUnimplemented: code = ErrorCode::kUnsupported; break;
    case StatusCode::kNotFound: code = ErrorCode::kNotFound; break;
    default: code = ErrorCode::kInternal; break;
  }
  return ApiError(code, status.message().empty() ? status.to_string() : status.message(), std::move(param));
}

void fail_invalid(const std::string& param, const std::string& message) {
  throw ApiError(ErrorCode::kInvalidRequest, message, param);
}

void fail_unsupported(const std::string& param, const std::string& message) {
  throw ApiError(ErrorCode::kUnsupported, message, param);
}

}  // namespace voltserve::openai
