// tokenizer_config.json -> eos/bos/pad tokens and the chat template (see tokenizer_impl.h). The token fields may
// be a string, null, or an AddedToken object {"content": ...}; chat_template may be a string or a list of
// {"name", "template"} (the one named "default" is used, as in transformers).
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_impl.h"

namespace voltserve::tokenizer {
namespace {

using nlohmann::json;

Result<std::string> token_field(const json& root, const char* key, const std::string& source) {
  if (!root.contains(key) || root[key].is_null()) return std::string();
  const json& v = root[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return invalid_argument(source + ": " + key + ": expected a string, null or {\"content\": ...}, got " + v.dump());
}

}  // namespace

Status apply_tokenizer_config(std::string_view json_text, const std::string& source, TokenizerImpl& impl) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return invalid_argument(source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return invalid_argument(source + ": expected a JSON object at the top level");
  VS_ASSIGN_OR_RETURN(impl.eos_token, token_field(root, "eos_token", source));
  VS_ASSIGN_OR_RETURN(impl.bos_token, token_field(root, "bos_token", source));
  VS_ASSIGN_OR_RETURN(impl.pad_token, token_field(root, "pad_token", source));
  if (root.contains("chat_template") && !root["chat_template"].is_null()) {
    const json& t = root["chat_template"];
    if (t.is_string()) {
      impl.chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      bool found = false;
      for (const auto& e : t) {
        if (e.is_object() && e.value("name", std::string()) == "default" && e.contains("template") &&
            e["template"].is_string()) {
          impl.chat_template = e["template"].get<std::string>();
          found = true;
        }
      }
      if (!found) return invalid_argument(source + ": chat_template: a list without a template named \"default\"");
    } else {
      return invalid_argument(source + ": chat_template: expected a string or a list of {name, template}");
    }
  }
  for (const std::string* tok : {&impl.eos_token, &impl.bos_token, &impl.pad_token}) {
    if (!tok->empty() && !impl.added_ids.contains(*tok) && !impl.bpe->token_id(*tok)) {
      return invalid_argument(source + ": special token '" + *tok + "' is not a token of tokenizer.json");
    }
  }
  return Status::ok();
}

}  // namespace voltserve::tokenizer
