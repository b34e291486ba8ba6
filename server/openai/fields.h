// Typed, range-checked reads of request fields. Every mismatch is an ApiError naming the field: no silent
// coercion (nlohmann's get<int>() would truncate 2.7, get<bool>() of 1 would throw a 500). Absent and null
// read as "not given". Tested by tests/server/fields_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "openai/json_body.h"

namespace voltserve::openai {

// The field's value, or nullptr when absent or null.
const Json* find_field(const Json& object, std::string_view key);

std::optional<bool> read_bool(const Json& object, std::string_view key, const std::string& param);
std::optional<std::string> read_string(const Json& object, std::string_view key, const std::string& param);
// Any JSON number; `lo`/`hi` inclusive unless the matching *_open flag is set.
std::optional<double> read_number(const Json& object, std::string_view key, const std::string& param, double lo,
                                  double hi, bool lo_open = false);
// A JSON integer (or a float with an integral value, as Python clients may send 3.0) in [lo, hi].
std::optional<int64_t> read_integer(const Json& object, std::string_view key, const std::string& param, int64_t lo,
                                    int64_t hi);
// The same checks on a value already found.
int64_t integer_value(const Json& value, const std::string& param, int64_t lo, int64_t hi);

// "messages[2].content" style paths.
std::string field_path(const std::string& parent, std::string_view key);
std::string index_path(const std::string& parent, size_t index);

// The JSON type name for messages ("a string", "an object", ...).
const char* json_type_name(const Json& value);

}  // namespace voltserve::openai
