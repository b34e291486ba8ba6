// Python's repr of floats and strings and json.dumps as the tojson filter uses them (CPython output as reference).
#include <catch2/catch_test_macros.hpp>

#include "chat/template/py_format.h"

using voltserve::chat::JsonDumpOptions;
using voltserve::chat::py_float_repr;
using voltserve::chat::py_json_dumps;
using voltserve::chat::py_repr;
using voltserve::chat::Value;

TEST_CASE("float repr matches CPython", "[unit]") {
  CHECK(py_float_repr(1.0) == "1.0");
  CHECK(py_float_repr(-0.0) == "-0.0");
  CHECK(py_float_repr(0.1) == "0.1");
  CHECK(py_float_repr(1e16) == "1e+16");
  CHECK(py_float_repr(1e15) == "1000000000000000.0");
  CHECK(py_float_repr(1.5e-5) == "1.5e-05");
  CHECK(py_float_repr(0.0001) == "0.0001");
  CHECK(py_float_repr(123456789012345680000.0) == "1.2345678901234568e+20");
  CHECK(py_float_repr(1.0 / 3.0) == "0.3333333333333333");
  CHECK(py_float_repr(2.5e300 * 1e10) == "inf");
}

TEST_CASE("string repr picks quotes and escapes like CPython", "[unit]") {
  CHECK(py_repr(Value("plain")) == "'plain'");
  CHECK(py_repr(Value("it's")) == "\"it's\"");
  CHECK(py_repr(Value("both ' and \"")) == "'both \\' and \"'");
  CHECK(py_repr(Value("a\nb\tc\\d\x01")) == "'a\\nb\\tc\\\\d\\x01'");
  CHECK(py_repr(Value("\xc3\xa9\xe2\x80\x8b")) == "'\xc3\xa9\\u200b'");  // é printable, zero-width space not
}

TEST_CASE("json dumps like transformers' tojson", "[unit]") {
  const Value v = Value::from_json(nlohmann::ordered_json::parse(R"({"b": [1, 2.0, null, true], "a": "\u00e9\n"})"));
  CHECK(py_json_dumps(v, {}) == "{\"b\": [1, 2.0, null, true], \"a\": \"\xc3\xa9\\n\"}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  CHECK(py_json_dumps(Value("\xc3\xa9\xf0\x9f\x98\x80"), ascii) == "\"\\u00e9\\ud83d\\ude00\"");
  JsonDumpOptions pretty;
  pretty.indent = "  ";
  pretty.sort_keys = true;
  CHECK(py_json_dumps(v, pretty) == "{\n  \"a\": \"\xc3\xa9\\n\",\n  \"b\": [\n    1,\n    2.0,\n    null,\n    true\n  ]\n}");
  CHECK_THROWS(py_json_dumps(Value(), {}));
}
