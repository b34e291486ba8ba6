// Request body -> template variables -> prompt text, mirroring transformers 5 apply_chat_template
// (_normalize_chat_messages, _alias_reasoning_fields, special_tokens_map) and vLLM's _postprocess_messages.
#include "chat/chat_prompt.h"

#include <fstream>
#include <map>
#include <sstream>

namespace voltserve::chat {
namespace {

using json = nlohmann::ordered_json;

std::string where(size_t i) { return "messages[" + std::to_string(i) + "]"; }

json parse_arguments(const json& arguments, const std::string& field) {
  if (arguments.is_null()) return json::object();
  if (!arguments.is_string()) return arguments;  // already an object (or array), as vLLM accepts
  const std::string& text = arguments.get_ref<const std::string&>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw ChatRequestError(field + " is not valid JSON: " + e.what());
  }
}

json normalize_tool_calls(const json& calls, const std::string& field) {
  if (!calls.is_array()) throw ChatRequestError(field + " must be an array");
  json out = json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const json& call = calls[j];
    const std::string call_field = field + "[" + std::to_string(j) + "]";
    if (!call.is_object()) throw ChatRequestError(call_field + " must be an object");
    json copy = call;
    if (copy.contains("function")) {
      json& fn = copy["function"];
      if (!fn.is_object()) throw ChatRequestError(call_field + ".function must be an object");
      fn["arguments"] = parse_arguments(fn.contains("arguments") ? fn["arguments"] : json(), call_field + ".function.arguments");
    }
    out.push_back(std::move(copy));
  }
  return out;
}

json normalize_message(const json& message, size_t i) {
  if (!message.is_object()) throw ChatRequestError(where(i) + " must be an object");
  const auto role = message.find("role");
  if (role == message.end() || !role->is_string()) throw ChatRequestError(where(i) + ".role must be a string");
  json out = json::object();
  for (const auto& [key, value] : message.items()) {
    if (value.is_null()) continue;  // transformers drops None-valued keys before templating
    if (key == "role" && value == "developer") {
      out[key] = "system";  // the Qwen templates only know system/user/assistant/tool
    } else if (key == "tool_calls") {
      if (value.is_array() && value.empty()) continue;  // vLLM drops an empty tool_calls list
      out[key] = normalize_tool_calls(value, where(i) + ".tool_calls");
    } else {
      out[key] = value;
    }
  }
  // transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}.
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    const auto it = out.find(key);
    if (it == out.end()) continue;
    const json reasoning = *it;
    json aliased = json::object();
    aliased["thinking"] = reasoning;
    for (const auto& [k, v] : out.items()) aliased[k] = v;  // a message's own "thinking" keeps position 0
    aliased["reasoning_content"] = reasoning;
    return aliased;
  }
  return out;
}

void check_bool_kwarg(const json& kwargs, const char* name) {
  const auto it = kwargs.find(name);
  if (it != kwargs.end() && !it->is_boolean() && !it->is_null()) {
    throw ChatRequestError(std::string("chat_template_kwargs.") + name + " must be a boolean");
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token in tokenizer_config.json: "text", {"content": "text", ...} (AddedToken) or null.
std::string special_token(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  throw std::runtime_error(std::string("tokenizer_config.json: ") + key + " must be a string, an object with \"content\", or null");
}

}  // namespace

json build_template_context(const json& request, const std::string& bos_token, const std::string& eos_token,
                            bool add_generation_prompt) {
  if (!request.is_object()) throw ChatRequestError("the request body must be a JSON object");
  const auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array()) throw ChatRequestError("messages must be an array");
  if (messages->empty()) throw ChatRequestError("messages must not be empty");

  json context = json::object();
  json normalized = json::array();
  for (size_t i = 0; i < messages->size(); ++i) normalized.push_back(normalize_message((*messages)[i], i));
  context["messages"] = std::move(normalized);

  const auto tools = request.find("tools");
  if (tools != request.end() && !tools->is_null()) {
    if (!tools->is_array()) throw ChatRequestError("tools must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      if (!(*tools)[i].is_object()) throw ChatRequestError("tools[" + std::to_string(i) + "] must be an object");
    }
    context["tools"] = *tools;
  } else {
    context["tools"] = nullptr;
  }
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  if (!bos_token.empty()) context["bos_token"] = bos_token;
  if (!eos_token.empty()) context["eos_token"] = eos_token;

  const auto effort = request.find("reasoning_effort");
  if (effort != request.end() && !effort->is_null()) {
    if (!effort->is_string()) throw ChatRequestError("reasoning_effort must be a string");
    if (*effort == "none") {
      context["enable_thinking"] = false;  // vLLM: reasoning_effort "none" turns thinking off
    } else {
      context["reasoning_effort"] = *effort;
    }
  }

  const auto kwargs = request.find("chat_template_kwargs");
  if (kwargs != request.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) throw ChatRequestError("chat_template_kwargs must be an object");
    check_bool_kwarg(*kwargs, "enable_thinking");
    check_bool_kwarg(*kwargs, "preserve_thinking");
    for (const auto& [key, value] : kwargs->items()) {
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
        throw ChatRequestError("chat_template_kwargs." + key + " is not allowed: set it in the request itself");
      }
      context[key] = value;
    }
  }
  return context;
}

