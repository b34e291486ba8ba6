// See chat_request.h. Message and tool rules follow OPENAI.md §1.2, §5.6 and the adversarial list (b).
#include "openai/chat_request.h"

#include <set>

#include <fmt/format.h>

#include "openai/api_error.h"
#include "openai/fields.h"

namespace voltserve::openai {

namespace {

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok) return false;
  }
  return true;
}

// Flattens string | [text parts] content into one string. Non-text parts are a 400 naming the part.
std::string flatten_content(const Json& content, const std::string& param, bool allow_refusal) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    fail_invalid(param, fmt::format("'{}' must be a string or an array of content parts, got {}", param,
                                    json_type_name(content)));
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    std::string part_param = index_path(param, j);
    if (!part.is_object()) fail_invalid(part_param, fmt::format("'{}' must be an object", part_param));
    std::optional<std::string> type = read_string(part, "type", field_path(part_param, "type"));
    if (!type) fail_invalid(field_path(part_param, "type"), fmt::format("'{}.type' is required", part_param));
    if (*type == "text" || (allow_refusal && *type == "refusal")) {
      const char* key = *type == "text" ? "text" : "refusal";
      std::optional<std::string> t = read_string(part, key, field_path(part_param, key));
      if (!t) fail_invalid(field_path(part_param, key), fmt::format("'{}.{}' is required", part_param, key));
      if (!text.empty()) text += "\n";
      text += *t;
    } else if (*type == "image_url" || *type == "input_image" || *type == "input_audio" || *type == "file" ||
               *type == "video_url") {
      fail_unsupported(part_param, fmt::format("'{}' is a '{}' part; this model accepts text only", part_param, *type));
    } else {
      fail_invalid(field_path(part_param, "type"), fmt::format("unknown content part type '{}'", *type));
    }
  }
  return text;
}

Json normalise_tool_calls(const Json& calls, const std::string& param) {
  if (!calls.is_array()) fail_invalid(param, fmt::format("'{}' must be an array", param));
  Json out = Json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const Json& call = calls[j];
    std::string p = index_path(param, j);
    if (!call.is_object()) fail_invalid(p, fmt::format("'{}' must be an object", p));
    std::optional<std::string> type = read_string(call, "type", field_path(p, "type"));
    if (type && *type != "function") fail_invalid(field_path(p, "type"), "tool call type must be 'function'");
    const Json* fn = find_field(call, "function");
    if (!fn || !fn->is_object()) fail_invalid(field_path(p, "function"), fmt::format("'{}.function' must be an object", p));
    std::optional<std::string> name = read_string(*fn, "name", field_path(p, "function.name"));
    if (!name || name->empty()) fail_invalid(field_path(p, "function.name"), "tool call function name is required");
    Json arguments = Json::object();
    if (const Json* args = find_field(*fn, "arguments")) {
      std::string ap = field_path(p, "function.arguments");
      if (args->is_string()) {
        const std::string& s = args->get_ref<const std::string&>();
        if (!s.empty()) {
          try {
            arguments = parse_json_body(s);
          } catch (const ApiError&) {
            fail_invalid(ap, fmt::format("'{}' must be a JSON-encoded object", ap));
          }
        }
      } else {
        arguments = *args;
      }
      if (!arguments.is_object()) fail_invalid(ap, fmt::format("'{}' must encode a JSON object", ap));
    }
    Json n;
    if (std::optional<std::string> id = read_string(call, "id", field_path(p, "id"))) n["id"] = *id;
    n["type"] = "function";
    n["function"] = {{"name", *name}, {"arguments", std::move(arguments)}};
    out.push_back(std::move(n));
  }
  return out;
}

