// See responses_request.h. Item and tool shapes follow the openai SDK's types (src/openai/types/responses/). The
// translated chat body goes through parse_chat_request, so every shared rule (sampling ranges, tool names, message
// normalisation) is the chat route's own; errors it raises are renamed to the Responses fields they came from.
#include "openai/responses_request.h"

#include <fmt/format.h>

#include "openai/api_error.h"
#include "openai/fields.h"

namespace voltserve::openai {

namespace {

// Item and tool types that OpenAI runs on its side (or that need a runtime this server does not have).
bool hosted_item_type(const std::string& t) {
  static const std::set<std::string> kHosted = {
      "file_search_call", "web_search_call", "computer_call", "computer_call_output", "image_generation_call",
      "code_interpreter_call", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
      "apply_patch_call", "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request",
      "mcp_approval_response", "mcp_call", "compaction", "tool_search_call", "tool_search_output"};
  return kHosted.count(t) > 0;
}

bool hosted_tool_type(const std::string& t) {
  return t.rfind("web_search", 0) == 0 || t == "file_search" || t.rfind("computer", 0) == 0 ||
         t == "code_interpreter" || t == "image_generation" || t == "mcp" || t == "local_shell" || t == "shell" ||
         t == "apply_patch" || t == "tool_search" || t == "namespace";
}

std::string required_string(const Json& object, const char* key, const std::string& parent) {
  std::string param = field_path(parent, key);
  std::optional<std::string> v = read_string(object, key, param);
  if (!v) fail_invalid(param, fmt::format("'{}' is required", param));
  return *v;
}

// Text of a content part list (input_text / output_text / refusal / summary or reasoning text); other parts are
// refused by name.
std::string content_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    fail_invalid(param, fmt::format("'{}' must be a string or an array of content parts, got {}", param,
                                    json_type_name(content)));
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    std::string p = index_path(param, j);
    if (!part.is_object()) fail_invalid(p, fmt::format("'{}' must be an object", p));
    std::string type = required_string(part, "type", p);
    std::string piece;
    if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
        type == "reasoning_text") {
      piece = required_string(part, "text", p);
    } else if (type == "refusal") {
      piece = required_string(part, "refusal", p);
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      fail_unsupported(p, fmt::format("'{}' is an '{}' part; this model accepts text only", p, type));
    } else {
      fail_invalid(field_path(p, "type"), fmt::format("unknown content part type '{}' in '{}'", type, p));
    }
    if (!text.empty()) text += "\n";
    text += piece;
  }
  return text;
}

// Turns the input items into chat messages, in order. function_call / custom_tool_call items (and a reasoning item
// before them) join one assistant message, as the chat format carries them.
class InputConverter {
 public:
  explicit InputConverter(const RequestLimits& limits) : limits_(limits) {}

  Json convert(const Json& input) {
    if (input.is_string()) {
      out_.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
      return out_;
    }
    if (!input.is_array()) {
      fail_invalid("input", fmt::format("'input' must be a string or an array of items, got {}", json_type_name(input)));
    }
    if (static_cast<int64_t>(input.size()) > limits_.max_messages) {
      fail_invalid("input", fmt::format("'input' may hold at most {} items", limits_.max_messages));
    }
    for (size_t i = 0; i < input.size(); ++i) item(input[i], index_path("input", i));
    close_assistant();
    return out_;
  }

 private:
  void close_assistant() {
    if (assistant_.is_null() && !reasoning_.empty()) assistant();  // reasoning with no answer after it
    if (assistant_.is_null()) return;
    out_.push_back(std::move(assistant_));
    assistant_ = nullptr;
  }

  Json& assistant() {
    if (assistant_.is_null()) {
      assistant_ = {{"role", "assistant"}, {"content", ""}};
      if (!reasoning_.empty()) assistant_["reasoning_content"] = reasoning_;
      reasoning_.clear();
    }
    return assistant_;
  }

