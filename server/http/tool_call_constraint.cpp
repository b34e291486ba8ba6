// See tool_call_constraint.h.
#include "http/tool_call_constraint.h"

#include <string>

namespace voltserve::http {
namespace {

using Kind = ConstraintSpec::Kind;
using openai::Json;

ConstraintSpec literal(std::string text) {
  ConstraintSpec s;
  s.kind = Kind::kLiteral;
  s.text = std::move(text);
  return s;
}

ConstraintSpec sequence(std::vector<ConstraintSpec> parts) {
  ConstraintSpec s;
  s.kind = Kind::kSequence;
  s.parts = std::move(parts);
  return s;
}

ConstraintSpec json_schema(const Json& schema) {
  ConstraintSpec s;
  s.kind = Kind::kJsonSchema;
  s.text = schema.is_object() ? schema.dump() : R"({"type": "object"})";
  s.any_whitespace = false;
  return s;
}

// Escapes regex metacharacters of a string enum value (the raw XML value is the string itself).
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// One XML parameter's value: a string schema is raw text (no '<', which would start the closing tag; bounded by
// maxLength when given), an enum of strings one of them, anything else the property's JSON schema.
ConstraintSpec xml_value(const Json& prop) {
  const bool is_string = prop.is_object() && prop.contains("type") && prop["type"] == "string";
  if (prop.is_object() && prop.contains("enum") && prop["enum"].is_array()) {
    bool all_strings = !prop["enum"].empty();
    for (const Json& v : prop["enum"]) all_strings = all_strings && v.is_string();
    if (all_strings) {
      ConstraintSpec s;
      s.kind = Kind::kRegex;
      s.text = "(";
      for (size_t i = 0; i < prop["enum"].size(); ++i) {
        if (i > 0) s.text.push_back('|');
        s.text.append(regex_escape(prop["enum"][i].get<std::string>()));
      }
      s.text.push_back(')');
      return s;
    }
  }
  if (is_string) {
    ConstraintSpec s;
    s.kind = Kind::kRegex;
    if (prop.contains("pattern") && prop["pattern"].is_string()) {
      std::string p = prop["pattern"].get<std::string>();
      if (!p.empty() && p.front() == '^') p.erase(0, 1);
      if (!p.empty() && p.back() == '$') p.pop_back();
      s.text = p;
    } else {
      const int64_t max_len = prop.contains("maxLength") && prop["maxLength"].is_number_integer()
                                  ? prop["maxLength"].get<int64_t>() : -1;
      const int64_t min_len = prop.contains("minLength") && prop["minLength"].is_number_integer()
                                  ? prop["minLength"].get<int64_t>() : 0;
      s.text = "[^<\\n]{";
      s.text.append(std::to_string(min_len));
      s.text.push_back(',');
      if (max_len >= 0) s.text.append(std::to_string(max_len));
      s.text.push_back('}');
    }
    return s;
  }
  return json_schema(prop.is_object() ? prop : Json::object());
}

// Every property of the schema, in order, each as a <parameter=...> block (optional ones too: always valid).
std::vector<ConstraintSpec> xml_parameters(const Json& params) {
  std::vector<ConstraintSpec> parts;
  if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) return parts;
  for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
    parts.push_back(literal("<parameter=" + it.key() + ">\n"));
    parts.push_back(xml_value(it.value()));
    parts.push_back(literal("\n</parameter>\n"));
  }
  return parts;
}

ConstraintSpec one_call(const openai::ToolDefinition& t, bool named, bool xml) {
  std::vector<ConstraintSpec> parts;
  if (xml) {
    if (!named) parts.push_back(literal(t.name + ">\n"));
    for (ConstraintSpec& p : xml_parameters(t.parameters)) parts.push_back(std::move(p));
    parts.push_back(literal("</function>\n</tool_call>"));
  } else {
    if (!named) parts.push_back(literal(t.name + "\", \"arguments\": "));
    parts.push_back(json_schema(t.parameters));
    parts.push_back(literal("}\n</tool_call>"));
  }
  return sequence(std::move(parts));
}

// A whole call of tool `t` under tool_choice "auto", from the opening tag to the closing one. Strict: the arguments
// follow its schema as in a forced call; otherwise only the call's shape: XML parameter blocks with any values
// (the parser types them), or any JSON object.
ConstraintSpec auto_call(const openai::ToolDefinition& t, bool xml) {
  std::vector<ConstraintSpec> parts;
  if (xml) {
    parts.push_back(literal("<tool_call>\n<function=" + t.name + ">\n"));
    if (t.strict) {
      for (ConstraintSpec& p : xml_parameters(t.parameters)) parts.push_back(std::move(p));
    } else {
      ConstraintSpec blocks;
      blocks.kind = Kind::kRegex;
      blocks.text = "(<parameter=[A-Za-z0-9_.\\-]+>\n[^<]*\n</parameter>\n)*";
      parts.push_back(std::move(blocks));
    }
    parts.push_back(literal("</function>\n</tool_call>"));
  } else {
    parts.push_back(literal("<tool_call>\n{\"name\": \"" + t.name + "\", \"arguments\": "));
    if (t.strict) {
      parts.push_back(json_schema(t.parameters));
    } else {
      ConstraintSpec any;
      any.kind = Kind::kJsonObject;
      any.any_whitespace = false;
      parts.push_back(std::move(any));
    }
    parts.push_back(literal("}\n</tool_call>"));
  }
  return sequence(std::move(parts));
}

}  // namespace

bool has_strict_tool(const std::vector<openai::ToolDefinition>& tools) {
  for (const openai::ToolDefinition& t : tools) {
    if (t.strict) return true;
  }
  return false;
}

ConstraintSpec auto_tool_call_constraint(const std::vector<openai::ToolDefinition>& tools, bool xml, bool parallel) {
  ConstraintSpec s;
  s.kind = Kind::kTriggered;
  s.single = !parallel;
  s.text = "<tool_call>";
  for (const openai::ToolDefinition& t : tools) s.parts.push_back(auto_call(t, xml));
  return s;
}

ConstraintSpec tool_call_constraint(const std::vector<openai::ToolDefinition>& tools, const std::string& named,
                                    bool xml) {
  if (!named.empty()) {
    for (const openai::ToolDefinition& t : tools) {
      if (t.name == named) return one_call(t, true, xml);
    }
  }
  ConstraintSpec any;
  any.kind = Kind::kAlternatives;
  for (const openai::ToolDefinition& t : tools) any.parts.push_back(one_call(t, false, xml));
  return any;
}

}  // namespace voltserve::http