Json normalise_messages(const Json& body, const RequestLimits& limits) {
  const Json* messages = find_field(body, "messages");
  if (!messages) fail_invalid("messages", "'messages' is required");
  if (!messages->is_array()) {
    fail_invalid("messages", fmt::format("'messages' must be an array, got {}", json_type_name(*messages)));
  }
  if (messages->empty()) fail_invalid("messages", "'messages' must contain at least one message");
  if (static_cast<int64_t>(messages->size()) > limits.max_messages) {
    fail_invalid("messages", fmt::format("'messages' may hold at most {} messages", limits.max_messages));
  }
  Json out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    std::string p = index_path("messages", i);
    if (!m.is_object()) fail_invalid(p, fmt::format("'{}' must be an object, got {}", p, json_type_name(m)));
    std::optional<std::string> role = read_string(m, "role", field_path(p, "role"));
    if (!role) fail_invalid(field_path(p, "role"), fmt::format("'{}.role' is required", p));
    Json n;
    const std::string content_param = field_path(p, "content");
    const Json* content = find_field(m, "content");
    if (*role == "system" || *role == "developer" || *role == "user" || *role == "tool") {
      // Qwen templates render only system/user/assistant/tool: developer becomes system.
      n["role"] = *role == "developer" ? "system" : *role;
      if (!content) fail_invalid(content_param, fmt::format("'{}' is required for role '{}'", content_param, *role));
      n["content"] = flatten_content(*content, content_param, false);
      if (*role == "tool") {
        std::optional<std::string> id = read_string(m, "tool_call_id", field_path(p, "tool_call_id"));
        if (!id) fail_invalid(field_path(p, "tool_call_id"), fmt::format("'{}.tool_call_id' is required", p));
        n["tool_call_id"] = *id;
      }
    } else if (*role == "assistant") {
      n["role"] = "assistant";
      Json calls;
      if (const Json* tc = find_field(m, "tool_calls")) calls = normalise_tool_calls(*tc, field_path(p, "tool_calls"));
      if (content) {
        n["content"] = flatten_content(*content, content_param, true);
      } else if (calls.is_array() && !calls.empty()) {
        n["content"] = "";
      } else {
        fail_invalid(content_param, fmt::format("'{}' is required unless the message has tool_calls", content_param));
      }
      std::optional<std::string> reasoning = read_string(m, "reasoning_content", field_path(p, "reasoning_content"));
      if (!reasoning) reasoning = read_string(m, "reasoning", field_path(p, "reasoning"));
      if (reasoning) {
        n["reasoning_content"] = *reasoning;
        n["reasoning"] = *reasoning;
      }
      if (calls.is_array() && !calls.empty()) n["tool_calls"] = std::move(calls);
    } else if (*role == "function") {
      fail_unsupported(field_path(p, "role"), "the deprecated 'function' role is not supported; use 'tool'");
    } else {
      fail_invalid(field_path(p, "role"),
                   fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got '{}'", p, *role));
    }
    if (std::optional<std::string> name = read_string(m, "name", field_path(p, "name"))) n["name"] = *name;
    out.push_back(std::move(n));
  }
  return out;
}

void read_tools(const Json& body, const RequestLimits& limits, ChatRequest& out) {
  const Json* tools = find_field(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) fail_invalid("tools", fmt::format("'tools' must be an array, got {}", json_type_name(*tools)));
  if (tools->empty()) fail_invalid("tools", "'tools' must not be empty; omit it instead");
  if (static_cast<int64_t>(tools->size()) > limits.max_tools) {
    fail_invalid("tools", fmt::format("'tools' may hold at most {} tools", limits.max_tools));
  }
  std::set<std::string> names;
  Json normalised = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    std::string p = index_path("tools", i);
    if (!t.is_object()) fail_invalid(p, fmt::format("'{}' must be an object", p));
    std::optional<std::string> type = read_string(t, "type", field_path(p, "type"));
    if (!type || *type != "function") {
      fail_unsupported(field_path(p, "type"), fmt::format("'{}.type' must be 'function'", p));
    }
    const Json* fn = find_field(t, "function");
    if (!fn || !fn->is_object()) fail_invalid(field_path(p, "function"), fmt::format("'{}.function' must be an object", p));
    std::optional<std::string> name = read_string(*fn, "name", field_path(p, "function.name"));
    if (!name || !valid_function_name(*name)) {
      fail_invalid(field_path(p, "function.name"),
                   fmt::format("'{}.function.name' must be 1-64 characters of a-z, A-Z, 0-9, '_', '-' or '.'", p));
    }
    if (!names.insert(*name).second) {
      fail_invalid(field_path(p, "function.name"), fmt::format("duplicate tool name '{}'", *name));
    }
    (void)read_string(*fn, "description", field_path(p, "function.description"));
    const bool strict = read_bool(*fn, "strict", field_path(p, "function.strict")).value_or(false);
    Json parameters;
    if (const Json* params = find_field(*fn, "parameters")) {
      if (!params->is_object()) {
        fail_invalid(field_path(p, "function.parameters"), fmt::format("'{}.function.parameters' must be a JSON schema object", p));
      }
      parameters = *params;
    }
    out.tools.push_back(ToolDefinition{*name, parameters, strict});
    normalised.push_back(t);
  }
  out.template_body["tools"] = std::move(normalised);
}