  void add_call(const std::string& call_id, const std::string& name, Json arguments) {
    Json& a = assistant();
    if (!a.contains("tool_calls")) a["tool_calls"] = Json::array();
    a["tool_calls"].push_back(
        {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(arguments)}}}});
  }

  void item(const Json& it, const std::string& p) {
    if (!it.is_object()) fail_invalid(p, fmt::format("'{}' must be an object, got {}", p, json_type_name(it)));
    std::optional<std::string> type = read_string(it, "type", field_path(p, "type"));
    if (!type || *type == "message") {
      message(it, p);
    } else if (*type == "function_call" || *type == "custom_tool_call") {
      std::string call_id = required_string(it, "call_id", p);
      std::string name = required_string(it, "name", p);
      Json arguments;
      if (*type == "function_call") {
        std::string ap = field_path(p, "arguments");
        std::string text = required_string(it, "arguments", p);
        try {
          arguments = text.find_first_not_of(" \t\r\n") == std::string::npos ? Json::object() : parse_json_body(text);
        } catch (const ApiError&) {
          fail_invalid(ap, fmt::format("'{}' must be a JSON-encoded object", ap));
        }
        if (!arguments.is_object()) fail_invalid(ap, fmt::format("'{}' must encode a JSON object", ap));
      } else {
        arguments = {{"input", required_string(it, "input", p)}};
      }
      add_call(call_id, name, std::move(arguments));
    } else if (*type == "function_call_output" || *type == "custom_tool_call_output") {
      close_assistant();
      std::string call_id = required_string(it, "call_id", p);
      const Json* output = find_field(it, "output");
      std::string op = field_path(p, "output");
      if (!output) fail_invalid(op, fmt::format("'{}' is required", op));
      out_.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(*output, op)}});
    } else if (*type == "reasoning") {
      // Reasoning text (or its summary) goes back to the model as the next assistant turn's reasoning_content;
      // encrypted_content is OpenAI's own and never produced here.
      if (!assistant_.is_null()) close_assistant();
      std::string text;
      if (const Json* content = find_field(it, "content")) text = content_text(*content, field_path(p, "content"));
      if (text.empty()) {
        if (const Json* summary = find_field(it, "summary")) text = content_text(*summary, field_path(p, "summary"));
      }
      (void)read_string(it, "encrypted_content", field_path(p, "encrypted_content"));
      reasoning_ += text;
    } else if (*type == "item_reference") {
      fail_unsupported(field_path(p, "type"),
                       fmt::format("'{}' is an item_reference; send the item itself (or use previous_response_id)", p));
    } else if (hosted_item_type(*type)) {
      fail_unsupported(field_path(p, "type"),
                       fmt::format("'{}' is a '{}' item of a hosted tool, which this server cannot run", p, *type));
    } else {
      fail_invalid(field_path(p, "type"), fmt::format("unknown input item type '{}' in '{}'", *type, p));
    }
  }

  void message(const Json& it, const std::string& p) {
    std::string role = required_string(it, "role", p);
    const Json* content = find_field(it, "content");
    std::string cp = field_path(p, "content");
    if (!content) fail_invalid(cp, fmt::format("'{}' is required", cp));
    std::string text = content_text(*content, cp);
    if (role == "assistant") {
      if (!assistant_.is_null()) close_assistant();  // pending reasoning belongs to this message
      assistant()["content"] = text;
    } else if (role == "user" || role == "system" || role == "developer") {
      close_assistant();
      out_.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
    } else {
      fail_invalid(field_path(p, "role"),
                   fmt::format("'{}.role' must be one of user, assistant, system, developer; got '{}'", p, role));
    }
  }

  const RequestLimits& limits_;
  Json out_ = Json::array();
  Json assistant_;         // the open assistant message, or null
  std::string reasoning_;  // reasoning items waiting for their assistant turn
};

