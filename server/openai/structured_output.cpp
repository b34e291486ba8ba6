// See structured_output.h.
#include "openai/structured_output.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "openai/api_error.h"
#include "openai/fields.h"

namespace voltserve::openai {
namespace {

using Kind = ConstraintSpec::Kind;

StructuredOutput make(Kind kind, std::string text, std::string param) {
  StructuredOutput out;
  out.spec.kind = kind;
  out.spec.text = std::move(text);
  out.param = std::move(param);
  // Compact JSON (", " and ": ", no other whitespace): free whitespace lets a model pad forever.
  out.spec.any_whitespace = false;
  return out;
}

std::string nonempty_string(const Json& value, const std::string& param, const char* what) {
  if (!value.is_string()) fail_invalid(param, fmt::format("'{}' must be a string ({}), got {}", param, what, json_type_name(value)));
  std::string s = value.get<std::string>();
  if (s.empty()) fail_invalid(param, fmt::format("'{}' must not be empty", param));
  return s;
}

StructuredOutput choice(const Json& value, const std::string& param) {
  if (!value.is_array() || value.empty()) fail_invalid(param, fmt::format("'{}' must be a non-empty array of strings", param));
  StructuredOutput out = make(Kind::kChoice, "", param);
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      fail_invalid(index_path(param, i), fmt::format("'{}' must be a string", index_path(param, i)));
    }
    std::string c = value[i].get<std::string>();
    if (c.empty()) fail_invalid(index_path(param, i), fmt::format("'{}' must not be empty", index_path(param, i)));
    out.spec.choices.push_back(std::move(c));
  }
  return out;
}

std::optional<StructuredOutput> response_format(const Json& body) {
  const Json* rf = find_field(body, "response_format");
  if (!rf) return std::nullopt;
  if (!rf->is_object()) fail_invalid("response_format", "'response_format' must be an object");
  std::optional<std::string> type = read_string(*rf, "type", "response_format.type");
  if (!type) fail_invalid("response_format.type", "'response_format.type' is required");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") return make(Kind::kJsonObject, "", "response_format");
  if (*type == "json_schema") {
    const Json* js = find_field(*rf, "json_schema");
    if (!js || !js->is_object()) {
      fail_invalid("response_format.json_schema", "'response_format.json_schema' must be an object");
    }
    std::optional<std::string> name = read_string(*js, "name", "response_format.json_schema.name");
    const Json* schema = find_field(*js, "schema");
    if (!schema) fail_invalid("response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
    StructuredOutput out = make(Kind::kJsonSchema, schema_text(*schema, "response_format.json_schema.schema"),
                                "response_format.json_schema.schema");
    // strict: true is OpenAI's promise that the output matches the schema, which every constrained output does;
    // strict: false still constrains (a looser promise kept more tightly). Either way additionalProperties is as
    // the schema says, defaulting to false as OpenAI's strict mode requires.
    out.spec.strict = true;
    (void)read_bool(*js, "strict", "response_format.json_schema.strict");
    out.name = name.value_or("");
    return out;
  }
  fail_invalid("response_format.type",
               fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema'; got '{}'", *type));
}

std::optional<StructuredOutput> vllm_structured_outputs(const Json& body) {
  const Json* so = find_field(body, "structured_outputs");
  if (!so) return std::nullopt;
  if (!so->is_object()) fail_invalid("structured_outputs", "'structured_outputs' must be an object");
  std::vector<StructuredOutput> found;
  if (const Json* v = find_field(*so, "json")) found.push_back(make(Kind::kJsonSchema, schema_text(*v, "structured_outputs.json"), "structured_outputs.json"));
  if (const Json* v = find_field(*so, "regex")) found.push_back(make(Kind::kRegex, nonempty_string(*v, "structured_outputs.regex", "a regular expression"), "structured_outputs.regex"));
  if (const Json* v = find_field(*so, "choice")) found.push_back(choice(*v, "structured_outputs.choice"));
  if (const Json* v = find_field(*so, "grammar")) found.push_back(make(Kind::kGrammar, nonempty_string(*v, "structured_outputs.grammar", "an EBNF grammar"), "structured_outputs.grammar"));
  if (read_bool(*so, "json_object", "structured_outputs.json_object").value_or(false)) {
    found.push_back(make(Kind::kJsonObject, "", "structured_outputs.json_object"));
  }
  for (const char* unsupported : {"structural_tag"}) {
    if (find_field(*so, unsupported)) {
      fail_unsupported(std::string("structured_outputs.") + unsupported,
                       fmt::format("'structured_outputs.{}' is not supported; use json, regex, choice or grammar", unsupported));
    }
  }
  if (found.empty()) fail_invalid("structured_outputs", "'structured_outputs' names none of json, regex, choice, grammar, json_object");
  if (found.size() > 1) {
    fail_invalid("structured_outputs", fmt::format("'structured_outputs' may name one constraint; got '{}' and '{}'",
                                                   found[0].param, found[1].param));
  }
  return found[0];
}

}  // namespace

std::string schema_text(const Json& value, const std::string& param) {
  if (value.is_object()) return value.dump();
  if (value.is_string()) {
    Json parsed = Json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      fail_invalid(param, fmt::format("'{}' must be a JSON schema (an object, or a string holding one)", param));
    }
    return parsed.dump();
  }
  if (value.is_boolean() && value.get<bool>()) return "{}";
  fail_invalid(param, fmt::format("'{}' must be a JSON schema (an object), got {}", param, json_type_name(value)));
}

std::optional<StructuredOutput> read_structured_output(const Json& body, bool chat) {
  std::vector<StructuredOutput> found;
  if (chat) {
    if (auto rf = response_format(body)) found.push_back(std::move(*rf));
  }
  if (auto so = vllm_structured_outputs(body)) found.push_back(std::move(*so));
  if (const Json* v = find_field(body, "guided_json")) found.push_back(make(Kind::kJsonSchema, schema_text(*v, "guided_json"), "guided_json"));
  if (const Json* v = find_field(body, "guided_regex")) found.push_back(make(Kind::kRegex, nonempty_string(*v, "guided_regex", "a regular expression"), "guided_regex"));
  if (const Json* v = find_field(body, "guided_choice")) found.push_back(choice(*v, "guided_choice"));
  if (const Json* v = find_field(body, "guided_grammar")) found.push_back(make(Kind::kGrammar, nonempty_string(*v, "guided_grammar", "an EBNF grammar"), "guided_grammar"));
  // llama.cpp's server: json_schema (a schema object) and grammar (GBNF, which XGrammar's EBNF reads).
  if (const Json* v = find_field(body, "json_schema")) found.push_back(make(Kind::kJsonSchema, schema_text(*v, "json_schema"), "json_schema"));
  if (const Json* v = find_field(body, "grammar")) found.push_back(make(Kind::kGrammar, nonempty_string(*v, "grammar", "a GBNF grammar"), "grammar"));
  if (found.empty()) return std::nullopt;
  if (found.size() > 1) {
    fail_invalid(found[1].param, fmt::format("'{}' and '{}' both ask for structured output; give one",
                                             found[0].param, found[1].param));
  }
  if (const Json* ws = find_field(body, "guided_whitespace_pattern")) {
    (void)ws;
    fail_unsupported("guided_whitespace_pattern", "'guided_whitespace_pattern' is not supported");
  }
  return found[0];
}

}  // namespace voltserve::openai