void read_tool_choice(const Json& body, ChatRequest& out) {
  const Json* choice = find_field(body, "tool_choice");
  out.tool_choice = out.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (!choice) return;
  if (choice->is_string()) {
    const std::string& s = choice->get_ref<const std::string&>();
    if (s == "none") {
      out.tool_choice = ToolChoice::kNone;
    } else if (s == "auto" || s == "required") {
      if (out.tools.empty()) fail_invalid("tool_choice", fmt::format("'tool_choice' is '{}' but no 'tools' were given", s));
      out.tool_choice = s == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
    } else {
      fail_invalid("tool_choice", fmt::format("'tool_choice' must be 'none', 'auto', 'required' or a function, got '{}'", s));
    }
  } else if (choice->is_object()) {
    std::optional<std::string> type = read_string(*choice, "type", "tool_choice.type");
    if (!type || *type != "function") fail_invalid("tool_choice.type", "'tool_choice.type' must be 'function'");
    const Json* fn = find_field(*choice, "function");
    if (!fn || !fn->is_object()) fail_invalid("tool_choice.function", "'tool_choice.function' must be an object");
    std::optional<std::string> name = read_string(*fn, "name", "tool_choice.function.name");
    if (!name || name->empty()) fail_invalid("tool_choice.function.name", "'tool_choice.function.name' is required");
    if (out.tools.empty()) fail_invalid("tool_choice", "'tool_choice' names a function but no 'tools' were given");
    bool found = false;
    for (const ToolDefinition& t : out.tools) found = found || t.name == *name;
    if (!found) {
      fail_invalid("tool_choice.function.name",
                   fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", *name));
    }
    out.tool_choice = ToolChoice::kNamed;
    out.tool_choice_name = *name;
  } else {
    fail_invalid("tool_choice", fmt::format("'tool_choice' must be a string or an object, got {}", json_type_name(*choice)));
  }
  out.template_body["tool_choice"] = *choice;
}

void read_reasoning_controls(const Json& body, ChatRequest& out) {
  if (const Json* kwargs = find_field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) fail_invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (std::optional<bool> thinking =
            read_bool(*kwargs, "enable_thinking", "chat_template_kwargs.enable_thinking")) {
      out.enable_thinking = *thinking;
    }
    out.template_body["chat_template_kwargs"] = *kwargs;
  }
  if (std::optional<std::string> effort = read_string(body, "reasoning_effort", "reasoning_effort")) {
    static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    if (!kEfforts.count(*effort)) {
      fail_invalid("reasoning_effort",
                   fmt::format("'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max; got '{}'", *effort));
    }
    if (*effort == "none") {
      if (!out.enable_thinking) out.enable_thinking = false;
    } else {
      out.template_body["reasoning_effort"] = *effort;
    }
  }
  if (out.enable_thinking) {
    // The template reads it from the kwargs; make "reasoning_effort: none" reach it the same way.
    out.template_body["chat_template_kwargs"]["enable_thinking"] = *out.enable_thinking;
  }
  out.include_reasoning = read_bool(body, "include_reasoning", "include_reasoning").value_or(true);
  if (auto budget = read_integer(body, "thinking_token_budget", "thinking_token_budget", 1, kMaxTokensCap)) {
    out.reasoning_budget = static_cast<int32_t>(*budget);
  }
}

void read_unsupported(const Json& body) {
  if (find_field(body, "functions") || find_field(body, "function_call")) {
    fail_unsupported(find_field(body, "functions") ? "functions" : "function_call",
                     "the deprecated 'functions'/'function_call' fields are not supported; use 'tools'");
  }
  if (read_bool(body, "continue_final_message", "continue_final_message").value_or(false)) {
    fail_unsupported("continue_final_message", "'continue_final_message' is not supported");
  }
  if (!read_bool(body, "add_generation_prompt", "add_generation_prompt").value_or(true)) {
    fail_unsupported("add_generation_prompt", "'add_generation_prompt: false' is not supported");
  }
  if (const Json* modalities = find_field(body, "modalities")) {
    if (!modalities->is_array()) fail_invalid("modalities", "'modalities' must be an array");
    for (const Json& m : *modalities) {
      if (!m.is_string() || m.get<std::string>() != "text") fail_unsupported("modalities", "only the 'text' modality is supported");
    }
  }
  if (find_field(body, "audio")) fail_unsupported("audio", "audio output is not supported");
}

}  // namespace

ChatRequest parse_chat_request(const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw ApiError(ErrorCode::kInvalidJson, "request body must be a JSON object");
  ChatRequest out;
  read_generation_options(body, limits, /*chat=*/true, out.options);
  out.template_body = Json::object();
  out.template_body["messages"] = normalise_messages(body, limits);
  read_tools(body, limits, out);
  read_tool_choice(body, out);
  out.parallel_tool_calls = read_bool(body, "parallel_tool_calls", "parallel_tool_calls").value_or(true);
  read_reasoning_controls(body, out);
  read_unsupported(body);
  return out;
}

}  // namespace voltserve::openai