Json custom_tool_parameters(const Json& tool, const std::string& p) {
  std::string description = "The complete free-form input of the tool, as one string.";
  if (const Json* format = find_field(tool, "format")) {
    std::string fp = field_path(p, "format");
    if (!format->is_object()) fail_invalid(fp, fmt::format("'{}' must be an object", fp));
    std::string type = required_string(*format, "type", fp);
    if (type == "grammar") {
      std::string syntax = required_string(*format, "syntax", fp);
      std::string definition = required_string(*format, "definition", fp);
      if (syntax != "lark" && syntax != "regex") {
        fail_invalid(field_path(fp, "syntax"), fmt::format("'{}.syntax' must be 'lark' or 'regex'", fp));
      }
      // No constrained decoding yet: the grammar is shown to the model instead of enforced.
      description += fmt::format(" It must follow this {} grammar:\n{}", syntax, definition);
    } else if (type != "text") {
      fail_invalid(field_path(fp, "type"), fmt::format("'{}.type' must be 'text' or 'grammar'", fp));
    }
  }
  return {{"type", "object"},
          {"properties", {{"input", {{"type", "string"}, {"description", description}}}}},
          {"required", Json::array({"input"})}};
}

// Responses tools -> chat tools; returns the chat `tools` array (null when none).
Json convert_tools(const Json& body, ResponsesRequest& out) {
  const Json* tools = find_field(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) fail_invalid("tools", fmt::format("'tools' must be an array, got {}", json_type_name(*tools)));
  if (tools->empty()) return nullptr;  // the SDKs send [] for "no tools"
  Json chat = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    std::string p = index_path("tools", i);
    if (!t.is_object()) fail_invalid(p, fmt::format("'{}' must be an object", p));
    std::string type = required_string(t, "type", p);
    Json fn;
    if (type == "function") {
      fn["name"] = required_string(t, "name", p);
      if (auto d = read_string(t, "description", field_path(p, "description"))) fn["description"] = *d;
      if (const Json* params = find_field(t, "parameters")) {
        if (!params->is_object()) {
          fail_invalid(field_path(p, "parameters"), fmt::format("'{}.parameters' must be a JSON schema object", p));
        }
        fn["parameters"] = *params;
      }
      if (auto strict = read_bool(t, "strict", field_path(p, "strict"))) fn["strict"] = *strict;
    } else if (type == "custom") {
      std::string name = required_string(t, "name", p);
      fn["name"] = name;
      if (auto d = read_string(t, "description", field_path(p, "description"))) fn["description"] = *d;
      fn["parameters"] = custom_tool_parameters(t, p);
      out.custom_tools.insert(name);
    } else if (hosted_tool_type(type)) {
      fail_unsupported(field_path(p, "type"),
                       fmt::format("'{}' tools are hosted by OpenAI (or need a runtime this server does not have); "
                                   "only 'function' and 'custom' tools are supported",
                                   type));
    } else {
      fail_invalid(field_path(p, "type"), fmt::format("unknown tool type '{}' in '{}'", type, p));
    }
    chat.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return chat;
}

