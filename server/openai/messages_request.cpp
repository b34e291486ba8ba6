// See messages_request.h. Shapes follow the anthropic SDK's types (src/anthropic/types/message_create_params.py and
// the *_block_param.py files). The translated chat body goes through parse_chat_request, so the shared rules are the
// chat route's own; errors it raises are renamed to the Anthropic fields they came from.
#include "openai/messages_request.h"

#include <fmt/format.h>

#include "openai/api_error.h"
#include "openai/fields.h"
#include "openai/responses_request.h"

namespace voltserve::openai {

namespace {

std::string required_string(const Json& object, const char* key, const std::string& parent) {
  std::string param = field_path(parent, key);
  std::optional<std::string> v = read_string(object, key, param);
  if (!v) fail_invalid(param, fmt::format("{}: field required", param));
  return *v;
}

// A text block list (system, tool_result content): text blocks joined with "\n"; images and documents refused.
std::string blocks_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    fail_invalid(param, fmt::format("{}: must be a string or an array of content blocks, got {}", param,
                                    json_type_name(content)));
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& b = content[j];
    std::string p = index_path(param, j);
    if (!b.is_object()) fail_invalid(p, fmt::format("{}: must be an object", p));
    std::string type = required_string(b, "type", p);
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += required_string(b, "text", p);
    } else if (type == "image" || type == "document" || type == "search_result") {
      fail_unsupported(p, fmt::format("{}: '{}' blocks are not supported; this model accepts text only", p, type));
    } else {
      fail_invalid(field_path(p, "type"), fmt::format("{}: unknown block type '{}' here", p, type));
    }
  }
  return text;
}

bool server_block(const std::string& type) {
  return type == "server_tool_use" || type.find("tool_result") != std::string::npos || type == "container_upload" ||
         type == "mcp_tool_use" || type == "mcp_tool_result";
}

void convert_message(const Json& m, const std::string& p, Json& out) {
  if (!m.is_object()) fail_invalid(p, fmt::format("{}: must be an object, got {}", p, json_type_name(m)));
  std::string role = required_string(m, "role", p);
  if (role != "user" && role != "assistant") {
    fail_invalid(field_path(p, "role"), fmt::format("{}.role: must be 'user' or 'assistant', got '{}'", p, role));
  }
  const Json* content = find_field(m, "content");
  std::string cp = field_path(p, "content");
  if (!content) fail_invalid(cp, fmt::format("{}: field required", cp));
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return;
  }
  if (!content->is_array()) {
    fail_invalid(cp, fmt::format("{}: must be a string or an array of content blocks, got {}", cp, json_type_name(*content)));
  }
  std::string text;
  bool has_text = false;
  std::string reasoning;
  Json calls = Json::array();
  auto flush_user_text = [&] {
    if (role == "user" && has_text) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& b = (*content)[j];
    std::string bp = index_path(cp, j);
    if (!b.is_object()) fail_invalid(bp, fmt::format("{}: must be an object", bp));
    std::string type = required_string(b, "type", bp);
    if (type == "text") {
      if (has_text) text += "\n";
      text += required_string(b, "text", bp);
      has_text = true;
    } else if (type == "tool_use" && role == "assistant") {
      std::string id = required_string(b, "id", bp);
      std::string name = required_string(b, "name", bp);
      const Json* input = find_field(b, "input");
      if (input && !input->is_object()) fail_invalid(field_path(bp, "input"), fmt::format("{}.input: must be an object", bp));
      calls.push_back({{"id", id}, {"type", "function"},
                       {"function", {{"name", name}, {"arguments", input ? *input : Json::object()}}}});
    } else if (type == "tool_result" && role == "user") {
      flush_user_text();
      std::string id = required_string(b, "tool_use_id", bp);
      std::string result;
      if (const Json* c = find_field(b, "content")) result = blocks_text(*c, field_path(bp, "content"));
      bool is_error = read_bool(b, "is_error", field_path(bp, "is_error")).value_or(false);
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", is_error ? "Error: " + result : result}});
    } else if (type == "thinking" && role == "assistant") {
      reasoning += required_string(b, "thinking", bp);
      (void)read_string(b, "signature", field_path(bp, "signature"));
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Encrypted by Anthropic: nothing to show this model.
    } else if (type == "image" || type == "document" || type == "search_result") {
      fail_unsupported(bp, fmt::format("{}: '{}' blocks are not supported; this model accepts text only", bp, type));
    } else if (server_block(type)) {
      fail_unsupported(bp, fmt::format("{}: '{}' blocks belong to server tools, which this server cannot run", bp, type));
    } else if (type == "tool_use" || type == "tool_result" || type == "thinking" || type == "redacted_thinking") {
      fail_invalid(field_path(bp, "type"), fmt::format("{}: a '{}' block is not allowed in a '{}' message", bp, type, role));
    } else {
      fail_invalid(field_path(bp, "type"), fmt::format("{}: unknown content block type '{}'", bp, type));
    }
  }
  if (role == "user") {
    flush_user_text();
    return;
  }
  Json a = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) a["reasoning_content"] = reasoning;
  if (!calls.empty()) a["tool_calls"] = std::move(calls);
  out.push_back(std::move(a));
}

