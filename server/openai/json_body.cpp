// See json_body.h. nlohmann's parser is iterative, so a depth callback stops absurd nesting before anything
// recursive (dump, destruction of a deep tree is fine) ever sees it.
#include "openai/json_body.h"

#include "openai/api_error.h"

namespace voltserve::openai {

namespace {

struct TooDeep {};

}  // namespace

Json parse_json_body(std::string_view body) {
  if (body.empty()) throw ApiError(ErrorCode::kInvalidJson, "request body is empty; expected a JSON object");
  Json::parser_callback_t depth_guard = [](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return Json::parse(body.begin(), body.end(), depth_guard, /*allow_exceptions=*/true);
  } catch (const TooDeep&) {
    throw ApiError(ErrorCode::kInvalidJson,
                   "request body is nested too deeply (more than " + std::to_string(kMaxJsonDepth) + " levels)");
  } catch (const nlohmann::json::exception& e) {
    // parse_error (syntax, invalid UTF-8, lone surrogates) and out_of_range.406 (1e400) alike.
    throw ApiError(ErrorCode::kInvalidJson, std::string("request body is not valid JSON: ") + e.what());
  }
}

Json parse_json_object_body(std::string_view body) {
  Json value = parse_json_body(body);
  if (!value.is_object()) throw ApiError(ErrorCode::kInvalidJson, "request body must be a JSON object");
  return value;
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace voltserve::openai