// Responses tool_choice -> chat tool_choice (may narrow `tools` for allowed_tools).
Json convert_tool_choice(const Json& body, Json& tools) {
  const Json* choice = find_field(body, "tool_choice");
  if (!choice) return nullptr;
  if (choice->is_string()) return *choice;  // none / auto / required: the chat rules check it
  if (!choice->is_object()) {
    fail_invalid("tool_choice", fmt::format("'tool_choice' must be a string or an object, got {}", json_type_name(*choice)));
  }
  std::string type = required_string(*choice, "type", "tool_choice");
  if (type == "function" || type == "custom") {
    return {{"type", "function"}, {"function", {{"name", required_string(*choice, "name", "tool_choice")}}}};
  }
  if (type == "allowed_tools") {
    std::string mode = required_string(*choice, "mode", "tool_choice");
    if (mode != "auto" && mode != "required") fail_invalid("tool_choice.mode", "'tool_choice.mode' must be 'auto' or 'required'");
    const Json* allowed = find_field(*choice, "tools");
    if (!allowed || !allowed->is_array() || allowed->empty()) {
      fail_invalid("tool_choice.tools", "'tool_choice.tools' must be a non-empty array of tools");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < allowed->size(); ++i) {
      std::string p = index_path("tool_choice.tools", i);
      if (!(*allowed)[i].is_object()) fail_invalid(p, fmt::format("'{}' must be an object", p));
      names.insert(required_string((*allowed)[i], "name", p));
    }
    if (!tools.is_array()) fail_invalid("tool_choice", "'tool_choice' lists allowed tools but no 'tools' were given");
    Json kept = Json::array();
    for (const Json& t : tools) {
      if (names.erase(t["function"]["name"].get<std::string>())) kept.push_back(t);
    }
    if (!names.empty()) {
      fail_invalid("tool_choice.tools", fmt::format("'tool_choice.tools' names '{}', which is not in 'tools'", *names.begin()));
    }
    tools = std::move(kept);  // the model is shown only the allowed ones
    return mode;
  }
  if (hosted_tool_type(type) || type == "mcp") {
    fail_unsupported("tool_choice.type", fmt::format("'tool_choice' names the hosted tool type '{}'", type));
  }
  fail_invalid("tool_choice.type", fmt::format("unknown 'tool_choice.type' '{}'", type));
}

// text.format becomes the chat body's response_format (Responses flattens json_schema's name/schema/strict into the
// format object); parse_chat_request validates it and errors are renamed back to text.format.
void read_text_config(const Json& body, Json& chat) {
  const Json* text = find_field(body, "text");
  if (!text) return;
  if (!text->is_object()) fail_invalid("text", "'text' must be an object");
  if (const Json* format = find_field(*text, "format")) {
    if (!format->is_object()) fail_invalid("text.format", "'text.format' must be an object");
    std::string type = required_string(*format, "type", "text.format");
    if (type == "json_object") chat["response_format"] = {{"type", "json_object"}};
    if (type == "json_schema") {
      Json js = Json::object();
      for (const char* k : {"name", "schema", "strict", "description"}) {
        if (const Json* v = find_field(*format, k)) js[k] = *v;
      }
      chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
    }
    if (type != "text" && type != "json_object" && type != "json_schema") {
      fail_invalid("text.format.type",
                   fmt::format("'text.format.type' must be 'text', 'json_schema' or 'json_object'; got '{}'", type));
    }
  }
  if (auto v = read_string(*text, "verbosity", "text.verbosity")) {
    if (*v != "low" && *v != "medium" && *v != "high") {
      fail_invalid("text.verbosity", "'text.verbosity' must be 'low', 'medium' or 'high'");
    }
  }
}

void read_metadata(const Json& body) {
  const Json* metadata = find_field(body, "metadata");
  if (!metadata) return;
  if (!metadata->is_object()) fail_invalid("metadata", "'metadata' must be an object of string values");
  if (metadata->size() > 16) fail_invalid("metadata", "'metadata' may hold at most 16 keys");
  for (auto it = metadata->begin(); it != metadata->end(); ++it) {
    std::string p = "metadata." + it.key();
    if (it.key().size() > 64) fail_invalid("metadata", "'metadata' keys must be at most 64 characters");
    if (!it.value().is_string()) fail_invalid(p, fmt::format("'{}' must be a string", p));
    if (it.value().get_ref<const std::string&>().size() > 512) {
      fail_invalid(p, fmt::format("'{}' must be at most 512 characters", p));
    }
  }
}

// Renames a chat-field param of an error raised by parse_chat_request to the Responses field it came from.
std::string responses_param(const std::string& chat_param) {
  static const std::pair<std::string, std::string> kRenames[] = {
      {"max_completion_tokens", "max_output_tokens"}, {"response_format.json_schema", "text.format"},
      {"response_format", "text.format"},
      {"reasoning_effort", "reasoning.effort"}};
  for (const auto& [from, to] : kRenames) {
    if (chat_param.rfind(from, 0) == 0) return to + chat_param.substr(from.size());
  }
  // Message indices differ from item indices (instructions, merged function calls): name the input as a whole.
  if (chat_param.rfind("messages", 0) == 0) return "input";
  if (chat_param.rfind("tools[", 0) == 0) {
    size_t fn = chat_param.find(".function");
    if (fn != std::string::npos) return chat_param.substr(0, fn) + chat_param.substr(fn + 9);
  }
  if (chat_param.rfind("tool_choice.function", 0) == 0) return "tool_choice" + chat_param.substr(20);
  return chat_param;
}

}  // namespace

