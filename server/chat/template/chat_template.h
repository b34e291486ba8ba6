// ChatTemplate: a Jinja chat template parsed once and rendered per request, the way transformers'
// apply_chat_template renders it (trim_blocks, lstrip_blocks, sandboxed, its own tojson/raise_exception/strftime_now).
// Differentially tested against transformers by tools/template_diff.py (tests/chat/).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/template/limits.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {

struct Stmt;

class ChatTemplate {
 public:
  // Throws TemplateError (naming the line) when the source is not a template this engine can run.
  static ChatTemplate parse(std::string_view source);

  // Renders with `context` as the template's variables (messages, tools, add_generation_prompt, bos_token, ...).
  // Throws TemplateError on render errors and for raise_exception(...) in the template.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;

  const std::string& source() const { return *source_; }

 private:
  struct Program;
  ChatTemplate() = default;

  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Program> program_;
};

}  // namespace voltserve::chat