std::string render_chat_prompt(const ChatTemplate& chat_template, const json& request, const std::string& bos_token,
                               const std::string& eos_token, bool add_generation_prompt) {
  return chat_template.render(build_template_context(request, bos_token, eos_token, add_generation_prompt));
}

ModelChatTemplate load_model_chat_template(const std::filesystem::path& model_dir, bool with_tools) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(model_dir)) throw std::runtime_error("model folder " + model_dir.string() + " does not exist");
  ModelChatTemplate out;
  json config = json::object();
  const fs::path config_path = model_dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    try {
      config = json::parse(read_file(config_path));
    } catch (const json::parse_error& e) {
      throw std::runtime_error(config_path.string() + " is not valid JSON: " + e.what());
    }
    if (!config.is_object()) throw std::runtime_error(config_path.string() + " must hold a JSON object");
    out.bos_token = special_token(config, "bos_token");
    out.eos_token = special_token(config, "eos_token");
  }

  std::map<std::string, std::pair<std::string, std::string>> named;  // name -> (source, origin)
  if (const fs::path p = model_dir / "chat_template.jinja"; fs::exists(p)) named["default"] = {read_file(p), p.string()};
  if (const fs::path dir = model_dir / "additional_chat_templates"; fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".jinja") {
        named[entry.path().stem().string()] = {read_file(entry.path()), entry.path().string()};
      }
    }
  }
  if (named.empty() && config.contains("chat_template")) {
    const json& ct = config["chat_template"];
    if (ct.is_string()) {
      named["default"] = {ct.get<std::string>(), config_path.string()};
    } else if (ct.is_array()) {
      for (const auto& t : ct) {
        if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
            !t["template"].is_string()) {
          throw std::runtime_error(config_path.string() + ": chat_template entries must be {\"name\", \"template\"}");
        }
        named[t["name"].get<std::string>()] = {t["template"].get<std::string>(), config_path.string()};
      }
    } else if (!ct.is_null()) {
      throw std::runtime_error(config_path.string() + ": chat_template must be a string or a list of named templates");
    }
  }
  if (named.empty()) {
    throw std::runtime_error("model folder " + model_dir.string() +
                             " has no chat template (neither chat_template.jinja nor a \"chat_template\" in "
                             "tokenizer_config.json); voltserve does not guess one");
  }
  std::string chosen;
  if (named.size() == 1 && named.count("default")) {
    chosen = "default";
  } else if (with_tools && named.count("tool_use")) {
    chosen = "tool_use";
  } else if (named.count("default")) {
    chosen = "default";
  } else {
    std::string names;
    for (const auto& [n, t] : named) names += (names.empty() ? "" : ", ") + n;
    throw std::runtime_error("model folder " + model_dir.string() + " has several chat templates (" + names +
                             ") and none is named \"default\"");
  }
  out.source = named[chosen].first;
  out.origin = named[chosen].second;
  return out;
}

}  // namespace voltserve::chat
