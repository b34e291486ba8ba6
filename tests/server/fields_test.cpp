// Typed field reads: no silent coercion (2.7 is not an integer, "hot" is not a number).
#include <catch2/catch_test_macros.hpp>

#include "api_error_matchers.h"
#include "openai/fields.h"

using namespace voltserve::openai;

TEST_CASE("integers reject fractions, strings and overflow", "[unit]") {
  Json j = Json::parse(R"({"a": 2.7, "b": "100", "c": 3.0, "d": 5, "e": 1e30, "f": 99999999999999999999999})");
  CHECK_API_ERROR(read_integer(j, "a", "a", 0, 100), 400, "a");
  CHECK_API_ERROR(read_integer(j, "b", "b", 0, 100), 400, "b");
  CHECK(read_integer(j, "c", "c", 0, 100).value() == 3);
  CHECK(read_integer(j, "d", "d", 0, 100).value() == 5);
  CHECK_API_ERROR(read_integer(j, "d", "d", 6, 100), 400, "d");
  CHECK_API_ERROR(read_integer(j, "e", "e", INT64_MIN, INT64_MAX), 400, "e");
  CHECK_API_ERROR(read_integer(j, "f", "f", INT64_MIN, INT64_MAX), 400, "f");
  CHECK_FALSE(read_integer(j, "missing", "missing", 0, 1).has_value());
}

TEST_CASE("numbers, bools and strings are type-checked", "[unit]") {
  Json j = Json::parse(R"({"t": "hot", "s": "yes", "b": 1, "x": 0.5, "n": null})");
  CHECK_API_ERROR(read_number(j, "t", "temperature", 0, 2), 400, "temperature");
  CHECK_API_ERROR(read_bool(j, "s", "stream"), 400, "stream");
  CHECK_API_ERROR(read_bool(j, "b", "b"), 400, "b");
  CHECK_API_ERROR(read_string(j, "x", "x"), 400, "x");
  CHECK(read_number(j, "x", "x", 0, 1).value() == 0.5);
  CHECK_API_ERROR(read_number(j, "x", "x", 0.5, 1, /*lo_open=*/true), 400, "x");
  CHECK_FALSE(read_number(j, "n", "n", 0, 1).has_value());
}