std::optional<int32_t> responses_effort_budget(const std::string& effort) {
  if (effort == "minimal") return 256;
  if (effort == "low") return 1024;
  if (effort == "medium") return 4096;
  if (effort == "high") return 16384;
  return std::nullopt;  // xhigh: as long as max_output_tokens allows; none: no reasoning at all
}

std::string responses_previous_id(const Json& body) {
  return read_string(body, "previous_response_id", "previous_response_id").value_or("");
}

ResponsesRequest parse_responses_request(const Json& body, const RequestLimits& limits, const Json* previous_messages) {
  if (!body.is_object()) throw ApiError(ErrorCode::kInvalidJson, "request body must be a JSON object");
  ResponsesRequest out;
  out.previous_response_id = responses_previous_id(body);
  out.store = read_bool(body, "store", "store").value_or(true);

  if (read_bool(body, "background", "background").value_or(false)) {
    fail_unsupported("background", "background responses are not supported; stream or wait for the answer");
  }
  if (find_field(body, "conversation")) {
    fail_unsupported("conversation", "'conversation' objects are not supported; use previous_response_id");
  }
  if (find_field(body, "prompt")) fail_unsupported("prompt", "stored prompt templates are not supported");
  if (auto top = read_integer(body, "top_logprobs", "top_logprobs", 0, 20); top && *top > 0) {
    fail_unsupported("top_logprobs", "logprobs are not returned on /v1/responses; use /v1/chat/completions");
  }
  if (const Json* include = find_field(body, "include")) {
    // e.g. "reasoning.encrypted_content" (Codex with store=false): nothing to add here, accepted.
    if (!include->is_array()) fail_invalid("include", "'include' must be an array of strings");
    for (size_t i = 0; i < include->size(); ++i) {
      if (!(*include)[i].is_string()) fail_invalid(index_path("include", i), "'include' entries must be strings");
    }
  }
  if (auto t = read_string(body, "truncation", "truncation"); t && *t != "auto" && *t != "disabled") {
    fail_invalid("truncation", "'truncation' must be 'auto' or 'disabled'");
  }
  (void)read_integer(body, "max_tool_calls", "max_tool_calls", 1, INT32_MAX);
  read_metadata(body);

  Json chat = Json::object();
  read_text_config(body, chat);
  for (const char* key : {"model", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                          "repetition_penalty", "repeat_penalty", "seed", "stop", "ignore_eos", "skip_special_tokens",
                          "logit_bias", "stop_token_ids", "parallel_tool_calls", "stream", "chat_template_kwargs",
                          "include_reasoning", "thinking_token_budget", "user", "prefix_cache", "cache_salt"}) {
    if (const Json* v = find_field(body, key)) chat[key] = *v;
  }
  int64_t cap = limits.context_length > 0 ? limits.context_length : kMaxTokensCap;
  if (auto v = read_integer(body, "max_output_tokens", "max_output_tokens", 1, cap)) chat["max_completion_tokens"] = *v;

  // reasoning: effort -> enable_thinking / the template's reasoning_effort / a budget (README, "Reasoning").
  if (const Json* reasoning = find_field(body, "reasoning")) {
    if (!reasoning->is_object()) fail_invalid("reasoning", "'reasoning' must be an object");
    if (auto effort = read_string(*reasoning, "effort", "reasoning.effort")) {
      static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh"};
      if (!kEfforts.count(*effort)) {
        fail_invalid("reasoning.effort",
                     fmt::format("'reasoning.effort' must be one of none, minimal, low, medium, high, xhigh; got '{}'",
                                 *effort));
      }
      if (*effort == "none") {
        chat["reasoning_effort"] = "none";
      } else {
        // The Qwen3.8 template knows low / medium / xhigh; earlier templates ignore the variable.
        chat["reasoning_effort"] = *effort == "minimal" || *effort == "low" ? "low" : *effort == "medium" ? "medium" : "xhigh";
        if (auto budget = responses_effort_budget(*effort); budget && !chat.contains("thinking_token_budget")) {
          chat["thinking_token_budget"] = *budget;
        }
      }
    }
    for (const char* key : {"summary", "generate_summary"}) {
      if (auto s = read_string(*reasoning, key, field_path("reasoning", key))) {
        if (*s != "auto" && *s != "concise" && *s != "detailed") {
          fail_invalid(field_path("reasoning", key), fmt::format("'reasoning.{}' must be auto, concise or detailed", key));
        }
      }
    }
  }

  Json tools = convert_tools(body, out);
  Json tool_choice = convert_tool_choice(body, tools);
  if (!tools.is_null()) chat["tools"] = tools;
  if (!tool_choice.is_null()) chat["tool_choice"] = tool_choice;

  Json messages = Json::array();
  if (auto instructions = read_string(body, "instructions", "instructions"); instructions && !instructions->empty()) {
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  if (previous_messages) {
    for (const Json& m : *previous_messages) messages.push_back(m);
  }
  const Json* input = find_field(body, "input");
  if (!input) fail_invalid("input", "'input' is required");
  out.input_messages = InputConverter(limits).convert(*input);
  for (const Json& m : out.input_messages) messages.push_back(m);
  if (messages.empty()) fail_invalid("input", "'input' must contain at least one item");
  chat["messages"] = std::move(messages);

  try {
    out.chat = parse_chat_request(chat, limits);
  } catch (const ApiError& e) {
    throw ApiError(e.code(), e.what(), responses_param(e.param()));
  }
  out.chat.options.max_tokens_param = "max_output_tokens";

  Json& echo = out.echo;
  echo["instructions"] = body.contains("instructions") ? body["instructions"] : Json(nullptr);
  echo["max_output_tokens"] = find_field(body, "max_output_tokens") ? body["max_output_tokens"] : Json(nullptr);
  echo["metadata"] = find_field(body, "metadata") ? body["metadata"] : Json::object();
  echo["parallel_tool_calls"] = out.chat.parallel_tool_calls;
  echo["previous_response_id"] = out.previous_response_id.empty() ? Json(nullptr) : Json(out.previous_response_id);
  Json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const Json* r = find_field(body, "reasoning")) {
    if (const Json* e = find_field(*r, "effort")) reasoning["effort"] = *e;
    if (const Json* s = find_field(*r, "summary")) reasoning["summary"] = *s;
  }
  echo["reasoning"] = std::move(reasoning);
  echo["store"] = out.store;
  echo["temperature"] = find_field(body, "temperature") ? body["temperature"] : Json(1.0);
  Json text = {{"format", {{"type", "text"}}}, {"verbosity", "medium"}};
  if (const Json* t = find_field(body, "text")) {
    if (const Json* v = find_field(*t, "verbosity")) text["verbosity"] = *v;
  }
  echo["text"] = std::move(text);
  if (const Json* choice = find_field(body, "tool_choice")) {
    echo["tool_choice"] = *choice;
  } else {
    echo["tool_choice"] = out.chat.tools.empty() ? "none" : "auto";
  }
  echo["tools"] = find_field(body, "tools") ? body["tools"] : Json::array();
  echo["top_logprobs"] = 0;
  echo["top_p"] = find_field(body, "top_p") ? body["top_p"] : Json(1.0);
  echo["truncation"] = find_field(body, "truncation") ? body["truncation"] : Json("disabled");
  echo["user"] = find_field(body, "user") ? body["user"] : Json(nullptr);
  return out;
}

}  // namespace voltserve::openai
