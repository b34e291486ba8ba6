// Parsing a request body into JSON safely (depth limit, UTF-8, number overflow -> 400 invalid_json) and
// dumping JSON that may hold model text without ever throwing. Tested by tests/server/json_body_test.cpp.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace voltserve::openai {

using Json = nlohmann::ordered_json;

// Nesting deeper than this is refused at parse time: nlohmann's dump() recurses and would overflow the stack.
inline constexpr int kMaxJsonDepth = 64;

// Parses `body` as one JSON value. Throws ApiError(kInvalidJson) for malformed JSON, invalid UTF-8 inside
// strings, lone surrogates, NaN, numbers that overflow a double, and nesting deeper than kMaxJsonDepth.
Json parse_json_body(std::string_view body);
// Same, and requires an object ("request body must be a JSON object").
Json parse_json_object_body(std::string_view body);

// Compact dump that replaces invalid UTF-8 with U+FFFD instead of throwing (model output can hold any bytes).
std::string dump_json(const Json& value);

}  // namespace voltserve::openai
