// Structured output requested by any of the fields clients send: OpenAI `response_format` (json_object, json_schema
// with strict), vLLM `structured_outputs` {json, regex, choice, grammar, json_object} and its older `guided_json` /
// `guided_regex` / `guided_choice` / `guided_grammar`, llama.cpp `json_schema` and `grammar` (GBNF). The result is an
// engine ConstraintSpec plus the field that set it (400s name it); /v1/responses maps `text.format` onto
// response_format; a translator may also build a StructuredOutput directly. Tested by
// tests/e2e/test_structured_output.py (every field, the 400s) and
// tests/server/chat_request_test.cpp.
#pragma once

#include <optional>
#include <string>

#include "openai/json_body.h"
#include "voltserve/grammar.h"

namespace voltserve::openai {

struct StructuredOutput {
  ConstraintSpec spec;
  std::string param;  // the request field it came from ("response_format.json_schema.schema", "guided_regex", ...)
  std::string name;   // json_schema.name, when given
};

// Reads the structured-output fields of `body`. `chat`: /v1/chat/completions (response_format is read there only).
// Throws ApiError naming the field when a field is malformed or two fields ask for different constraints.
std::optional<StructuredOutput> read_structured_output(const Json& body, bool chat);

// A JSON schema field's value as the grammar engine reads it: an object, or a string holding one (vLLM accepts
// both). Throws ApiError naming `param` otherwise.
std::string schema_text(const Json& value, const std::string& param);

}  // namespace voltserve::openai
