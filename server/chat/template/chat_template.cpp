// ChatTemplate: parse once (parser.cpp) and render many times (renderer.cpp); the parsed tree is immutable and
// shared, so one ChatTemplate may render concurrently from several threads.
#include "chat/template/chat_template.h"

#include "chat/template/parser.h"
#include "chat/template/renderer.h"

namespace voltserve::chat {

struct ChatTemplate::Program {
  Body body;
};

ChatTemplate ChatTemplate::parse(std::string_view source) {
  ChatTemplate t;
  t.source_ = std::make_shared<const std::string>(source);
  auto program = std::make_shared<Program>();
  program->body = parse_template(source);
  t.program_ = std::move(program);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  if (!context.is_object()) throw TemplateError("the template context must be a JSON object");
  const Value variables = Value::from_json(context);
  Renderer renderer(limits);
  return renderer.render(program_->body, variables);
}

}  // namespace voltserve::chat
