// The error table: every code has a status and a type; bodies have the four OpenAI keys.
#include <catch2/catch_test_macros.hpp>

#include "openai/api_error.h"

using namespace voltserve;
using namespace voltserve::openai;

TEST_CASE("error table maps codes to status and type", "[unit]") {
  CHECK(error_kind(ErrorCode::kInvalidJson).http_status == 400);
  CHECK(error_kind(ErrorCode::kInvalidApiKey).http_status == 401);
  CHECK(std::string(error_kind(ErrorCode::kInvalidApiKey).type) == "authentication_error");
  CHECK(error_kind(ErrorCode::kModelNotFound).http_status == 404);
  CHECK(std::string(error_kind(ErrorCode::kModelNotFound).code) == "model_not_found");
  CHECK(error_kind(ErrorCode::kPayloadTooLarge).http_status == 413);
  CHECK(error_kind(ErrorCode::kQueueFull).http_status == 429);
  CHECK(error_kind(ErrorCode::kUnavailable).http_status == 503);
  CHECK(std::string(error_kind(ErrorCode::kContextLengthExceeded).code) == "context_length_exceeded");
  CHECK(error_kind(ErrorCode::kRequestTimeout).http_status == 408);
  CHECK(error_kind(ErrorCode::kUriTooLong).http_status == 414);
  CHECK(error_kind(ErrorCode::kHeadersTooLarge).http_status == 431);
  CHECK(error_kind(ErrorCode::kTooManyConnections).http_status == 429);
  CHECK(std::string(error_kind(ErrorCode::kTooManyConnections).type) == "rate_limit_error");
  CHECK(error_kind(ErrorCode::kServerBusy).http_status == 503);
}

TEST_CASE("error body has message, type, param, code", "[unit]") {
  auto body = error_body(ApiError(ErrorCode::kInvalidRequest, "bad temperature", "temperature"));
  REQUIRE(body.contains("error"));
  CHECK(body["error"]["message"] == "bad temperature");
  CHECK(body["error"]["type"] == "invalid_request_error");
  CHECK(body["error"]["param"] == "temperature");
  CHECK(body["error"]["code"] == "invalid_value");
  auto no_param = error_body(ApiError(ErrorCode::kInvalidJson, "x"));
  CHECK(no_param["error"]["param"].is_null());
}

TEST_CASE("engine statuses map into the table", "[unit]") {
  CHECK(api_error_from_status(resource_exhausted("queue full")).http_status() == 429);
  CHECK(api_error_from_status(out_of_range("too long")).http_status() == 400);
  CHECK(api_error_from_status(unavailable("draining")).http_status() == 503);
  CHECK(api_error_from_status(invalid_argument("bad")).http_status() == 400);
  CHECK(api_error_from_status(internal_error("boom")).http_status() == 500);
  CHECK(std::string(api_error_from_status(internal_error("boom")).what()) == "boom");
}

TEST_CASE("the Anthropic error shape comes from the same table", "[unit]") {
  auto body = anthropic_error_body(ApiError(ErrorCode::kInvalidRequest, "max_tokens: field required", "max_tokens"));
  CHECK(body["type"] == "error");
  CHECK(body["error"]["type"] == "invalid_request_error");
  CHECK(body["error"]["message"] == "max_tokens: field required");
  CHECK(body["error"].size() == 2);
  CHECK(std::string(error_kind(ErrorCode::kModelNotFound).anthropic_type) == "not_found_error");
  CHECK(std::string(error_kind(ErrorCode::kPayloadTooLarge).anthropic_type) == "request_too_large");
  CHECK(std::string(error_kind(ErrorCode::kInvalidApiKey).anthropic_type) == "authentication_error");
  CHECK(std::string(error_kind(ErrorCode::kQueueFull).anthropic_type) == "rate_limit_error");
  CHECK(std::string(error_kind(ErrorCode::kUnavailable).anthropic_type) == "overloaded_error");
  CHECK(std::string(error_kind(ErrorCode::kInternal).anthropic_type) == "api_error");
}