Json convert_tools(const Json& body) {
  const Json* tools = find_field(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) fail_invalid("tools", fmt::format("tools: must be an array, got {}", json_type_name(*tools)));
  if (tools->empty()) return nullptr;
  Json chat = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    std::string p = index_path("tools", i);
    if (!t.is_object()) fail_invalid(p, fmt::format("{}: must be an object", p));
    if (auto type = read_string(t, "type", field_path(p, "type")); type && *type != "custom") {
      fail_unsupported(field_path(p, "type"),
                       fmt::format("{}.type: '{}' is an Anthropic server or client-defined tool version this server "
                                   "cannot run; give tools as name + input_schema",
                                   p, *type));
    }
    Json fn;
    fn["name"] = required_string(t, "name", p);
    if (auto d = read_string(t, "description", field_path(p, "description"))) fn["description"] = *d;
    const Json* schema = find_field(t, "input_schema");
    if (!schema) fail_invalid(field_path(p, "input_schema"), fmt::format("{}.input_schema: field required", p));
    if (!schema->is_object()) fail_invalid(field_path(p, "input_schema"), fmt::format("{}.input_schema: must be an object", p));
    fn["parameters"] = *schema;
    chat.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return chat;
}

// Renames a chat-field param raised by parse_chat_request to the Anthropic field it came from.
std::string messages_param(const std::string& chat_param) {
  if (chat_param.rfind("stop", 0) == 0 && chat_param.rfind("stop_", 0) != 0) return "stop_sequences" + chat_param.substr(4);
  if (chat_param.rfind("thinking_token_budget", 0) == 0) return "thinking.budget_tokens";
  if (chat_param.rfind("tools[", 0) == 0) {
    size_t fn = chat_param.find(".function");
    if (fn != std::string::npos) {
      std::string rest = chat_param.substr(fn + 9);
      return chat_param.substr(0, fn) + (rest == ".parameters" ? ".input_schema" : rest);
    }
  }
  if (chat_param.rfind("tool_choice.function", 0) == 0) return "tool_choice" + chat_param.substr(20);
  if (chat_param.rfind("messages", 0) == 0) return "messages";  // indices differ once blocks are split
  return chat_param;
}

}  // namespace

std::string tool_use_id(const std::string& call_id) {
  return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
}

