// render_chat_prompt: the one place where a chat-completions request becomes prompt text, used by `voltserve render`
// and the HTTP server alike. It builds the variables transformers' apply_chat_template passes (after vLLM's message
// clean-up) and renders the model's template. Tested against transformers by tools/template_diff.py (tests/chat/).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/template/chat_template.h"

namespace voltserve::chat {

// The request body is malformed for templating (not a template bug): HTTP 400, the message names the field.
class ChatRequestError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The template variables for a chat-completions `request`:
//   messages   the request's messages with null-valued keys dropped (as transformers does), role "developer" mapped
//              to "system", an empty tool_calls list dropped, every tool_call's function.arguments JSON string parsed
//              (empty/null -> {}), and reasoning aliased like transformers (reasoning_content/thinking/reasoning);
//              content strings and arrays of parts are passed as given;
//   tools      the request's tools as given (key order kept), or null;  documents  null;
//   add_generation_prompt;  bos_token / eos_token when non-empty;
//   reasoning_effort  the top-level field when set ("none" instead sets enable_thinking=false);
//   and every entry of chat_template_kwargs (enable_thinking, preserve_thinking, reasoning_effort, ...), which win.
// Throws ChatRequestError when the body is malformed (messages missing or empty, arguments not JSON, ...).
nlohmann::ordered_json build_template_context(const nlohmann::ordered_json& request, const std::string& bos_token,
                                              const std::string& eos_token, bool add_generation_prompt = true);

// build_template_context + ChatTemplate::render. Throws ChatRequestError or TemplateError (raised_by_template() is
// true when the template itself rejected the conversation, e.g. "No user query found in messages.").
std::string render_chat_prompt(const ChatTemplate& chat_template, const nlohmann::ordered_json& request,
                               const std::string& bos_token, const std::string& eos_token,
                               bool add_generation_prompt = true);

// A model folder's chat template and special tokens, found the way transformers looks for them:
// chat_template.jinja (plus additional_chat_templates/*.jinja), else tokenizer_config.json "chat_template" (a string
// or a list of {name, template}); bos_token/eos_token from tokenizer_config.json (a string, an AddedToken object or
// null). With several named templates, "tool_use" is chosen when the request has tools, else "default".
struct ModelChatTemplate {
  std::string source;
  std::string bos_token;  // "" when the model has none
  std::string eos_token;
  std::string origin;     // the file the template came from, for messages
};

// Throws std::runtime_error naming the folder when there is no template (a model without one gets an error, never a
// guessed ChatML) or the files are malformed.
ModelChatTemplate load_model_chat_template(const std::filesystem::path& model_dir, bool with_tools = false);

}  // namespace voltserve::chat
