// Body parsing: malformed JSON, invalid UTF-8, overflow and deep nesting are 400 invalid_json, never a crash.
#include <catch2/catch_test_macros.hpp>

#include "api_error_matchers.h"
#include "openai/json_body.h"

using namespace voltserve::openai;

TEST_CASE("malformed bodies are invalid_json", "[unit]") {
  CHECK_API_ERROR(parse_json_body(""), 400, "");
  CHECK_API_ERROR(parse_json_body("{\"model\":\"m\",\"messages\":["), 400, "");
  CHECK_API_ERROR(parse_json_body("{} trailing"), 400, "");
  CHECK_API_ERROR(parse_json_body("{\"a\": NaN}"), 400, "");
  CHECK_API_ERROR(parse_json_body("{\"a\": 1e400}"), 400, "");  // out_of_range.406, not parse_error
  CHECK_API_ERROR(parse_json_body("{\"a\": \"\xff\xfe\"}"), 400, "");
  CHECK_API_ERROR(parse_json_body("{\"a\": \"\\ud800\"}"), 400, "");
  CHECK_API_ERROR(parse_json_object_body("[1,2]"), 400, "");
  CHECK_API_ERROR(parse_json_object_body("null"), 400, "");
}

TEST_CASE("nesting beyond the limit is refused, within it accepted", "[unit]") {
  std::string ok = std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']');
  CHECK(parse_json_body(ok).is_array());
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_API_ERROR(parse_json_body(deep), 400, "");
}

TEST_CASE("dump_json never throws on invalid UTF-8", "[unit]") {
  Json j;
  j["text"] = std::string("ok \xe4\xbd");  // a code point cut in half
  std::string s;
  REQUIRE_NOTHROW(s = dump_json(j));
  CHECK(s.find("ok") != std::string::npos);
  CHECK(s.find("\xef\xbf\xbd") != std::string::npos);  // U+FFFD
}