MessagesRequest parse_messages_request(const Json& body, const RequestLimits& base_limits, bool count_tokens) {
  if (!body.is_object()) throw ApiError(ErrorCode::kInvalidJson, "request body must be a JSON object");
  RequestLimits limits = base_limits;
  limits.max_stop = 16;  // Anthropic has no OpenAI-style limit of 4 stop strings
  // max_tokens is bounded by the model, not by the room the prompt leaves: generation runs until the context is
  // full (stop_reason "model_context_window_exceeded"); the handler clamps it to that room.
  limits.context_length = 0;
  Json chat = Json::object();
  if (!find_field(body, "model")) fail_invalid("model", "model: field required");
  chat["model"] = body["model"];
  if (!count_tokens) {
    const Json* max_tokens = find_field(body, "max_tokens");
    if (!max_tokens) fail_invalid("max_tokens", "max_tokens: field required");
    chat["max_tokens"] = *max_tokens;
    if (auto t = read_number(body, "temperature", "temperature", 0.0, 1.0)) chat["temperature"] = *t;
    for (const char* key : {"top_p", "top_k", "stream", "min_p", "presence_penalty", "frequency_penalty",
                            "repetition_penalty", "seed", "ignore_eos", "prefix_cache", "cache_salt"}) {
      if (const Json* v = find_field(body, key)) chat[key] = *v;
    }
    if (const Json* stops = find_field(body, "stop_sequences")) {
      if (!stops->is_array()) fail_invalid("stop_sequences", "stop_sequences: must be an array of strings");
      if (!stops->empty()) chat["stop"] = *stops;
    }
    if (const Json* metadata = find_field(body, "metadata")) {
      if (!metadata->is_object()) fail_invalid("metadata", "metadata: must be an object");
      (void)read_string(*metadata, "user_id", "metadata.user_id");
    }
    if (auto tier = read_string(body, "service_tier", "service_tier"); tier && *tier != "auto" && *tier != "standard_only") {
      fail_invalid("service_tier", "service_tier: must be 'auto' or 'standard_only'");
    }
  }
  if (const Json* servers = find_field(body, "mcp_servers"); servers && !(servers->is_array() && servers->empty())) {
    fail_unsupported("mcp_servers", "mcp_servers: remote MCP servers are not supported");
  }
  if (find_field(body, "output_format")) fail_unsupported("output_format", "output_format: structured outputs are not supported yet");
  std::optional<std::string> effort;
  if (const Json* config = find_field(body, "output_config")) {
    if (!config->is_object()) fail_invalid("output_config", "output_config: must be an object");
    if (find_field(*config, "format")) {
      fail_unsupported("output_config.format", "output_config.format: structured outputs are not supported yet");
    }
    effort = read_string(*config, "effort", "output_config.effort");
    if (effort && *effort != "low" && *effort != "medium" && *effort != "high" && *effort != "xhigh" && *effort != "max") {
      fail_invalid("output_config.effort", "output_config.effort: must be low, medium, high, xhigh or max");
    }
  }

  Json messages = Json::array();
  if (const Json* system = find_field(body, "system")) {
    std::string text = blocks_text(*system, "system");
    if (!text.empty()) messages.push_back({{"role", "system"}, {"content", text}});
  }
  const Json* input = find_field(body, "messages");
  if (!input) fail_invalid("messages", "messages: field required");
  if (!input->is_array()) fail_invalid("messages", fmt::format("messages: must be an array, got {}", json_type_name(*input)));
  if (input->empty()) fail_invalid("messages", "messages: at least one message is required");
  if (static_cast<int64_t>(input->size()) > limits.max_messages) {
    fail_invalid("messages", fmt::format("messages: at most {} messages", limits.max_messages));
  }
  for (size_t i = 0; i < input->size(); ++i) convert_message((*input)[i], index_path("messages", i), messages);
  if (messages.back().value("role", "") == "assistant") {
    fail_unsupported(index_path("messages", input->size() - 1),
                     "messages: a final assistant message (prefill) is not supported; end with a user message");
  }
  chat["messages"] = std::move(messages);

  Json tools = convert_tools(body);
  if (!tools.is_null()) chat["tools"] = tools;
  if (const Json* choice = find_field(body, "tool_choice")) {
    if (!choice->is_object()) fail_invalid("tool_choice", "tool_choice: must be an object");
    std::string type = required_string(*choice, "type", "tool_choice");
    if (type == "auto" || type == "none") {
      chat["tool_choice"] = type;
    } else if (type == "any") {
      chat["tool_choice"] = "required";
    } else if (type == "tool") {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", required_string(*choice, "name", "tool_choice")}}}};
    } else {
      fail_invalid("tool_choice.type", fmt::format("tool_choice.type: must be auto, any, tool or none; got '{}'", type));
    }
    if (read_bool(*choice, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use").value_or(false)) {
      chat["parallel_tool_calls"] = false;
    }
    if (type == "none" && tools.is_null()) chat.erase("tool_choice");
  }

  // thinking: enabled (+ budget_tokens) / adaptive -> thinking on; disabled or absent -> off (Anthropic's default).
  // output_config.effort -> the template's reasoning_effort and, for adaptive thinking, the Responses budget table.
  bool thinking = false;
  bool show_thinking = true;
  if (const Json* t = find_field(body, "thinking")) {
    if (!t->is_object()) fail_invalid("thinking", "thinking: must be an object");
    std::string type = required_string(*t, "type", "thinking");
    if (type == "enabled") {
      thinking = true;
      const Json* budget = find_field(*t, "budget_tokens");
      if (!budget) fail_invalid("thinking.budget_tokens", "thinking.budget_tokens: field required");
      chat["thinking_token_budget"] = integer_value(*budget, "thinking.budget_tokens", 1, kMaxTokensCap);
    } else if (type == "adaptive") {
      thinking = true;
      if (effort) {
        if (auto budget = responses_effort_budget(*effort == "max" ? "xhigh" : *effort)) chat["thinking_token_budget"] = *budget;
      }
    } else if (type != "disabled") {
      fail_invalid("thinking.type", fmt::format("thinking.type: must be enabled, adaptive or disabled; got '{}'", type));
    }
    if (auto display = read_string(*t, "display", "thinking.display")) {
      if (*display != "summarized" && *display != "omitted") {
        fail_invalid("thinking.display", "thinking.display: must be summarized or omitted");
      }
      show_thinking = *display != "omitted";
    }
  }
  chat["chat_template_kwargs"] = {{"enable_thinking", thinking}};
  if (thinking && effort) chat["reasoning_effort"] = *effort == "low" || *effort == "medium" ? *effort : "xhigh";
  if (!show_thinking) chat["include_reasoning"] = false;

  MessagesRequest out;
  try {
    out.chat = parse_chat_request(chat, limits);
  } catch (const ApiError& e) {
    std::string param = messages_param(e.param());
    std::string message = e.what();
    throw ApiError(e.code(), message, param);
  }
  return out;
}

}  // namespace voltserve::openai
